"""The kinds served as storage only, over HTTP on both backends: for each one, what upstream's
informers, the namespace controller and the garbage collector do with it (create, get, list,
watch, metadata-only list, delete, deletecollection), its status subresource, its table columns
and its place in discovery."""

from __future__ import annotations

import copy
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from app.api.openapi import create_example
from app.registry import lookup
from app.registry.base import KindStrategy
from tests.helpers import assert_status, new_namespace, watch_lines

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Case:
    group: str
    plural: str
    # upstream's `kubectl get` columns (wide ones included)
    columns: tuple[str, ...]
    # a status its /status accepts (None: the kind has no status subresource)
    status: dict[str, Any] | None = None
    generation: bool = False
    # The status of a new object: what Go writes for the kind's zero status (None: the kind has none).
    new_status: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


REPLICAS = ("Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector")
CONDITIONS = {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Test", "message": "ok"}]}
REPLICA_STATUS = {"replicas": 0, "observedGeneration": 1}
CASES = [
    Case("", "persistentvolumes", ("Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age", "VolumeMode"), status={"phase": "Available"}, new_status={}),
    Case("", "persistentvolumeclaims", ("Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"), status={"phase": "Bound"}, new_status={}),
    Case("", "services", ("Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"), status=CONDITIONS, new_status={"loadBalancer": {}}),
    Case("", "replicationcontrollers", REPLICAS, status=REPLICA_STATUS, generation=True, new_status={"replicas": 0}),
    Case("", "configmaps", ("Name", "Data", "Age")),
    Case("policy", "poddisruptionbudgets", ("Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"), status={"disruptionsAllowed": 1, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}, generation=True, new_status=dict.fromkeys(("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"), 0)),
    Case("storage.k8s.io", "storageclasses", ("Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age")),
    Case("storage.k8s.io", "csinodes", ("Name", "Drivers", "Age"), status={"storageHealth": [{"name": "csi.example.com", "healthConditions": [{"status": "StorageDegraded", "reason": "Test"}]}]}, new_status={}),
    Case("storage.k8s.io", "csidrivers", ("Name", "AttachRequired", "PodInfoOnMount", "StorageCapacity", "TokenRequests", "RequiresRepublish", "Modes", "Age")),
    Case("storage.k8s.io", "csistoragecapacities", ("Name", "StorageClassName", "Capacity")),
    Case("storage.k8s.io", "volumeattachments", ("Name", "Attacher", "PV", "Node", "Attached", "Age"), status={"attached": True}, new_status={"attached": False}),
]  # fmt: skip


def _strategy(case: Case) -> KindStrategy:
    strategy = lookup(case.group, "v1", case.plural)
    assert strategy is not None, case
    return strategy


def _collection(case: Case, ns: str) -> str:
    prefix = f"/apis/{case.group}/v1" if case.group else "/api/v1"
    return f"{prefix}/namespaces/{ns}/{case.plural}" if _strategy(case).namespaced else f"{prefix}/{case.plural}"


def _body(case: Case, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = create_example(_strategy(case))
    assert body is not None
    body = copy.deepcopy(body)
    body["metadata"] = {"name": name, "labels": labels or {}}
    return body


def _names(body: dict[str, Any]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in body["items"])


@pytest.mark.parametrize("case", CASES, ids=str)
def test_create_get_list_watch_delete(api: httpx.Client, ns: str, case: Case) -> None:
    strategy = _strategy(case)
    path = _collection(case, ns)
    label = {"test": uuid.uuid4().hex[:8]}
    name = f"x-{uuid.uuid4().hex[:8]}"
    created = api.post(path, json=_body(case, name, label))
    assert created.status_code == 201, created.text
    obj = created.json()
    assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == (strategy.api_version, strategy.kind, name)
    assert (obj["metadata"].get("generation") == 1) == case.generation
    # A client cannot set status on create; a kind whose Go type holds a status has Go's zero one.
    assert obj.get("status") == case.new_status
    assert api.get(f"{path}/{name}").json()["metadata"]["uid"] == obj["metadata"]["uid"]

    listed = api.get(path, params={"labelSelector": f"test={label['test']}"})
    assert listed.status_code == 200 and _names(listed.json()) == [name]
    # The namespace controller and the garbage collector list (and watch) metadata only.
    partial = api.get(path, params={"labelSelector": f"test={label['test']}"}, headers={"Accept": METADATA_LIST}).json()
    assert partial["kind"] == "PartialObjectMetadataList" and [i["metadata"]["name"] for i in partial["items"]] == [name]

    table = api.get(f"{path}/{name}", headers={"Accept": TABLE}).json()
    assert tuple(c["name"] for c in table["columnDefinitions"]) == case.columns
    assert all(c["description"] for c in table["columnDefinitions"]), table["columnDefinitions"]
    assert table["rows"][0]["cells"][0] == name

    rv = listed.json()["metadata"]["resourceVersion"]
    assert api.delete(f"{path}/{name}").status_code == 200
    assert_status(api.get(f"{path}/{name}"), 404, "NotFound")
    events = watch_lines(api, path, {"resourceVersion": rv, "labelSelector": f"test={label['test']}", "timeoutSeconds": "5"}, limit=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", name)]
    # The garbage collector's metadata informer watches too.
    params = {"watch": "true", "resourceVersion": rv, "labelSelector": f"test={label['test']}", "timeoutSeconds": "5"}
    with api.stream("GET", path, params=params, headers={"Accept": METADATA}) as stream:
        first = orjson.loads(next(line for line in stream.iter_lines() if line))
    assert (first["type"], first["object"]["kind"], first["object"]["metadata"]["name"]) == ("DELETED", "PartialObjectMetadata", name)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_deletecollection(api: httpx.Client, ns: str, case: Case) -> None:
    path = _collection(case, ns)
    label = {"test": uuid.uuid4().hex[:8]}
    names = [f"c-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for name in names:
        assert api.post(path, json=_body(case, name, label)).status_code == 201
    response = api.request("DELETE", path, params={"labelSelector": f"test={label['test']}"})
    assert response.status_code == 200, response.text
    assert _names(response.json()) == sorted(names)
    assert api.get(path, params={"labelSelector": f"test={label['test']}"}).json()["items"] == []


@pytest.mark.parametrize("case", [c for c in CASES if c.status is not None], ids=str)
def test_status_subresource(api: httpx.Client, ns: str, case: Case) -> None:
    path = _collection(case, ns)
    name = f"s-{uuid.uuid4().hex[:8]}"
    assert api.post(path, json=_body(case, name)).status_code == 201
    merge = {"Content-Type": "application/merge-patch+json"}
    # Status writes keep the rest; main writes keep the status.
    status = case.status
    assert status is not None
    patched = api.patch(f"{path}/{name}/status", json={"status": status}, headers=merge)
    assert patched.status_code == 200, patched.text
    assert patched.json()["status"] == {**(case.new_status or {}), **status}
    assert api.patch(f"{path}/{name}", json={"status": {}, "metadata": {"labels": {"main": "yes"}}}, headers=merge).json()["status"] == patched.json()["status"]
    assert api.get(f"{path}/{name}/status").json()["status"] == patched.json()["status"]


def test_discovery(api: httpx.Client) -> None:
    aggregated = api.get("/apis", headers={"Accept": AGGREGATED}).json()
    legacy = api.get("/api", headers={"Accept": AGGREGATED}).json()
    served = {
        (item["metadata"].get("name", ""), r["resource"]): r for doc in (aggregated, legacy) for item in doc["items"] for v in item["versions"] for r in v["resources"]
    }
    for case in CASES:
        strategy = _strategy(case)
        entry = served[(case.group, case.plural)]
        assert entry["verbs"] == ALL_VERBS and entry["scope"] == ("Namespaced" if strategy.namespaced else "Cluster")
        assert [s["subresource"] for s in entry.get("subresources", [])] == (["status"] if case.status is not None else [])
        listing = api.get(f"/apis/{case.group}/v1" if case.group else "/api/v1").json()
        (resource,) = [r for r in listing["resources"] if r["name"] == case.plural]
        assert (resource["kind"], resource["namespaced"], resource["verbs"]) == (strategy.kind, strategy.namespaced, ALL_VERBS)
    groups = {g["name"] for g in api.get("/apis").json()["groups"]}
    assert {"apps", "policy", "storage.k8s.io", "events.k8s.io"} <= groups


def test_names_follow_upstream_rules(api: httpx.Client, ns: str) -> None:
    services = _collection(CASES[2], ns)
    body = assert_status(api.post(services, json=_body(CASES[2], "a.b")), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert api.post(_collection(CASES[4], ns), json=_body(CASES[4], "a.b")).status_code == 201


def test_deleting_a_namespace_empties_it_of_these_kinds(api: httpx.Client) -> None:
    ns = new_namespace(api)
    paths = [f"{_collection(case, ns)}/kept" for case in CASES if _strategy(case).namespaced]
    for case in CASES:
        if _strategy(case).namespaced:
            assert api.post(_collection(case, ns), json=_body(case, "kept")).status_code == 201
    assert api.delete(f"/api/v1/namespaces/{ns}").status_code == 200
    deadline = time.monotonic() + 20
    while api.get(f"/api/v1/namespaces/{ns}").status_code != 404:
        assert time.monotonic() < deadline, [p for p in paths if api.get(p).status_code == 200]
        time.sleep(0.2)
    assert all(api.get(p).status_code == 404 for p in paths)


def test_values_go_cannot_decode_are_refused(api: httpx.Client, ns: str) -> None:
    """Nothing validates these kinds' fields, but a value of the wrong JSON type is refused as Go's
    decoding refuses it: 400 on create and update, 422 on the field "patch" for a patch."""
    controllers, services, configmaps = _collection(CASES[3], ns), _collection(CASES[2], ns), _collection(CASES[4], ns)
    cases = [
        (controllers, {**_body(CASES[3], "rc"), "spec": {"replicas": "two"}},
         'ReplicationController in version "v1" cannot be handled as a ReplicationController: json: cannot unmarshal string into Go struct field ReplicationControllerSpec.spec.replicas of type int32'),
        (services, {**_body(CASES[2], "svc"), "spec": {"ports": [{"port": 80, "nodePort": 1.5}]}},
         'Service in version "v1" cannot be handled as a Service: json: cannot unmarshal number 1.5 into Go struct field ServicePort.spec.ports.nodePort of type int32'),
        (configmaps, {**_body(CASES[4], "cm"), "data": ["x"]},
         'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string'),
        (configmaps, {**_body(CASES[4], "cm"), "data": {"key": 5}},
         'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string'),
    ]  # fmt: skip
    for path, body, message in cases:
        assert assert_status(api.post(path, json=body), 400, "BadRequest")["message"] == message
    assert api.post(controllers, json=_body(CASES[3], "rc")).status_code == 201
    put = {**api.get(f"{controllers}/rc").json(), "spec": {"replicas": [1]}}
    assert "cannot unmarshal array into Go struct field ReplicationControllerSpec.spec.replicas of type int32" in assert_status(api.put(f"{controllers}/rc", json=put), 400, "BadRequest")["message"]
    patched = assert_status(api.patch(f"{controllers}/rc", json={"spec": {"replicas": "two"}}, headers={"Content-Type": "application/merge-patch+json"}), 422, "Invalid")
    assert patched["details"]["causes"][0]["field"] == "patch"
    assert patched["message"].endswith("json: cannot unmarshal string into Go struct field ReplicationControllerSpec.spec.replicas of type int32")
    # Quantities and int-or-strings decode numbers and strings alike.
    pdbs = _collection(CASES[5], ns)
    assert api.post(pdbs, json={**_body(CASES[5], "p"), "spec": {"maxUnavailable": "50%"}}).status_code == 201
