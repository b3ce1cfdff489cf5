"""A tiny HTTP/1.1 responder for worker processes (health, the scheduler's explanations): one
request per connection, no web framework, HTTPS with an optional client certificate."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from kube.tasks import wait_for

MAX_HEADER_LINES = 100
MAX_BODY = 3 * 1024 * 1024  # the API server's request limit (a pod, its templates, a few slices)
READ_TIMEOUT = 10.0
REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    413: "Request Entity Too Large", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    503: "Service Unavailable", 504: "Gateway Timeout",
}  # fmt: skip


@dataclass
class Request:
    method: str
    path: str  # decoded, without the query
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    client_certificate: bytes | None = None  # DER, verified by the TLS layer
    body: bytes = b""  # at most MAX_BODY bytes (Content-Length); larger requests are refused with 413


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain"

    @classmethod
    def json(cls, status: int, document: object) -> Response:
        return cls(status, orjson.dumps(document), "application/json")


Handler = Callable[[Request], Awaitable[Response]]


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
    line = await wait_for(reader.readline(), READ_TIMEOUT)
    parts = line.decode("latin-1").split()
    if len(parts) != 3:
        return None
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        raw = await wait_for(reader.readline(), READ_TIMEOUT)
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    target = urlsplit(parts[1])
    query = {k: v[-1] for k, v in parse_qs(target.query).items()}
    certificate = None
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is not None:
        certificate = ssl_object.getpeercert(binary_form=True)
    body = b""
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > MAX_BODY:
        raise _TooLarge
    if int(length):
        body = await wait_for(reader.readexactly(int(length)), READ_TIMEOUT)
    return Request(parts[0].upper(), unquote(target.path), query, headers, certificate, body)


class _TooLarge(Exception):
    """A body over MAX_BODY (or a Content-Length that is not a number)."""


async def serve_http(handler: Handler, port: int, host: str = "127.0.0.1", ssl_context: ssl.SSLContext | None = None) -> asyncio.Server:
    """Answer each connection's one request with ``handler`` (a 500 when it raises)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl.SSLError):
            response: Response
            try:
                request = await _read_request(reader, writer)
            except _TooLarge:
                request = None
                response = Response(413, f"request body over {MAX_BODY} bytes".encode())
            else:
                response = Response(400, b"bad request")
            if request is not None:
                try:
                    response = await handler(request)
                except Exception as exc:  # the process keeps serving; the caller sees what broke
                    response = Response(500, f"internal error: {exc}".encode())
            reason = REASONS.get(response.status, "")
            writer.write(
                f"HTTP/1.1 {response.status} {reason}\r\nContent-Type: {response.content_type}\r\n"
                f"Content-Length: {len(response.body)}\r\nConnection: close\r\n\r\n".encode()
                + response.body
            )
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, host, port, ssl=ssl_context)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is only reachable from this machine."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def server_tls_context(cert_file: str, key_file: str, client_ca_file: str = "") -> ssl.SSLContext:
    """Serving TLS; with ``client_ca_file`` clients may present a certificate signed by that CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
