"""The benchmark's HTTP clients (raw keep-alive streams or httpx) and its watchers."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from bench.common import JSON, REQUEST_TIMEOUT, now
from kube.tasks import wait_for

# ----------------------------------------------------------------------------- HTTP clients


class ApiClient(Protocol):
    """One logical client connection: a request returns (status, body)."""

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]: ...

    async def aclose(self) -> None: ...


class RawHTTP:
    """Minimal HTTP/1.1 keep-alive client on asyncio streams (one connection, one request at a time)."""

    def __init__(
        self, host: str, port: int, headers: dict[str, str], ssl_context: ssl.SSLContext | None = None, media_type: str = JSON
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context  # HTTPS (with a client certificate when the context holds one)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._common = f"Host: {host}:{port}\r\nAccept: {media_type}\r\n{extra}".encode()
        self._content_type = f"Content-Type: {media_type}\r\n".encode()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20, ssl=self.ssl_context)
        return self._reader, self._writer

    def _head(self, method: str, path: str, body: bytes | None) -> bytes:
        line = f"{method} {path} HTTP/1.1\r\n".encode()
        if body is None:
            return line + self._common + b"\r\n"
        return line + self._common + self._content_type + b"Content-Length: %d\r\n\r\n" % len(body)

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if sep:
                headers[k.strip().lower()] = v.strip()
        return status, headers

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request and read the whole response."""
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                reader, writer = await self._connect()
                writer.write(self._head(method, path, body) + (body or b""))
                status, headers = await self._read_head(reader)
                data = await self._read_body(reader, headers, status, method)
        except BaseException:
            await self.aclose()
            raise
        if headers.get(b"connection", b"").lower() == b"close":
            await self.aclose()
        return status, data

    async def _read_body(
        self, reader: asyncio.StreamReader, headers: dict[bytes, bytes], status: int, method: str
    ) -> bytes:
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return b""
        if b"content-length" in headers:
            return await reader.readexactly(int(headers[b"content-length"]))
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            for _ in range(10_000_000):
                size = int((await reader.readline()).split(b";", 1)[0], 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            return b"".join(parts)
        data = await reader.read()
        await self.aclose()
        return data

    async def aclose(self) -> None:
        """Close the connection (a later request reconnects)."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class HttpxApi:
    """ApiClient over a (possibly shared) httpx.AsyncClient."""

    def __init__(self, client: Any, owner: bool) -> None:
        self.client = client
        self.owner = owner

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request through the pool."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        r = await self.client.request(method, path, content=body, headers=headers)
        return r.status_code, r.content

    async def aclose(self) -> None:
        """Close the pool if this wrapper owns it."""
        if self.owner:
            await self.client.aclose()


def make_clients(
    kind: str, base_url: str, n: int, headers: dict[str, str], ssl_context: ssl.SSLContext | None = None, media_type: str = JSON
) -> list[ApiClient]:
    """``n`` clients; raw = one connection each, httpx = one shared keep-alive pool of ``n``."""
    parts = urlsplit(base_url)
    if kind == "raw":
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return [RawHTTP(parts.hostname or "127.0.0.1", port, headers, ssl_context, media_type) for _ in range(n)]
    if media_type != JSON:
        raise ValueError("the httpx client sends JSON only")
    import httpx

    pool = httpx.AsyncClient(
        base_url=base_url,
        headers={"Accept": "application/json", **headers},
        limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
        timeout=REQUEST_TIMEOUT,
        http1=True,
        http2=False,
        verify=ssl_context or True,
    )
    return [HttpxApi(pool, owner=(i == 0)) for i in range(n)]


async def close_all(clients: list[ApiClient]) -> None:
    """Close every client."""
    for c in clients:
        with contextlib.suppress(Exception):
            await c.aclose()


# ----------------------------------------------------------------------------- watchers


class ChunkDecoder:
    """Incremental decoder of an HTTP/1.1 chunked body."""

    def __init__(self) -> None:
        self.buf = b""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Add raw bytes; return the body bytes of every complete chunk so far."""
        buf = self.buf + data
        pieces: list[bytes] = []
        pos = 0
        while not self.done:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            if size == 0:
                self.done = True
                break
            end = eol + 2 + size
            if len(buf) < end + 2:
                break
            pieces.append(buf[eol + 2 : end])
            pos = end + 2
        self.buf = buf[pos:]
        return b"".join(pieces)


class _WatchProtocol(asyncio.Protocol):
    """Reads one streaming HTTP/1.1 response with callbacks only (no coroutine per read)."""

    def __init__(self, on_head: Callable[[int], None], on_data: Callable[[bytes, float], None]) -> None:
        self.on_head = on_head
        self.on_data = on_data
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._head = b""
        self._in_body = False
        self._chunks: ChunkDecoder | None = None

    def data_received(self, data: bytes) -> None:
        t = now()
        if not self._in_body:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4 :]
            self._in_body, self._head = True, b""
            lines = head.split(b"\r\n")
            self.on_head(int(lines[0].split(b" ", 2)[1]))
            if any(ln.lower().replace(b" ", b"") == b"transfer-encoding:chunked" for ln in lines[1:]):
                self._chunks = ChunkDecoder()
        if self._chunks is not None:
            data = self._chunks.feed(data)
        if data:
            self.on_data(data, t)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class Watcher:
    """One watch stream; records (object name, arrival time) of every ADDED/MODIFIED event."""

    def __init__(self, marker: bytes) -> None:
        """``marker`` is ``"name":"<prefix>`` of the objects the writer creates (fast path, no JSON parse)."""
        self.status = 0
        self.connected = asyncio.Event()
        self.arrivals: list[tuple[bytes, float]] = []
        self.types: Counter[str] = Counter()
        self.error: str | None = None
        self._buf = b""
        self._marker = marker
        self._skip = len(b'"name":"')

    def on_head(self, status: int) -> None:
        """Response headers arrived."""
        self.status = status
        self.connected.set()

    def on_data(self, data: bytes, t: float) -> None:
        """Split body bytes into events and record (name, arrival time) of each ADDED/MODIFIED."""
        buf = self._buf + data
        if b"\n" not in buf:
            self._buf = buf
            return
        *lines, self._buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            i = line.find(self._marker)
            if i >= 0 and (line.startswith(b'{"type":"ADDED"') or line.startswith(b'{"type":"MODIFIED"')):
                start = i + self._skip
                self.types["ADDED" if line[9] == 65 else "MODIFIED"] += 1
                self.arrivals.append((line[start : line.find(b'"', start)], t))
                continue
            try:
                ev = orjson.loads(line)
                etype = ev["type"]
                self.types[etype] += 1
                if etype in ("ADDED", "MODIFIED"):
                    self.arrivals.append((ev["object"]["metadata"]["name"].encode(), t))
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                self.types["unparsable"] += 1

    async def run(
        self,
        kind: str,
        base_url: str,
        path: str,
        headers: dict[str, str],
        deadline: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Hold the stream open until ``deadline`` (or until the server ends it)."""
        try:
            if kind == "raw":
                parts = urlsplit(base_url)
                host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
                loop = asyncio.get_running_loop()
                transport, proto = await loop.create_connection(
                    lambda: _WatchProtocol(self.on_head, self.on_data), host, port, ssl=ssl_context
                )
                try:
                    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    transport.write(
                        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n{extra}\r\n".encode()
                    )
                    with contextlib.suppress(TimeoutError):
                        await wait_for(asyncio.shield(proto.closed), timeout=max(0.0, deadline - now()))
                finally:
                    transport.close()
            else:
                import httpx

                timeout = httpx.Timeout(REQUEST_TIMEOUT, read=max(1.0, deadline - now() + 5))
                async with (
                    httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, verify=ssl_context or True) as client,
                    client.stream("GET", path) as resp,
                ):
                    self.on_head(resp.status_code)
                    async for chunk in resp.aiter_raw():
                        self.on_data(chunk, now())
                        if now() >= deadline:
                            break
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.connected.set()
