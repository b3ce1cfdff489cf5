"""Whether a TCP address can be listened on, said in one line (the server's and ``make run``'s start)."""

from __future__ import annotations

import errno
import socket


def listen_error(host: str, port: int) -> str | None:
    """None when ``host:port`` can be bound now (as a server binds it: SO_REUSEADDR), else what stops it,
    e.g. ``127.0.0.1:6443 is already in use``."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot listen on {address}: {exc.strerror}"
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return f"{address} is already in use"
                return f"cannot listen on {address}: {exc.strerror or exc}"
    return None
