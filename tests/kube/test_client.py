"""KubeClient against an in-process mock transport: error mapping, paging, watch parsing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from kube.client import KubeClient, WatchExpired, record_event, resource_path
from kube.errors import ApiError


def _client(handler: Any) -> KubeClient:
    return KubeClient("http://test", user_agent="unit/1", transport=httpx.MockTransport(handler))


def test_resource_path() -> None:
    assert resource_path("", "v1", "pods", "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert resource_path("", "v1", "nodes") == "/api/v1/nodes"
    assert resource_path("resource.k8s.io", "v1", "resourceclaims", "a") == "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims"
    assert resource_path("resource.k8s.io", "v1", "deviceclasses", name="gpu") == "/apis/resource.k8s.io/v1/deviceclasses/gpu"


async def test_error_mapping_from_status() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "message": 'pods "x" not found',
                  "details": {"name": "x", "kind": "pods"}, "code": 404}
        return httpx.Response(404, json=status)

    client = _client(handler)
    with pytest.raises(ApiError) as info:
        await client.get("/api/v1/namespaces/d/pods/x")
    assert (info.value.code, info.value.reason, info.value.details) == (404, "NotFound", {"name": "x", "kind": "pods"})
    assert await client.delete("/api/v1/namespaces/d/pods/x", missing_ok=True) is None
    with pytest.raises(ApiError):
        await client.delete("/api/v1/namespaces/d/pods/x")
    await client.close()


async def test_non_status_error_body() -> None:
    client = _client(lambda request: httpx.Response(502, text="bad gateway"))
    with pytest.raises(ApiError) as info:
        await client.get("/x")
    assert info.value.code == 502 and "bad gateway" in info.value.message
    await client.close()


async def test_list_follows_continue() -> None:
    seen: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        seen.append(params)
        token = params.get("continue")
        if not token:
            return httpx.Response(200, json={"kind": "PodList", "metadata": {"resourceVersion": "7", "continue": "c1", "remainingItemCount": 1},
                                             "items": [{"metadata": {"name": "a"}}]})
        return httpx.Response(200, json={"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "b"}}]})

    client = _client(handler)
    result = await client.list("/api/v1/pods", label_selector="app=x", limit=1)
    assert [i["metadata"]["name"] for i in result["items"]] == ["a", "b"]
    assert result["metadata"] == {"resourceVersion": "7"}
    assert seen[0] == {"labelSelector": "app=x", "limit": "1"}
    assert seen[1] == {"labelSelector": "app=x", "limit": "1", "continue": "c1"}
    await client.close()


async def test_patch_content_types_and_params() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"kind": "Pod"})

    client = _client(handler)
    await client.patch("/p", {"a": 1})
    await client.patch("/p", [{"op": "remove", "path": "/a"}], patch_type="json")
    await client.patch("/p", {"a": 1}, patch_type="apply", field_manager="me", force=True)
    await client.patch("/p", {"a": 1}, patch_type="strategic")
    types = [r.headers["content-type"] for r in requests]
    assert types == ["application/merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml", "application/strategic-merge-patch+json"]
    assert dict(requests[2].url.params) == {"fieldManager": "me", "force": "true"}
    with pytest.raises(ValueError):
        await client.patch("/p", {}, patch_type="nope")
    await client.close()


async def test_delete_options_body() -> None:
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(orjson.loads(request.content))
        return httpx.Response(200, json={"kind": "Status", "status": "Success"})

    client = _client(handler)
    await client.delete("/p", grace_period_seconds=0, preconditions={"uid": "u"}, propagation_policy="Background")
    assert bodies[0] == {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": "u"},
                         "propagationPolicy": "Background"}
    await client.close()


def _stream(*events: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


async def test_watch_parses_events_and_params() -> None:
    params: dict[str, str] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        params.update(request.url.params)
        body = _stream(
            {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
        ) + b"\n" + _stream({"type": "DELETED", "object": {"metadata": {"name": "a", "resourceVersion": "4"}}})
        return httpx.Response(200, content=body)

    client = _client(handler)
    events = [e async for e in client.watch("/api/v1/pods", resource_version="1", timeout_seconds=5, field_selector="spec.nodeName=n")]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK", "DELETED"]
    assert params == {"watch": "true", "resourceVersion": "1", "fieldSelector": "spec.nodeName=n", "timeoutSeconds": "5",
                      "allowWatchBookmarks": "true"}
    await client.close()


async def test_watch_error_410_raises_expired() -> None:
    gone = {"kind": "Status", "status": "Failure", "reason": "Expired", "message": "too old resource version: 1 (5)", "code": 410}

    client = _client(lambda request: httpx.Response(200, content=_stream({"type": "ERROR", "object": gone})))
    with pytest.raises(WatchExpired):
        async for _ in client.watch("/api/v1/pods", resource_version="1"):
            pass
    client = _client(lambda request: httpx.Response(410, json=gone))
    with pytest.raises(WatchExpired):
        async for _ in client.watch("/api/v1/pods", resource_version="1"):
            pass
    other = {"kind": "Status", "status": "Failure", "reason": "InternalError", "message": "boom", "code": 500}
    client = _client(lambda request: httpx.Response(200, content=_stream({"type": "ERROR", "object": other})))
    with pytest.raises(ApiError) as info:
        async for _ in client.watch("/api/v1/pods", resource_version="1"):
            pass
    assert info.value.code == 500
    await client.close()


async def test_record_event() -> None:
    created: list[tuple[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        created.append((request.url.path, body))
        return httpx.Response(201, json=body)

    client = _client(handler)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "9"}}
    await record_event(client, pod, "Created", "made it", component="dra-controller")
    path, event = created[0]
    assert path == "/api/v1/namespaces/ns/events"
    assert event["metadata"]["name"].startswith("p.")
    assert event["involvedObject"] == {"kind": "Pod", "apiVersion": "v1", "name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "9"}
    assert event["count"] == 1 and event["source"] == {"component": "dra-controller"} and event["reportingComponent"] == "dra-controller"
    assert event["firstTimestamp"] == event["lastTimestamp"]
    await client.close()


async def test_retry_after_is_honoured_up_to_the_retry_limit() -> None:
    """As client-go: a 5xx/429 with Retry-After is retried at most max_retries times, then its error is raised."""
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(500, headers={"Retry-After": "0"}, json={"kind": "Status", "code": 500, "reason": "ServerTimeout", "message": "busy"})

    client = KubeClient("http://test", user_agent="unit/1", transport=httpx.MockTransport(handler), max_retries=3)
    with pytest.raises(ApiError) as info:
        await client.get("/api/v1/nodes/n")
    assert (info.value.code, info.value.reason, calls) == (500, "ServerTimeout", 4)
    await client.close()


async def test_retry_after_waits_the_seconds_asked_for() -> None:
    answers = [httpx.Response(429, headers={"Retry-After": "1"}, json={"kind": "Status", "code": 429}), httpx.Response(200, json={"kind": "Node"})]
    client = _client(lambda request: answers.pop(0))
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await client.get("/api/v1/nodes/n") == {"kind": "Node"}
    assert loop.time() - started >= 0.99
    await client.close()


@pytest.mark.parametrize("status, retry_after", [(500, None), (503, "soon"), (503, "-1"), (404, "0")])
async def test_answers_without_a_usable_retry_after_fail_at_once(status: int, retry_after: str | None) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(status, headers={"Retry-After": retry_after} if retry_after else {}, json={"kind": "Status", "code": status})

    client = _client(handler)
    with pytest.raises(ApiError):
        await client.get("/x")
    assert calls == 1
    await client.close()
