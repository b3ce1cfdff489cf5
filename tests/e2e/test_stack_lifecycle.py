"""Pod and claim lifecycles on the whole stack, including workers killed and restarted mid-flight.

One stack per backend (module scope): a server, the controller and the scheduler (both with
leader election, so a restarted one has to take over from its dead predecessor), and one kubelet
simulator with two nodes of four GPUs each (a profile written for this file), so eight devices in
all. Each test uses its own namespace and leaves no pods behind, so the next one starts with every
device free. Everything is checked through the API, as a user would see it.
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
NODES = 2
GPUS_PER_NODE = 4
DEVICES = NODES * GPUS_PER_NODE
PREFIX = "life-"
RUN_SECONDS = "dra.example.dev/run-seconds"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

PROFILE = f"""\
description: {GPUS_PER_NODE} GPUs per node (tests/e2e/test_stack_lifecycle.py)
drivers:
- name: gpu.example.com
  devices:
  - repeat: {{i: {GPUS_PER_NODE}}}
    name: "gpu-{{i}}"
    attributes:
      index: {{int: "{{i}}"}}
    capacity:
      memory: {{value: 80Gi}}
"""


class Stack:
    """The API server's client and the worker processes, which tests may kill and restart."""

    def __init__(self, client: httpx.Client, workers: dict[str, Worker]) -> None:
        self.client = client
        self.workers = workers

    def kill(self, name: str) -> None:
        self.workers[name].kill()

    def restart(self, name: str) -> None:
        self.workers[name].start()


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    started = time.monotonic()
    server = start_server("--bookmark-interval", "1")
    logs = tmp_path_factory.mktemp("lifecycle")
    profile = logs / "four-gpus.yaml"
    profile.write_text(PROFILE)
    url = server.url
    workers = {
        "controllers": Worker("controllers", ["--server", url, "--lease-duration", "2"], logs / "controller.log"),
        "schedulers": Worker("schedulers", ["--server", url, "--lease-duration", "2"], logs / "scheduler.log"),
        "kubeletsim": Worker(
            "kubeletsim",
            ["--server", url, "--nodes", str(NODES), "--profile", str(profile), "--node-prefix", PREFIX, "--resync-interval", "5"],
            logs / "sim.log",
        ),
    }
    for worker in workers.values():
        worker.start()
    try:
        with httpx.Client(base_url=url, timeout=30.0) as client:
            gpu_class = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
            }
            assert client.post(f"{RESOURCE}/deviceclasses", json=gpu_class).status_code == 201
            eventually(lambda: len(client.get(f"{RESOURCE}/resourceslices").json()["items"]) == NODES, "simulator publishes its slices")
            yield Stack(client, workers)
    finally:
        for worker in reversed(workers.values()):
            worker.stop()
        print(f"lifecycle stack lifetime: {time.monotonic() - started:.1f}s (logs in {logs})")
    for name in ("controller.log", "scheduler.log", "sim.log"):
        assert "Traceback" not in (logs / name).read_text(), f"{name} has a traceback (logs in {logs})"


# ---- helpers -----------------------------------------------------------------------------------------


def namespace_with_template(client: httpx.Client) -> str:
    """A fresh namespace holding the one-GPU claim template ``gpu``."""
    name = f"life-{uuid.uuid4().hex[:6]}"
    assert client.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    template = {
        "metadata": {"name": "gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
    }
    assert client.post(f"{RESOURCE}/namespaces/{name}/resourceclaimtemplates", json=template).status_code == 201
    return name


def create_pod(client: httpx.Client, namespace: str, name: str, *, claim: bool = True, run_seconds: str | None = None) -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": name, "annotations": {RUN_SECONDS: run_seconds} if run_seconds else {}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    if claim:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    response = client.post(f"/api/v1/namespaces/{namespace}/pods", json=pod)
    assert response.status_code == 201, response.text


def pods(client: httpx.Client, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in client.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]}


def claims(client: httpx.Client, namespace: str | None = None) -> list[dict[str, Any]]:
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims" if namespace else f"{RESOURCE}/resourceclaims"
    return list(client.get(path).json()["items"])


def phase(pod: dict[str, Any] | None) -> str | None:
    return ((pod or {}).get("status") or {}).get("phase")


