# The client's models type every field Optional; these tests assert on the values instead.
# mypy: disable-error-code="union-attr,index,arg-type"
"""The official ``kubernetes`` Python client (v37, strict pydantic models) against a test server.

The point: every object the server returns must decode into the client's models
(``resourceVersion`` strings, integer ``generation``, quantities as strings, required
sub-fields present, ``items`` never null...). A decoding problem surfaces as a pydantic
``ValidationError`` from the call itself, so each call below is also a schema check.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from devtools.server import ServerProcess
from tests.helpers import claim, device_class, pod

MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"
ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool-a", "device": "gpu-0"}]},
}


@pytest.fixture(scope="session")
def api_client(server: ServerProcess) -> Iterator[client.ApiClient]:
    config = client.Configuration(host=server.url)
    with client.ApiClient(config) as api:
        yield api


@pytest.fixture
def resource(api_client: client.ApiClient) -> client.ResourceV1Api:
    return client.ResourceV1Api(api_client)


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def coordination(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


def status_of(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["code"] == exc.status, body
    return body  # type: ignore[no-any-return]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def names(items: list[Any]) -> list[str]:
    return sorted(i.metadata.name for i in items)


def labelled_claim(name: str, **labels: str) -> dict[str, Any]:
    return claim(name, labels=labels or None)


def slice_body(name: str, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": f"{node}-pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"model": {"string": "a100"}, "cores": {"int": 108}, "healthy": {"bool": True}, "driverVersion": {"version": "1.2.3"}},
                    "capacity": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}},
                },
                {"name": "gpu-1"},
            ],
        },
    }


def taint_rule_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "pool-a", "device": "gpu-0"},
            "taint": {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"},
        },
    }


def node_body(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
    }


def node_status() -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "7500m", "memory": "31Gi", "pods": "110"},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname", "address": "n1"}],
        "nodeInfo": {
            "machineID": "m",
            "systemUUID": "s",
            "bootID": "b",
            "kernelVersion": "6.1.0",
            "osImage": "Debian GNU/Linux 12",
            "containerRuntimeVersion": "containerd://1.7.0",
            "kubeletVersion": "v1.37.0",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


# ---- ResourceClaim -----------------------------------------------------------------------------


def test_claim_create_read_and_errors(resource: client.ResourceV1Api, ns: str) -> None:
    created = resource.create_namespaced_resource_claim(ns, labelled_claim("c1", app="demo"))
    assert isinstance(created, client.ResourceV1ResourceClaim)
    meta = created.metadata
    assert meta.name == "c1" and meta.namespace == ns and meta.uid
    assert isinstance(meta.resource_version, str) and meta.resource_version.isdigit()
    assert meta.generation == 1
    assert isinstance(meta.creation_timestamp, datetime)
    assert created.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"

    got = resource.read_namespaced_resource_claim("c1", ns)
    assert got.metadata.uid == meta.uid and got.metadata.labels == {"app": "demo"}

    # Typed model bodies work as well as dicts.
    model = client.ResourceV1ResourceClaim.from_dict(claim("c2"))
    assert resource.create_namespaced_resource_claim(ns, model).metadata.name == "c2"

    with pytest.raises(ApiException) as err:
        resource.create_namespaced_resource_claim(ns, labelled_claim("c1"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as err:
        resource.read_namespaced_resource_claim("missing", ns)
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'resourceclaims.resource.k8s.io "missing" not found'
    with pytest.raises(ApiException) as err:
        resource.create_namespaced_resource_claim(ns, labelled_claim("Bad_Name"))
    body = status_of(err.value)
    assert err.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "metadata.name"

    dry = resource.create_namespaced_resource_claim(ns, labelled_claim("dry"), dry_run="All")
    assert dry.metadata.name == "dry" and dry.metadata.uid
    with pytest.raises(ApiException) as err:
        resource.read_namespaced_resource_claim("dry", ns)
    assert err.value.status == 404


def test_upstream_defaults(resource: client.ResourceV1Api, ns: str) -> None:
    """pkg/apis/resource/v1/defaults.go: allocationMode ExactCount, count 1, taint timeAdded now."""
    created = resource.create_namespaced_resource_claim(ns, claim("defaults"))
    exactly = created.spec.devices.requests[0].exactly
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)
    body = claim("sub")
    body["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.example.com"}]}]
    sub = resource.create_namespaced_resource_claim(ns, body).spec.devices.requests[0].first_available[0]
    assert (sub.allocation_mode, sub.count) == ("ExactCount", 1)
    template = resource.create_namespaced_resource_claim_template(
        ns, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "defaults"}, "spec": {"spec": claim()["spec"]}}
    )
    assert template.spec.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    rule = resource.create_device_taint_rule(taint_rule_body(f"{ns}-defaults"))
    assert rule.spec.taint.time_added is not None
    assert abs((rule.spec.taint.time_added - datetime.now(UTC)).total_seconds()) < 60
    resource.delete_device_taint_rule(f"{ns}-defaults")


def test_claim_list_labels_and_pagination(resource: client.ResourceV1Api, ns: str) -> None:
    for i in range(5):
        resource.create_namespaced_resource_claim(ns, labelled_claim(f"c{i}", tier="even" if i % 2 == 0 else "odd"))
    everything = resource.list_namespaced_resource_claim(ns)
    assert isinstance(everything, client.V1ResourceClaimList)
    assert names(everything.items) == [f"c{i}" for i in range(5)]
    assert everything.metadata.resource_version.isdigit()

    even = resource.list_namespaced_resource_claim(ns, label_selector="tier=even")
    assert names(even.items) == ["c0", "c2", "c4"]
    assert resource.list_namespaced_resource_claim(ns, label_selector="tier in (odd),tier!=even").items[0].metadata.labels == {"tier": "odd"}
    assert resource.list_namespaced_resource_claim(ns, label_selector="nothere").items == []
    assert names(resource.list_namespaced_resource_claim(ns, field_selector="metadata.name=c3").items) == ["c3"]

    pages: list[list[str | None]] = []
    token = None
    while True:
        page = resource.list_namespaced_resource_claim(ns, limit=2, _continue=token)
        pages.append([i.metadata.name for i in page.items])
        token = page.metadata.var_continue
        if not token:
            assert page.metadata.remaining_item_count in (None, 0)
            break
        assert page.metadata.remaining_item_count == 5 - sum(len(p) for p in pages)
    assert pages == [["c0", "c1"], ["c2", "c3"], ["c4"]]

    # Pagination also composes with a label selector.
    first = resource.list_namespaced_resource_claim(ns, limit=2, label_selector="tier=even")
    rest = resource.list_namespaced_resource_claim(ns, limit=2, label_selector="tier=even", _continue=first.metadata.var_continue)
    assert [i.metadata.name for i in first.items + rest.items] == ["c0", "c2", "c4"]

    across = resource.list_resource_claim_for_all_namespaces(label_selector="tier=odd", field_selector=f"metadata.namespace={ns}")
    assert names(across.items) == ["c1", "c3"]
    assert {i.metadata.namespace for i in across.items} == {ns}


def test_claim_watch(resource: client.ResourceV1Api, ns: str) -> None:
    start = resource.list_namespaced_resource_claim(ns).metadata.resource_version
    resource.create_namespaced_resource_claim(ns, labelled_claim("w1"))
    resource.patch_namespaced_resource_claim("w1", ns, {"metadata": {"labels": {"step": "2"}}})
    resource.delete_namespaced_resource_claim("w1", ns)

    w = watch.Watch(return_type=client.ResourceV1ResourceClaim)
    seen: list[tuple[str, str, dict[str, str] | None]] = []
    for event in w.stream(resource.list_namespaced_resource_claim, ns, resource_version=start, timeout_seconds=5):
        assert isinstance(event["object"], client.ResourceV1ResourceClaim), event
        seen.append((event["type"], event["object"].metadata.name, event["object"].metadata.labels))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "w1", None), ("MODIFIED", "w1", {"step": "2"}), ("DELETED", "w1", {"step": "2"})]
    assert int(w.resource_version) > int(start)


def test_claim_watch_times_out_with_bookmarks_and_filters(resource: client.ResourceV1Api, ns: str) -> None:
    rv = resource.list_namespaced_resource_claim(ns).metadata.resource_version
    resource.create_namespaced_resource_claim(ns, labelled_claim("skip", app="other"))
    resource.create_namespaced_resource_claim(ns, labelled_claim("keep", app="demo"))
    w = watch.Watch(return_type=client.ResourceV1ResourceClaim)
    started = time.monotonic()
    events = list(w.stream(resource.list_namespaced_resource_claim, ns, resource_version=rv, label_selector="app=demo", timeout_seconds=3, allow_watch_bookmarks=True))
    elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 10, elapsed  # the server closes the stream at timeoutSeconds
    typed = [(e["type"], e["object"].metadata.name) for e in events if e["type"] != "BOOKMARK"]
    assert typed == [("ADDED", "keep")]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, "the test server sends a bookmark every second"
    assert all(isinstance(b["raw_object"]["metadata"]["resourceVersion"], str) for b in bookmarks)
    assert int(w.resource_version) >= int(events[0]["object"].metadata.resource_version)


def test_claim_watch_live_events(resource: client.ResourceV1Api, ns: str) -> None:
    """Without a resourceVersion in the past: events that happen while the stream is open."""
    rv = resource.list_namespaced_resource_claim(ns).metadata.resource_version
    w = watch.Watch(return_type=client.ResourceV1ResourceClaim)

    def later() -> None:
        time.sleep(0.5)
        resource.create_namespaced_resource_claim(ns, labelled_claim("live"))

    threading.Thread(target=later).start()
    for event in w.stream(resource.list_namespaced_resource_claim, ns, resource_version=rv, timeout_seconds=10):
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "live")
        w.stop()
        break
    else:
        pytest.fail("no event within the watch timeout")


def test_claim_patch_types(resource: client.ResourceV1Api, ns: str) -> None:
    resource.create_namespaced_resource_claim(ns, labelled_claim("p1", a="1"))
    # dict => strategic merge patch
    patched = resource.patch_namespaced_resource_claim("p1", ns, {"metadata": {"labels": {"b": "2"}}})
    assert isinstance(patched, client.ResourceV1ResourceClaim)
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    # merge patch deleting a key
    patched = resource.patch_namespaced_resource_claim("p1", ns, {"metadata": {"labels": {"a": None}}}, _content_type=MERGE)
    assert patched.metadata.labels == {"b": "2"}
    # list => JSON patch
    patched = resource.patch_namespaced_resource_claim("p1", ns, [{"op": "add", "path": "/metadata/annotations", "value": {"note": "x"}}])
    assert patched.metadata.annotations == {"note": "x"}
    # server-side apply with a field manager
    applied = resource.patch_namespaced_resource_claim(
        "p1", ns, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "p1", "labels": {"owner": "me"}}}, field_manager="pytest", _content_type=APPLY
    )
    assert applied.metadata.labels == {"b": "2", "owner": "me"}
    managers = {(m.manager, m.operation) for m in applied.metadata.managed_fields}
    assert ("pytest", "Apply") in managers
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim(
            "p1", ns, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "p1", "labels": {"owner": "you"}}}, field_manager="other", _content_type=APPLY
        )
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    forced = resource.patch_namespaced_resource_claim(
        "p1", ns, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "p1", "labels": {"owner": "you"}}}, field_manager="other", force=True, _content_type=APPLY
    )
    assert forced.metadata.labels["owner"] == "you"
    # apply creates a missing object
    made = resource.patch_namespaced_resource_claim("p2", ns, {**claim("p2"), "metadata": {"name": "p2"}}, field_manager="pytest", _content_type=APPLY)
    assert made.metadata.uid and made.metadata.generation == 1
    # patching a missing object is a 404
    with pytest.raises(ApiException) as err:
        resource.patch_namespaced_resource_claim("nope", ns, {"metadata": {"labels": {"x": "y"}}})
    assert err.value.status == 404


def test_claim_replace_and_conflict(resource: client.ResourceV1Api, ns: str) -> None:
    original = resource.create_namespaced_resource_claim(ns, labelled_claim("r1", stage="one"))
    current = resource.read_namespaced_resource_claim("r1", ns)
    current.metadata.labels = {"stage": "two"}
    replaced = resource.replace_namespaced_resource_claim("r1", ns, current)
    assert replaced.metadata.labels == {"stage": "two"}
    assert int(replaced.metadata.resource_version) > int(original.metadata.resource_version)
    assert replaced.metadata.generation == 1
    original.metadata.labels = {"stage": "stale"}
    with pytest.raises(ApiException) as err:
        resource.replace_namespaced_resource_claim("r1", ns, original)
    body = status_of(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]


def test_claim_status_subresource(resource: client.ResourceV1Api, core: client.CoreV1Api, ns: str) -> None:
    p = core.create_namespaced_pod(ns, pod("user"))
    resource.create_namespaced_resource_claim(ns, labelled_claim("s1"))
    current = resource.read_namespaced_resource_claim_status("s1", ns)
    assert isinstance(current, client.ResourceV1ResourceClaim)
    assert current.status is None or current.status.allocation is None
    body = current.to_dict()
    body["status"] = {
        "allocation": ALLOCATION,
        "reservedFor": [{"resource": "pods", "name": "user", "uid": p.metadata.uid}],
    }
    updated = resource.replace_namespaced_resource_claim_status("s1", ns, body)
    assert isinstance(updated, client.ResourceV1ResourceClaim)
    result = updated.status.allocation.devices.results[0]
    assert (result.request, result.driver, result.pool, result.device) == ("gpu", "gpu.example.com", "pool-a", "gpu-0")
    assert updated.status.reserved_for[0].uid == p.metadata.uid
    assert updated.metadata.generation == 1  # status writes do not bump generation

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    device_status = {
        "driver": "gpu.example.com",
        "pool": "pool-a",
        "device": "gpu-0",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared", "message": "device ready", "lastTransitionTime": now}],
        "data": {"vendor": "example"},
        "networkData": {"interfaceName": "eth1", "ips": ["10.9.8.7/24"], "hardwareAddress": "ea:9f:24:6b:6d:85"},
    }
    patched = resource.patch_namespaced_resource_claim_status("s1", ns, {"status": {"devices": [device_status]}}, _content_type=MERGE)
    assert patched.status.devices[0].conditions[0].reason == "Prepared"
    assert patched.status.devices[0].network_data.interface_name == "eth1"
    assert patched.status.allocation is not None

    read = resource.read_namespaced_resource_claim_status("s1", ns)
    assert read.status.devices[0].device == "gpu-0"
    # The main resource ignores status; the status subresource ignores spec and labels.
    ignored = resource.patch_namespaced_resource_claim("s1", ns, {"status": {"reservedFor": None}}, _content_type=MERGE)
    assert ignored.status.reserved_for is not None
    ignored = resource.patch_namespaced_resource_claim_status("s1", ns, {"metadata": {"labels": {"via": "status"}}}, _content_type=MERGE)
    assert not ignored.metadata.labels
    # Deallocate.
    cleared = resource.patch_namespaced_resource_claim_status("s1", ns, {"status": {"reservedFor": None, "allocation": None, "devices": None}}, _content_type=MERGE)
    assert cleared.status is None or (cleared.status.allocation is None and not cleared.status.reserved_for)


def test_claim_delete_and_delete_collection(resource: client.ResourceV1Api, ns: str) -> None:
    for name, tier in (("d1", "x"), ("d2", "y"), ("d3", "y"), ("d4", "z")):
        resource.create_namespaced_resource_claim(ns, labelled_claim(name, tier=tier))
    deleted = resource.delete_namespaced_resource_claim("d1", ns)
    assert isinstance(deleted, client.ResourceV1ResourceClaim)
    assert deleted.metadata.name == "d1"
    with pytest.raises(ApiException) as err:
        resource.delete_namespaced_resource_claim("d1", ns)
    assert err.value.status == 404
    gone = resource.delete_collection_namespaced_resource_claim(ns, label_selector="tier=y")
    assert gone is not None
    assert names(resource.list_namespaced_resource_claim(ns).items) == ["d4"]
    # Preconditions: a wrong uid is a conflict.
    with pytest.raises(ApiException) as err:
        resource.delete_namespaced_resource_claim("d4", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000")))
    assert err.value.status == 409
    # Finalizers keep a deleted claim around with a deletionTimestamp.
    resource.patch_namespaced_resource_claim("d4", ns, {"metadata": {"finalizers": ["example.com/hold"]}})
    pending = resource.delete_namespaced_resource_claim("d4", ns)
    assert pending.metadata.deletion_timestamp is not None
    assert resource.read_namespaced_resource_claim("d4", ns).metadata.deletion_timestamp is not None
    resource.patch_namespaced_resource_claim("d4", ns, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    with pytest.raises(ApiException) as err:
        resource.read_namespaced_resource_claim("d4", ns)
    assert err.value.status == 404


# ---- ResourceClaimTemplate ---------------------------------------------------------------------


def test_claim_template(resource: client.ResourceV1Api, ns: str) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t1", "labels": {"app": "demo"}},
        "spec": {"metadata": {"labels": {"from": "template"}}, "spec": claim()["spec"]},
    }
    made = resource.create_namespaced_resource_claim_template(ns, body)
    assert isinstance(made, client.V1ResourceClaimTemplate)
    assert made.spec.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"
    assert resource.read_namespaced_resource_claim_template("t1", ns).spec.metadata.labels == {"from": "template"}
    listed = resource.list_namespaced_resource_claim_template(ns, label_selector="app=demo")
    assert isinstance(listed, client.V1ResourceClaimTemplateList) and names(listed.items) == ["t1"]
    assert names(resource.list_resource_claim_template_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items) == ["t1"]
    patched = resource.patch_namespaced_resource_claim_template("t1", ns, {"metadata": {"annotations": {"a": "b"}}})
    assert patched.metadata.annotations == {"a": "b"}
    current = resource.read_namespaced_resource_claim_template("t1", ns)
    current.metadata.labels["v"] = "2"
    assert resource.replace_namespaced_resource_claim_template("t1", ns, current).metadata.labels == {"app": "demo", "v": "2"}
    deleted = resource.delete_namespaced_resource_claim_template("t1", ns)
    assert isinstance(deleted, client.V1ResourceClaimTemplate)
    resource.create_namespaced_resource_claim_template(ns, {**body, "metadata": {"name": "t2"}})
    resource.delete_collection_namespaced_resource_claim_template(ns)
    assert resource.list_namespaced_resource_claim_template(ns).items == []


# ---- ResourceSlice -------------------------------------------------------------------------------


def test_resource_slice(resource: client.ResourceV1Api, ns: str) -> None:
    node = f"{ns}-node"
    made = resource.create_resource_slice(slice_body(f"{ns}-s1", node, {"test": ns}))
    assert isinstance(made, client.V1ResourceSlice)
    assert made.spec.pool.generation == 1 and made.spec.pool.resource_slice_count == 1
    device = made.spec.devices[0]
    assert device.capacity["memory"].value == "80Gi"
    assert device.attributes["cores"].int == 108 and device.attributes["model"].string == "a100"
    assert device.attributes["healthy"].bool is True and device.attributes["driverVersion"].version == "1.2.3"
    resource.create_resource_slice(slice_body(f"{ns}-s2", f"{ns}-other", {"test": ns}))

    listed = resource.list_resource_slice(label_selector=f"test={ns}")
    assert isinstance(listed, client.V1ResourceSliceList) and names(listed.items) == [f"{ns}-s1", f"{ns}-s2"]
    assert names(resource.list_resource_slice(field_selector=f"spec.nodeName={node}").items) == [f"{ns}-s1"]
    assert names(resource.list_resource_slice(field_selector=f"spec.driver=gpu.example.com,spec.nodeName={ns}-other").items) == [f"{ns}-s2"]
    page = resource.list_resource_slice(label_selector=f"test={ns}", limit=1)
    assert len(page.items) == 1 and page.metadata.var_continue

    w = watch.Watch()
    rv = listed.metadata.resource_version
    resource.patch_resource_slice(f"{ns}-s1", {"metadata": {"labels": {"seen": "yes"}}})
    for event in w.stream(resource.list_resource_slice, resource_version=rv, field_selector=f"spec.nodeName={node}", timeout_seconds=5):
        assert isinstance(event["object"], client.V1ResourceSlice)
        assert (event["type"], event["object"].metadata.labels.get("seen")) == ("MODIFIED", "yes")
        w.stop()

    current = resource.read_resource_slice(f"{ns}-s1")
    current.spec.pool.generation = 2
    replaced = resource.replace_resource_slice(f"{ns}-s1", current)
    assert replaced.spec.pool.generation == 2
    assert replaced.metadata.generation == 2
    deleted = resource.delete_resource_slice(f"{ns}-s1")
    assert isinstance(deleted, client.V1ResourceSlice)
    resource.delete_collection_resource_slice(label_selector=f"test={ns}")
    assert resource.list_resource_slice(label_selector=f"test={ns}").items == []


# ---- DeviceClass ------------------------------------------------------------------------------


def test_device_class(resource: client.ResourceV1Api, ns: str) -> None:
    name = f"{ns}.example.com"
    made = resource.create_device_class({**device_class(name), "metadata": {"name": name, "labels": {"test": ns}}})
    assert isinstance(made, client.V1DeviceClass) and made.metadata.generation == 1
    assert made.spec.selectors[0].cel.expression == 'device.driver == "gpu.example.com"'
    assert names(resource.list_device_class(label_selector=f"test={ns}").items) == [name]
    relabelled = resource.patch_device_class(name, {"metadata": {"labels": {"extra": "1"}}})
    assert relabelled.metadata.generation == 1  # metadata-only change
    respec = resource.patch_device_class(name, {"spec": {"selectors": [{"cel": {"expression": "true"}}]}}, _content_type=MERGE)
    assert respec.metadata.generation == 2
    current = resource.read_device_class(name)
    current.spec.config = [client.V1DeviceClassConfiguration(opaque=client.V1OpaqueDeviceConfiguration(driver="gpu.example.com", parameters={"mode": "fast"}))]
    replaced = resource.replace_device_class(name, current)
    assert replaced.spec.config[0].opaque.parameters == {"mode": "fast"}
    assert replaced.metadata.generation == 3
    deleted = resource.delete_device_class(name)
    assert isinstance(deleted, client.V1DeviceClass)
    resource.create_device_class({**device_class(name), "metadata": {"name": name, "labels": {"test": ns}}})
    resource.delete_collection_device_class(label_selector=f"test={ns}")
    assert resource.list_device_class(label_selector=f"test={ns}").items == []


# ---- DeviceTaintRule ----------------------------------------------------------------------------


def test_device_taint_rule(resource: client.ResourceV1Api, ns: str) -> None:
    name = f"{ns}-taint"
    made = resource.create_device_taint_rule(taint_rule_body(name))
    assert isinstance(made, client.V1DeviceTaintRule)
    assert made.spec.taint.key == "example.com/unhealthy" and made.spec.taint.effect == "NoSchedule"
    assert made.metadata.generation == 1
    assert name in names(resource.list_device_taint_rule().items)

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": "EvictionInProgress", "status": "False", "reason": "NoEffect", "message": "NoSchedule does not evict", "lastTransitionTime": now, "observedGeneration": 1}
    with_status = resource.patch_device_taint_rule_status(name, {"status": {"conditions": [condition]}}, _content_type=MERGE)
    assert with_status.status.conditions[0].type == "EvictionInProgress"
    assert resource.read_device_taint_rule_status(name).status.conditions[0].reason == "NoEffect"

    current = resource.read_device_taint_rule(name)
    current.spec.taint.value = "false"
    replaced = resource.replace_device_taint_rule(name, current)
    assert replaced.spec.taint.value == "false" and replaced.metadata.generation == 2
    assert replaced.status.conditions[0].type == "EvictionInProgress"  # a main write keeps status

    status_body = resource.read_device_taint_rule_status(name)
    status_body.status.conditions[0].status = "True"
    status_body.status.conditions[0].reason = "Evicting"
    assert resource.replace_device_taint_rule_status(name, status_body).status.conditions[0].reason == "Evicting"

    # v1 requires a resourceVersion on update.
    blind = resource.read_device_taint_rule(name).to_dict()
    blind["metadata"].pop("resource_version", None)
    blind["metadata"].pop("resourceVersion", None)
    with pytest.raises(ApiException) as err:
        resource.replace_device_taint_rule(name, blind)
    assert err.value.status == 422, err.value.body
    assert status_of(err.value)["details"]["causes"][0]["field"] == "metadata.resourceVersion"

    # The v1 store answers a delete with a Status (its typed return is ``object``).
    answer = resource.delete_device_taint_rule(name)
    assert isinstance(answer, dict) and answer["kind"] == "Status" and answer["status"] == "Success", answer
    resource.create_device_taint_rule({**taint_rule_body(name), "metadata": {"name": name, "labels": {"test": ns}}})
    resource.delete_collection_device_taint_rule(label_selector=f"test={ns}")
    assert name not in names(resource.list_device_taint_rule().items)


# ---- Pod and binding -------------------------------------------------------------------------------


def test_pod_lifecycle_and_binding(core: client.CoreV1Api, ns: str) -> None:
    node = f"{ns}-n1"
    core.create_node(node_body(node))
    body = pod("p1")
    body["metadata"]["labels"] = {"app": "demo"}
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}], "limits": {"cpu": "500m", "memory": "64Mi"}}
    made = core.create_namespaced_pod(ns, body)
    assert isinstance(made, client.V1Pod)
    assert made.status.phase == "Pending" and made.spec.scheduler_name == "default-scheduler"
    assert made.spec.resource_claims[0].resource_claim_template_name == "gpu-template"
    assert made.spec.containers[0].resources.limits == {"cpu": "500m", "memory": "64Mi"}

    assert names(core.list_namespaced_pod(ns, label_selector="app=demo").items) == ["p1"]
    assert names(core.list_namespaced_pod(ns, field_selector="spec.nodeName=").items) == ["p1"]
    assert names(core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns},status.phase=Pending").items) == ["p1"]

    binding = client.V1Binding(metadata=client.V1ObjectMeta(name="p1"), target=client.V1ObjectReference(api_version="v1", kind="Node", name=node))
    # The Status answer does not decode as a V1Binding (upstream too): read it raw.
    response: Any = core.create_namespaced_pod_binding("p1", ns, binding, _preload_content=False)
    assert response.status == 201
    answer = json.loads(response.data)
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    bound = core.read_namespaced_pod("p1", ns)
    assert bound.spec.node_name == node
    assert names(core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={node}").items) == ["p1"]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("p1", ns, binding, _preload_content=False)
    assert err.value.status == 409

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status_patch = {
        "status": {
            "phase": "Running",
            "podIP": "10.1.2.3",
            "podIPs": [{"ip": "10.1.2.3"}],
            "hostIP": "10.0.0.7",
            "startTime": now,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {"name": "main", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": True, "restartCount": 0, "started": True, "state": {"running": {"startedAt": now}}}
            ],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p1-gpu-abcde"}],
        }
    }
    running = core.patch_namespaced_pod_status("p1", ns, status_patch)
    assert running.status.phase == "Running" and running.status.pod_ip == "10.1.2.3"
    assert running.status.container_statuses[0].state.running.started_at is not None
    assert running.status.resource_claim_statuses[0].resource_claim_name == "p1-gpu-abcde"
    assert core.read_namespaced_pod_status("p1", ns).status.conditions[1].type == "Ready"
    assert names(core.list_namespaced_pod(ns, field_selector="status.phase=Running").items) == ["p1"]

    current = core.read_namespaced_pod("p1", ns)
    current.spec.containers[0].image = "registry.k8s.io/pause:3.11"
    replaced = core.replace_namespaced_pod("p1", ns, current)
    assert replaced.spec.containers[0].image == "registry.k8s.io/pause:3.11"
    assert replaced.status.phase == "Running"

    # A bound, running pod is deleted gracefully: the object comes back with a deletionTimestamp.
    deleting = core.delete_namespaced_pod("p1", ns)
    assert isinstance(deleting, client.V1Pod)
    assert deleting.metadata.deletion_timestamp is not None and deleting.metadata.deletion_grace_period_seconds == 30
    final = core.delete_namespaced_pod("p1", ns, grace_period_seconds=0)
    assert isinstance(final, client.V1Pod)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("p1", ns)
    assert err.value.status == 404


def test_pod_delete_collection_and_watch(core: client.CoreV1Api, ns: str) -> None:
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    for i in range(3):
        core.create_namespaced_pod(ns, {**pod(f"w{i}"), "metadata": {"name": f"w{i}", "labels": {"batch": "yes"}}})
    core.delete_collection_namespaced_pod(ns, label_selector="batch=yes")
    assert core.list_namespaced_pod(ns).items == []
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=5):
        assert isinstance(event["object"], client.V1Pod)
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 6:
            w.stop()
    assert sorted(seen) == sorted([("ADDED", f"w{i}") for i in range(3)] + [("DELETED", f"w{i}") for i in range(3)])


# ---- Node ---------------------------------------------------------------------------------------


def test_node(core: client.CoreV1Api, ns: str) -> None:
    name = f"{ns}-node"
    made = core.create_node(node_body(name, {"test": ns, "node-role.kubernetes.io/worker": ""}))
    assert isinstance(made, client.V1Node)
    assert names(core.list_node(label_selector=f"test={ns}").items) == [name]

    with_status = core.patch_node_status(name, {"status": node_status()})
    assert with_status.status.capacity == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert with_status.status.allocatable["cpu"] == "7500m"
    assert with_status.status.node_info.kubelet_version == "v1.37.0"
    assert core.read_node_status(name).status.conditions[0].type == "Ready"

    cordoned = core.patch_node(name, {"spec": {"unschedulable": True, "taints": [{"key": "example.com/maint", "effect": "NoSchedule"}]}})
    assert cordoned.spec.unschedulable is True and cordoned.spec.taints[0].key == "example.com/maint"
    assert cordoned.status.node_info.os_image == "Debian GNU/Linux 12"  # a main write keeps status
    assert names(core.list_node(field_selector="spec.unschedulable=true", label_selector=f"test={ns}").items) == [name]

    current = core.read_node_status(name)
    current.status.conditions[0].status = "False"
    current.status.conditions[0].reason = "KubeletNotReady"
    assert core.replace_node_status(name, current).status.conditions[0].status == "False"
    current = core.read_node(name)
    current.metadata.labels["zone"] = "a"
    assert core.replace_node(name, current).metadata.labels["zone"] == "a"

    answer = core.delete_node(name)
    assert answer is not None
    with pytest.raises(ApiException) as err:
        core.read_node(name)
    assert err.value.status == 404
    core.create_node(node_body(f"{name}-2", {"test": ns}))
    core.delete_collection_node(label_selector=f"test={ns}")
    assert core.list_node(label_selector=f"test={ns}").items == []


# ---- Namespace ------------------------------------------------------------------------------


def test_namespace(core: client.CoreV1Api) -> None:
    name = unique("pyns")
    made = core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": "dra"}}})
    assert isinstance(made, client.V1Namespace)
    assert made.status.phase == "Active"
    assert made.metadata.labels == {"team": "dra", "kubernetes.io/metadata.name": name}
    assert made.spec.finalizers == ["kubernetes"]
    assert name in names(core.list_namespace(label_selector="team=dra").items)
    assert names(core.list_namespace(field_selector=f"metadata.name={name}").items) == [name]
    patched = core.patch_namespace(name, {"metadata": {"annotations": {"owner": "pytest"}}})
    assert patched.metadata.annotations == {"owner": "pytest"}
    assert core.read_namespace_status(name).status.phase == "Active"
    current = core.read_namespace(name)
    current.metadata.labels["extra"] = "1"
    assert core.replace_namespace(name, current).metadata.labels["extra"] == "1"

    client.ResourceV1Api(core.api_client).create_namespaced_resource_claim(name, claim("inside"))
    answer = core.delete_namespace(name)
    assert answer is not None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            ns_obj = core.read_namespace(name)
        except ApiException as exc:
            assert exc.status == 404
            break
        assert ns_obj.status.phase == "Terminating" and ns_obj.metadata.deletion_timestamp is not None
        time.sleep(0.2)
    else:
        pytest.fail("namespace was not removed after its contents were deleted")
    with pytest.raises(ApiException) as err:
        client.ResourceV1Api(core.api_client).read_namespaced_resource_claim("inside", name)
    assert err.value.status == 404


# ---- Lease ---------------------------------------------------------------------------------------


def test_lease(coordination: client.CoordinationV1Api, ns: str) -> None:
    renew = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader", labels={"app": "scheduler"}),
        spec=client.V1LeaseSpec(holder_identity="sched-1", lease_duration_seconds=15, acquire_time=renew, renew_time=renew, lease_transitions=0),
    )
    made = coordination.create_namespaced_lease(ns, body)
    assert isinstance(made, client.V1Lease)
    assert made.spec.holder_identity == "sched-1"
    assert made.spec.renew_time == renew  # MicroTime keeps microseconds
    assert names(coordination.list_namespaced_lease(ns, label_selector="app=scheduler").items) == ["leader"]
    assert "leader" in names(coordination.list_lease_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items)

    current = coordination.read_namespaced_lease("leader", ns)
    later = datetime.now(UTC)
    current.spec.renew_time = later
    renewed = coordination.replace_namespaced_lease("leader", ns, current)
    assert renewed.spec.renew_time is not None
    assert abs((renewed.spec.renew_time - later).total_seconds()) < 1e-3
    # Leader election relies on optimistic concurrency.
    current.spec.holder_identity = "sched-2"
    with pytest.raises(ApiException) as err:
        coordination.replace_namespaced_lease("leader", ns, current)
    assert err.value.status == 409
    patched = coordination.patch_namespaced_lease("leader", ns, {"spec": {"holderIdentity": "sched-2", "leaseTransitions": 1}})
    assert patched.spec.holder_identity == "sched-2" and patched.spec.lease_transitions == 1

    assert coordination.delete_namespaced_lease("leader", ns) is not None
    coordination.create_namespaced_lease(ns, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "other"}, "spec": {}})
    coordination.delete_collection_namespaced_lease(ns)
    assert coordination.list_namespaced_lease(ns).items == []


# ---- Event -------------------------------------------------------------------------------------


def test_event(core: client.CoreV1Api, resource: client.ResourceV1Api, ns: str) -> None:
    target = resource.create_namespaced_resource_claim(ns, claim("evented"))
    now = datetime.now(UTC).replace(microsecond=0)
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="evented.1", namespace=ns),
        involved_object=client.V1ObjectReference(api_version="resource.k8s.io/v1", kind="ResourceClaim", name="evented", namespace=ns, uid=target.metadata.uid),
        reason="Allocated",
        message="allocated gpu-0",
        type="Normal",
        source=client.V1EventSource(component="dra-scheduler"),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        reporting_component="dra-scheduler",
        reporting_instance="sched-1",
    )
    made = core.create_namespaced_event(ns, body)
    assert isinstance(made, client.CoreV1Event)
    assert made.count == 1 and made.first_timestamp == now
    selector = f"involvedObject.kind=ResourceClaim,involvedObject.name=evented,involvedObject.uid={target.metadata.uid}"
    assert names(core.list_namespaced_event(ns, field_selector=selector).items) == ["evented.1"]
    assert core.list_namespaced_event(ns, field_selector="involvedObject.name=other").items == []
    assert names(core.list_event_for_all_namespaces(field_selector=f"reason=Allocated,metadata.namespace={ns}").items) == ["evented.1"]
    bumped = core.patch_namespaced_event("evented.1", ns, {"count": 2, "lastTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")})
    assert bumped.count == 2
    current = core.read_namespaced_event("evented.1", ns)
    current.message = "allocated gpu-0 again"
    assert core.replace_namespaced_event("evented.1", ns, current).message == "allocated gpu-0 again"
    assert core.delete_namespaced_event("evented.1", ns) is not None
    with pytest.raises(ApiException) as err:
        core.read_namespaced_event("evented.1", ns)
    assert err.value.status == 404
    micro = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "micro"},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": ns},
        "eventTime": "2026-01-02T03:04:05.123456Z",
        "reportingComponent": "c",
        "reportingInstance": "i",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
    }
    made = core.create_namespaced_event(ns, micro)
    assert made.event_time == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    core.delete_collection_namespaced_event(ns)
    assert core.list_namespaced_event(ns).items == []
