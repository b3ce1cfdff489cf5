"""resource.k8s.io/v1beta2 and v1alpha3 over HTTP, on a server started with --runtime-config:
every verb, watch and patch type in each version, objects shared with v1 without loss, the
version-specific answers upstream gives, discovery and OpenAPI; and a server without the flag
not serving them at all."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
import yaml

from app import protobuf
from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.objects import Obj
from tests.contract import check_response_body
from tests.helpers import assert_status, new_namespace, watch_lines

GROUP = "/apis/resource.k8s.io"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def _checked(response: httpx.Response) -> None:
    if response.request.url.params.get("watch") in ("true", "1"):
        return
    response.read()
    check_response_body(response.content, response.headers.get("content-type", ""), f"{response.request.method} {response.request.url.path}")


@pytest.fixture(scope="module")
def versioned(start_server: Callable[..., ServerProcess]) -> Iterator[httpx.Client]:
    """A server serving every version, with a client whose answers are checked against the official schemas."""
    server = start_server("--runtime-config", "api/all=true")
    with httpx.Client(base_url=server.url, timeout=30.0, event_hooks={"response": [_checked]}) as client:
        yield client


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _claim(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}


def _template(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"spec": _claim(name)["spec"]}}


def _device_class(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}


def _slice(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]},
    }


def _taint_rule(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}


# (version, kind, plural, namespaced, builder): every kind in every older version.
SERVED = [
    ("v1beta2", "DeviceClass", "deviceclasses", False, _device_class),
    ("v1beta2", "ResourceClaim", "resourceclaims", True, _claim),
    ("v1beta2", "ResourceClaimTemplate", "resourceclaimtemplates", True, _template),
    ("v1beta2", "ResourceSlice", "resourceslices", False, _slice),
    ("v1beta2", "DeviceTaintRule", "devicetaintrules", False, _taint_rule),
    ("v1alpha3", "DeviceTaintRule", "devicetaintrules", False, _taint_rule),
]


def _collection(version: str, plural: str, ns: str | None) -> str:
    return f"{GROUP}/{version}/namespaces/{ns}/{plural}" if ns else f"{GROUP}/{version}/{plural}"


@pytest.mark.parametrize(("version", "kind", "plural", "namespaced", "build"), SERVED, ids=lambda v: v if isinstance(v, str) else "")
def test_every_verb_and_patch_type_in_an_older_version(
    versioned: httpx.Client, version: str, kind: str, plural: str, namespaced: bool, build: Callable[[str], Obj]
) -> None:
    ns = new_namespace(versioned) if namespaced else None
    api_version = f"resource.k8s.io/{version}"
    collection = _collection(version, plural, ns)
    stored = _collection("v1", plural, ns)
    name = _unique("v")
    body = {"apiVersion": api_version, "kind": kind, **build(name)}

    created = versioned.post(collection, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["apiVersion"] == api_version
    assert created.json()["metadata"]["managedFields"][0]["apiVersion"] == api_version
    # One object, seen in both versions.
    in_v1 = versioned.get(f"{stored}/{name}").json()
    assert in_v1["apiVersion"] == "resource.k8s.io/v1"
    assert {k: v for k, v in in_v1.items() if k != "apiVersion"} == {k: v for k, v in created.json().items() if k != "apiVersion"}

    got = versioned.get(f"{collection}/{name}").json()
    assert got["apiVersion"] == api_version and got["metadata"]["uid"] == in_v1["metadata"]["uid"]
    listed = versioned.get(collection).json()
    assert (listed["apiVersion"], listed["kind"]) == (api_version, f"{kind}List")
    assert [i["apiVersion"] for i in listed["items"] if i["metadata"]["name"] == name] == [api_version]

    got["metadata"]["labels"] = {"put": "yes"}
    put = versioned.put(f"{collection}/{name}", json=got)
    assert put.status_code == 200, put.text
    assert put.json()["apiVersion"] == api_version
    patches = [
        (JSON_PATCH, orjson.dumps([{"op": "add", "path": "/metadata/labels/json", "value": "yes"}])),
        (MERGE, orjson.dumps({"metadata": {"labels": {"merge": "yes"}}})),
        (STRATEGIC, orjson.dumps({"metadata": {"labels": {"strategic": "yes"}}})),
    ]
    for content_type, patch in patches:
        patched = versioned.patch(f"{collection}/{name}", content=patch, headers={"content-type": content_type})
        assert patched.status_code == 200, (content_type, patched.text)
        assert patched.json()["apiVersion"] == api_version
    applied_body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "labels": {"apply": "yes"}}}
    applied = versioned.patch(
        f"{collection}/{name}", content=yaml.safe_dump(applied_body), headers={"content-type": APPLY}, params={"fieldManager": "old-client"}
    )
    assert applied.status_code == 200, applied.text
    assert applied.json()["metadata"]["labels"] == {"put": "yes", "json": "yes", "merge": "yes", "strategic": "yes", "apply": "yes"}
    managers = {e["manager"]: e["apiVersion"] for e in applied.json()["metadata"]["managedFields"]}
    assert managers["old-client"] == api_version
    assert versioned.get(f"{stored}/{name}").json()["metadata"]["labels"]["apply"] == "yes"

    deleted = versioned.delete(f"{collection}/{name}")
    assert deleted.status_code == 200, deleted.text
    assert versioned.get(f"{stored}/{name}").status_code == 404

    labels = {"batch": _unique("b")}
    for _ in range(2):
        item = {"apiVersion": api_version, "kind": kind, **build(_unique("dc"))}
        item["metadata"]["labels"] = labels
        assert versioned.post(collection, json=item).status_code == 201
    selector = f"batch={labels['batch']}"
    removed = versioned.delete(collection, params={"labelSelector": selector})
    assert removed.status_code == 200, removed.text
    assert removed.json()["apiVersion"] == api_version
    assert versioned.get(stored, params={"labelSelector": selector}).json()["items"] == []


@pytest.mark.parametrize("version", ["v1beta2", "v1alpha3"])
def test_watch_in_an_older_version_shows_every_object_in_it(versioned: httpx.Client, version: str) -> None:
    collection = _collection(version, "devicetaintrules", None)
    name = _unique("w")
    start = versioned.get(collection).json()["metadata"]["resourceVersion"]
    # Written in v1 and in the older version; the watch from before shows both in its own.
    assert versioned.post(_collection("v1", "devicetaintrules", None), json=_taint_rule(name)).status_code == 201
    patched = versioned.patch(f"{collection}/{name}", json={"metadata": {"labels": {"seen": "yes"}}}, headers={"content-type": MERGE})
    assert patched.status_code == 200, patched.text
    assert versioned.delete(f"{_collection('v1', 'devicetaintrules', None)}/{name}").status_code == 200
    events = watch_lines(versioned, collection, {"resourceVersion": start, "fieldSelector": f"metadata.name={name}", "timeoutSeconds": "5"}, limit=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert {e["object"]["apiVersion"] for e in events} == {f"resource.k8s.io/{version}"}
    # Initial events of a watch without a resourceVersion are converted too.
    assert versioned.post(collection, json=_taint_rule(name)).status_code == 201
    initial = watch_lines(versioned, collection, {"fieldSelector": f"metadata.name={name}", "timeoutSeconds": "2"}, limit=1)
    assert [(e["type"], e["object"]["apiVersion"]) for e in initial] == [("ADDED", f"resource.k8s.io/{version}")]


def test_status_is_written_through_the_older_versions_status_subresource(versioned: httpx.Client) -> None:
    ns = new_namespace(versioned)
    path = f"{_collection('v1beta2', 'resourceclaims', ns)}/c"
    assert versioned.post(_collection("v1beta2", "resourceclaims", ns), json=_claim("c")).status_code == 201
    claim = versioned.get(path).json()
    claim["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}]}},
    }
    written = versioned.put(f"{path}/status", json=claim)
    assert written.status_code == 200, written.text
    assert written.json()["apiVersion"] == "resource.k8s.io/v1beta2"
    v1 = versioned.get(f"{_collection('v1', 'resourceclaims', ns)}/c/status").json()
    assert v1["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    table = versioned.get(path, headers={"accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert table["rows"][0]["cells"][:2] == ["c", "allocated"]


def test_an_object_with_every_field_written_in_v1beta2_loses_nothing_in_v1(versioned: httpx.Client) -> None:
    name = _unique("full")
    rich = _slice(name)
    rich["metadata"].update(labels={"a": "b"}, annotations={"note": "kept"})
    rich["spec"]["devices"] = [
        {
            "name": "gpu-0",
            "attributes": {"model": {"string": "x"}, "cores": {"int": 4}, "ok": {"bool": True}, "v": {"version": "1.2.3"}},
            "capacity": {"memory": {"value": "8Gi"}},
            "taints": [{"key": "example.com/k", "value": "v", "effect": "NoSchedule"}],
            "allowMultipleAllocations": True,
            "bindsToNode": True,
            "bindingConditions": ["ready"],
            "bindingFailureConditions": ["failed"],
        }
    ]
    written = versioned.post(f"{GROUP}/v1beta2/resourceslices", json={"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceSlice", **rich})
    assert written.status_code == 201, written.text
    in_v1 = versioned.get(f"{GROUP}/v1/resourceslices/{name}").json()
    for field in ("attributes", "capacity", "taints", "allowMultipleAllocations", "bindsToNode", "bindingConditions", "bindingFailureConditions"):
        assert in_v1["spec"]["devices"][0][field] == written.json()["spec"]["devices"][0][field], field
    # Written back in v1 unchanged and read in v1beta2: the same object.
    again = versioned.put(f"{GROUP}/v1/resourceslices/{name}", json=in_v1)
    assert again.status_code == 200, again.text
    back = versioned.get(f"{GROUP}/v1beta2/resourceslices/{name}").json()
    assert {k: v for k, v in back.items() if k != "apiVersion"} == {k: v for k, v in in_v1.items() if k != "apiVersion"}


# ---- answers that differ by version, and bad input ------------------------------------------------


def test_validation_errors_name_the_fields_in_the_request_version(versioned: httpx.Client) -> None:
    ns = new_namespace(versioned)
    bad = _claim("bad")
    bad["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "Not_A_Name"
    body = assert_status(versioned.post(_collection("v1beta2", "resourceclaims", ns), json=bad), 422, "Invalid")
    assert body["details"]["group"] == "resource.k8s.io" and body["details"]["kind"] == "ResourceClaim"
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.devices.requests[0].exactly.deviceClassName"]
    mismatch = versioned.post(_collection("v1beta2", "resourceclaims", ns), json={"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **_claim("m")})
    assert assert_status(mismatch, 400, "BadRequest")["message"] == (
        "the API version in the data (resource.k8s.io/v1) does not match the expected API version (resource.k8s.io/v1beta2)"
    )
    field = versioned.get(f"{GROUP}/v1beta2/resourceslices", params={"fieldSelector": "spec.bogus=x"})
    assert assert_status(field, 400, "BadRequest")["message"] == "field label not supported for resource.k8s.io/v1beta2, Kind=ResourceSlice: spec.bogus"


def test_a_field_an_older_release_of_v1alpha3_had_is_unknown_now(versioned: httpx.Client) -> None:
    """``deviceSelector.deviceClassName`` and ``selectors`` were in v1alpha3 before v1.35 and are gone
    from v1.37's: Strict refuses them, the default drops them with a warning, nothing else is lost."""
    name = _unique("old")
    old = _taint_rule(name)
    old["spec"]["deviceSelector"].update(deviceClassName="gpu.example.com", selectors=[{"cel": {"expression": "true"}}])
    collection = _collection("v1alpha3", "devicetaintrules", None)
    strict = versioned.post(collection, json=old, params={"fieldValidation": "Strict"})
    assert assert_status(strict, 400, "BadRequest")["message"] == (
        'DeviceTaintRule in version "v1alpha3" cannot be handled as a DeviceTaintRule: '
        'strict decoding error: unknown field "spec.deviceSelector.deviceClassName", unknown field "spec.deviceSelector.selectors"'
    )
    warned = versioned.post(collection, json=old)
    assert warned.status_code == 201, warned.text
    assert warned.headers["warning"] == (
        r'299 - "resource.k8s.io/v1alpha3 DeviceTaintRule is deprecated in v1.36+, unavailable in v1.39+", '
        r'299 - "unknown field \"spec.deviceSelector.deviceClassName\"", 299 - "unknown field \"spec.deviceSelector.selectors\""'
    )

    assert versioned.get(f"{GROUP}/v1/devicetaintrules/{name}").json()["spec"]["deviceSelector"] == {"driver": "gpu.example.com"}


