"""The connection guards on a real uvicorn server in process: Go's framing answers to request
smuggling shapes, the header size limit, long URLs, and slow or silent clients cut."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from app.filters import connections
from devtools.ports import free_port


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers what it was sent: path and query lengths, headers and body."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    answer = orjson.dumps(
        {"path": len(scope["path"]), "query": len(scope["query_string"]), "headers": [k.decode() for k, _ in scope["headers"]], "body": body.decode()}
    )
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture
async def port(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr(connections, "READ_HEADER_TIMEOUT", 0.5)
    chosen = free_port()
    config = uvicorn.Config(echo, host="127.0.0.1", port=chosen, http=connections.GuardedHttpToolsProtocol, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield chosen
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def exchange(port: int, request: bytes, wait: float = 5.0) -> bytes:
    """Send ``request`` and read until the server closes the connection (or ``wait`` passes)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        chunks = []
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(wait):
                while chunk := await reader.read(65536):
                    chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()


def body_of(response: bytes) -> dict[str, Any]:
    return orjson.loads(response.split(b"\r\n\r\n", 1)[1])  # type: ignore[no-any-return]


async def test_transfer_encoding_wins_over_content_length_and_drops_it(port: int) -> None:
    request = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    response = await exchange(port, request)
    assert response.startswith(b"HTTP/1.1 200 ")
    answer = body_of(response)
    assert answer["body"] == "abc"
    assert "content-length" not in answer["headers"], "Go removes the Content-Length a Transfer-Encoding overrides"


@pytest.mark.parametrize(
    "encoding",
    [b"Transfer-Encoding: gzip\r\n", b"Transfer-Encoding: gzip, chunked\r\n", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"Transfer-Encoding: identity\r\n"],
)
async def test_transfer_encodings_other_than_chunked_are_not_implemented(port: int, encoding: bytes) -> None:
    response = await exchange(port, b"POST /x HTTP/1.1\r\nHost: h\r\n" + encoding + b"\r\n0\r\n\r\n")
    assert response == b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding"


@pytest.mark.parametrize("lengths", [b"Content-Length: 3\r\nContent-Length: 4\r\n", b"Content-Length: +3\r\n", b"Content-Length: 3\r\nContent-Length: 3\r\n"])
async def test_repeated_or_malformed_content_length_is_a_bad_request(port: int, lengths: bytes) -> None:
    response = await exchange(port, b"POST /x HTTP/1.1\r\nHost: h\r\n" + lengths + b"\r\nabcd")
    assert response == b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"


async def test_headers_up_to_one_mebibyte_are_served_beyond_are_431(port: int) -> None:
    fits = b"GET /x HTTP/1.1\r\nHost: h\r\nX-Big: " + b"b" * (1 << 20) + b"\r\nConnection: close\r\n\r\n"
    assert (await exchange(port, fits)).startswith(b"HTTP/1.1 200 ")
    many = b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(1100))
    too_large = await exchange(port, b"GET /x HTTP/1.1\r\nHost: h\r\n" + many + b"\r\n")
    assert too_large == b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"


async def test_a_url_longer_than_the_url_parser_takes_is_served(port: int) -> None:
    path = b"/x/" + b"a" * 100_000
    response = await exchange(port, b"GET " + path + b"?q=" + b"z" * 1000 + b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert response.startswith(b"HTTP/1.1 200 ")
    assert body_of(response)["path"] == len(path) and body_of(response)["query"] == 1002


async def test_slow_and_silent_clients_are_cut_while_others_are_served(port: int) -> None:
    silent = await asyncio.open_connection("127.0.0.1", port)
    slow = await asyncio.open_connection("127.0.0.1", port)
    slow[1].write(b"GET /x HTTP/1.1\r\nHost: h\r\n")
    for _ in range(4):
        slow[1].write(b"X: y\r\n")  # a header line now and then, never the end of the head
        assert (await exchange(port, b"GET /y HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        await asyncio.sleep(0.2)
    for reader, writer in (silent, slow):
        async with asyncio.timeout(5):
            assert await reader.read() == b"", "closed without an answer, as Go does"
        writer.close()