def running(client: httpx.Client, namespace: str, names: list[str]) -> dict[str, dict[str, Any]] | None:
    found = pods(client, namespace)
    return found if all(phase(found.get(n)) == "Running" for n in names) else None


def claim_of(client: httpx.Client, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    """The claim generated for the pod (named in its status, owned by it)."""
    [entry] = pod["status"]["resourceClaimStatuses"]
    claim = client.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims/{entry['resourceClaimName']}").json()
    assert claim["metadata"]["annotations"][POD_CLAIM_ANNOTATION] == "gpu"
    assert [o["uid"] for o in claim["metadata"]["ownerReferences"]] == [pod["metadata"]["uid"]]
    return dict(claim)


def device_of(claim: dict[str, Any]) -> tuple[str, str, str]:
    [result] = claim["status"]["allocation"]["devices"]["results"]
    return result["driver"], result["pool"], result["device"]


def assert_consistent(client: httpx.Client) -> list[dict[str, Any]]:
    """What must hold at every moment: no device in two claims, at most one generated claim per pod."""
    everything = claims(client)
    allocated = collections.Counter(device_of(c) for c in everything if (c.get("status") or {}).get("allocation"))
    shared = [device for device, count in allocated.items() if count > 1]
    assert not shared, f"devices allocated to more than one claim: {shared}"
    owners = collections.Counter(
        (c["metadata"]["namespace"], o["uid"]) for c in everything for o in c["metadata"].get("ownerReferences") or [] if o.get("kind") == "Pod"
    )
    doubled = [owner for owner, count in owners.items() if count > 1]
    assert not doubled, f"pods with more than one generated claim: {doubled}"
    return everything


def delete_all_pods(client: httpx.Client, namespace: str) -> None:
    """Delete the namespace's pods and wait until they and their generated claims are gone."""
    for name in pods(client, namespace):
        client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
    eventually(lambda: not pods(client, namespace), f"pods of {namespace} gone")
    eventually(lambda: not claims(client, namespace), f"generated claims of {namespace} deleted")


def fill_devices(client: httpx.Client, namespace: str, prefix: str) -> dict[str, dict[str, Any]]:
    """One pod with a one-GPU claim per device; returns them once all run."""
    names = [f"{prefix}-{i}" for i in range(DEVICES)]
    for name in names:
        create_pod(client, namespace, name)
    found = eventually(lambda: running(client, namespace, names), f"{DEVICES} pods Running")
    devices = {device_of(claim_of(client, namespace, found[n])) for n in names}
    assert len(devices) == DEVICES
    return {n: found[n] for n in names}


# ---- tests -------------------------------------------------------------------------------------------


def test_deleting_a_pod_deletes_its_generated_claim_and_frees_the_device(stack: Stack) -> None:
    client = stack.client
    ns = namespace_with_template(client)
    filled = fill_devices(client, ns, "a")
    victim = filled["a-0"]
    claim = claim_of(client, ns, victim)
    freed = device_of(claim)
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "a-0", "uid": victim["metadata"]["uid"]}]

    assert client.delete(f"/api/v1/namespaces/{ns}/pods/a-0").status_code == 200
    eventually(lambda: client.get(f"/api/v1/namespaces/{ns}/pods/a-0").status_code == 404, "pod deleted")
    path = f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim['metadata']['name']}"
    eventually(lambda: client.get(path).status_code == 404, "generated claim deleted")
    assert len(claims(client, ns)) == DEVICES - 1

    # Every other device is taken, so the new pod can only run on the freed one.
    create_pod(client, ns, "a-new")
    new = eventually(lambda: running(client, ns, ["a-new"]), "new pod Running")["a-new"]
    assert device_of(claim_of(client, ns, new)) == freed
    assert_consistent(client)
    delete_all_pods(client, ns)


