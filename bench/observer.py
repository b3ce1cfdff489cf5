"""``python -m bench.observer``: how often the observing scheduler (``python -m schedulers
--observe``) agrees with kube-scheduler, on upstream's control plane.

kube-apiserver v1.37.2 on etcd, kube-scheduler, and kube-controller-manager (the resource claim,
garbage collector, node lifecycle and service account controllers, each as its service account)
run with this project's kubelet simulator's nodes (``gpu,nic`` and ``gpu-partitionable``) and the
observer, started as a user would start it: the user's kubeconfig, acting as the read-only service
account of ``examples/observer/rbac.yaml``, recording its URL in that kubeconfig for kubectl dra.

A mixed workload of ``--pods`` pods (claims from templates, shared claims, constraints, CEL
selectors, admin access, device taints, extended resources backed by devices, prioritized lists,
partitions, pods that fit nowhere and pods that wait for a class) is placed one pod at a time: the
pod is created with a scheduling gate; once the observer has seen it (and its claims), the observer
is asked for its verdict as if the gate were gone (``?ifUngated=true&nodes=all``: every node that
fits, and why each other does not); the gate is removed and kube-scheduler decides. A pod
kube-scheduler binds to node N agrees when the observer had said N fits and the devices kube-scheduler
allocated are one of the answers this project's allocator gives on the state it chose them in
(``devices_refused``); a pod it reports ``FailedScheduling`` for agrees when the observer had said
no node fits (a scheduler error, a selector's CEL runtime error, when the observer said Error). Every disagreement is
printed with both sides' words. Last, the apiserver's audit log is read: the observer's user must
have written nothing (its SubjectAccessReviews, which store nothing, aside).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.scheduler import UPSTREAM_CLIENT_FLAGS, Worker
from devtools.devstack import apply_manifest
from devtools.ports import free_port
from devtools.server import REPO_ROOT
from kube.client import KubeClient, resource_path
from kube.dra.explanations import KUBECONFIG_EXTENSION, explain_path, recorded_scheduler
from kube.errors import ApiError
from kube.features import FeatureGates, Gate, gates_flag
from kube.kubeconfig import load_kubeconfig_context
from schedulers.allocator import Allocated, AllocatedState, Allocator, AllocatorFeatures, ResourceIndex

OBSERVER_ACCOUNT = ("kube-system", "dra-observer")
OBSERVER_USER = f"system:serviceaccount:{OBSERVER_ACCOUNT[0]}:{OBSERVER_ACCOUNT[1]}"
OBSERVER_RBAC = REPO_ROOT / "examples" / "observer" / "rbac.yaml"
GATE = "example.com/observed"
FEATURE_GATES = gates_flag({Gate.DRAPartitionableDevices: True})
FEATURES = AllocatorFeatures.from_gates(FeatureGates.parse(FEATURE_GATES))
# kube-controller-manager's controllers a DRA cluster's pods need (claims from templates and their
# removal, nodes' not-ready taint lifted, namespaces' default ServiceAccount).
CONTROLLERS = ("resourceclaim-controller", "garbage-collector-controller", "node-lifecycle-controller", "serviceaccount-controller")
NODE_GROUPS = (("sim-", "gpu,nic"), ("part-", "gpu-partitionable"))
# Requests that store nothing: the observer's check of its callers.
REVIEWS = frozenset({"subjectaccessreviews", "selfsubjectreviews", "selfsubjectaccessreviews", "tokenreviews"})
AUDIT_POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
RESOURCE = "resource.k8s.io"
ADMIN_NAMESPACE = "observed-admin"


@dataclass
class ObservedCluster:
    """Upstream's control plane with simulated nodes and the observer; ``kubeconfig`` is the
    user's (admin), where the observer recorded itself."""

    directory: Path
    kubeconfig: Path
    audit_log: Path
    nodes: list[str]
    admin: httpx.Client
    observer: Worker
    observer_log: Path

    def logs(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in sorted(self.directory.glob("*.log")) if p.name != "audit.log")


