"""The resource router: path parsing, which handler serves which method, and whole requests
served in-process (ASGI) on the server's own storage."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import orjson
import pytest

from app.api.generic import GenericStore
from app.api.handlers.action import act
from app.api.handlers.get import get, list_resource
from app.api.handlers.update import update
from app.api.routing import ResourceRouter, split_api_path
from app.config import Settings
from app.registry import NAMESPACE_KIND
from app.registry.core import pod as pod_kind
from app.registry.resource import resourceclaim
from app.server import ApiServer
from kube.errors import ApiError
from tests.helpers import claim, pod

LIMIT = 1024 * 1024
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture(scope="module")
def offline() -> ResourceRouter:
    """A router for parsing and routing only: the server is never started, so nothing here reaches
    a database (a real store object all the same: the compiled router checks its argument's type)."""
    return ResourceRouter(ApiServer(Settings(database_url="sqlite:///:memory:")).registry, LIMIT)


@pytest.fixture
def router(store: GenericStore) -> ResourceRouter:
    return ResourceRouter(store, LIMIT)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods", ("", "v1", "pods")),
        ("/api/v1/namespaces/a/pods/p/binding", ("", "v1", "namespaces/a/pods/p/binding")),
        ("/apis/resource.k8s.io/v1/resourceclaims", ("resource.k8s.io", "v1", "resourceclaims")),
        ("/api/v1", None),
        ("/api/v1/", None),
        ("/api/v2/pods", None),
        ("/apis/resource.k8s.io/v1", None),
        ("/apis/resource.k8s.io", None),
        ("/healthz", None),
        ("/openapi/v3/apis/resource.k8s.io/v1", None),
    ],
)
def test_split_api_path(path: str, expected: tuple[str, str, str] | None) -> None:
    assert split_api_path(path) == expected


@pytest.mark.parametrize(
    ("group", "rest", "expected"),
    [
        ("", "namespaces/a/pods", ("pods", "a", "", "")),
        ("", "namespaces/a/pods/p", ("pods", "a", "p", "")),
        ("", "namespaces/a/pods/p/binding", ("pods", "a", "p", "binding")),
        ("", "pods", ("pods", None, "", "")),
        ("", "nodes/n/status", ("nodes", None, "n", "status")),
        # A namespace is itself a cluster-scoped object: "namespaces/NAME/SUB" is one of its subresources.
        ("", "namespaces", ("namespaces", None, "", "")),
        ("", "namespaces/a", ("namespaces", None, "a", "")),
        ("", "namespaces/a/finalize", ("namespaces", None, "a", "finalize")),
        ("", "namespaces//a///pods/", ("pods", "a", "", "")),
        ("resource.k8s.io", "devicetaintrules/r", ("devicetaintrules", None, "r", "")),
        # A namespaced kind's object needs its namespace; unknown kinds and deeper paths are nothing.
        ("", "pods/p", None),
        ("", "namespaces/a/pods/p/status/extra", None),
        ("", "nodes/n/status/extra", None),
        ("", "namespaces/a/nodes/n", None),
        ("", "widgets", None),
        ("resource.k8s.io", "pods", None),
    ],
)
def test_parse(offline: ResourceRouter, group: str, rest: str, expected: tuple[str, str | None, str, str] | None) -> None:
    target = offline.parse(group, "v1", rest)
    if expected is None:
        assert target is None
        return
    assert target is not None
    assert (target.kind.strategy.plural, target.namespace, target.name, target.subresource) == expected


def _route(router: ResourceRouter, method: str, rest: str, group: str = "") -> Any:
    target = router.parse(group, "v1", rest)
    assert target is not None
    return router.route(target, method)


