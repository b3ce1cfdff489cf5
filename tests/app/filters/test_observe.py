"""The outermost layer of every request: request ids, request metrics, and a Status for an error
nothing else answered."""

from __future__ import annotations

from typing import cast

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.filters.observe import ObserveMiddleware


async def answer(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["path"].endswith("/broken"):
        raise RuntimeError("a bug")
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"made"})


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=cast(ASGIApp, ObserveMiddleware(answer)), raise_app_exceptions=False), base_url="http://server")


def requests_counted(verb: str, resource: str, code: str) -> float:
    value = metrics.REGISTRY.get_sample_value("apiserver_request_total", {"verb": verb, "resource": resource, "subresource": "", "code": code})
    return value or 0.0


async def test_request_ids() -> None:
    async with client() as http:
        first = await http.post("/api/v1/namespaces/w/configmaps")
        second = await http.post("/api/v1/namespaces/w/configmaps")
        given = await http.post("/api/v1/namespaces/w/configmaps", headers={"X-Request-Id": "r" * 70})
    assert (first.status_code, first.text, first.headers["content-type"]) == (201, "made", "text/plain")
    ids = first.headers["x-request-id"], second.headers["x-request-id"]
    assert len(set(ids)) == 2 and all(len(i) == 16 for i in ids)
    assert given.headers["x-request-id"] == "r" * 64  # the client's, cut to 64 characters


async def test_unexpected_error_is_a_status_and_counted() -> None:
    before = requests_counted("POST", "configmaps", "500")
    async with client() as http:
        response = await http.post("/api/v1/namespaces/w/configmaps/broken", headers={"X-Request-Id": "abc"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "abc"
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "InternalError", 500)
    assert status["message"] == "Internal error occurred: request abc failed; see the server log"
    assert requests_counted("POST", "configmaps", "500") == before + 1


async def test_metrics_by_verb_and_resource() -> None:
    before = requests_counted("POST", "resourceclaims", "201")
    async with client() as http:
        await http.post("/apis/resource.k8s.io/v1/namespaces/w/resourceclaims")
    assert requests_counted("POST", "resourceclaims", "201") == before + 1