def _wait(condition: Any, what: str, timeout: float, cluster_logs: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if result := condition():
                return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {timeout:.0f}s" + (f"\n{cluster_logs()}" if cluster_logs else ""))
        time.sleep(0.2)


def observer_command(kubeconfig: Path, port: int, *extra: str) -> list[str]:
    """The observer as a user starts it: the cluster's kubeconfig, acting as the read-only account."""
    return ["--observe", "--kubeconfig", str(kubeconfig), "--as", OBSERVER_USER, "--record-in-kubeconfig",
            "--explain-port", str(port), "--feature-gates", FEATURE_GATES, *extra]  # fmt: skip


@contextlib.contextmanager
def observed_cluster(directory: Path, nodes_per_group: tuple[int, ...] = (4, 2), timeout: float = 180.0) -> Iterator[ObservedCluster]:
    from devtools.upstream import UpstreamControlPlane, start_kube_controller_manager, start_kube_scheduler

    directory.mkdir(parents=True, exist_ok=True)
    policy, audit_log = directory / "audit-policy.yaml", directory / "audit.log"
    policy.write_text(AUDIT_POLICY)
    groups = [(prefix, count, profile) for (prefix, profile), count in zip(NODE_GROUPS, nodes_per_group, strict=True) if count]
    nodes = [f"{prefix}{i}" for prefix, count, _ in groups for i in range(count)]
    audit = ["--audit-policy-file", str(policy), "--audit-log-path", str(audit_log)]
    gates = ["--feature-gates", FEATURE_GATES]
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(UpstreamControlPlane(directory, nodes=nodes, feature_gates=FEATURE_GATES, extra_args=audit))
        stack.enter_context(start_kube_scheduler(plane.kubeconfig("scheduler"), extra_args=[*UPSTREAM_CLIENT_FLAGS, *gates], log_path=directory / "kube-scheduler.log"))
        stack.enter_context(start_kube_controller_manager(
            plane.kubeconfig("controller-manager"), controllers=CONTROLLERS, log_path=directory / "kube-controller-manager.log",
            extra_args=[*UPSTREAM_CLIENT_FLAGS, "--use-service-account-credentials", *gates],
        ))  # fmt: skip
        for prefix, count, profile in groups:
            args = [*plane.credentials.worker_flags("kubeletsim"), "--nodes", str(count), "--node-prefix", prefix, "--profile", profile, *gates]
            simulator = Worker("kubeletsim", args, directory / f"kubeletsim-{prefix.rstrip('-')}.log")
            stack.callback(simulator.stop)
        admin = stack.enter_context(httpx.Client(**plane.httpx_options(), timeout=30.0))  # type: ignore[arg-type]
        apply_manifest(admin, OBSERVER_RBAC)
        kubeconfig = directory / "user.kubeconfig"
        shutil.copyfile(plane.kubeconfig("admin"), kubeconfig)
        kubeconfig.chmod(0o600)
        observer_log = directory / "observer.log"
        observer = Worker("schedulers", observer_command(kubeconfig, free_port()), observer_log)
        stack.callback(observer.stop)
        cluster = ObservedCluster(directory, kubeconfig, audit_log, nodes, admin, observer, observer_log)

        def slices_published() -> bool:
            ready = {n["metadata"]["name"] for n in admin.get("/api/v1/nodes").json()["items"]
                     if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
                     and not any(t["key"] == "node.kubernetes.io/not-ready" for t in n.get("spec", {}).get("taints") or [])}  # fmt: skip
            slices = admin.get(resource_path(RESOURCE, "v1", "resourceslices")).json()["items"]
            return ready == set(nodes) and {s["spec"].get("nodeName") for s in slices} >= set(nodes)

        _wait(slices_published, "nodes Ready and untainted with their ResourceSlices", timeout, cluster.logs)
        _wait(lambda: KUBECONFIG_EXTENSION in load_kubeconfig_context([kubeconfig]).extensions, "the observer recorded in the kubeconfig", 60, cluster.logs)
        yield cluster


def observer_client(kubeconfig: Path) -> tuple[KubeClient, str]:
    """A client of the observer as kubectl dra makes one (the kubeconfig's extension: URL and CA,
    the user's credentials), and its URL."""
    context = load_kubeconfig_context([kubeconfig])
    recorded = recorded_scheduler(context.extensions)
    if recorded is None:
        raise RuntimeError(f"{kubeconfig}: no {KUBECONFIG_EXTENSION} extension (the observer did not record itself)")
    url, ca = recorded
    connection = dataclasses.replace(context.connection, server=url, ca_data=ca)
    return KubeClient.from_connection(connection, user_agent="bench-observer"), url


def observer_writes(audit_log: Path, user: str = OBSERVER_USER) -> list[str]:
    """Every request of ``user`` (itself or impersonated) in the audit log that is not a read or a review."""
    writes = []
    for line in audit_log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        who = {(event.get("user") or {}).get("username"), (event.get("impersonatedUser") or {}).get("username")}
        resource = (event.get("objectRef") or {}).get("resource", "")
        if user in who and event.get("stage") == "ResponseComplete" and event.get("verb") not in ("get", "list", "watch") and resource not in REVIEWS:
            writes.append(f"{event.get('verb')} {event.get('requestURI')} -> {(event.get('responseStatus') or {}).get('code')}")
    return writes


# ----------------------------------------------------------------------------- the workload


def _request(name: str, device_class: str = "gpu.example.com", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count, **extra}}