@pytest.mark.parametrize(
    ("method", "rest"),
    [
        ("POST", "namespaces/a/pods/p"),  # create is a collection verb
        ("PUT", "namespaces/a/pods"),
        ("PATCH", "namespaces/a/pods"),
        ("POST", "pods"),  # objects are created in a namespace
        ("GET", "namespaces/a/pods/p/binding"),  # binding only creates
        ("PUT", "namespaces/a/pods/p/binding"),
        ("POST", "namespaces/a/pods/p/status"),
        ("DELETE", "namespaces/a/pods/p/status"),
        ("GET", "namespaces/n/finalize"),  # finalize only updates
        ("DELETE", "namespaces"),  # namespaces have no deletecollection
    ],
)
def test_methods_a_path_does_not_serve_are_405(offline: ResourceRouter, method: str, rest: str) -> None:
    with pytest.raises(ApiError) as caught:
        _route(offline, method, rest)
    assert (caught.value.code, caught.value.reason) == (405, "MethodNotAllowed")


def test_undeclared_subresources_are_404(offline: ResourceRouter) -> None:
    for method in ("GET", "POST", "DELETE"):
        with pytest.raises(ApiError) as caught:
            _route(offline, method, "namespaces/a/pods/p/exec")
        assert caught.value.code == 404
    with pytest.raises(ApiError) as caught:
        _route(offline, "GET", "devicetaintrules/r/binding", "resource.k8s.io")
    assert caught.value.code == 404


def test_routes_follow_the_declarations(offline: ResourceRouter) -> None:
    route, handler = _route(offline, "PUT", "namespaces/a/resourceclaims/c/status", "resource.k8s.io")
    assert (route.strategy, handler) == (resourceclaim.STATUS_STRATEGY, update)
    route, handler = _route(offline, "GET", "namespaces/a/resourceclaims/c/status", "resource.k8s.io")
    assert handler is get
    route, handler = _route(offline, "PUT", "namespaces/a/resourceclaims/c", "resource.k8s.io")
    assert (route.strategy, handler) == (resourceclaim.STRATEGY, update)
    route, handler = _route(offline, "POST", "namespaces/a/pods/p/binding")
    assert (route.strategy, route.subresource, handler) == (pod_kind.STRATEGY, pod_kind.BINDING, act)
    route, handler = _route(offline, "DELETE", "pods")  # deletecollection across namespaces stays served
    assert route.strategy is pod_kind.STRATEGY
    assert _route(offline, "GET", "pods")[1] is list_resource


# ---- whole requests -------------------------------------------------------------------------------


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return orjson.loads(self.body)


async def call(router: ResourceRouter, method: str, path: str, body: Any = None, query: str = "", **headers: str) -> Answer | None:
    """Serve one request through the router (None: not a resource path)."""
    raw = body if isinstance(body, bytes) else b"" if body is None else orjson.dumps(body)
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    api_path = split_api_path(path)
    if api_path is None:
        return None
    await router.answer(scope, receive, send, api_path)
    start = sent[0]
    return Answer(
        start["status"],
        {k.decode(): v.decode() for k, v in start["headers"]},
        b"".join(m.get("body", b"") for m in sent[1:]),
    )


def _claims(namespace: str, name: str = "") -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims" + (f"/{name}" if name else "")


async def test_other_paths_are_left_to_the_application(router: ResourceRouter) -> None:
    assert await call(router, "GET", "/healthz") is None
    assert await call(router, "GET", "/apis/resource.k8s.io/v1") is None


async def test_unknown_paths_and_methods_answer_a_status(router: ResourceRouter, store_ns: str) -> None:
    answer = await call(router, "GET", "/apis/resource.k8s.io/v1/widgets")
    assert answer is not None and answer.status == 404
    assert answer.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "code": 404,
    }
    answer = await call(router, "POST", _claims(store_ns, "c"), claim("c"))
    assert answer is not None and (answer.status, answer.json()["reason"]) == (405, "MethodNotAllowed")


