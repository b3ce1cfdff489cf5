"""``/healthz`` for worker processes: a tiny HTTP responder, no web framework needed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

HEALTH_PATHS = (b"/healthz", b"/livez", b"/readyz")


async def serve_health(port: int, ready: Callable[[], bool] = lambda: True, host: str = "127.0.0.1") -> asyncio.Server:
    """Answer GET /healthz (/livez, /readyz) with 200 once ``ready()``, 503 before."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            request = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            path = request.split(b" ")[1] if request.count(b" ") >= 2 else b""
            known = path.split(b"?")[0] in HEALTH_PATHS
            ok = known and ready()
            body = b"ok" if ok else (b"not ready" if known else b"not found")
            status = b"200 OK" if ok else (b"503 Service Unavailable" if known else b"404 Not Found")
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
            )
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, host, port)