def _cel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


# Claim specs by kind; each a ResourceClaimTemplate (or the shared claims' spec).
# fmt: off
CLAIM_SPECS: dict[str, dict[str, Any]] = {
    "one-gpu": {"devices": {"requests": [_request("gpu")]}},
    "two-gpus": {"devices": {"requests": [_request("gpu", count=2)]}},
    "high-index-gpu": {"devices": {"requests": [_request("gpu", selectors=_cel('device.attributes["gpu.example.com"].index >= 4'))]}},
    "nic-pair": {"devices": {"requests": [_request("nics", "nic.example.com", 2)], "constraints": [{"matchAttribute": "dra.net/numaNode"}]}},
    "gpu-and-nic": {"devices": {"requests": [_request("gpu"), _request("nic", "nic.example.com")]}},
    "prioritized": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
        {"name": "four", "deviceClassName": "gpu.example.com", "count": 4},
        {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
        {"name": "one", "deviceClassName": "gpu.example.com"}]}]}},
    "partition": {"devices": {"requests": [_request("mig", selectors=_cel('device.attributes["gpu.example.com"].profile == "4g.40gb"'))]}},
    "too-many": {"devices": {"requests": [_request("gpu", count=9)]}},
    "missing-class": {"devices": {"requests": [_request("gpu", "missing.example.com")]}},
    "tainted-tolerated": {"devices": {"requests": [_request("gpu", selectors=_cel('device.attributes["gpu.example.com"].index == 7'),
                                                            tolerations=[{"key": "example.com/maintenance", "operator": "Exists"}])]}},
    "tainted": {"devices": {"requests": [_request("gpu", selectors=_cel('device.attributes["gpu.example.com"].index == 7'))]}},
    "admin": {"devices": {"requests": [_request("gpu", adminAccess=True)]}},
}
# fmt: on
# Pod kinds and their weights in the mix.
KINDS: dict[str, int] = {
    "one-gpu": 6, "two-gpus": 3, "high-index-gpu": 3, "nic-pair": 3, "gpu-and-nic": 3, "prioritized": 3, "partition": 3,
    "too-many": 1, "missing-class": 1, "tainted-tolerated": 1, "tainted": 1, "admin": 1,
    "shared": 3, "extended": 3, "cpu-only": 3, "nowhere": 1,
}  # fmt: skip
SHARED_CLAIMS = 8