def test_pod_waits_for_devices_and_runs_when_another_pod_finishes(stack: Stack) -> None:
    client = stack.client
    ns = namespace_with_template(client)
    filled = fill_devices(client, ns, "b")
    create_pod(client, ns, "waiter")

    def unschedulable() -> dict[str, Any] | None:
        pod = pods(client, ns)["waiter"]
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or []}
        scheduled = conditions.get("PodScheduled") or {}
        return pod if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable" else None

    waiter = eventually(unschedulable, "waiter Unschedulable")
    assert phase(waiter) == "Pending" and not waiter["spec"].get("nodeName")
    scheduled = next(c for c in waiter["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["message"].startswith(f"0/{NODES} nodes are available")

    # The simulated run time ends the first pod now; its claim is released and the waiter gets the device.
    finishing = claim_of(client, ns, filled["b-0"])
    patch = {"metadata": {"annotations": {RUN_SECONDS: "0"}}}
    response = client.patch(f"/api/v1/namespaces/{ns}/pods/b-0", json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    eventually(lambda: phase(pods(client, ns)["b-0"]) == "Succeeded", "first pod Succeeded")
    waiter = eventually(lambda: running(client, ns, ["waiter"]), "waiter Running")["waiter"]
    assert device_of(claim_of(client, ns, waiter)) == device_of(finishing)
    eventually(lambda: client.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{finishing['metadata']['name']}").status_code == 404,
               "finished pod's claim deleted")  # fmt: skip
    assert_consistent(client)
    delete_all_pods(client, ns)


def test_killing_and_restarting_every_worker_loses_nothing(stack: Stack) -> None:
    client = stack.client
    ns = namespace_with_template(client)
    nodes_before = {n["metadata"]["name"]: n["metadata"]["uid"] for n in client.get("/api/v1/nodes").json()["items"]}
    assert len(nodes_before) == NODES
    # Pods with a claim run for a second, so 12 of them have to take turns on the 8 devices;
    # pods without a claim keep running.
    batches: list[list[str]] = [[f"c{b}-{i}" for i in range(4)] for b in range(4)]
    plain = {name for batch in batches for name in batch if name.endswith("-3")}

    def create(batch: list[str]) -> None:
        for name in batch:
            create_pod(client, ns, name, claim=name not in plain, run_seconds=None if name in plain else "1")
        assert_consistent(client)

    def claims_created(batch: list[str]) -> bool:
        found = pods(client, ns)
        return all((found[n].get("status") or {}).get("resourceClaimStatuses") for n in batch if n not in plain)

    def any_bound(batch: list[str]) -> bool:
        found = pods(client, ns)
        return any(found[n]["spec"].get("nodeName") for n in batch)

    # Each worker dies with work in hand, and the next one is killed only once its replacement
    # (after taking over its dead predecessor's leader lease) has visibly done some work.
    create(batches[0])
    stack.kill("controllers")
    create(batches[1])
    stack.restart("controllers")
    eventually(lambda: claims_created(batches[1]), "restarted controller creates claims")
    stack.kill("schedulers")
    create(batches[2])
    stack.restart("schedulers")
    eventually(lambda: any_bound(batches[2]), "restarted scheduler binds pods")
    stack.kill("kubeletsim")
    create(batches[3])
    stack.restart("kubeletsim")

    every = [name for batch in batches for name in batch]

    def settled() -> dict[str, dict[str, Any]] | None:
        assert_consistent(client)
        found = pods(client, ns)
        assert set(found) == set(every), f"pods lost or added: {sorted(set(found) ^ set(every))}"
        want = {n: "Running" if n in plain else "Succeeded" for n in every}
        return found if all(phase(found[n]) == want[n] for n in every) else None

    found = eventually(settled, "every pod Running (no claim) or Succeeded (claim)", timeout=60.0)
    for name in every:
        statuses = found[name]["status"].get("resourceClaimStatuses") or []
        assert len(statuses) == (0 if name in plain else 1), (name, statuses)
    # Finished pods' claims are deallocated and deleted; nothing else is left holding a device.
    eventually(lambda: not assert_consistent(client), "every generated claim deleted")
    nodes_after = {n["metadata"]["name"]: n["metadata"]["uid"] for n in client.get("/api/v1/nodes").json()["items"]}
    assert nodes_after == nodes_before
    ready = [
        n["metadata"]["name"]
        for n in client.get("/api/v1/nodes").json()["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    ]
    assert sorted(ready) == sorted(nodes_before)
    delete_all_pods(client, ns)
