"""Connection guards uvicorn lacks, as Go's net/http applies them in kube-apiserver.

- The request line and headers may take 1 MiB (Go's MaxHeaderBytes, plus its 4 KiB of slack);
  beyond, a 431 and the connection is closed.
- They must arrive within 32 s (ReadHeaderTimeout) of the connection's start, or of the first
  byte of the next request on a kept-alive connection; a slow or silent client (slowloris) has its
  connection closed without an answer. Idle kept-alive connections are closed after 90 s by
  uvicorn's keep-alive timeout (IdleTimeout), which ``python -m app`` sets.
- A URL may take all of that: httptools' URL parser stops at 64 KiB, so a longer one is split here.
- Framing as Go reads it (request smuggling): Transfer-Encoding must be exactly one ``chunked``
  (else 501 ``Unsupported transfer encoding``) and then overrides a Content-Length, which is
  dropped; repeated or malformed Content-Length headers are a 400. (Go accepts a repeated
  Content-Length when the copies agree; the parser here refuses any repetition.)

What an answer writes within one turn of the event loop goes to the socket in one write, as Go's
buffered writer sends a response's head and body together: uvicorn writes the head and each body
piece apart, and each write is a TLS record and a system call (a third of a small request's CPU
went to them).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 1 << 20
_URL_PARSER_LIMIT = 65535
HEADER_SLACK = 4096
READ_HEADER_TIMEOUT = 32.0
IDLE_TIMEOUT = 90.0

# Writes of one turn of the event loop are gathered up to this size (a response head and a small
# body, the events of a watch); larger ones go out at once.
COALESCE_BYTES = 64 * 1024

_BAD_REQUEST = (400, b"400 Bad Request")
_TOO_LARGE = (431, b"431 Request Header Fields Too Large")
_UNSUPPORTED_ENCODING = (501, b"Unsupported transfer encoding")
_REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large", 501: b"Not Implemented"}


class CoalescingTransport:
    """A transport whose small writes of one turn of the event loop go out together at its end (or
    before the transport closes); a write that makes them ``COALESCE_BYTES`` or more goes out at
    once with them, so large answers meet the transport's flow control as before. Everything
    else is the wrapped transport's."""

    __slots__ = ("_loop", "_pending", "_pending_bytes", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None
        self._pending_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        # A mutable buffer could change before the turn ends: kept as it is now.
        chunk = data if type(data) is bytes else bytes(data)
        pending = self._pending
        if pending is None:
            if len(chunk) >= COALESCE_BYTES:
                self.transport.write(chunk)
                return
            self._pending = [chunk]
            self._pending_bytes = len(chunk)
            self._loop.call_soon(self.flush)
            return
        pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._pending_bytes >= COALESCE_BYTES:
            self.flush()

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        pending = self._pending
        self._pending = None
        self._pending_bytes = 0
        if pending and not self.transport.is_closing():
            self.transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._pending_bytes

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self._pending = None
        self._pending_bytes = 0
        self.transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request that was refused."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with Go's header limits, header timeout and framing rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The parser's own refusals of these shapes would pre-empt Go's answers, decided below.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True, lenient_chunked_length=True, lenient_transfer_encoding=True)
        self._reading_head = True
        self._head_bytes = 0  # of the data received while the head is incomplete
        self._head_size = 0  # of the request line and headers parsed so far
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._deferred_refusal: tuple[int, bytes] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        if self._reading_head and self._head_timer is None:
            self._arm_head_timer()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError:
            if not self._refused:
                self._refuse(*_BAD_REQUEST)
            return
        if self._reading_head:
            # One header still incomplete: the parser holds it whole until its line ends.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEADER_BYTES + HEADER_SLACK:
                self._refuse(*_TOO_LARGE)

    # on_url and on_header do uvicorn's work themselves (called once per header: a call to the
    # parent's would cost as much again); the head's size is counted in _count_head.
    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        name = name.lower()
        # llhttp keeps a value's trailing whitespace, which is not part of it (RFC 9110 5.5).
        value = value.rstrip(b" \t")
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def _count_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEADER_BYTES + HEADER_SLACK:
            self._refuse(*_TOO_LARGE)
            raise _Refused

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._head_bytes = 0
        self._head_size = 0
        self._disarm_head_timer()
        refusal = _framing_refusal(self.headers, self.parser.get_http_version())
        if refusal is not None:
            self._refuse(*refusal)
            raise _Refused
        url = self.url
        if len(url) <= _URL_PARSER_LIMIT:
            super().on_headers_complete()
            return
        # The request's task is created below but runs later: its scope can still be completed here.
        self.url = b"/"
        super().on_headers_complete()
        target, _, query = url.partition(b"#")[0].partition(b"?")
        path = target.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        self.scope["path"] = self.root_path + path
        self.scope["raw_path"] = self.root_path.encode("ascii") + target
        self.scope["query_string"] = query

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading_head = True
        self._head_bytes = 0
        self._head_size = 0

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(READ_HEADER_TIMEOUT, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._reading_head or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # the next request's head is read once this one is answered
        self.transport.close()

    def on_response_complete(self) -> None:
        if self._deferred_refusal is not None:
            status, body = self._deferred_refusal
            self._deferred_refusal = None
            if not self.transport.is_closing():
                self._write_refusal(status, body)
            return
        super().on_response_complete()

    def _refuse(self, status: int, body: bytes) -> None:
        """Answer as Go's server does before a handler runs, and close the connection: after the
        answer to the request before, when that one is still being served (Go reads the next
        request only then)."""
        self._refused = True
        self._disarm_head_timer()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if not cycle.more_body:
                self._deferred_refusal = (status, body)
                return
            # The request being served lost the rest of its body: it sees a disconnect.
            cycle.disconnected = True
            cycle.message_event.set()
        self._write_refusal(status, body)

    def _write_refusal(self, status: int, body: bytes) -> None:
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n%s" % (status, _REASONS[status], body)
        )
        self.transport.close()


def _framing_refusal(headers: list[tuple[bytes, bytes]], http_version: str) -> tuple[int, bytes] | None:
    """Go's answer to the request's Transfer-Encoding, or None after dropping a Content-Length it overrides."""
    encodings = [value for name, value in headers if name == b"transfer-encoding"]
    if not encodings:
        return None
    if http_version == "1.0":
        return _BAD_REQUEST  # Go ignores the header on HTTP/1.0; the parser here would not
    if len(encodings) != 1 or encodings[0].strip().lower() != b"chunked":
        return _UNSUPPORTED_ENCODING
    headers[:] = [(name, value) for name, value in headers if name != b"content-length"]
    return None
