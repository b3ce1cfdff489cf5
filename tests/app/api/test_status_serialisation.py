"""A kind whose Go type holds its status by value always has one, as upstream serialises it:
``"status": {}`` on a new ResourceClaim, the zero fields Go writes inside (a Node's
``nodeInfo``), in every answer (create, get, list, watch, protobuf) and after a write that
drops it. So a JSON patch can add to a new object's status, as upstream's [Conformance]
ResourceClaim test does. A kind whose status is a pointer (ResourcePoolStatusRequest) has none.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from app import protobuf
from app.api.generic import GenericStore, complete_status
from app.api.openapi import create_example
from app.registry import served_kinds
from app.registry.base import KindStrategy, StatusSubresource
from app.registry.resource import resourceclaim, resourcepoolstatusrequest
from app.storage.cache import ADDED
from app.storage.dialects import WriteOp
from kube.client import resource_path
from tests.app.api.conftest import WRITER
from tests.helpers import claim, claims_path, watch_lines

CLAIMS = resourceclaim.STRATEGY

PB_ACCEPT = {"accept": protobuf.CONTENT_TYPE}


def _go_status(strategy: KindStrategy) -> dict[str, Any] | None:
    """The JSON of the kind's zero status, from the Go types (None: the kind has no status by value)."""
    message = protobuf.schema().message_for(strategy.api_version, strategy.kind)
    assert message is not None
    found = next((f for f in message.fields if f.json == "status"), None)
    if found is None or found.pointer or found.message is None:
        return None
    return protobuf.decode(b"", found.message)


STATUS_KINDS = [k for k in served_kinds() if k.stored and k.create_example is not None and _go_status(k) is not None]


def test_the_kinds_with_a_status_by_value() -> None:
    names = {f"{k.api_version}/{k.kind}" for k in STATUS_KINDS}
    assert {"resource.k8s.io/v1/ResourceClaim", "resource.k8s.io/v1/DeviceTaintRule", "v1/Pod", "v1/Node", "v1/Namespace"} <= names
    assert not names & {"resource.k8s.io/v1/DeviceClass", "resource.k8s.io/v1/ResourceSlice", "coordination.k8s.io/v1/Lease", "v1/ConfigMap"}


@pytest.mark.parametrize("strategy", STATUS_KINDS, ids=lambda s: f"{s.api_version}/{s.kind}")
def test_a_new_object_has_its_status_in_every_answer(api: httpx.Client, ns: str, strategy: KindStrategy) -> None:
    namespace = ns if strategy.namespaced else None
    collection = resource_path(strategy.group, strategy.version, strategy.plural, namespace)
    start = api.get(collection).json()["metadata"]["resourceVersion"]
    created = api.post(collection, json=create_example(strategy))
    assert created.status_code == 201, created.text
    obj = created.json()
    zero = _go_status(strategy)
    assert zero is not None
    # Every zero field Go writes is there, in every answer (a strategy may set more: a new Pod is
    # Pending; and the server's own controllers may write the status meanwhile: a policy's type check).
    def complete(status: Any) -> bool:
        return isinstance(status, dict) and ({**zero, **status} == status or strategy.kind == "Namespace")

    assert complete(obj["status"]), obj["status"]
    name = obj["metadata"]["name"]
    item = f"{collection}/{name}"
    assert complete(api.get(item).json()["status"])
    listed = [i for i in api.get(collection).json()["items"] if i["metadata"]["name"] == name]
    assert len(listed) == 1 and complete(listed[0]["status"]), listed
    events = watch_lines(api, collection, {"resourceVersion": start, "fieldSelector": f"metadata.name={name}", "timeoutSeconds": "5"}, limit=1)
    assert [(e["type"], e["object"]["status"]) for e in events] == [("ADDED", obj["status"])]
    # Read without the fixture's schema check: decoding protobuf drops the nulls Go writes, which
    # leaves some kinds (a CSINode's drivers) without a field their JSON schema requires.
    answer = httpx.get(f"{api.base_url}{item}", headers=PB_ACCEPT)
    assert answer.headers["content-type"] == protobuf.CONTENT_TYPE
    assert complete(protobuf.decode_object(answer.content)["status"])


def test_new_claim_and_rule_have_the_empty_status(api: httpx.Client, ns: str) -> None:
    assert api.post(claims_path(ns), json=claim("fresh")).json()["status"] == {}
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"generateName": "r-"}, "spec": {"taint": {"key": "k", "effect": "None"}}}
    assert api.post("/apis/resource.k8s.io/v1/devicetaintrules", json=rule).json()["status"] == {}


def test_new_node_has_the_zero_fields_go_writes(api: httpx.Client) -> None:
    node = api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"generateName": "zero-"}}).json()
    info = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion", "operatingSystem", "architecture")
    assert node["status"] == {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": dict.fromkeys(info, "")}
    assert api.delete(f"/api/v1/nodes/{node['metadata']['name']}").status_code == 200


def test_json_patch_adds_to_a_new_claims_status(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("patched"))
    patch = b'[{"op": "add", "path": "/status/allocation", "value": {}}]'
    answer = api.patch(f"{claims_path(ns, 'patched')}/status", content=patch, headers={"content-type": "application/json-patch+json"})
    assert answer.status_code == 200, answer.text
    # As upstream answers: the allocation's devices are a struct too.
    assert answer.json()["status"] == {"allocation": {"devices": {}}}


def test_a_write_that_drops_the_status_leaves_the_empty_one(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("dropped")).json()
    status_path = f"{claims_path(ns, 'dropped')}/status"
    allocated = api.patch(status_path, json={"status": {"allocation": {}}}, headers={"content-type": "application/merge-patch+json"}).json()
    assert allocated["status"] == {"allocation": {"devices": {}}}
    removed = api.patch(status_path, json={"status": None}, headers={"content-type": "application/merge-patch+json"})
    assert removed.status_code == 200, removed.text
    assert removed.json()["status"] == {}
    without = {k: v for k, v in removed.json().items() if k != "status"}
    replaced = api.put(status_path, json=without)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["status"] == {}
    assert created["metadata"]["uid"] == replaced.json()["metadata"]["uid"]


async def test_a_claim_stored_without_status_takes_a_json_patch_to_it(store: GenericStore, store_ns: str) -> None:
    """An object stored before statuses were completed: the patch applies to the status Go writes."""
    metadata = {"name": "old", "namespace": store_ns, "uid": "0b7a4d55-8d4e-4c8e-9f4e-6d1c2b3a4f50", "creationTimestamp": "2026-01-01T00:00:00Z"}
    await store.storage.write(WriteOp(ADDED, CLAIMS.stored_resource, store_ns, "old", {**claim("old"), "metadata": metadata}))
    assert "status" not in (await store.get(CLAIMS, store_ns, "old")).obj
    status = next(sub.strategy for sub in CLAIMS.subresources if isinstance(sub, StatusSubresource))
    patch = [{"op": "add", "path": "/status/allocation", "value": {}}]
    result = await store.patch(status, store_ns, "old", patch, "json", WRITER)
    assert orjson.loads(result.raw)["status"] == {"allocation": {"devices": {}}}


def test_a_status_held_by_pointer_is_left_out() -> None:
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": "r"}, "spec": {"driver": "d"}}
    complete_status(resourcepoolstatusrequest.STRATEGY, obj)
    assert "status" not in obj
