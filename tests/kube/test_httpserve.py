"""The workers' tiny HTTP responder over a real socket: a request body reaches the handler, and a
body over the limit is refused with 413 before the handler runs."""

from __future__ import annotations

import httpx
import pytest

from devtools.ports import free_port
from kube import httpserve
from kube.httpserve import Request, Response, serve_http


async def echo(request: Request) -> Response:
    return Response.json(200, {"method": request.method, "path": request.path, "body": request.body.decode()})


async def test_a_request_body_reaches_the_handler() -> None:
    port = free_port()
    server = await serve_http(echo, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            answer = await client.post("/whatif/x", content=b'{"pod": {}}')
            assert answer.status_code == 200 and answer.json() == {"method": "POST", "path": "/whatif/x", "body": '{"pod": {}}'}
            assert (await client.get("/healthz")).json()["body"] == ""
    finally:
        server.close()


async def test_a_body_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpserve, "MAX_BODY", 10)
    port = free_port()
    server = await serve_http(echo, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            answer = await client.post("/x", content=b"x" * 11)
            assert (answer.status_code, answer.text) == (413, "request body over 10 bytes")
            assert (await client.post("/x", content=b"x" * 10)).status_code == 200
    finally:
        server.close()