# What kube-apiserver v1.37 warns of on every request in a version its types mark deprecated.
DEPRECATED = {
    ("v1beta2", kind): f"resource.k8s.io/v1beta2 {kind} is deprecated in v1.36+, unavailable in v1.39+"
    for kind in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
} | {("v1alpha3", "DeviceTaintRule"): "resource.k8s.io/v1alpha3 DeviceTaintRule is deprecated in v1.36+, unavailable in v1.39+"}


@pytest.mark.parametrize(("version", "kind", "plural", "namespaced", "build"), SERVED, ids=lambda v: v if isinstance(v, str) else "")
def test_every_request_in_a_deprecated_version_is_warned_of_it(
    versioned: httpx.Client, version: str, kind: str, plural: str, namespaced: bool, build: Callable[[str], Obj]
) -> None:
    ns = new_namespace(versioned) if namespaced else None
    collection = _collection(version, plural, ns)
    name = _unique("dep")
    expected = DEPRECATED.get((version, kind))
    answers = [
        versioned.post(collection, json=build(name)),
        versioned.get(f"{collection}/{name}"),
        versioned.get(collection),
        versioned.get(f"{collection}/missing"),
        versioned.delete(f"{collection}/{name}"),
    ]
    if kind in ("ResourceClaim", "DeviceTaintRule"):
        answers.append(versioned.patch(f"{collection}/{name}/status", json={}, headers={"content-type": MERGE}))
    for answer in answers:
        where = f"{answer.request.method} {answer.request.url.path}: {answer.status_code}"
        assert answer.status_code < 500, where
        if expected is None:
            # v1beta2 DeviceTaintRule is deprecated only from v1.39.
            assert "warning" not in answer.headers, where
        else:
            assert answer.headers.get("warning") == f'299 - "{expected}"', where
    assert "warning" not in versioned.get(_collection("v1", plural, ns)).headers