def setup_objects() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) to create before the pods."""
    objects: list[tuple[str, dict[str, Any]]] = []
    for example in ("gpu-deviceclass.yaml", "nic-deviceclass.yaml"):
        objects.append((resource_path(RESOURCE, "v1", "deviceclasses"), yaml.safe_load((REPO_ROOT / "examples" / example).read_text())))
    admin_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ADMIN_NAMESPACE, "labels": {"resource.kubernetes.io/admin-access": "true"}}}
    objects.append(("/api/v1/namespaces", admin_ns))
    taint = {"apiVersion": f"{RESOURCE}/v1", "kind": "DeviceTaintRule", "metadata": {"name": "gpu-7-maintenance"},
             "spec": {"deviceSelector": {"driver": "gpu.example.com", "device": "gpu-7"},
                      "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}}}  # fmt: skip
    objects.append((resource_path(RESOURCE, "v1", "devicetaintrules"), taint))
    for kind, spec in CLAIM_SPECS.items():
        namespace = ADMIN_NAMESPACE if kind == "admin" else "default"
        template = {"apiVersion": f"{RESOURCE}/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": kind}, "spec": {"spec": spec}}
        objects.append((resource_path(RESOURCE, "v1", "resourceclaimtemplates", namespace), template))
    for i in range(SHARED_CLAIMS):
        claim = {"apiVersion": f"{RESOURCE}/v1", "kind": "ResourceClaim", "metadata": {"name": f"shared-{i}"}, "spec": CLAIM_SPECS["one-gpu"]}
        objects.append((resource_path(RESOURCE, "v1", "resourceclaims", "default"), claim))
    return objects


def pod_of(kind: str, index: int, rng: random.Random) -> dict[str, Any]:
    """Pod ``index`` of ``kind``, gated."""
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "10m"}}}
    spec: dict[str, Any] = {"containers": [container], "schedulingGates": [{"name": GATE}], "terminationGracePeriodSeconds": 0}
    namespace = ADMIN_NAMESPACE if kind == "admin" else "default"
    if kind in CLAIM_SPECS:
        spec["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": kind}]
        container["resources"]["claims"] = [{"name": "devices"}]
    elif kind == "shared":
        spec["resourceClaims"] = [{"name": "devices", "resourceClaimName": f"shared-{rng.randrange(SHARED_CLAIMS)}"}]
        container["resources"]["claims"] = [{"name": "devices"}]
    elif kind == "extended":
        extended = {"deviceclass.resource.kubernetes.io/gpu.example.com": "1"}
        container["resources"] = {"requests": {**container["resources"]["requests"], **extended}, "limits": extended}
    elif kind == "nowhere":
        spec["nodeSelector"] = {"example.com/pool": "none"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{kind}-{index}", "namespace": namespace, "labels": {"observed": kind}}, "spec": spec}


def workload(count: int, seed: int = 41) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    kinds = rng.choices(list(KINDS), weights=list(KINDS.values()), k=count)
    # Every kind at least once, early, whatever the count.
    kinds[: len(KINDS)] = list(KINDS)[: min(count, len(KINDS))]
    return [(kind, pod_of(kind, i, rng)) for i, kind in enumerate(kinds)]


# ----------------------------------------------------------------------------- the comparison


@dataclass
class Verdict:
    pod: str
    kind: str
    observer_state: str = ""
    observer_message: str = ""
    fitting: list[str] = field(default_factory=list)
    nodes_explained: int = 0  # nodes the observer named a reason for (0 when the pod itself is refused)
    scheduler: str = ""  # "bound", "unschedulable", "error" (PodScheduled's reason SchedulerError) or "undecided"
    node: str = ""
    scheduler_message: str = ""
    # For a bound pod: why kube-scheduler's devices (for the claims it allocated) are not an answer
    # this project's allocator accepts on the state it chose them in ("" when they are).
    devices_refused: str = ""
    devices_checked: bool = False

    @property
    def agrees(self) -> bool:
        if self.scheduler == "bound":
            return self.observer_state == "Schedulable" and self.node in self.fitting and not self.devices_refused
        if self.scheduler == "unschedulable":
            return self.observer_state == "Unschedulable"
        if self.scheduler == "error":  # a broken claim or class (a CEL runtime error on a device)
            return self.observer_state == "Error"
        return False


def _condition(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})


async def _explain(observer: KubeClient, namespace: str, name: str, **query: str) -> dict[str, Any]:
    suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
    return await observer.get(explain_path(namespace, name) + suffix)


async def _until(probe: Any, seconds: float, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(ApiError):
            if result := await probe():
                return result
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(interval)


async def compare(api: KubeClient, observer: KubeClient, pods: list[tuple[str, dict[str, Any]]], decide_seconds: float = 30.0) -> list[Verdict]:
    """Each pod in turn: the observer's verdict, then kube-scheduler's (see the module docstring)."""
    verdicts = [await place_one(api, observer, kind, pod, decide_seconds) for kind, pod in pods]
    # kube-scheduler tries a pending pod again on later events: one it bound since is its last word.
    for verdict in verdicts:
        if verdict.scheduler != "bound":
            namespace, name = verdict.pod.split("/")
            found = await api.get(resource_path("", "v1", "pods", namespace, name))
            if found["spec"].get("nodeName"):
                verdict.scheduler, verdict.node = "bound", found["spec"]["nodeName"]
                verdict.scheduler_message = "bound later, on a retry"
    return verdicts


async def place_one(api: KubeClient, observer: KubeClient, kind: str, pod: dict[str, Any], seconds: float) -> Verdict:
    """Create ``pod`` gated, ask the observer, ungate it and wait for kube-scheduler's decision."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    path = resource_path("", "v1", "pods", namespace, name)
    await api.create(resource_path("", "v1", "pods", namespace), pod)
    verdict = Verdict(f"{namespace}/{name}", kind)

    async def asked() -> dict[str, Any] | None:
        answer = await _explain(observer, namespace, name, ifUngated="true", nodes="all")
        return answer if answer.get("state") != "WaitingForClaims" else None

    answer = await _until(asked, seconds) or await _explain(observer, namespace, name, ifUngated="true", nodes="all")
    verdict.observer_state, verdict.observer_message = answer.get("state", ""), answer.get("message", "")
    verdict.fitting = list((answer.get("nodes") or {}).get("fitting") or [])
    verdict.nodes_explained = sum(g.get("count", 0) for g in answer.get("groups") or [])
    fresh = {c["name"] for c in answer.get("claims") or [] if not c.get("allocated")}
    await api.patch(path, {"spec": {"schedulingGates": None}})

    async def decided() -> dict[str, Any] | None:
        found = await api.get(path)
        condition = _condition(found)
        return found if found["spec"].get("nodeName") or (condition.get("status") == "False" and condition.get("reason") in ("Unschedulable", "SchedulerError")) else None

    found = await _until(decided, seconds)
    if found is None:
        verdict.scheduler = "undecided"
    elif found["spec"].get("nodeName"):
        verdict.scheduler, verdict.node = "bound", found["spec"]["nodeName"]
        refused = await devices_refused(api, found, fresh, FEATURES)
        verdict.devices_checked, verdict.devices_refused = refused is not None, refused or ""
        # The next verdict is asked of an observer that has seen this binding.
        await _until(lambda: _bound_seen(observer, namespace, name), seconds)
    else:
        condition = _condition(found)
        verdict.scheduler = "unschedulable" if condition.get("reason") == "Unschedulable" else "error"
        verdict.scheduler_message = condition.get("message", "")
    return verdict


