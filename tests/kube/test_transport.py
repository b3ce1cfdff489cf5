"""LeanTransport against small raw-socket servers: keep-alive, chunked streams, errors map to httpx's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from kube.client import KubeClient
from kube.errors import ApiError
from kube.transport import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of one request, or (b"", b"") at EOF."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    body = await reader.readexactly(length) if length else b""
    return head, body


async def _serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def _response(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body


async def test_keep_alive_reuses_one_connection_and_sends_bodies() -> None:
    connections = 0
    bodies: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                _head, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            bodies.append(body)
            writer.write(_response(b'{"n": %d}' % len(bodies)))
            await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server, KubeClient(url, user_agent="t/1") as client:
        for i in range(5):
            assert await client.update("/x", {"i": i}) == {"n": i + 1}
    assert connections == 1
    assert bodies == [b'{"i":%d}' % i for i in range(5)]


async def test_server_closing_an_idle_connection_is_retried_on_a_new_one() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(_response(b"{}", extra=b"Connection: keep-alive\r\n"))
        await writer.drain()
        # Read the next request, then hang up without answering (a keep-alive timeout race).
        await reader.read(1)
        writer.close()

    server, url = await _serve(handler)
    async with server, KubeClient(url, user_agent="t/1") as client:
        assert await client.get("/a") == {}
        assert await client.get("/b") == {}  # first attempt hits the hang-up, the retry succeeds


async def test_chunked_stream_yields_events_as_they_arrive() -> None:
    release = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for n in range(3):
            line = b'{"type":"ADDED","object":{"n":%d}}\n' % n
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            await release.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    seen: list[int] = []
    async with server, KubeClient(url, user_agent="t/1") as client:
        stream: AsyncIterator[dict[str, object]] = client.watch("/w", resource_version="1")
        first = await anext(stream)
        seen.append(first["object"]["n"])  # type: ignore[index]
        release.set()  # the first event arrived before the server sent the rest
        async for event in stream:
            seen.append(event["object"]["n"])  # type: ignore[index]
    assert seen == [0, 1, 2]


async def test_connection_refused_is_a_connect_error() -> None:
    server, url = await _serve(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    async with KubeClient(url, user_agent="t/1") as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("/x")


async def test_silent_server_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(5)
        writer.close()

    server, url = await _serve(handler)
    async with server, KubeClient(url, user_agent="t/1", timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/x")


async def test_garbage_response_is_a_protocol_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server:
        transport = LeanTransport()
        with pytest.raises(httpx.TransportError):
            request = httpx.Request("GET", url + "/x", extensions={"timeout": {"connect": 1, "read": 1}})
            await transport.handle_async_request(request)
        await transport.aclose()


async def test_large_bodies_round_trip() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _, body = await _read_request(reader)
        writer.write(_response(body))
        await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    payload = {"data": "x" * 300_000}
    async with server, KubeClient(url, user_agent="t/1") as client:
        assert await client.update("/big", payload) == payload


async def test_retry_after_answers_are_sent_again_as_client_go_does() -> None:
    """429 and 5xx with Retry-After are retried on the lean path (the body again too); other errors are not."""
    answers = [
        _response(b'{"kind":"Status","code":429,"reason":"TooManyRequests"}', "429 Too Many Requests", b"Retry-After: 0\r\n"),
        _response(b'{"kind":"Status","code":500,"reason":"ServerTimeout"}', "500 Internal Server Error", b"Retry-After: 0\r\n"),
        _response(b'{"metadata":{"name":"made"}}', "201 Created"),
        _response(b'{"kind":"Status","code":409,"reason":"AlreadyExists"}', "409 Conflict", b"Retry-After: 0\r\n"),
    ]
    bodies: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            try:
                _head, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            bodies.append(body)
            writer.write(answers.pop(0))
            await writer.drain()
        writer.close()

    server, url = await _serve(handler)
    async with server, KubeClient(url, user_agent="unit/1") as client:
        assert await client.create("/api/v1/namespaces/d/pods", {"metadata": {"name": "made"}}) == {"metadata": {"name": "made"}}
        assert len(bodies) == 3 and len(set(bodies)) == 1
        with pytest.raises(ApiError) as info:  # 409 is not retried, whatever its headers say
            await client.create("/api/v1/namespaces/d/pods", {"metadata": {"name": "made"}})
        assert info.value.code == 409 and len(bodies) == 4