def test_device_taint_rules_answer_as_upstream_does_in_each_version(versioned: httpx.Client) -> None:
    for version in ("v1", "v1beta2", "v1alpha3"):
        collection = _collection(version, "devicetaintrules", None)
        name = _unique(version)
        created = versioned.post(collection, json=_taint_rule(name)).json()
        unconditional = copy.deepcopy(created)
        del unconditional["metadata"]["resourceVersion"]
        unconditional["metadata"]["labels"] = {"x": "y"}
        updated = versioned.put(f"{collection}/{name}", json=unconditional)
        deleted = versioned.delete(f"{collection}/{name}")
        if version == "v1":
            # v1 requires a resourceVersion on update and answers a DELETE with a Status.
            assert assert_status(updated, 422, "Invalid")["details"]["causes"][0]["field"] == "metadata.resourceVersion"
            assert deleted.json()["kind"] == "Status"
        else:
            assert updated.status_code == 200, updated.text
            assert (deleted.json()["kind"], deleted.json()["apiVersion"]) == ("DeviceTaintRule", f"resource.k8s.io/{version}")


# ---- discovery and OpenAPI ----------------------------------------------------------------------


def test_discovery_lists_the_older_versions_after_v1(versioned: httpx.Client) -> None:
    group = versioned.get(GROUP).json()
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta2", "v1alpha3"]
    assert group["preferredVersion"]["version"] == "v1"
    beta = versioned.get(f"{GROUP}/v1beta2").json()
    stable = {r["name"]: r for r in versioned.get(f"{GROUP}/v1").json()["resources"]}
    assert sorted(r["name"] for r in beta["resources"]) == sorted(stable)
    for resource in beta["resources"]:
        # One storage version hash for a kind, whichever version lists it.
        assert resource.get("storageVersionHash") == stable[resource["name"]].get("storageVersionHash")
    alpha = versioned.get(f"{GROUP}/v1alpha3").json()
    assert sorted(r["name"] for r in alpha["resources"]) == ["devicetaintrules", "devicetaintrules/status"]
    aggregated = versioned.get("/apis", headers={"accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}).json()
    resource_group = next(g for g in aggregated["items"] if g["metadata"]["name"] == "resource.k8s.io")
    versions = {v["version"]: v for v in resource_group["versions"]}
    assert list(versions) == ["v1", "v1beta2", "v1alpha3"]
    claims = next(r for r in versions["v1beta2"]["resources"] if r["resource"] == "resourceclaims")
    assert claims["responseKind"] == {"group": "resource.k8s.io", "version": "v1beta2", "kind": "ResourceClaim"}
    assert claims["subresources"][0]["responseKind"]["version"] == "v1beta2"


def test_openapi_documents_every_served_version(versioned: httpx.Client) -> None:
    index = versioned.get("/openapi/v3").json()["paths"]
    assert {"apis/resource.k8s.io/v1", "apis/resource.k8s.io/v1beta2", "apis/resource.k8s.io/v1alpha3"} <= set(index)
    v3 = versioned.get(index["apis/resource.k8s.io/v1beta2"]["serverRelativeURL"]).json()
    assert "/apis/resource.k8s.io/v1beta2/namespaces/{namespace}/resourceclaims/{name}/status" in v3["paths"]
    assert all(path.startswith("/apis/resource.k8s.io/v1beta2/") for path in v3["paths"])
    claim_schema = v3["components"]["schemas"]["io.k8s.api.resource.v1beta2.ResourceClaim"]
    assert claim_schema["x-kubernetes-group-version-kind"] == [{"group": "resource.k8s.io", "kind": "ResourceClaim", "version": "v1beta2"}]
    alpha = versioned.get(index["apis/resource.k8s.io/v1alpha3"]["serverRelativeURL"]).json()
    assert {p.split("/")[4] for p in alpha["paths"]} == {"devicetaintrules"}
    v2 = versioned.get("/openapi/v2").json()
    assert "/apis/resource.k8s.io/v1beta2/resourceslices" in v2["paths"]
    assert "/apis/resource.k8s.io/v1alpha3/devicetaintrules/{name}/status" in v2["paths"]
    assert "io.k8s.api.resource.v1alpha3.DeviceTaintRule" in v2["definitions"]


def test_a_server_without_the_flag_serves_v1_only(api: httpx.Client) -> None:
    assert assert_status(api.get(f"{GROUP}/v1beta2/resourceclaims"), 404, "NotFound")
    assert assert_status(api.get(f"{GROUP}/v1alpha3/devicetaintrules"), 404, "NotFound")
    assert [v["version"] for v in api.get(GROUP).json()["versions"]] == ["v1"]
    assert api.get(f"{GROUP}/v1beta2").status_code == 404
    assert "apis/resource.k8s.io/v1beta2" not in api.get("/openapi/v3").json()["paths"]
    assert not any("v1beta2" in path for path in api.get("/openapi/v2").json()["paths"])


# ---- ResourcePoolStatusRequest (v1alpha3 only, gate DRAResourcePoolStatus) ---------------------------

REQUESTS = f"{GROUP}/v1alpha3/resourcepoolstatusrequests"


@pytest.fixture(scope="module")
def pool_status(start_server: Callable[..., ServerProcess]) -> Iterator[httpx.Client]:
    server = start_server("--runtime-config", "resource.k8s.io/v1alpha3=true", "--feature-gates", gates_flag({Gate.DRAResourcePoolStatus: True}))
    with httpx.Client(base_url=server.url, timeout=30.0, event_hooks={"response": [_checked]}) as client:
        yield client


def _request(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": name}, "spec": {"driver": "gpu.example.com", **spec}}


def test_the_gated_kind_is_served_only_with_its_gate(versioned: httpx.Client, pool_status: httpx.Client) -> None:
    assert assert_status(versioned.get(REQUESTS), 404, "NotFound")
    names = sorted(r["name"] for r in pool_status.get(f"{GROUP}/v1alpha3").json()["resources"])
    assert names == ["devicetaintrules", "devicetaintrules/status", "resourcepoolstatusrequests", "resourcepoolstatusrequests/status"]
    assert [v["version"] for v in pool_status.get(GROUP).json()["versions"]] == ["v1", "v1alpha3"]


def test_a_pool_status_request_is_defaulted_and_its_spec_is_immutable(pool_status: httpx.Client) -> None:
    name = _unique("req")
    created = pool_status.post(REQUESTS, json={**_request(name), "status": {"poolCount": 3}})
    assert created.status_code == 201, created.text
    assert created.json()["spec"] == {"driver": "gpu.example.com", "limit": 100}
    assert "status" not in created.json()
    changed = created.json()
    changed["spec"]["limit"] = 5
    refused = assert_status(pool_status.put(f"{REQUESTS}/{name}", json=changed), 422, "Invalid")
    assert [(c["field"], c["reason"], c["message"]) for c in refused["details"]["causes"]] == [("spec", "FieldValueInvalid", 'Invalid value: {"driver":"gpu.example.com","limit":5}: field is immutable')]


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        ({"driver": ""}, [("spec.driver", "FieldValueRequired")]),
        ({"driver": "Not_A_Driver"}, [("spec.driver", "FieldValueInvalid")]),
        ({"limit": 0}, [("spec.limit", "FieldValueInvalid")]),
        ({"limit": 1001}, [("spec.limit", "FieldValueInvalid")]),
        ({"poolName": "bad pool"}, [("spec.poolName", "FieldValueInvalid")]),
    ],
)
def test_a_pool_status_request_is_validated(pool_status: httpx.Client, spec: Obj, causes: list[tuple[str, str]]) -> None:
    body = _request(_unique("bad"))
    body["spec"].update(spec)
    refused = assert_status(pool_status.post(REQUESTS, json=body), 422, "Invalid")
    assert [(c["field"], c["reason"]) for c in refused["details"]["causes"]] == causes


def test_a_default_partition_type_attribute_is_dropped_without_its_gate(pool_status: httpx.Client) -> None:
    # DRAPartitionableDevicesType is off on this server: upstream drops the field rather than refuse it.
    created = pool_status.post(REQUESTS, json=_request(_unique("req"), defaultPartitionTypeAttribute="example.com/profile"))
    assert created.status_code == 201, created.text
    assert created.json()["spec"] == {"driver": "gpu.example.com", "limit": 100}


def test_a_pool_status_requests_status_is_written_once(pool_status: httpx.Client) -> None:
    name = _unique("req")
    created = pool_status.post(REQUESTS, json=_request(name, poolName="node-1")).json()
    bad = copy.deepcopy(created)
    bad["status"] = {"poolCount": 1, "pools": [{"driver": "gpu.example.com", "poolName": "node-1", "generation": -1}]}
    refused = assert_status(pool_status.put(f"{REQUESTS}/{name}/status", json=bad), 422, "Invalid")
    assert [c["field"] for c in refused["details"]["causes"]] == ["status.pools[0].generation"]
    answer = {
        "poolCount": 1,
        "pools": [{"driver": "gpu.example.com", "poolName": "node-1", "nodeName": "node-1", "generation": 1, "resourceSliceCount": 1, "totalDevices": 2, "allocatedDevices": 1, "availableDevices": 1, "unavailableDevices": 0}],
        "conditions": [{"type": "Complete", "status": "True", "reason": "Calculated", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    written = pool_status.put(f"{REQUESTS}/{name}/status", json={**created, "status": answer})
    assert written.status_code == 200, written.text
    assert written.json()["status"] == answer
    again = written.json()
    again["status"]["poolCount"] = 2
    refused = assert_status(pool_status.put(f"{REQUESTS}/{name}/status", json=again), 422, "Invalid")
    assert [c["field"] for c in refused["details"]["causes"]] == ["status"]
    deleted = pool_status.delete(f"{REQUESTS}/{name}")
    assert deleted.json()["kind"] == "ResourcePoolStatusRequest"


# The status the controller writes for a partitionable pool and a pool of shareable devices.
VIEWS_ANSWER: Obj = {
    "poolCount": 2,
    "pools": [
        {
            "driver": "gpu.example.com", "poolName": "partitioned", "generation": 1, "resourceSliceCount": 2,
            "totalDevices": 3, "allocatedDevices": 1, "availableDevices": 2, "unavailableDevices": 0,
            "partitionSummary": [
                {"attribute": "gpu.example.com/profile", "type": "Full", "total": 1, "allocatable": 0},
                {"attribute": "gpu.example.com/profile", "type": "Half", "total": 2, "allocatable": 1},
            ],
        },
        {
            "driver": "gpu.example.com", "poolName": "shareable", "generation": 1, "resourceSliceCount": 1,
            "totalDevices": 2, "allocatedDevices": 1, "availableDevices": 1, "unavailableDevices": 0,
            "shareableSummary": {
                "fullyAvailableDevices": 1, "partiallyAvailableDevices": 1,
                "capacity": [{"name": "memory", "total": "32Gi", "consumed": "6Gi", "available": "26Gi"}],
            },
        },
    ],
    "conditions": [{"type": "Complete", "status": "True", "reason": "CalculationComplete", "message": "Calculated status for 2 pools", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
}  # fmt: skip


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_the_partition_and_shareable_summaries_are_kept(pool_status: httpx.Client, encoding: str) -> None:
    name = _unique("views")
    created = pool_status.post(REQUESTS, json=_request(name)).json()
    answered = {**created, "status": VIEWS_ANSWER}
    if encoding == "json":
        written = pool_status.put(f"{REQUESTS}/{name}/status", json=answered)
    else:
        pb = {"content-type": protobuf.CONTENT_TYPE, "accept": protobuf.CONTENT_TYPE}
        written = pool_status.put(f"{REQUESTS}/{name}/status", content=protobuf.encode_object(answered), headers=pb)
    assert written.status_code == 200, written.content[:300]
    # Read back both ways: JSON and protobuf answers carry the summaries unchanged.
    assert pool_status.get(f"{REQUESTS}/{name}").json()["status"] == VIEWS_ANSWER
    in_protobuf = pool_status.get(f"{REQUESTS}/{name}", headers={"accept": protobuf.CONTENT_TYPE})
    assert protobuf.decode_object(in_protobuf.content)["status"] == VIEWS_ANSWER




def _pool(**fields: Any) -> Obj:
    return {"driver": "gpu.example.com", "poolName": "p", "generation": 1, **fields}


@pytest.mark.parametrize(
    ("pool", "causes"),
    [
        (_pool(generation=0), [("status.pools[0].generation", "FieldValueRequired", "Required value")]),
        (
            _pool(partitionSummary=[{"attribute": "gpu.example.com/profile", "type": "Full", "total": 1, "allocatable": 1}] * 2),
            [("status.pools[0].partitionSummary[1]", "FieldValueDuplicate",
              'Duplicate value: {"attribute":"gpu.example.com/profile","type":"Full","total":1,"allocatable":1}')],
        ),
        (
            _pool(partitionSummary=[{"attribute": "", "type": "Full", "total": -1}]),
            [("status.pools[0].partitionSummary[0].attribute", "FieldValueRequired", "Required value"),
             ("status.pools[0].partitionSummary[0].total", "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0"),
             ("status.pools[0].partitionSummary[0].allocatable", "FieldValueRequired", "Required value")],
        ),
        (
            # Too many entries: the entries themselves are not looked at.
            _pool(partitionSummary=[{"type": str(i)} for i in range(33)]),
            [("status.pools[0].partitionSummary", "FieldValueTooMany", "Too many: 33: must have at most 32 items")],
        ),
        (
            _pool(shareableSummary={"partiallyAvailableDevices": -1, "capacity": [{"name": "memory", "total": "1"}]}),
            [("status.pools[0].shareableSummary.fullyAvailableDevices", "FieldValueRequired", "Required value"),
             ("status.pools[0].shareableSummary.partiallyAvailableDevices", "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0"),
             ("status.pools[0].shareableSummary.capacity[0].consumed", "FieldValueRequired", "Required value"),
             ("status.pools[0].shareableSummary.capacity[0].available", "FieldValueRequired", "Required value")],
        ),
        (
            _pool(shareableSummary={"fullyAvailableDevices": 0, "partiallyAvailableDevices": 0,
                                    "capacity": [{"name": "", "total": "1", "consumed": "0", "available": "1"}] * 33}),
            [("status.pools[0].shareableSummary.capacity", "FieldValueTooMany", "Too many: 33: must have at most 32 items")],
        ),
    ],
    ids=["generation-zero", "duplicate-partition", "partition-entry", "partitions-over-cap", "shareable", "capacities-over-cap"],
)  # fmt: skip
def test_a_pool_status_answer_is_validated(pool_status: httpx.Client, pool: Obj, causes: list[tuple[str, str, str]]) -> None:
    name = _unique("bad")
    created = pool_status.post(REQUESTS, json=_request(name)).json()
    refused = assert_status(pool_status.put(f"{REQUESTS}/{name}/status", json={**created, "status": {"poolCount": 1, "pools": [pool]}}), 422, "Invalid")
    got = [(c["field"], c["reason"], c["message"]) for c in refused["details"]["causes"]]
    assert got == causes
    assert "status" not in pool_status.get(f"{REQUESTS}/{name}").json()