async def test_create_get_list_and_delete(router: ResourceRouter, store_ns: str) -> None:
    created = await call(router, "POST", _claims(store_ns), claim("c"), query="fieldManager=router-test", content_type="application/json")
    assert created is not None and created.status == 201, created and created.body
    assert created.headers["content-type"] == "application/json"
    got = await call(router, "GET", _claims(store_ns, "c"))
    assert got is not None and got.status == 200
    assert got.json()["metadata"]["managedFields"][0]["manager"] == "router-test"
    listed = await call(router, "GET", _claims(store_ns))
    assert listed is not None and [i["metadata"]["name"] for i in listed.json()["items"]] == ["c"]
    assert listed.json()["kind"] == "ResourceClaimList"
    deleted = await call(router, "DELETE", _claims(store_ns, "c"))
    assert deleted is not None and (deleted.status, deleted.json()["metadata"]["name"]) == (200, "c")
    gone = await call(router, "GET", _claims(store_ns, "c"))
    assert gone is not None and gone.status == 404


async def test_conversions_and_406(router: ResourceRouter, store_ns: str) -> None:
    await call(router, "POST", _claims(store_ns), claim("c"))
    table = await call(router, "GET", _claims(store_ns), accept=TABLE)
    assert table is not None and table.json()["kind"] == "Table"
    assert [row["cells"][0] for row in table.json()["rows"]] == ["c"]
    partial = await call(router, "GET", _claims(store_ns, "c"), accept=PARTIAL)
    assert partial is not None and partial.json()["kind"] == "PartialObjectMetadata"
    refused = await call(router, "GET", _claims(store_ns), accept=PARTIAL)
    assert refused is not None and (refused.status, refused.json()["reason"]) == (406, "NotAcceptable")
    refused = await call(router, "GET", _claims(store_ns, "c"), accept=PARTIAL_LIST)
    assert refused is not None and refused.status == 406
    refused = await call(router, "GET", _claims(store_ns), query="watch=1", accept=PARTIAL_LIST)
    assert refused is not None and refused.status == 406
    # A missing object is a 404 before any 406.
    missing = await call(router, "GET", _claims(store_ns, "nope"), accept=PARTIAL_LIST)
    assert missing is not None and missing.status == 404


async def test_unknown_body_types_are_415(router: ResourceRouter, store_ns: str) -> None:
    answer = await call(router, "POST", _claims(store_ns), b"<claim/>", content_type="application/xml")
    assert answer is not None and (answer.status, answer.json()["reason"]) == (415, "UnsupportedMediaType")
    answer = await call(router, "PATCH", _claims(store_ns, "c"), {}, content_type="application/json")
    assert answer is not None and answer.status == 415


async def test_binding_answers_a_success_status(router: ResourceRouter, store_ns: str) -> None:
    await call(router, "POST", f"/api/v1/namespaces/{store_ns}/pods", pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    answer = await call(router, "POST", f"/api/v1/namespaces/{store_ns}/pods/p/binding", binding)
    assert answer is not None and answer.status == 201
    assert answer.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    # Decoding errors name the subresource's kind.
    answer = await call(router, "POST", f"/api/v1/namespaces/{store_ns}/pods/p/binding", b"")
    assert answer is not None and answer.status == 400
    assert answer.json()["message"] == "the object provided is unrecognized (must be of type Binding): no content"


async def test_finalize_answers_the_namespace(router: ResourceRouter, store: GenericStore, store_ns: str) -> None:
    answer = await call(router, "PUT", f"/api/v1/namespaces/{store_ns}/finalize", {"spec": {"finalizers": []}})
    assert answer is not None and answer.status == 200
    assert answer.json()["kind"] == "Namespace"
    assert "finalizers" not in answer.json()["spec"]
    assert "finalizers" not in (await store.get(NAMESPACE_KIND, "", store_ns)).obj["spec"]


async def test_status_writes_go_through_the_status_strategy(router: ResourceRouter, store_ns: str) -> None:
    created = await call(router, "POST", _claims(store_ns), claim("s"))
    assert created is not None
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}
    body = {**created.json(), "spec": {"devices": {"requests": []}}, "status": {"allocation": allocation}}
    answer = await call(router, "PUT", _claims(store_ns, "s") + "/status", body)
    assert answer is not None and answer.status == 200
    assert answer.json()["status"]["allocation"] == allocation
    assert answer.json()["spec"] == created.json()["spec"]