async def devices_refused(api: KubeClient, pod: dict[str, Any], fresh: set[str], features: AllocatorFeatures) -> str | None:
    """Whether the devices kube-scheduler allocated to ``pod``'s claims named in ``fresh`` (those
    unallocated when the observer was asked, and the claim of its extended resources) are one of
    the answers this project's allocator gives: it is asked to allocate those claims on the pod's
    node again, on the same state (every other claim's allocation), with no device of the node
    but the ones kube-scheduler chose. "" when they are, the allocator's reason when not, None
    when kube-scheduler allocated nothing for the pod."""
    namespace = pod["metadata"]["namespace"]
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    names = fresh | ({f"{namespace}/{extended}"} if extended else set())
    claims = (await api.get(resource_path(RESOURCE, "v1", "resourceclaims")))["items"]
    mine = [c for c in claims if f"{c['metadata']['namespace']}/{c['metadata']['name']}" in names and (c.get("status") or {}).get("allocation")]
    if not mine:
        return None
    uids = {c["metadata"]["uid"] for c in mine}
    chosen = {(r["driver"], r["pool"], r["device"]) for c in mine for r in c["status"]["allocation"]["devices"].get("results") or []}
    slices = (await api.get(resource_path(RESOURCE, "v1", "resourceslices")))["items"]
    only_chosen = [{**s, "spec": {**s["spec"], "devices": [d for d in s["spec"].get("devices") or []
                                                           if (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]) in chosen]}}
                   for s in slices]  # fmt: skip
    classes = (await api.get(resource_path(RESOURCE, "v1", "deviceclasses")))["items"]
    rules = (await api.get(resource_path(RESOURCE, "v1", "devicetaintrules")))["items"]
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in (await api.get("/api/v1/namespaces"))["items"]}
    node = await api.get(resource_path("", "v1", "nodes", name=pod["spec"]["nodeName"]))
    others = AllocatedState.from_claims(c for c in claims if c["metadata"]["uid"] not in uids)
    allocator = Allocator(ResourceIndex(only_chosen, classes, rules, features), others, features, labels)
    outcome = allocator.allocate(node, [{**c, "status": {}} for c in mine])
    return "" if isinstance(outcome, Allocated) else f"{outcome.message} (devices {sorted('/'.join(d) for d in chosen)})"


async def _bound_seen(observer: KubeClient, namespace: str, name: str) -> bool:
    return (await _explain(observer, namespace, name)).get("state") == "Bound"


