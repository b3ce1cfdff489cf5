"""Upstream's request limits in process, around an application whose requests wait until released:
in-flight limits per kind of request, the request deadline and its ``?timeout=``, the watch limit;
then the watch flags on a real server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import orjson
import pytest
from starlette.types import Receive, Scope, Send

from app.api.requestinfo import request_verb
from app.filters.limits import RequestLimits
from devtools.server import ServerProcess
from tests.processes import eventually

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"


class Held:
    """An application that answers 200 once released; ``entered`` counts requests inside it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.entered += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"done"})


@pytest.fixture
async def held() -> Held:
    return Held()


def limited(app: Held, *, read_only: int = 400, mutating: int = 200, timeout: float = 60.0, watches: int = 100) -> httpx.AsyncClient:
    limits = RequestLimits(app, max_read_only=read_only, max_mutating=mutating, request_timeout=timeout, max_watches=watches)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=limits), base_url="http://server")


async def until_entered(app: Held, count: int) -> None:
    while app.entered < count:
        await asyncio.sleep(0.01)


async def test_verbs_as_upstream_names_them() -> None:
    def verb(method: str, path: str, query: bytes = b"") -> str:
        return request_verb({"method": method, "path": path, "query_string": query})

    assert verb("GET", CLAIMS) == "list"
    assert verb("GET", CLAIMS, b"watch=true") == "watch"
    assert verb("GET", CLAIMS, b"watch") == "watch", "?watch alone means true"
    assert verb("GET", CLAIMS, b"watch=false") == "list"
    assert verb("GET", CLAIMS + "/c") == "get"
    assert verb("POST", CLAIMS) == "create"
    assert verb("PATCH", CLAIMS + "/c/status") == "patch"
    assert verb("DELETE", CLAIMS) == "deletecollection"
    assert verb("DELETE", "/api/v1/namespaces/ns") == "delete"
    assert verb("GET", "/api/v1/namespaces/ns") == "get"
    assert verb("GET", "/apis/resource.k8s.io/v1") == "get", "discovery is a non-resource request"
    assert verb("POST", "/version") == "post"


async def test_mutating_requests_beyond_the_limit_get_upstreams_429(held: Held) -> None:
    async with limited(held, mutating=2) as client:
        writes = [asyncio.create_task(client.post(CLAIMS, content=b"{}")) for _ in range(2)]
        await until_entered(held, 2)
        refused = await client.put(CLAIMS + "/c", content=b"{}")
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["content-type"] == "text/plain; charset=utf-8"
        assert refused.text == "Too many requests, please try again later.\n"
        # Reads have their own limit; watches take no slot at all.
        read = asyncio.create_task(client.get(CLAIMS))
        await until_entered(held, 3)
        held.release.set()
        assert [r.status_code for r in await asyncio.gather(*writes, read)] == [200, 200, 200]
        assert (await client.post(CLAIMS, content=b"{}")).status_code == 200, "a freed slot serves again"


async def test_read_only_limit_leaves_writes_and_watches_alone(held: Held) -> None:
    async with limited(held, read_only=1) as client:
        first = asyncio.create_task(client.get(CLAIMS + "/c"))
        await until_entered(held, 1)
        assert (await client.get(CLAIMS)).status_code == 429
        write = asyncio.create_task(client.post(CLAIMS, content=b"{}"))
        watch = asyncio.create_task(client.get(CLAIMS, params={"watch": "true"}))
        await until_entered(held, 3)
        held.release.set()
        assert [r.status_code for r in await asyncio.gather(first, write, watch)] == [200, 200, 200]


async def test_zero_means_no_limit(held: Held) -> None:
    async with limited(held, read_only=0, mutating=0) as client:
        requests = [asyncio.create_task(client.get(CLAIMS)) for _ in range(20)]
        await until_entered(held, 20)
        held.release.set()
        assert {r.status_code for r in await asyncio.gather(*requests)} == {200}


async def test_a_request_past_its_deadline_gets_upstreams_504(held: Held) -> None:
    async with limited(held, timeout=0.2) as client:
        response = await client.get(CLAIMS)
    assert response.status_code == 504
    # Upstream's timeout filter writes the Status without kind and apiVersion, as text/plain.
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text.endswith("\n")
    assert orjson.loads(response.content) == {
        "metadata": {},
        "status": "Failure",
        "message": "Timeout: request did not complete within the allotted timeout",
        "reason": "Timeout",
        "details": {},
        "code": 504,
    }


async def test_timeout_parameter_shortens_the_deadline_but_never_lengthens_it(held: Held) -> None:
    async with limited(held, timeout=30) as client:
        assert (await client.get(CLAIMS, params={"timeout": "100ms"})).status_code == 504
    async with limited(held, timeout=0.2) as client:
        assert (await client.get(CLAIMS, params={"timeout": "1h"})).status_code == 504
        assert (await client.get(CLAIMS, params={"timeout": "0s"})).status_code == 504, "0 means the server's deadline"


async def test_an_invalid_timeout_parameter_is_upstreams_400(held: Held) -> None:
    async with limited(held) as client:
        response = await client.get(CLAIMS, params={"timeout": "10"})
    assert response.status_code == 400
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'invalid timeout specified in the request URL - time: missing unit in duration "10"',
        "reason": "BadRequest",
        "code": 400,
    }
    assert held.entered == 0


async def test_watches_have_no_deadline_but_a_limit(held: Held) -> None:
    async with limited(held, timeout=0.1, watches=2) as client:
        watches = [asyncio.create_task(client.get(CLAIMS, params={"watch": "1"})) for _ in range(2)]
        await until_entered(held, 2)
        await asyncio.sleep(0.3)  # past the request deadline: watches are long-running
        refused = await client.get(CLAIMS, params={"watch": "true"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        status = refused.json()
        assert status["reason"] == "TooManyRequests" and status["details"] == {"retryAfterSeconds": 1}
        assert "too many watches" in status["message"] and "limit is 2" in status["message"]
        held.release.set()
        assert [r.status_code for r in await asyncio.gather(*watches)] == [200, 200]


def test_the_servers_flags_bound_watches_and_their_default_length(start_server: Callable[..., ServerProcess]) -> None:
    """On a real server: ``--max-watches`` refuses the watch beyond it, and a watch without
    timeoutSeconds ends by itself between ``--min-request-timeout`` and twice that."""
    server = start_server("--max-watches", "1", "--min-request-timeout", "1")
    with httpx.Client(base_url=server.url, timeout=30) as api:
        api.post("/api/v1/namespaces", json={"metadata": {"name": "limits"}})
        path = "/apis/resource.k8s.io/v1/namespaces/limits/resourceclaims"
        started = time.monotonic()
        with api.stream("GET", path, params={"watch": "true"}) as watch:
            assert watch.status_code == 200
            refused = api.get(path, params={"watch": "true"})
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert refused.json()["reason"] == "TooManyRequests"
            assert api.get(path).status_code == 200, "a LIST takes no watch slot"
            assert [line for line in watch.iter_lines() if line] == [], "the stream ends by itself, without an event"
        assert time.monotonic() - started >= 1.0, "not before --min-request-timeout"
        # The slot is given back as the handler returns, just after the stream's last chunk.
        eventually(
            lambda: api.get(path, params={"watch": "true", "timeoutSeconds": "1"}).status_code == 200, "the ended watch gave its slot back"
        )
