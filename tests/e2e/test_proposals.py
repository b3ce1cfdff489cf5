"""The two proposals on the whole stack: claims reserved for a workload (KEP-5194) and node
allocatable resources mapped from devices (KEP-5517), both behind alpha gates that are off by default.

One stack per backend (module scope): the server, the controller, the scheduler and one kubelet
simulator, every one started with both gates on. The simulator runs the ``gpu`` and ``cpu``
profiles in one process (two drivers) on two nodes that take up to 1,100 pods each: every node
has 8 GPUs, each charging a 128Mi per-pod memory overhead, and four CPU devices of 8 cores whose
cores map to the node's cpu (32 cpus, 256Gi per node). Tests pin their pods to a node by its
hostname label, use their own namespace and leave no pods behind; the last test restarts every
process with the gates off. Everything is checked through the API, as a user would see it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.objects import Obj
from tests.e2e.test_examples import EXAMPLES, apply, path_for
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
GATES = gates_flag({Gate.DRAReservedForWorkloads: True, Gate.DRANodeAllocatableResources: True})
FEATURE = Gate.DRANodeAllocatableResources
PREFIX = "prop-"
CPU_NODE, GPU_NODE = f"{PREFIX}0", f"{PREFIX}1"
MAX_PODS = 1100
# More pods than a claim's status.reservedFor may list (256): only the workload's reservation
# lets them all share the claim. How far beyond that it scales is bench.proposals' (1,000 pods).
RESERVED_FOR_LIMIT = 256
SHARED_PODS = 300
TIMEOUT = 30.0
# Creating and starting the shared pods on a loaded 2-core machine; the measured time is printed.
MANY_TIMEOUT = 600.0
GIB, MIB = 2**30, 2**20


class Stack:
    """The server and the workers, all started with ``gates``; :meth:`restart` starts them again with other gates."""

    def __init__(self, start_server: Callable[..., ServerProcess], logs: Path, server_flags: tuple[str, ...] = ()) -> None:
        self.start_server = start_server
        self.logs = logs
        self.server_flags = server_flags  # the server's alone (e.g. --runtime-config), on every start
        self.server: ServerProcess | None = None
        self.workers: list[Worker] = []
        self.client = httpx.Client(timeout=60.0)
        self.runs = 0

    def start(self, gates: str) -> None:
        flags = ["--feature-gates", gates] if gates else []
        database = self.server.database_url if self.server is not None else None
        self.server = self.start_server("--bookmark-interval", "1", *self.server_flags, *flags, database_url=database, migrate_first=database is None)
        url = self.server.url
        self.runs += 1
        run = f"{self.runs}-{'on' if gates else 'off'}"
        common = ["--server", url, *flags]
        self.workers = [
            Worker("controllers", [*common, "--lease-duration", "2"], self.logs / f"controller-{run}.log"),
            Worker("schedulers", [*common, "--no-leader-elect"], self.logs / f"scheduler-{run}.log"),
            Worker(
                "kubeletsim",
                [
                    *common,
                    "--nodes",
                    "2",
                    "--profile",
                    "gpu,cpu",
                    "--node-prefix",
                    PREFIX,
                    "--max-pods",
                    str(MAX_PODS),
                    "--resync-interval",
                    "5",
                ],
                self.logs / f"sim-{run}.log",
            ),
        ]
        for worker in self.workers:
            worker.start()
        self.client.close()
        self.client = httpx.Client(base_url=url, timeout=60.0)

    def stop(self) -> None:
        for worker in reversed(self.workers):
            worker.stop()
        if self.server is not None:
            self.server.stop()

    def restart(self, gates: str) -> None:
        self.stop()
        self.start(gates)


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    started = time.monotonic()
    stack = Stack(start_server, tmp_path_factory.mktemp("proposals"))
    stack.start(GATES)
    try:
        http = stack.client
        # Two pools per node (gpu and cpu); each node declares the feature the scheduler asks for.
        eventually(lambda: len(our_slices(http)) == 4, "simulator publishes its gpu and cpu slices", TIMEOUT)
        for node in (CPU_NODE, GPU_NODE):
            status = http.get(f"/api/v1/nodes/{node}").json()["status"]
            assert status["declaredFeatures"] == [FEATURE] and status["allocatable"]["pods"] == str(MAX_PODS), status
        apply(http, "gpu-deviceclass.yaml")
        apply_docs(http, [d for d in load_alpha("node-allocatable-cpu.yaml") if d["kind"] == "DeviceClass"])
        yield stack
    finally:
        stack.stop()
        stack.client.close()
        print(f"proposals stack lifetime: {time.monotonic() - started:.1f}s (logs in {stack.logs})")


@pytest.fixture
def ns(stack: Stack) -> Iterator[str]:
    """A namespace of the test's own; its pods are gone afterwards (claims stay, unreserved)."""
    name = f"prop-{uuid.uuid4().hex[:8]}"
    assert stack.client.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    yield name
    http = stack.client
    http.delete(f"/api/v1/namespaces/{name}/pods", params={"gracePeriodSeconds": "0"})
    eventually(lambda: not http.get(f"/api/v1/namespaces/{name}/pods").json()["items"], "the test's pods gone", TIMEOUT)


