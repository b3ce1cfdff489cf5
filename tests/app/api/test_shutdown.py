"""A server asked to stop (SIGTERM) ends its open watches and stops by itself, promptly and cleanly:
watch clients see their stream end (and re-watch elsewhere), and neither a watch nor a TLS
client that never answers the connection's close holds the process until it is killed."""

from __future__ import annotations

import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from devtools.credentials import ClusterCredentials
from devtools.server import ServerProcess

# Well under the 10 s a caller (a test, compose, a kubelet) gives before it kills the process.
STOPS_WITHIN = 6.0
# Shut down by SIGTERM, the server exits 0 as kube-apiserver does; one killed shows -SIGKILL.
STOPPED_CLEANLY = 0


def stop_and_time(server: ServerProcess) -> tuple[int, float]:
    """SIGTERM; the exit code and the seconds it took (the process is killed after 15 s)."""
    assert server.process is not None
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(15)
    except Exception:
        server.process.kill()
        code = server.process.wait()
    return code, time.monotonic() - started


def test_a_stopping_server_ends_its_watches_and_exits(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server()
    ended: list[str] = []
    opened = threading.Event()

    def watch() -> None:
        with (
            httpx.Client(base_url=server.url, timeout=30) as client,
            client.stream("GET", "/api/v1/namespaces/default/configmaps", params={"watch": "true"}) as response,
        ):
            opened.set()
            for _ in response.iter_lines():
                pass
            ended.append("cleanly")  # the chunked stream's end, not a broken connection

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    assert opened.wait(10)
    time.sleep(0.3)  # the watch is registered with the server's cache
    code, seconds = stop_and_time(server)
    reader.join(5)
    assert (code, ended) == (STOPPED_CLEANLY, ["cleanly"])
    assert seconds < STOPS_WITHIN, f"stopping took {seconds:.1f}s"


def test_a_tls_client_that_never_closes_does_not_hold_the_stop(start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    credentials = ClusterCredentials.ensure(tmp_path / "pki")
    server = start_server(credentials=credentials)
    context = ssl.create_default_context(cafile=str(credentials.ca_cert))
    raw = socket.create_connection(("127.0.0.1", server.port))
    conn = context.wrap_socket(raw, server_hostname="127.0.0.1")
    conn.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # anonymous: system:public-info-viewer
    assert conn.recv(65536).startswith(b"HTTP/1.1 ")
    # The connection is left open and its close never answered: this client reads nothing more.
    try:
        code, seconds = stop_and_time(server)
    finally:
        conn.close()
    assert code == STOPPED_CLEANLY
    assert seconds < STOPS_WITHIN, f"stopping took {seconds:.1f}s"
