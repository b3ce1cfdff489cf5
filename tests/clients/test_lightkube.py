# lightkube's models type every field Optional; these tests assert on the values instead.
# mypy: disable-error-code="union-attr,index,arg-type"
"""lightkube (typed models, httpx2 transport) against a test server.

lightkube needs a kubeconfig with a user entry (``user: {}``), sends ``Accept: */*``,
patches with strategic merge by default, and watches without a resourceVersion (so the
server must start the stream with a synthetic ADDED for every existing object).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.resource_v1 import (
    AllocationResult,
    CELDeviceSelector,
    DeviceAllocationResult,
    DeviceClaim,
    DeviceClassSpec,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    ExactDeviceRequest,
    ResourceClaimSpec,
    ResourcePool,
    ResourceSliceSpec,
)
from lightkube.models.resource_v1 import Device as DeviceModel
from lightkube.resources.core_v1 import Namespace, Pod
from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceSlice
from lightkube.types import PatchType

from devtools.server import ServerProcess


@pytest.fixture(scope="session")
def lk(server: ServerProcess) -> Iterator[Client]:
    config = KubeConfig.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": server.url}}],
            "users": [{"name": "test", "user": {}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
            "current-context": "test",
        }
    )
    # 30 s as the other clients of the suite (lightkube's own default is 10 s).
    client = Client(config=config, field_manager="lightkube-test", timeout=30.0)  # a number: lightkube builds its own Timeout (httpx or httpx2)
    yield client


def new_claim(name: str, **labels: str) -> ResourceClaim:
    return ResourceClaim(
        metadata=ObjectMeta(name=name, labels=labels or None),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=[DeviceRequest(name="gpu", exactly=ExactDeviceRequest(deviceClassName="gpu.example.com"))])),
    )


def test_create_get_and_errors(lk: Client, ns: str) -> None:
    created = lk.create(new_claim("c1", app="demo"), namespace=ns)
    assert isinstance(created, ResourceClaim)
    assert created.metadata.name == "c1" and created.metadata.namespace == ns
    assert created.metadata.uid and created.metadata.resourceVersion.isdigit()
    assert created.metadata.generation == 1
    assert any(m.manager == "lightkube-test" for m in created.metadata.managedFields)
    got = lk.get(ResourceClaim, "c1", namespace=ns)
    assert got.metadata.uid == created.metadata.uid
    assert got.spec.devices.requests[0].exactly.deviceClassName == "gpu.example.com"
    with pytest.raises(ApiError) as err:
        lk.get(ResourceClaim, "missing", namespace=ns)
    assert err.value.status.code == 404 and err.value.status.reason == "NotFound"
    with pytest.raises(ApiError) as err:
        lk.create(new_claim("c1"), namespace=ns)
    assert err.value.status.code == 409 and err.value.status.reason == "AlreadyExists"

    pod = lk.create(Pod(metadata=ObjectMeta(name="p1"), spec=PodSpec(containers=[Container(name="main", image="registry.k8s.io/pause:3.10")])), namespace=ns)
    assert pod.status.phase == "Pending"
    assert lk.get(Namespace, ns).status.phase == "Active"


def test_list_chunked_with_labels(lk: Client, ns: str) -> None:
    for i in range(5):
        lk.create(new_claim(f"c{i}", tier="even" if i % 2 == 0 else "odd"), namespace=ns)
    # chunk_size=1 makes lightkube follow five continue tokens (one object per page).
    assert [c.metadata.name for c in lk.list(ResourceClaim, namespace=ns, chunk_size=1)] == [f"c{i}" for i in range(5)]
    even = [c.metadata.name for c in lk.list(ResourceClaim, namespace=ns, chunk_size=1, labels={"tier": "even"})]
    assert even == ["c0", "c2", "c4"]
    odd = [c.metadata.name for c in lk.list(ResourceClaim, namespace="*", labels={"tier": "odd"}, fields={"metadata.namespace": ns})]
    assert odd == ["c1", "c3"]
    assert list(lk.list(ResourceClaim, namespace=ns, labels={"tier": "none"})) == []


def test_watch_without_resource_version(lk: Client, ns: str) -> None:
    lk.create(new_claim("existing"), namespace=ns)

    def later() -> None:
        time.sleep(0.5)
        lk.create(new_claim("fresh"), namespace=ns)
        lk.patch(ResourceClaim, "fresh", {"metadata": {"labels": {"step": "2"}}}, namespace=ns)
        lk.delete(ResourceClaim, "fresh", namespace=ns)

    worker = threading.Thread(target=later)
    worker.start()
    seen: list[tuple[str, str]] = []
    deadline = time.monotonic() + 20
    for event_type, obj in lk.watch(ResourceClaim, namespace=ns, server_timeout=10):
        assert isinstance(obj, ResourceClaim)
        seen.append((event_type, obj.metadata.name))
        if (event_type, obj.metadata.name) == ("DELETED", "fresh") or time.monotonic() > deadline:
            break
    worker.join()
    # No resourceVersion: the stream starts with the current state, then live events.
    assert seen == [("ADDED", "existing"), ("ADDED", "fresh"), ("MODIFIED", "fresh"), ("DELETED", "fresh")]


def test_patch_types(lk: Client, ns: str) -> None:
    lk.create(new_claim("p1", a="1"), namespace=ns)
    patched = lk.patch(ResourceClaim, "p1", {"metadata": {"labels": {"b": "2"}}}, namespace=ns)
    assert isinstance(patched, ResourceClaim) and patched.metadata.labels == {"a": "1", "b": "2"}
    patched = lk.patch(ResourceClaim, "p1", {"metadata": {"labels": {"a": None}}}, namespace=ns, patch_type=PatchType.MERGE)
    assert patched.metadata.labels == {"b": "2"}
    patched = lk.patch(ResourceClaim, "p1", [{"op": "replace", "path": "/metadata/labels/b", "value": "3"}], namespace=ns, patch_type=PatchType.JSON)
    assert patched.metadata.labels == {"b": "3"}
    # Status subresource.
    allocation = AllocationResult(devices=DeviceAllocationResult(results=[DeviceRequestAllocationResult(request="gpu", driver="gpu.example.com", pool="pool-a", device="gpu-0")]))
    with_status = lk.patch(ResourceClaim.Status, "p1", {"status": {"allocation": allocation.to_dict()}}, namespace=ns, patch_type=PatchType.MERGE)
    assert with_status.status.allocation.devices.results[0].device == "gpu-0"
    assert lk.get(ResourceClaim, "p1", namespace=ns).status.allocation is not None
    # Strategic merge on a pod merges containers by name.
    lk.create(
        Pod(metadata=ObjectMeta(name="sp"), spec=PodSpec(containers=[Container(name="main", image="a:1"), Container(name="side", image="b:1")])),
        namespace=ns,
    )
    merged = lk.patch(Pod, "sp", {"spec": {"containers": [{"name": "side", "image": "b:2"}]}}, namespace=ns)
    assert [(c.name, c.image) for c in merged.spec.containers] == [("main", "a:1"), ("side", "b:2")]


def test_apply_force(lk: Client, ns: str) -> None:
    name = f"{ns}.example.com"
    first = DeviceClass(
        metadata=ObjectMeta(name=name, labels={"owner": "lightkube"}),
        spec=DeviceClassSpec(selectors=[DeviceSelector(cel=CELDeviceSelector(expression='device.driver == "gpu.example.com"'))]),
    )
    applied = lk.apply(first, force=True)
    assert isinstance(applied, DeviceClass)
    assert applied.metadata.generation == 1
    assert [(m.manager, m.operation) for m in applied.metadata.managedFields] == [("lightkube-test", "Apply")]
    second = DeviceClass(
        metadata=ObjectMeta(name=name, labels={"owner": "lightkube"}),
        spec=DeviceClassSpec(selectors=[DeviceSelector(cel=CELDeviceSelector(expression="true"))]),
    )
    reapplied = lk.apply(second, force=True)
    assert reapplied.spec.selectors[0].cel.expression == "true"
    assert reapplied.metadata.generation == 2
    # Another manager takes a field over only with force.
    lk.patch(DeviceClass, name, {"metadata": {"labels": {"owner": "someone"}}}, field_manager="other")
    taken = lk.apply(DeviceClass(metadata=ObjectMeta(name=name, labels={"owner": "lightkube"}), spec=second.spec), force=True)
    assert taken.metadata.labels == {"owner": "lightkube"}
    # A namespaced apply that creates.
    to_apply = new_claim("applied", app="x")
    to_apply.metadata.namespace = ns
    claim = lk.apply(to_apply, force=True)
    assert claim.metadata.uid and claim.metadata.labels == {"app": "x"}

    lk.delete(DeviceClass, name)


def test_delete(lk: Client, ns: str) -> None:
    for name in ("d1", "d2", "d3"):
        lk.create(new_claim(name), namespace=ns)
    lk.delete(ResourceClaim, "d1", namespace=ns)
    with pytest.raises(ApiError) as err:
        lk.get(ResourceClaim, "d1", namespace=ns)
    assert err.value.status.code == 404
    with pytest.raises(ApiError) as err:
        lk.delete(ResourceClaim, "d1", namespace=ns)
    assert err.value.status.code == 404
    lk.deletecollection(ResourceClaim, namespace=ns)
    assert list(lk.list(ResourceClaim, namespace=ns)) == []

    node = f"{ns}-node"
    made = lk.create(
        ResourceSlice(
            metadata=ObjectMeta(name=f"{ns}-slice"),
            spec=ResourceSliceSpec(driver="gpu.example.com", nodeName=node, pool=ResourcePool(name="p", generation=1, resourceSliceCount=1), devices=[DeviceModel(name="gpu-0")]),
        )
    )
    assert made.spec.pool.resourceSliceCount == 1
    assert [s.metadata.name for s in lk.list(ResourceSlice, fields={"spec.nodeName": node})] == [f"{ns}-slice"]
    lk.delete(ResourceSlice, f"{ns}-slice")
    assert list(lk.list(ResourceSlice, fields={"spec.nodeName": node})) == []