# ---- helpers -------------------------------------------------------------------------------------


def our_slices(http: httpx.Client) -> list[Obj]:
    return [s for s in http.get(f"{RESOURCE}/resourceslices").json()["items"] if s["spec"].get("nodeName", "").startswith(PREFIX)]


def load_alpha(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((EXAMPLES / "alpha" / name).read_text()) if d]


def apply_docs(http: httpx.Client, docs: list[Obj]) -> None:
    for doc in docs:
        response = http.post(path_for(doc), json=doc)
        assert response.status_code in (201, 409), f"{doc['kind']} {doc['metadata']['name']}: {response.text}"


def pod_body(name: str, *, claim: str | None = None, template: str | None = None, node: str | None = None, **requests: str) -> Obj:
    """A pause pod with one container asking for ``requests`` and using ``claim`` (or a claim from ``template``)."""
    container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {}}
    if requests:
        container["resources"]["requests"] = dict(requests)
    spec: Obj = {"containers": [container]}
    if claim or template:
        container["resources"]["claims"] = [{"name": "dev"}]
        spec["resourceClaims"] = [{"name": "dev", **({"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template})}]
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create_pod(http: httpx.Client, ns: str, body: Obj) -> None:
    response = http.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert response.status_code == 201, response.text


def create_claim(http: httpx.Client, ns: str, name: str, device_class: str, **spec: Any) -> None:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": device_class}}]}, **spec},
    }
    response = http.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=body)
    assert response.status_code == 201, response.text


def get_pod(http: httpx.Client, ns: str, name: str) -> Obj:
    response = http.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def get_claim(http: httpx.Client, ns: str, name: str) -> Obj:
    response = http.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def running(http: httpx.Client, ns: str, name: str, timeout: float = TIMEOUT) -> Obj:
    def check() -> Obj | None:
        pod = get_pod(http, ns, name)
        assert pod.get("status", {}).get("phase") != "Failed", pod["status"]
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    return eventually(check, f"pod {ns}/{name} Running", timeout)  # type: ignore[no-any-return]


def unschedulable(http: httpx.Client, ns: str, name: str) -> str:
    """The PodScheduled=False message the scheduler gives (the pod stays unbound)."""

    def check() -> str | None:
        pod = get_pod(http, ns, name)
        assert not pod["spec"].get("nodeName"), f"{name} was bound to {pod['spec'].get('nodeName')}"
        for c in pod.get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                return str(c["message"])
        return None

    return eventually(check, f"pod {ns}/{name} Unschedulable", TIMEOUT)  # type: ignore[no-any-return]


def rejected(http: httpx.Client, ns: str, name: str, reason: str) -> str:
    """The simulated kubelet refused the pod: phase Failed with ``reason``, and a Warning event of it."""

    def check() -> Obj | None:
        pod = get_pod(http, ns, name)
        return pod if pod.get("status", {}).get("phase") == "Failed" else None

    pod = eventually(check, f"pod {ns}/{name} rejected", TIMEOUT)
    assert pod["status"]["reason"] == reason, pod["status"]

    def event() -> Obj | None:
        items = http.get(f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": f"involvedObject.name={name}"}).json()["items"]
        return next((e for e in items if e.get("reason") == reason), None)

    found = eventually(event, f"{reason} event of {name}", TIMEOUT)
    assert found["type"] == "Warning" and found["source"]["component"] == "kubelet"
    assert pod["status"]["message"] == f"Pod was rejected: {found['message']}"
    return str(pod["status"]["message"])


def gone(http: httpx.Client, path: str) -> Callable[[], bool]:
    return lambda: http.get(path).status_code == 404


def delete_and_wait(http: httpx.Client, ns: str, *pods: str) -> None:
    for name in pods:
        http.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"})
    for name in pods:
        eventually(gone(http, f"/api/v1/namespaces/{ns}/pods/{name}"), f"pod {name} gone", TIMEOUT)


def delete_claims(http: httpx.Client, ns: str, *claims: str) -> None:
    """Delete claims no pod uses any more (the controller deallocates them and drops its finalizer)."""
    for name in claims:
        http.delete(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")
    for name in claims:
        eventually(gone(http, f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}"), f"claim {name} gone", TIMEOUT)


def claim_charges(pod: Obj) -> list[Obj]:
    return pod.get("status", {}).get("nodeAllocatableResourceClaimStatuses") or []


def allocate_by_hand(http: httpx.Client, ns: str, claim: str, pod: Obj, node: str, driver: str, device: str) -> None:
    """What a scheduler would write: the claim's allocation on ``node`` and its reservation for ``pod``."""
    body = get_claim(http, ns, claim)
    body["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "dev", "driver": driver, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
    }
    response = http.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim}/status", json=body)
    assert response.status_code == 200, response.text


def bind(http: httpx.Client, ns: str, name: str, node: str) -> None:
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    response = http.post(f"/api/v1/namespaces/{ns}/pods/{name}/binding", json=binding)
    assert response.status_code == 201, response.text


def free_device(http: httpx.Client, node: str, driver: str) -> str:
    """A device of ``driver`` on ``node`` that no claim holds."""
    taken = {
        (r["pool"], r["device"])
        for c in http.get(f"{RESOURCE}/resourceclaims").json()["items"]
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    }
    devices = [
        d["name"] for s in our_slices(http) if s["spec"]["nodeName"] == node and s["spec"]["driver"] == driver for d in s["spec"]["devices"]
    ]
    return next(d for d in sorted(devices) if (node, d) not in taken)


# ---- KEP-5517: node allocatable resources ----------------------------------------------------------


def test_mapped_cpu_counts_at_the_scheduler_and_at_kubelet_admission(stack: Stack, ns: str) -> None:
    http = stack.client
    # 25 cpus would fit the empty 32-cpu node; with the device's 8 cores they do not.
    create_claim(http, ns, "cores-a", "cpu.example.com")
    create_pod(http, ns, pod_body("too-big", claim="cores-a", node=CPU_NODE, cpu="25"))
    message = unschedulable(http, ns, "too-big")
    assert message.startswith("0/2 nodes are available:") and "1 Insufficient cpu" in message, message
    assert not get_claim(http, ns, "cores-a").get("status", {}).get("allocation")
    # 24 + 8 = 32 fits exactly; the pod reports the cores it got on top of what its container asks.
    create_claim(http, ns, "cores-b", "cpu.example.com")
    create_pod(http, ns, pod_body("fits", claim="cores-b", node=CPU_NODE, cpu="24"))
    pod = running(http, ns, "fits")
    assert claim_charges(pod) == [{"resourceClaimName": "cores-b", "containers": ["main"], "mapping": [{"name": "cpu", "quantity": "8"}]}]
    assert pod["status"]["allocatedResources"] == {"cpu": "32"}
    assert pod["status"]["containerStatuses"][0]["allocatedResources"] == {"cpu": "24"}
    # A pod bound with spec.nodeName (no scheduler involved) asking for 1 cpu: 24 + 1 would fit, but
    # the kubelet counts the other pod's 8 DRA cores too and refuses it.
    direct = pod_body("direct", cpu="1")
    direct["spec"]["nodeName"] = CPU_NODE
    create_pod(http, ns, direct)
    assert rejected(http, ns, "direct", "OutOfcpu") == (
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 32000, capacity: 32000"
    )
    delete_and_wait(http, ns, "too-big", "fits", "direct")
    delete_claims(http, ns, "cores-a", "cores-b")

    # The kubelet also charges a pod its own claims: 20 cpus are taken, a pod asking for 5 and bound
    # (by hand, bypassing the scheduler) with a claim of 8 cores is refused for 13 > 12 free cpus.
    create_pod(http, ns, pod_body("holder", node=CPU_NODE, cpu="20"))
    running(http, ns, "holder")
    create_claim(http, ns, "cores-c", "cpu.example.com")
    manual = pod_body("manual", claim="cores-c", cpu="5")
    manual["spec"]["schedulerName"] = "by-hand"
    create_pod(http, ns, manual)
    pod = get_pod(http, ns, "manual")
    allocate_by_hand(http, ns, "cores-c", pod, CPU_NODE, "cpu.example.com", free_device(http, CPU_NODE, "cpu.example.com"))
    charge = {"resourceClaimName": "cores-c", "containers": ["main"], "mapping": [{"name": "cpu", "quantity": "8"}]}
    response = http.patch(
        f"/api/v1/namespaces/{ns}/pods/manual/status",
        json={"status": {"nodeAllocatableResourceClaimStatuses": [charge]}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 200, response.text
    bind(http, ns, "manual", CPU_NODE)
    assert rejected(http, ns, "manual", "OutOfcpu") == (
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 13000, used: 20000, capacity: 32000"
    )
    delete_and_wait(http, ns, "holder", "manual")
    delete_claims(http, ns, "cores-c")


def test_a_mapping_claim_serves_one_pod_only(stack: Stack, ns: str) -> None:
    http = stack.client
    create_claim(http, ns, "cores", "cpu.example.com")
    create_pod(http, ns, pod_body("first", claim="cores", node=CPU_NODE))
    running(http, ns, "first")
    create_pod(http, ns, pod_body("second", claim="cores", node=CPU_NODE))
    message = unschedulable(http, ns, "second")
    assert "resourceclaim cores maps node allocatable resources and is already in use by pod first" in message, message
    assert [r["name"] for r in get_claim(http, ns, "cores")["status"]["reservedFor"]] == ["first"]
    delete_and_wait(http, ns, "first", "second")
    delete_claims(http, ns, "cores")


def test_gpu_memory_overhead_is_charged_per_pod_of_a_shared_claim(stack: Stack, ns: str) -> None:
    http = stack.client
    create_claim(http, ns, "gpu", "gpu.example.com")
    # Two pods share one GPU and each pays its 128Mi: 2 x (255.875Gi / 2 + 128Mi) = 256Gi, the node's memory.
    each = 128 * 1024 - 128  # Mi
    for name in ("a", "b"):
        create_pod(http, ns, pod_body(name, claim="gpu", node=GPU_NODE, memory=f"{each}Mi"))
    for name in ("a", "b"):
        pod = running(http, ns, name)
        assert claim_charges(pod) == [
            {"resourceClaimName": "gpu", "containers": ["main"], "overhead": [{"name": "memory", "perPod": "128Mi"}]}
        ]
        assert pod["status"]["allocatedResources"] == {"memory": "128Gi"}
        assert pod["status"]["containerStatuses"][0]["allocatedResources"] == {"memory": f"{each}Mi"}
    assert [r["name"] for r in get_claim(http, ns, "gpu")["status"]["reservedFor"]] == ["a", "b"]
    # 64Mi more would fit (256Mi are left without the overheads), but not with a third 128Mi overhead.
    create_pod(http, ns, pod_body("c", claim="gpu", node=GPU_NODE, memory="64Mi"))
    message = unschedulable(http, ns, "c")
    assert "1 Insufficient memory" in message, message
    # The kubelet counts the overheads of the pods it runs as well.
    direct = pod_body("direct", memory="64Mi")
    direct["spec"]["nodeName"] = GPU_NODE
    create_pod(http, ns, direct)
    assert rejected(http, ns, "direct", "OutOfmemory") == (
        f"Pod was rejected: Node didn't have enough resource: memory, requested: {64 * MIB}, used: {256 * GIB}, capacity: {256 * GIB}"
    )
    delete_and_wait(http, ns, "a", "b", "c", "direct")
    delete_claims(http, ns, "gpu")


# ---- the alpha examples ------------------------------------------------------------------------------


def test_every_alpha_example_runs(stack: Stack) -> None:
    http = stack.client
    names = sorted(p.name for p in (EXAMPLES / "alpha").glob("*.yaml"))
    assert {"reserved-for-workload.yaml", "node-allocatable-cpu.yaml"} <= set(names)
    for name in names:
        docs = load_alpha(name)
        apply_docs(http, docs)
        pods = {
            d["metadata"]["name"]: running(http, d["metadata"].get("namespace", "default"), d["metadata"]["name"])
            for d in docs
            if d["kind"] == "Pod"
        }
        assert pods, f"{name} has no pod"
        claims = {d["metadata"]["name"]: get_claim(http, "default", d["metadata"]["name"]) for d in docs if d["kind"] == "ResourceClaim"}
        if name == "reserved-for-workload.yaml":
            [claim] = claims.values()
            assert claim["status"]["reservedFor"] == [claim["spec"]["reservedFor"]]
            assert claim["status"]["allocation"]["reservedForAnyPod"] is True
        if name == "node-allocatable-cpu.yaml":
            pod = pods["cpu-pinned"]
            assert pod["status"]["allocatedResources"] == {"cpu": "8500m", "memory": "1Gi"}
            container = pod["status"]["containerStatuses"][0]
            assert container["allocatedResources"] == {"cpu": "500m", "memory": "1Gi"}
            assert container["resources"]["limits"] == {"cpu": "9", "memory": "1Gi"}
        delete_and_wait(http, "default", *pods)
        for claim_name, claim in claims.items():
            if claim["spec"].get("reservedFor"):
                # The workload's owner releases its reservation; the controller then deallocates.
                release(http, "default", claim_name)
        delete_claims(http, "default", *claims)
        for doc in docs:
            if doc["kind"] == "ResourceClaimTemplate":
                http.delete(f"{path_for(doc)}/{doc['metadata']['name']}")


# ---- KEP-5194: claims reserved for a workload ---------------------------------------------------------


def workload_ref() -> Obj:
    return {"apiGroup": "batch", "resource": "jobs", "name": "trainer", "uid": str(uuid.uuid4())}


def release(http: httpx.Client, ns: str, claim: str) -> None:
    """Remove the workload's reference from the claim's reservedFor, as its owner would."""

    def attempt() -> bool:
        body = get_claim(http, ns, claim)
        body["status"]["reservedFor"] = None
        response = http.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim}/status", json=body)
        assert response.status_code in (200, 409), response.text
        return response.status_code == 200  # 409: the kubelet just updated the claim's device status

    eventually(attempt, f"reservation of {claim} released", TIMEOUT)


async def _create_many(url: str, ns: str, bodies: list[Obj], concurrency: int = 8) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:

        async def one(body: Obj) -> None:
            async with gate:
                response = await http.post(f"/api/v1/namespaces/{ns}/pods", json=body)
                assert response.status_code == 201, response.text

        await asyncio.gather(*(one(b) for b in bodies))


def count_running(http: httpx.Client, ns: str) -> int:
    pods = http.get(f"/api/v1/namespaces/{ns}/pods", params={"fieldSelector": "status.phase=Running"}).json()["items"]
    return len(pods)


def test_more_pods_than_reserved_for_can_list_share_a_claim_reserved_for_a_workload(stack: Stack, ns: str) -> None:
    assert SHARED_PODS > RESERVED_FOR_LIMIT
    http = stack.client
    workload = workload_ref()
    create_claim(http, ns, "shared-gpu", "gpu.example.com", reservedFor=workload)
    started = time.monotonic()
    asyncio.run(_create_many(str(http.base_url), ns, [pod_body(f"worker-{i}", claim="shared-gpu") for i in range(SHARED_PODS)]))
    created = time.monotonic() - started
    eventually(lambda: count_running(http, ns) == SHARED_PODS, f"{SHARED_PODS} pods Running", MANY_TIMEOUT, interval=1.0)
    elapsed = time.monotonic() - started
    print(f"{SHARED_PODS} pods sharing one claim: created in {created:.1f}s, all Running after {elapsed:.1f}s")
    pods = http.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
    # Beyond reservedFor's 256 entries: the workload holds the reservation, so every pod runs on the GPU's node.
    assert len({p["spec"]["nodeName"] for p in pods}) == 1
    claim = get_claim(http, ns, "shared-gpu")
    assert claim["status"]["reservedFor"] == [workload]
    assert claim["status"]["allocation"]["reservedForAnyPod"] is True
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == pods[0]["spec"]["nodeName"]
    # Each pod pays the GPU's memory overhead once (the shared claim charges every pod).
    assert all(p["status"]["allocatedResources"] == {"memory": "128Mi"} for p in pods)
    # The pods go; the claim stays allocated and reserved for the workload.
    http.delete(f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    eventually(lambda: not http.get(f"/api/v1/namespaces/{ns}/pods").json()["items"], "pods gone", MANY_TIMEOUT, interval=1.0)
    claim = get_claim(http, ns, "shared-gpu")
    assert claim["status"]["reservedFor"] == [workload] and claim["status"]["allocation"]
    # Its owner removes the reference: the controller deallocates the claim.
    release(http, ns, "shared-gpu")
    eventually(lambda: not get_claim(http, ns, "shared-gpu").get("status", {}).get("allocation"), "claim deallocated", TIMEOUT)
    delete_claims(http, ns, "shared-gpu")


def test_turning_the_gates_off_changes_nothing_for_running_pods(stack: Stack) -> None:
    """Last in this file: the stack runs without the gates afterwards."""
    http = stack.client
    ns = f"prop-{uuid.uuid4().hex[:8]}"
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    workload = workload_ref()
    create_claim(http, ns, "shared-gpu", "gpu.example.com", reservedFor=workload)
    create_claim(http, ns, "cores", "cpu.example.com")
    names = [f"worker-{i}" for i in range(20)]
    for name in names:
        create_pod(http, ns, pod_body(name, claim="shared-gpu"))
    create_pod(http, ns, pod_body("pinned", claim="cores", cpu="1"))
    before = {name: running(http, ns, name) for name in [*names, "pinned"]}
    claims_before = {c: get_claim(http, ns, c) for c in ("shared-gpu", "cores")}

    stack.restart("")
    http = stack.client
    # Every process is up again and has worked through what it found: a new pod whose claim the
    # controller creates from a template, the scheduler allocates and the kubelet prepares, runs.
    requests = [{"name": "dev", "exactly": {"deviceClassName": "cpu.example.com"}}]
    template = {"metadata": {"name": "one-core-group"}, "spec": {"spec": {"devices": {"requests": requests}}}}
    assert http.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=template).status_code == 201
    create_pod(http, ns, pod_body("sentinel", template="one-core-group"))
    running(http, ns, "sentinel", timeout=60.0)
    # The nodes no longer declare the feature (the simulator runs without the gate now).
    eventually(
        lambda: not http.get(f"/api/v1/nodes/{CPU_NODE}").json()["status"].get("declaredFeatures"), "feature no longer declared", TIMEOUT
    )
    # Nothing about the running pods or their claims changed: no process wrote to them.
    for name, pod in before.items():
        now = get_pod(http, ns, name)
        assert now["status"]["phase"] == "Running"
        assert now["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"], name
    for name, claim in claims_before.items():
        now = get_claim(http, ns, name)
        assert now["metadata"]["resourceVersion"] == claim["metadata"]["resourceVersion"], name
    assert get_claim(http, ns, "shared-gpu")["status"]["reservedFor"] == [workload]
