"""The observing scheduler (``python -m schedulers --observe``) on upstream's control plane:
kube-apiserver v1.37.2 on etcd, kube-scheduler placing the pods, kube-controller-manager making
their claims, the kubelet simulator's nodes (``bench.observer.observed_cluster``). The observer
runs as a user starts it (the user's kubeconfig, acting as the read-only account of
``examples/observer/rbac.yaml``, recording itself in that kubeconfig), and:

* agrees with kube-scheduler on every pod of a mixed workload (``bench.observer``, which measures
  the same on 1,000 pods): a pod kube-scheduler binds to N, the observer had said N fits (and the
  devices kube-scheduler chose are an answer of this project's allocator on the same state); a
  pod it leaves pending, the observer had said no node fits;
* answers ``kubectl dra why|fit|drain-plan`` and the dashboard unchanged, found through the
  kubeconfig, on a pod kube-scheduler reported ``FailedScheduling`` for;
* refuses to start, in one error naming each permission, as an identity that may not list what it needs;
* writes nothing: the apiserver's audit log holds no write by its user.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bench.observer import GATE, OBSERVER_USER, ObservedCluster, observed_cluster, observer_command, observer_writes, pod_of, run
from devtools.ports import free_port
from devtools.server import REPO_ROOT, stop_process
from kube.client import resource_path
from tests.interop.upstream import needs_upstream, upstream_binaries
from tests.processes import eventually

pytestmark = [*needs_upstream, pytest.mark.slow]
KUBECTL_DRA = Path(sys.executable).with_name("kubectl-dra")
PODS = 48


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedCluster]:
    upstream_binaries()
    with observed_cluster(tmp_path_factory.mktemp("observer"), (2, 1)) as running:
        yield running


def kubectl_dra(cluster: ObservedCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KUBECTL_DRA), "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_observer_agrees_with_kube_scheduler_on_every_pod(cluster: ObservedCluster) -> None:
    result = asyncio.run(run(cluster, PODS))
    assert result["disagreements"] == [], f"{result['disagreements']}\n{cluster.logs()}"
    assert result["decided"] == PODS and result["agreement"] == 1.0
    # Both outcomes were met, and pending pods were explained node by node.
    assert result["bound"] >= 10 and result["unschedulable"] >= 5
    assert result["unschedulable_explained_per_node"] >= 3
    # kube-scheduler's devices were an answer of this project's allocator for every pod it allocated to.
    assert result["devices_checked"] >= 5 and result["devices_refused"] == 0


def failed_scheduling_pod(cluster: ObservedCluster) -> dict[str, Any]:
    """A pod kube-scheduler reported FailedScheduling for (nine GPUs of sim-0, which has eight)."""
    pod = pod_of("too-many", 9000, random.Random(0))
    pod["metadata"]["name"] = "big"
    pod["spec"].pop("schedulingGates")
    only = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [cluster.nodes[0]]}]}
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [only]}}}
    assert GATE not in str(pod["spec"])
    cluster.admin.post(resource_path("", "v1", "pods", "default"), json=pod).raise_for_status()

    def failed() -> dict[str, Any] | None:
        found = cluster.admin.get(resource_path("", "v1", "pods", "default", "big")).json()
        condition: dict[str, Any] = next((c for c in found.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
        return found if condition.get("reason") == "Unschedulable" else None

    # Generous: kube-scheduler may still be working through the agreement run's backlog on a loaded machine.
    found = eventually(failed, "kube-scheduler reports big unschedulable", timeout=180)

    def reported() -> bool:
        events = cluster.admin.get("/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
        return any(e.get("reason") == "FailedScheduling" and e.get("regarding", {}).get("name") == "big" for e in events)

    eventually(reported, "kube-scheduler's FailedScheduling event for big", timeout=180)
    return dict(found)


def test_kubectl_dra_finds_the_observer_in_the_kubeconfig(cluster: ObservedCluster) -> None:
    found = failed_scheduling_pod(cluster)
    said = next(c for c in found["status"]["conditions"] if c["type"] == "PodScheduled")["message"]

    def explained() -> subprocess.CompletedProcess[str] | None:
        answer = kubectl_dra(cluster, "why", "pod/big")
        return answer if answer.returncode == 0 and "Unschedulable" in answer.stdout else None

    why = eventually(explained, "kubectl dra why pod/big", timeout=60)
    lines = why.stdout.splitlines()
    assert lines[0] == "Pod default/big: Unschedulable", why.stdout
    assert f"  The scheduler said: {said}" in lines, why.stdout
    assert any(line.startswith("Nodes: 0 of 3 fit") for line in lines), why.stdout
    as_json = yaml.safe_load(kubectl_dra(cluster, "why", "pod/big", "-o", "json").stdout)
    assert as_json["schedulerMessage"] == said and sum(g["count"] for g in as_json["groups"]) == 3

    # What if: the same pod's copies (none fit), and a node's drain plan.
    manifest = cluster.directory / "big.yaml"
    manifest.write_text(yaml.safe_dump({**found, "metadata": {"name": "big-copy", "namespace": "default"}, "status": {}}))
    fit = kubectl_dra(cluster, "fit", "-f", str(manifest), "-o", "json")
    assert fit.returncode == 0, fit.stderr
    assert yaml.safe_load(fit.stdout)["total"] == 0
    drain = kubectl_dra(cluster, "drain-plan", cluster.nodes[0])
    assert drain.returncode == 0 and f"if node {cluster.nodes[0]} went now" in drain.stdout, drain.stdout + drain.stderr


def test_the_dashboard_explains_through_the_observer(cluster: ObservedCluster) -> None:
    port = free_port()
    dashboard = subprocess.Popen([str(KUBECTL_DRA), "--kubeconfig", str(cluster.kubeconfig), "dashboard", "--port", str(port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        def explained() -> dict[str, Any] | None:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/explain/default/big", timeout=10)
            except httpx.TransportError:
                assert dashboard.poll() is None, dashboard.stderr.read() if dashboard.stderr else ""
                return None  # not listening yet
            return dict(answer.json()) if answer.status_code == 200 else None

        body = eventually(explained, "the dashboard's explanation of big", timeout=60)
        assert body["state"] == "Unschedulable" and body["pod"] == "default/big"
    finally:
        stop_process(dashboard)


def test_an_identity_that_may_not_list_a_kind_gets_one_error_naming_each(cluster: ObservedCluster) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    rules = yaml.safe_load_all((REPO_ROOT / "examples" / "observer" / "rbac.yaml").read_text())
    role = next(d for d in rules if d and d["kind"] == "ClusterRole")
    # All of the observer's role but devicetaintrules and namespaces.
    for rule in role["rules"]:
        rule["resources"] = [r for r in rule["resources"] if r not in ("devicetaintrules", "namespaces")]
    role["metadata"]["name"] = "limited-observer"
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "limited-observer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "limited-observer"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "limited"}]}  # fmt: skip
    assert cluster.admin.post(f"{rbac}/clusterroles", json=role).status_code == 201
    assert cluster.admin.post(f"{rbac}/clusterrolebindings", json=binding).status_code == 201
    command = observer_command(cluster.kubeconfig, free_port())
    command[command.index(OBSERVER_USER)] = "limited"
    command.remove("--record-in-kubeconfig")

    def refused() -> subprocess.CompletedProcess[str] | None:
        answer = subprocess.run([sys.executable, "-m", "schedulers", *command], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False)
        return answer if "devicetaintrules" in answer.stderr else None  # RBAC's cache may lag the binding a moment

    answer = eventually(refused, "the observer refuses to start as limited", timeout=30)
    assert answer.returncode == 1
    error = [line for line in answer.stderr.splitlines() if not line.startswith("{")]  # the log lines are JSON
    assert error == [
        "error: the observer cannot read what it watches (it needs get, list and watch on each):",
        '  devicetaintrules.resource.k8s.io is forbidden: User "limited" cannot list resource "devicetaintrules" in API group "resource.k8s.io" at the cluster scope',
        '  namespaces is forbidden: User "limited" cannot list resource "namespaces" in API group "" at the cluster scope',
        "grant them, for instance: kubectl apply -f examples/observer/rbac.yaml",
    ], answer.stderr


def test_the_observer_wrote_nothing(cluster: ObservedCluster) -> None:
    """Runs last: every request of the observer's user (and of the limited one) in the audit log."""
    time.sleep(1.0)  # the audit log's last lines
    assert cluster.observer.process.poll() is None, cluster.logs()
    requests = [line for line in cluster.audit_log.read_text().splitlines() if OBSERVER_USER in line]
    assert len(requests) > 20  # it did read: lists and watches of every kind
    assert observer_writes(cluster.audit_log) == []
    assert observer_writes(cluster.audit_log, "limited") == []
