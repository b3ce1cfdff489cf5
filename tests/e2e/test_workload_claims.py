"""KEP-5729 on the whole stack: claims of PodGroups (DRAWorkloadResourceClaims) on the Workload API
(GenericWorkload), next to KEP-5194's claims reserved for a workload (DRAReservedForWorkloads).

One stack per backend (module scope), every process started with all three gates, so both
proposals run side by side; the last tests restart it with fewer gates. The stack is the one
``test_proposals`` uses (two simulated nodes of 8 GPUs each). Everything is checked through the
API, as a user would see it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
import yaml

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.objects import Obj
from tests.e2e.test_examples import EXAMPLES, apply, path_for
from tests.e2e.test_proposals import (
    RESOURCE,
    TIMEOUT,
    Stack,
    create_claim,
    delete_and_wait,
    get_claim,
    get_pod,
    our_slices,
    pod_body,
    running,
    workload_ref,
)
from tests.processes import eventually

SCHEDULING = "/apis/scheduling.k8s.io/v1beta1"
BOTH_PROPOSALS = gates_flag({Gate.GenericWorkload: True, Gate.DRAWorkloadResourceClaims: True, Gate.DRAReservedForWorkloads: True})
KEP_5729_ONLY = gates_flag({Gate.GenericWorkload: True, Gate.DRAWorkloadResourceClaims: True})
# Like every beta API since v1.24, scheduling.k8s.io/v1beta1 is also off until --runtime-config enables it.
RUNTIME_CONFIG = ("--runtime-config", "scheduling.k8s.io/v1beta1=true")
TEMPLATE = "group-gpu"


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(start_server, tmp_path_factory.mktemp("workload-claims"), server_flags=RUNTIME_CONFIG)
    stack.start(BOTH_PROPOSALS)
    try:
        eventually(lambda: len(our_slices(stack.client)) == 4, "simulator publishes its slices", TIMEOUT)
        apply(stack.client, "gpu-deviceclass.yaml")
        yield stack
    finally:
        stack.stop()
        stack.client.close()


@pytest.fixture
def ns(stack: Stack) -> str:
    name = f"wl-{uuid.uuid4().hex[:8]}"
    assert stack.client.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    template = {"metadata": {"name": TEMPLATE}, "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
    assert stack.client.post(f"{RESOURCE}/namespaces/{name}/resourceclaimtemplates", json=template).status_code == 201
    return name


# ---- helpers -------------------------------------------------------------------------------------------


def create_group(http: httpx.Client, ns: str, name: str, *, min_count: int = 0, claims: list[Obj] | None = None) -> Obj:
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    spec: Obj = {"schedulingPolicy": policy}
    if claims is not None:
        spec["resourceClaims"] = claims
    response = http.post(f"{SCHEDULING}/namespaces/{ns}/podgroups", json={"metadata": {"name": name}, "spec": spec})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def get_group(http: httpx.Client, ns: str, name: str) -> httpx.Response:
    return http.get(f"{SCHEDULING}/namespaces/{ns}/podgroups/{name}")


def member(name: str, group: str, *, template: str | None = TEMPLATE, claim: str | None = None) -> Obj:
    """A pod of ``group`` whose claim entry "dev" matches the group's claim of the same source."""
    body = pod_body(name, template=template) if claim is None else pod_body(name, claim=claim)
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


def create_pods(http: httpx.Client, ns: str, *bodies: Obj) -> None:
    for body in bodies:
        response = http.post(f"/api/v1/namespaces/{ns}/pods", json=body)
        assert response.status_code == 201, response.text


def group_claim_name(http: httpx.Client, ns: str, group: str, entry: str = "dev") -> str:
    def recorded() -> str | None:
        statuses = (get_group(http, ns, group).json().get("status") or {}).get("resourceClaimStatuses") or []
        return next((s.get("resourceClaimName") for s in statuses if s["name"] == entry), None)

    return eventually(recorded, f"claim of PodGroup {group} recorded", TIMEOUT)  # type: ignore[no-any-return]


def group_sharing_claim(http: httpx.Client, ns: str, name: str, *pods: str) -> list[Obj]:
    """A claim and a PodGroup of the same name whose claim it is, and running pods of the group using it."""
    create_claim(http, ns, name, "gpu.example.com")
    create_group(http, ns, name, claims=[{"name": "dev", "resourceClaimName": name}])
    create_pods(http, ns, *(member(pod, name, claim=name) for pod in pods))
    return [running(http, ns, pod) for pod in pods]


