"""A lean httpx transport for API servers: HTTP/1.1 keep-alive on asyncio protocols, over TLS too.

Workers are CPU-bound on request overhead (the scheduler makes four writes per pod). httpx's
default transport (httpcore) spends most of a small request in pool bookkeeping, anyio
cancel scopes and its pure-Python h11 parser; this transport writes the request in one call and
parses the response with httptools (the C parser uvicorn uses), which cut the client's share of
a request by more than half when measured with ``python -m bench.client``. It is still an httpx
transport, so callers keep httpx's API, errors and timeouts. ``https`` URLs take the same path
when the transport has a TLS context (the connection is then an asyncio TLS stream), and
httpx's own transport otherwise.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import cast

import httptools
import httpx

MAX_IDLE_PER_HOST = 32
# Stop reading from the socket while this much response body waits for the consumer.
PAUSE_READING_BYTES = 4 * 1024 * 1024


class _Expired(Exception):
    """A connection's read timer fired."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(_Expired())


class _Connection(asyncio.Protocol):
    """One TCP connection carrying one request at a time; also the httptools callback target."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reset()

    def _reset(self) -> None:
        """Fresh parser and response state for the next request on this connection."""
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.headers_done = False
        self.complete = False
        self.received_any = False
        self.keep_alive = True
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.paused = False

    # --- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's is not an asyncio.Transport subclass, so no isinstance check).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response: {exc}"))

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.complete:
            if not self.received_any:
                self.error = httpx.RemoteProtocolError("Server disconnected without sending a response.")
            else:
                self.error = httpx.ReadError(f"connection lost mid-response: {exc or 'closed by peer'}")
        self._wake()

    def pause_writing(self) -> None:  # request bodies are small; nothing to throttle
        pass

    def resume_writing(self) -> None:
        pass

    # --- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        if self.status < 200:  # 1xx: the real response follows
            self.headers = []
            return
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(bytes(body))
        self.buffered += len(body)
        if self.buffered > PAUSE_READING_BYTES and self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.status < 200:
            return
        self.complete = True
        self._wake()

    # --- used by the transport

    def _fail(self, error: Exception) -> None:
        self.error = error
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Wait for the next parser progress (headers, body, end) or a failure."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        # A plain timer on the future: asyncio.timeout()'s context manager costs more than a small request.
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        except _Expired:
            self.close()
            raise httpx.ReadTimeout("timed out waiting for the server") from None
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take_chunks(self) -> list[bytes]:
        chunks = list(self.chunks)
        self.chunks.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return chunks

    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _ResponseBody(httpx.AsyncByteStream):
    """The response body as it arrives; closing it returns the connection to the pool."""

    def __init__(self, owner: LeanTransport, key: tuple[str, int], conn: _Connection, read_timeout: float | None) -> None:
        self._owner = owner
        self._key = key
        self._conn = conn
        self._read_timeout = read_timeout
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            for chunk in conn.take_chunks():
                yield chunk
            if conn.complete:
                return
            if conn.error is not None:
                raise conn.error
            await conn.wait(self._read_timeout)

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        conn = self._conn
        if conn.complete and conn.keep_alive and conn.error is None and conn.reusable():
            self._owner._release(self._key, conn)
        else:
            self._owner._discard(conn)


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive for ``http://`` servers, and for ``https://`` ones with
    ``ssl_context``; other requests go to httpx's transport."""

    def __init__(self, *, max_idle_per_host: int = MAX_IDLE_PER_HOST, ssl_context: ssl.SSLContext | None = None) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._all: set[_Connection] = set()
        self._max_idle = max_idle_per_host
        self._fallback: httpx.AsyncHTTPTransport | None = None
        self.ssl_context = ssl_context

    def serves(self, scheme: str) -> bool:
        """Whether requests of this URL scheme take the lean path."""
        # One transport speaks TLS to every server or to none: connections are pooled by host and port.
        return scheme == ("https" if self.ssl_context is not None else "http")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if not self.serves(url.scheme):
            if self._fallback is None:
                self._fallback = httpx.AsyncHTTPTransport()
            return await self._fallback.handle_async_request(request)
        timeouts = request.extensions.get("timeout") or {}
        key = (url.host, url.port or (443 if url.scheme == "https" else 80))
        body = await request.aread()
        conn = await self._exchange(key, self._head(request, body), body, timeouts)
        return httpx.Response(
            conn.status,
            headers=conn.headers,
            stream=_ResponseBody(self, key, conn, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def fetch(
        self, key: tuple[str, int], head: bytes, body: bytes, timeouts: Mapping[str, float | None]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send a request already serialised (``head`` ends with the blank line) and read the whole response.

        The short path for bodies read whole: no ``httpx.URL``/``Request``/``Response`` objects and
        no async body iterator, which cost more CPU than the exchange itself for small objects.
        Returns the status, the response headers (names as sent) and the body. Errors are httpx's,
        as for :meth:`handle_async_request`.
        """
        conn = await self._exchange(key, head, body, timeouts)
        read_timeout = timeouts.get("read")
        chunks: list[bytes] = []
        try:
            while True:
                chunks.extend(conn.take_chunks())
                if conn.complete:
                    break
                if conn.error is not None:
                    raise conn.error
                await conn.wait(read_timeout)
        except BaseException:
            self._discard(conn)
            raise
        if conn.keep_alive and conn.error is None and conn.reusable():
            self._release(key, conn)
        else:
            self._discard(conn)
        return conn.status, conn.headers, chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def open(self, key: tuple[str, int], head: bytes, timeouts: Mapping[str, float | None]) -> tuple[int, _ResponseBody]:
        """Send a body-less request already serialised and return its status and streamed body (close it when done)."""
        conn = await self._exchange(key, head, b"", timeouts)
        return conn.status, _ResponseBody(self, key, conn, timeouts.get("read"))

    async def _exchange(self, key: tuple[str, int], head: bytes, body: bytes, timeouts: Mapping[str, float | None]) -> _Connection:
        """Write the request on a pooled (or new) connection and wait for the response headers."""
        for attempt in range(2):
            conn, reused = await self._acquire(key, timeouts.get("connect"))
            try:
                assert conn.transport is not None
                conn.transport.write(head + body if len(body) < 65536 else head)
                if len(body) >= 65536:
                    conn.transport.write(body)
                while not conn.headers_done:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(timeouts.get("read"))
            except httpx.RemoteProtocolError:
                self._discard(conn)
                # A kept-alive connection the server closed before answering: retry once on a new one.
                if reused and attempt == 0 and not conn.received_any:
                    continue
                raise
            except BaseException:
                self._discard(conn)
                raise
            return conn
        raise AssertionError("unreachable")

    @staticmethod
    def _head(request: httpx.Request, body: bytes) -> bytes:
        url = request.url
        target = url.raw_path
        lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
        has_length = False
        for name, value in request.headers.raw:
            lower = name.lower()
            if lower == b"content-length":
                has_length = True
            elif lower == b"transfer-encoding":
                continue  # the body was read whole; it goes with a Content-Length
            lines.append(name + b": " + value)
        if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
            lines.append(b"Content-Length: " + str(len(body)).encode("ascii"))
        return b"\r\n".join(lines) + b"\r\n\r\n"

    async def _acquire(self, key: tuple[str, int], connect_timeout: float | None) -> tuple[_Connection, bool]:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable():
                conn._reset()
                return conn, True
            self._discard(conn)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                if self.ssl_context is not None:
                    _, protocol = await loop.create_connection(_Connection, key[0], key[1], ssl=self.ssl_context, server_hostname=key[0])
                else:
                    _, protocol = await loop.create_connection(_Connection, key[0], key[1])
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {key[0]}:{key[1]}") from None
        except OSError as exc:  # ssl.SSLError is one: a refused certificate is a connect error
            raise httpx.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc}") from exc
        self._all.add(protocol)
        return protocol, False

    def _release(self, key: tuple[str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) >= self._max_idle:
            self._discard(conn)
        else:
            idle.append(conn)

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def aclose(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()
        if self._fallback is not None:
            with contextlib.suppress(Exception):
                await self._fallback.aclose()