def summary(verdicts: list[Verdict]) -> dict[str, Any]:
    decided = [v for v in verdicts if v.scheduler != "undecided"]
    agreed = [v for v in decided if v.agrees]
    by_kind: dict[str, Counter[str]] = {}
    for v in verdicts:
        counts = by_kind.setdefault(v.kind, Counter())
        counts["pods"] += 1
        counts[v.scheduler] += 1
        counts["agree"] += v.agrees
    return {
        "pods": len(verdicts), "decided": len(decided), "agreed": len(agreed),
        "agreement": round(len(agreed) / len(decided), 4) if decided else None,
        "bound": sum(v.scheduler == "bound" for v in verdicts), "unschedulable": sum(v.scheduler == "unschedulable" for v in verdicts),
        "errors": sum(v.scheduler == "error" for v in verdicts),
        "devices_checked": sum(v.devices_checked for v in verdicts), "devices_refused": sum(bool(v.devices_refused) for v in verdicts),
        "unschedulable_explained_per_node": sum(v.scheduler == "unschedulable" and v.nodes_explained > 0 for v in verdicts),
        "by_kind": {kind: dict(counts) for kind, counts in sorted(by_kind.items())},
        "disagreements": [asdict(v) for v in verdicts if not v.agrees],
    }  # fmt: skip


def show(result: dict[str, Any], seconds: float) -> None:
    print(f"{'kind':<20}{'pods':>6}{'bound':>7}{'pending':>9}{'error':>7}{'agree':>7}")
    for kind, counts in result["by_kind"].items():
        print(f"{kind:<20}{counts['pods']:>6}{counts.get('bound', 0):>7}{counts.get('unschedulable', 0):>9}{counts.get('error', 0):>7}{counts['agree']:>7}")
    share = "n/a" if result["agreement"] is None else f"{100 * result['agreement']:.1f}%"
    print(f"agreement with kube-scheduler: {result['agreed']}/{result['decided']} pods ({share}); "
          f"{result['bound']} bound, {result['unschedulable']} left pending ({result['unschedulable_explained_per_node']} with a reason per node), "
          f"{result['errors']} refused with a scheduler error, "
          f"kube-scheduler's devices checked for {result['devices_checked']} bound pods ({result['devices_refused']} refused), "
          f"{result['pods'] - result['decided']} undecided; {seconds:.0f} s")  # fmt: skip
    for d in result["disagreements"]:
        print(f"  DISAGREE {d['pod']} ({d['kind']}): kube-scheduler {d['scheduler']} {d['node']} {d['scheduler_message']!r}; "
              f"observer {d['observer_state']} fitting={d['fitting']} {d['observer_message']!r}"
              + (f"; kube-scheduler's devices refused: {d['devices_refused']}" if d["devices_refused"] else ""))  # fmt: skip
    print(f"observer writes in the audit log: {result['observer_writes'] or 'none'}")


async def run(cluster: ObservedCluster, count: int, seed: int = 41) -> dict[str, Any]:
    """The workload against ``cluster``; the summary (``show`` prints it)."""
    connection = load_kubeconfig_context([cluster.kubeconfig]).connection
    async with KubeClient.from_connection(connection, user_agent="bench-observer") as api:
        for collection, obj in setup_objects():
            with contextlib.suppress(ApiError):  # exists already (a second run on one cluster)
                await api.create(collection, obj)
        observer, _url = observer_client(cluster.kubeconfig)
        async with observer:
            # The observer answers once its caches are synced (before: 503).
            await _until(lambda: _answers(observer), 60, 0.2)
            verdicts = await compare(api, observer, workload(count, seed))
    result = summary(verdicts)
    result["observer_writes"] = observer_writes(cluster.audit_log)
    return result


async def _answers(observer: KubeClient) -> bool:
    try:
        await _explain(observer, "default", "no-such-pod")
    except ApiError as exc:
        return exc.code == 404
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.observer", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=1000, help="pods in the workload (default 1000)")
    parser.add_argument("--nodes", default="16,4", help="simulated nodes: gpu,nic ones and gpu-partitionable ones (default 16,4)")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--json", default="", help="also write the result here")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs, audit log)")
    args = parser.parse_args(argv)
    counts = tuple(int(n) for n in args.nodes.split(","))
    directory = Path(tempfile.mkdtemp(prefix="dra-bench-observer-"))
    started = time.monotonic()
    try:
        with observed_cluster(directory, counts) as cluster:
            print(f"upstream's control plane, {len(cluster.nodes)} simulated nodes, the observer as {OBSERVER_USER}; {args.pods} pods", flush=True)
            result = asyncio.run(run(cluster, args.pods, args.seed))
        show(result, time.monotonic() - started)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
    finally:
        if args.keep:
            print(f"logs in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return 0 if result["agreement"] == 1.0 and not result["observer_writes"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