def stays_pending(http: httpx.Client, ns: str, *names: str, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in names:
            assert not get_pod(http, ns, name)["spec"].get("nodeName"), f"{name} was scheduled"
        time.sleep(0.3)


def initially_scheduled(http: httpx.Client, ns: str, group: str, status: str) -> Obj:
    """The group's PodGroupInitiallyScheduled condition once it has ``status``."""

    def condition() -> Obj | None:
        for found in (get_group(http, ns, group).json().get("status") or {}).get("conditions") or []:
            if found["type"] == "PodGroupInitiallyScheduled" and found["status"] == status:
                return found  # type: ignore[no-any-return]
        return None

    return eventually(condition, f"PodGroup {group} PodGroupInitiallyScheduled={status}", TIMEOUT)  # type: ignore[no-any-return]


def devices(claim: Obj) -> list[tuple[str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [(r["pool"], r["device"]) for r in results]


GROUP_CLAIM = [{"name": "dev", "resourceClaimTemplateName": TEMPLATE}]


# ---- the group's claim ------------------------------------------------------------------------------------


def test_one_claim_per_group_reserved_for_the_group(stack: Stack, ns: str) -> None:
    http = stack.client
    group = create_group(http, ns, "trainers", claims=GROUP_CLAIM)
    claim_name = group_claim_name(http, ns, "trainers")
    claim = get_claim(http, ns, claim_name)
    # Made from the template for the group: owned by the PodGroup, annotated with the entry's name.
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "trainers", "uid": group["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "dev"
    assert claim_name.startswith("trainers-dev-")
    names = [f"trainer-{i}" for i in range(4)]
    create_pods(http, ns, *(member(n, "trainers") for n in names))
    pods = [running(http, ns, n) for n in names]
    # The pods record the group's claim; nobody made a claim per pod.
    assert all(p["status"]["resourceClaimStatuses"] == [{"name": "dev", "resourceClaimName": claim_name}] for p in pods)
    assert [c["metadata"]["name"] for c in http.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims").json()["items"]] == [claim_name]
    claim = get_claim(http, ns, claim_name)
    assert claim["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers", "uid": group["metadata"]["uid"]}]
    assert "reservedForAnyPod" not in claim["status"]["allocation"]
    assert len({p["spec"]["nodeName"] for p in pods}) == 1
    # The pods go; the group keeps the claim allocated.
    delete_and_wait(http, ns, *names)
    assert get_claim(http, ns, claim_name)["status"]["reservedFor"]
    # The group goes: its reservation, the allocation and the generated claim go with it.
    assert http.delete(f"{SCHEDULING}/namespaces/{ns}/podgroups/trainers").status_code == 200
    eventually(lambda: get_group(http, ns, "trainers").status_code == 404, "PodGroup gone", TIMEOUT)
    eventually(lambda: http.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim_name}").status_code == 404, "group claim deleted", TIMEOUT)


def test_a_named_claim_of_the_group_and_deletion_waiting_for_pods(stack: Stack, ns: str) -> None:
    http = stack.client
    group_sharing_claim(http, ns, "named", "a", "b")
    assert [r["resource"] for r in get_claim(http, ns, "named")["status"]["reservedFor"]] == ["podgroups"]
    # PodGroup deletion waits for its finalizer, which goes once no active pod names the group.
    assert http.delete(f"{SCHEDULING}/namespaces/{ns}/podgroups/named").status_code == 200
    time.sleep(1.0)
    pending = get_group(http, ns, "named").json()
    assert pending["metadata"]["deletionTimestamp"] and pending["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    delete_and_wait(http, ns, "a", "b")
    eventually(lambda: get_group(http, ns, "named").status_code == 404, "PodGroup gone", TIMEOUT)
    # A claim the user made stays, deallocated once the group's reservation went.
    eventually(lambda: not get_claim(http, ns, "named").get("status", {}).get("allocation"), "claim deallocated", TIMEOUT)


def test_gang_waits_for_its_minimum(stack: Stack, ns: str) -> None:
    http = stack.client
    create_group(http, ns, "gang", min_count=3, claims=GROUP_CLAIM)
    create_pods(http, ns, member("g-0", "gang"), member("g-1", "gang"))
    stays_pending(http, ns, "g-0", "g-1")
    assert not (get_group(http, ns, "gang").json().get("status") or {}).get("conditions"), "no outcome before the gang is complete"
    create_pods(http, ns, member("g-2", "gang"))
    pods = [running(http, ns, n) for n in ("g-0", "g-1", "g-2")]
    assert len({p["spec"]["nodeName"] for p in pods}) == 1
    # Upstream's scheduler records the group's first success (schedule_one_podgroup.go).
    scheduled = initially_scheduled(http, ns, "gang", "True")
    generation = get_group(http, ns, "gang").json()["metadata"]["generation"]
    assert (scheduled["reason"], scheduled["message"], scheduled["observedGeneration"]) == ("Scheduled", "", generation)
    delete_and_wait(http, ns, "g-0", "g-1", "g-2")


def test_gang_members_are_not_bound_while_one_cannot_be_placed(stack: Stack, ns: str) -> None:
    """All or nothing: two members fit, the third fits no node, so none is bound (they wait at Permit)."""
    http = stack.client
    create_group(http, ns, "stuck", min_count=3, claims=GROUP_CLAIM)
    misfit = member("s-2", "stuck")
    misfit["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "no-such-node"}
    create_pods(http, ns, member("s-0", "stuck"), member("s-1", "stuck"), misfit)
    stays_pending(http, ns, "s-0", "s-1", "s-2")
    # The group says why, in the words of the member that fits nowhere.
    unschedulable = initially_scheduled(http, ns, "stuck", "False")
    assert unschedulable["reason"] == "Unschedulable"
    assert unschedulable["message"].startswith("0/2 nodes are available"), unschedulable["message"]
    # A third member that fits completes the gang.
    delete_and_wait(http, ns, "s-2")
    create_pods(http, ns, member("s-3", "stuck"))
    for name in ("s-0", "s-1", "s-3"):
        running(http, ns, name, timeout=90.0)
    assert initially_scheduled(http, ns, "stuck", "True")["reason"] == "Scheduled"
    # True is final: a later member that fits nowhere does not turn it back.
    late = member("s-4", "stuck")
    late["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "no-such-node"}
    create_pods(http, ns, late)
    eventually(lambda: (get_pod(http, ns, "s-4").get("status") or {}).get("conditions"), "s-4 is reported unschedulable", TIMEOUT)
    time.sleep(1.0)
    assert initially_scheduled(http, ns, "stuck", "True")["reason"] == "Scheduled"
    delete_and_wait(http, ns, "s-0", "s-1", "s-3", "s-4")


# ---- bad input ----------------------------------------------------------------------------------------------


def test_pod_naming_a_missing_group_waits_until_it_exists(stack: Stack, ns: str) -> None:
    http = stack.client
    create_pods(http, ns, member("early", "later"))
    stays_pending(http, ns, "early")
    assert not http.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims").json()["items"]
    create_group(http, ns, "later", claims=GROUP_CLAIM)
    pod = running(http, ns, "early")
    assert pod["status"]["resourceClaimStatuses"] == [{"name": "dev", "resourceClaimName": group_claim_name(http, ns, "later")}]
    delete_and_wait(http, ns, "early")


def test_a_group_of_another_namespace_is_not_the_pods(stack: Stack, ns: str) -> None:
    http = stack.client
    other = f"wl-{uuid.uuid4().hex[:8]}"
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": other}}).status_code == 201
    create_group(http, other, "elsewhere", claims=[{"name": "dev", "resourceClaimName": "x"}])
    create_pods(http, ns, member("stray", "elsewhere"))
    stays_pending(http, ns, "stray")
    # Its template entry is not the (foreign) group's: no claim is made for it either way until its own group exists.
    assert get_pod(http, ns, "stray").get("status", {}).get("resourceClaimStatuses") is None
    delete_and_wait(http, ns, "stray")


def test_a_pod_claim_that_differs_from_the_groups_is_the_pods_own(stack: Stack, ns: str) -> None:
    """The group's pods disagree: one uses the group's claim, one has its own claim of the same name."""
    http = stack.client
    create_claim(http, ns, "own", "gpu.example.com")
    group = create_group(http, ns, "mixed", claims=GROUP_CLAIM)
    group_claim = group_claim_name(http, ns, "mixed")
    create_pods(http, ns, member("shares", "mixed"), member("apart", "mixed", claim="own"))
    shares, apart = running(http, ns, "shares"), running(http, ns, "apart")
    assert shares["status"]["resourceClaimStatuses"] == [{"name": "dev", "resourceClaimName": group_claim}]
    own, shared = get_claim(http, ns, "own"), get_claim(http, ns, group_claim)
    assert own["status"]["reservedFor"] == [{"resource": "pods", "name": "apart", "uid": apart["metadata"]["uid"]}]
    assert shared["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "mixed", "uid": group["metadata"]["uid"]}]
    # No device is allocated twice.
    assert set(devices(own)).isdisjoint(devices(shared)) and len(devices(own)) == len(devices(shared)) == 1
    delete_and_wait(http, ns, "shares", "apart")


def test_both_proposals_side_by_side(stack: Stack, ns: str) -> None:
    http = stack.client
    workload = workload_ref()
    create_claim(http, ns, "by-5194", "gpu.example.com", reservedFor=workload)
    group = create_group(http, ns, "by-5729", claims=GROUP_CLAIM)
    create_pods(http, ns, pod_body("w-0", claim="by-5194"), pod_body("w-1", claim="by-5194"), member("g-0", "by-5729"), member("g-1", "by-5729"))
    for name in ("w-0", "w-1", "g-0", "g-1"):
        running(http, ns, name)
    assert get_claim(http, ns, "by-5194")["status"]["reservedFor"] == [workload]
    assert get_claim(http, ns, group_claim_name(http, ns, "by-5729"))["status"]["reservedFor"][0]["uid"] == group["metadata"]["uid"]
    delete_and_wait(http, ns, "w-0", "w-1", "g-0", "g-1")


def test_the_example_runs(stack: Stack) -> None:
    http = stack.client
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "workloads" / "podgroup-claim.yaml").read_text()) if d]
    for doc in docs:
        response = http.post(path_for(doc), json=doc)
        assert response.status_code == 201, response.text
    names = [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]
    pods = [running(http, "default", n) for n in names]
    claim_name = group_claim_name(http, "default", "trainer-workers", "gpu")
    assert all(p["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": claim_name}] for p in pods)
    assert [r["name"] for r in get_claim(http, "default", claim_name)["status"]["reservedFor"]] == ["trainer-workers"]
    delete_and_wait(http, "default", *names)
    for kind, name in (("podgroups", "trainer-workers"), ("workloads", "trainer")):
        http.delete(f"{SCHEDULING}/namespaces/default/{kind}/{name}")
    eventually(lambda: http.get(f"{RESOURCE}/namespaces/default/resourceclaims/{claim_name}").status_code == 404, "group claim gone", TIMEOUT)


# ---- gates: each alone, neither; turning them off leaves reservations -------------------------------------


def test_gates_off_leave_reservations_in_place(stack: Stack) -> None:
    """Last in this file: restarts the stack with fewer gates."""
    http = stack.client
    ns = f"wl-{uuid.uuid4().hex[:8]}"
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    group_sharing_claim(http, ns, "kept", "holder")
    before = get_claim(http, ns, "kept")

    # KEP-5729 alone (no DRAReservedForWorkloads): a new group's pods share its claim.
    stack.restart(KEP_5729_ONLY)
    http = stack.client
    group_sharing_claim(http, ns, "alone", "alone-0", "alone-1")
    assert [r["name"] for r in get_claim(http, ns, "alone")["status"]["reservedFor"]] == ["alone"]

    # GenericWorkload without DRAWorkloadResourceClaims: the group reservation stays, the pod keeps running.
    stack.restart(gates_flag({Gate.GenericWorkload: True}))
    http = stack.client
    time.sleep(2.0)
    assert get_claim(http, ns, "kept")["status"]["reservedFor"] == before["status"]["reservedFor"]
    assert get_pod(http, ns, "holder")["status"]["phase"] == "Running"
    # The group's claims are not served any more (the stored ones are kept).
    assert get_group(http, ns, "kept").json()["spec"]["resourceClaims"] == [{"name": "dev", "resourceClaimName": "kept"}]

    # Neither gate: the API is gone (its version still enabled); the reservation and the pod are still there.
    stack.restart("")
    http = stack.client
    time.sleep(2.0)
    assert get_group(http, ns, "kept").status_code == 404
    claim = get_claim(http, ns, "kept")
    assert claim["status"]["reservedFor"] == before["status"]["reservedFor"] and claim["status"]["allocation"] == before["status"]["allocation"]
    assert get_pod(http, ns, "holder")["status"]["phase"] == "Running"
