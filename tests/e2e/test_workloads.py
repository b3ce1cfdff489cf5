"""Workloads on the whole stack (``tests/stack.py``: what ``make run`` starts), driven with the real
kubectl as a user would: a Deployment whose pod template names a claim template rolls out, scales,
rolls to a new template and back, each pod with an allocated claim of its own; a Job whose pods
each take a GPU completes; ``kubectl create deployment``, ``create job``, ``scale`` and
``rollout status`` (Deployment, DaemonSet, StatefulSet), and the three cascading deletes; and the
ReplicaSet upstream's DRA e2e suite deploys its test driver with, the way the suite does."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import yaml

from devtools.server import REPO_ROOT
from kube.objects import Obj
from tests.clients.kubectl_helpers import VENV_KUBECTL
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow, pytest.mark.skipif(VENV_KUBECTL is None, reason="no kubectl in the venv")]

RESOURCE = "/apis/resource.k8s.io/v1"
APPS = "/apis/apps/v1"
TIMEOUT = 90.0
PAUSE = "registry.k8s.io/pause:3.10"


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("workloads"), profile="gpu") as stack:
        yield stack


@pytest.fixture(scope="module")
def admin(stack: Stack) -> Iterator[httpx.Client]:
    with stack.admin() as client:
        yield client


def kubectl(stack: Stack, *args: str, stdin: str | None = None) -> Run:
    """kubectl as the admin, from the repository's root (so ``examples/...`` resolves)."""
    assert VENV_KUBECTL is not None
    environment = {**os.environ, "KUBECONFIG": str(stack.admin_kubeconfig)}
    done = subprocess.run(
        [VENV_KUBECTL, *args], input=stdin, capture_output=True, text=True, env=environment, cwd=REPO_ROOT, timeout=TIMEOUT + 30
    )
    return Run(done.returncode, done.stdout, done.stderr)


def ok(stack: Stack, *args: str, stdin: str | None = None) -> str:
    run = kubectl(stack, *args, stdin=stdin)
    assert run.code == 0, f"kubectl {' '.join(args)}: exit {run.code}\n{run.out}{run.err}\n--- controller\n{stack.log('controller')}"
    return run.out


def rolled_out(stack: Stack, what: str, namespace: str = "default") -> str:
    """``kubectl rollout status``'s last line once it returns."""
    return ok(stack, "rollout", "status", what, "-n", namespace, f"--timeout={int(TIMEOUT)}s").splitlines()[-1]


def items(admin: httpx.Client, path: str, selector: str = "") -> list[Obj]:
    response = admin.get(path, params={"labelSelector": selector} if selector else None)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])


def claims_of_ready_pods(admin: httpx.Client, selector: str, count: int) -> dict[str, str]:
    """Once exactly ``count`` pods of ``selector`` run and nothing else of it is left: pod name ->
    its claim's name, each claim allocated to that pod alone, no two with the same device."""

    def settled() -> list[Obj] | None:
        pods = items(admin, "/api/v1/namespaces/default/pods", selector)
        return pods if len(pods) == count and all(ready(p) for p in pods) else None

    pods: list[Obj] = eventually(settled, f"{count} pods of {selector} ready and no other", TIMEOUT)
    claims: dict[str, str] = {}
    devices = set()
    for pod in pods:
        [status] = pod["status"]["resourceClaimStatuses"]
        name = status["resourceClaimName"]
        claim = admin.get(f"{RESOURCE}/namespaces/default/resourceclaims/{name}").json()
        [owner] = claim["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "Pod",
            pod["metadata"]["name"],
            pod["metadata"]["uid"],
            True,
        )
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        [result] = claim["status"]["allocation"]["devices"]["results"]
        devices.add((result["pool"], result["device"]))
        claims[pod["metadata"]["name"]] = name
    assert len(set(claims.values())) == len(devices) == count, claims
    return claims


def gone(admin: httpx.Client, claims: dict[str, str]) -> bool:
    return all(admin.get(f"{RESOURCE}/namespaces/default/resourceclaims/{name}").status_code == 404 for name in claims.values())


def template_hash(pod_name: str) -> str:
    return pod_name.rsplit("-", 2)[1]


def test_a_deployment_gives_each_pod_its_own_claim_through_scaling_and_rollouts(stack: Stack, admin: httpx.Client) -> None:
    ok(stack, "apply", "-f", "examples/gpu-deviceclass.yaml", "-f", "examples/deploy/deployment.yaml")
    assert rolled_out(stack, "deployment/inference") == 'deployment "inference" successfully rolled out'
    first = claims_of_ready_pods(admin, "app=inference", 3)

    assert ok(stack, "scale", "deployment/inference", "--replicas=4") == "deployment.apps/inference scaled\n"
    rolled_out(stack, "deployment/inference")
    scaled = claims_of_ready_pods(admin, "app=inference", 4)
    assert first.items() <= scaled.items()  # the three keep their pods and claims

    # A new template: a new ReplicaSet, pods and claims replaced; the old claims go with their pods.
    assert (
        ok(stack, "set", "image", "deployment/inference", "server=registry.k8s.io/pause:3.10.1")
        == "deployment.apps/inference image updated\n"
    )
    rolled_out(stack, "deployment/inference")
    updated = claims_of_ready_pods(admin, "app=inference", 4)
    assert not set(updated) & set(scaled) and not set(updated.values()) & set(scaled.values())
    eventually(lambda: gone(admin, scaled), "the replaced pods' claims deleted", TIMEOUT)
    sets = {rs["metadata"]["name"]: rs for rs in items(admin, f"{APPS}/namespaces/default/replicasets", "app=inference")}
    new, old = f"inference-{template_hash(next(iter(updated)))}", f"inference-{template_hash(next(iter(first)))}"
    assert (sets[new]["spec"]["replicas"], sets[old]["spec"]["replicas"]) == (4, 0)
    assert (
        sets[old]["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        sets[new]["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
    ) == ("1", "2")

    # And back: the first ReplicaSet is scaled up again as revision 3.
    assert ok(stack, "rollout", "undo", "deployment/inference") == "deployment.apps/inference rolled back\n"
    rolled_out(stack, "deployment/inference")
    undone = claims_of_ready_pods(admin, "app=inference", 4)
    assert {template_hash(name) for name in undone} == {template_hash(next(iter(first)))}
    deployment = admin.get(f"{APPS}/namespaces/default/deployments/inference").json()
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    status = deployment["status"]
    assert (status["observedGeneration"], status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"]) == (
        deployment["metadata"]["generation"], 4, 4, 4, 4,
    )  # fmt: skip
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {
        "Available": "MinimumReplicasAvailable",
        "Progressing": "NewReplicaSetAvailable",
    }

    ok(stack, "delete", "-f", "examples/deploy/deployment.yaml")
    eventually(lambda: not items(admin, "/api/v1/namespaces/default/pods", "app=inference"), "the deployment's pods deleted", TIMEOUT)
    eventually(lambda: gone(admin, undone), "their claims deleted", TIMEOUT)
    assert not items(admin, f"{APPS}/namespaces/default/replicasets", "app=inference")


def test_a_job_whose_pods_each_take_a_gpu_completes(stack: Stack, admin: httpx.Client) -> None:
    ok(stack, "apply", "-f", "examples/gpu-deviceclass.yaml", "-f", "examples/deploy/job.yaml")
    assert (
        ok(stack, "wait", "--for=condition=complete", "job/training", f"--timeout={int(TIMEOUT)}s") == "job.batch/training condition met\n"
    )
    job = admin.get("/apis/batch/v1/namespaces/default/jobs/training").json()
    status = job["status"]
    assert (status["succeeded"], status.get("failed", 0), status.get("active", 0), status["ready"], status["terminating"]) == (
        4,
        0,
        0,
        0,
        0,
    )
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("SuccessCriteriaMet", "True"), ("Complete", "True")]
    assert status["startTime"] <= status["completionTime"] and status["uncountedTerminatedPods"] == {}
    pods = items(admin, "/api/v1/namespaces/default/pods", "batch.kubernetes.io/job-name=training")
    assert len(pods) == 4 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
    assert all(not p["metadata"].get("finalizers") for p in pods)  # batch.kubernetes.io/job-tracking removed once counted
    claims = {p["metadata"]["name"]: p["status"]["resourceClaimStatuses"][0]["resourceClaimName"] for p in pods}
    assert len(set(claims.values())) == 4
    eventually(lambda: gone(admin, claims), "the finished pods' claims deleted", TIMEOUT)
    ok(stack, "delete", "-f", "examples/deploy/job.yaml")
    eventually(
        lambda: not items(admin, "/api/v1/namespaces/default/pods", "batch.kubernetes.io/job-name=training"),
        "the job's pods deleted",
        TIMEOUT,
    )


DAEMON_AND_STATEFUL_SETS = f"""
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      containers: [{{name: agent, image: {PAUSE}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  replicas: 2
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers: [{{name: db, image: {PAUSE}}}]
"""


def test_kubectl_creates_scales_and_follows_rollouts(stack: Stack, admin: httpx.Client) -> None:
    ns = f"wl-{uuid.uuid4().hex[:8]}"
    ok(stack, "create", "namespace", ns)
    assert ok(stack, "create", "deployment", "hello", f"--image={PAUSE}", "--replicas=2", "-n", ns) == "deployment.apps/hello created\n"
    assert rolled_out(stack, "deployment/hello", ns) == 'deployment "hello" successfully rolled out'
    assert ok(stack, "scale", "deployment", "hello", "--replicas=3", "--current-replicas=2", "-n", ns) == "deployment.apps/hello scaled\n"
    refused = kubectl(stack, "scale", "deployment", "hello", "--replicas=5", "--current-replicas=2", "-n", ns)
    assert (refused.code, refused.err) == (1, "error: Expected replicas to be 2, was 3\n")
    rolled_out(stack, "deployment/hello", ns)
    header, row = ok(stack, "get", "deployment", "hello", "-n", ns).splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and row.split()[:4] == ["hello", "3/3", "3", "3"]
    scale = admin.get(f"{APPS}/namespaces/{ns}/deployments/hello/scale").json()
    assert (scale["kind"], scale["spec"], scale["status"]) == ("Scale", {"replicas": 3}, {"replicas": 3, "selector": "app=hello"})

    assert ok(stack, "create", "job", "once", f"--image={PAUSE}", "-n", ns) == "job.batch/once created\n"
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/once"
    eventually(lambda: (admin.get(path).json().get("status") or {}).get("ready") == 1, "the job's pod ready", TIMEOUT)
    [job_pod] = items(admin, f"/api/v1/namespaces/{ns}/pods", "job-name=once")
    assert job_pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"] and ready(job_pod)

    assert (
        ok(stack, "apply", "-n", ns, "-f", "-", stdin=DAEMON_AND_STATEFUL_SETS)
        == "daemonset.apps/agent created\nstatefulset.apps/db created\n"
    )
    assert rolled_out(stack, "daemonset/agent", ns) == 'daemon set "agent" successfully rolled out'
    assert rolled_out(stack, "statefulset/db", ns) == "partitioned roll out complete: 2 new pods have been updated..."
    agents = items(admin, f"/api/v1/namespaces/{ns}/pods", "app=agent")
    placed = {p["spec"]["nodeName"]: p for p in agents}
    assert sorted(placed) == ["sim-0", "sim-1"] and all(ready(p) for p in agents)
    for node, pod in placed.items():
        [term] = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term == {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    assert sorted(p["metadata"]["name"] for p in items(admin, f"/api/v1/namespaces/{ns}/pods", "app=db")) == ["db-0", "db-1"]

    # Foreground: kubectl returns once the Deployment is gone, which is after its ReplicaSet and pods.
    ok(stack, "delete", "deployment", "hello", "--cascade=foreground", "-n", ns)
    assert not items(admin, f"{APPS}/namespaces/{ns}/replicasets") and not items(admin, f"/api/v1/namespaces/{ns}/pods", "app=hello")
    # Orphan: the StatefulSet's pods stay, owned by nothing.
    ok(stack, "delete", "statefulset", "db", "--cascade=orphan", "-n", ns)
    orphans = eventually(lambda: [p for p in items(admin, f"/api/v1/namespaces/{ns}/pods", "app=db") if not p["metadata"].get("ownerReferences")],
                         "the orphaned pods released", TIMEOUT)  # fmt: skip
    assert len(orphans) == 2
    # Background (kubectl's default): the DaemonSet goes at once, its pods after it.
    ok(stack, "delete", "daemonset", "agent", "-n", ns)
    eventually(lambda: not items(admin, f"/api/v1/namespaces/{ns}/pods", "app=agent"), "the daemon pods deleted", TIMEOUT)
    ok(stack, "delete", "namespace", ns, "--wait=false")


# test/e2e/testing-manifests/dra/dra-test-driver-proxy.yaml of k8s.io/kubernetes v1.37.2, with the
# image and replicas the suite patches in (test/e2e/dra/utils/deploy.go).
DRA_TEST_DRIVER = """
kind: ReplicaSet
apiVersion: apps/v1
metadata:
  name: dra-test-driver
  labels:
    app.kubernetes.io/instance: test-driver.dra.k8s.io
    app.kubernetes.io/part-of: dra-test-driver
    app.kubernetes.io/name: dra-test-driver-kubelet-plugin
    app.kubernetes.io/component: kubelet-plugin
spec:
  selector:
    matchLabels:
      app.kubernetes.io/instance: test-driver.dra.k8s.io
      app.kubernetes.io/part-of: dra-test-driver
      app.kubernetes.io/name: dra-test-driver-kubelet-plugin
      app.kubernetes.io/component: kubelet-plugin
  replicas: 2
  template:
    metadata:
      labels:
        app.kubernetes.io/instance: test-driver.dra.k8s.io
        app.kubernetes.io/part-of: dra-test-driver
        app.kubernetes.io/name: dra-test-driver-kubelet-plugin
        app.kubernetes.io/component: kubelet-plugin
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels:
                app.kubernetes.io/instance: test-driver.dra.k8s.io
            topologyKey: kubernetes.io/hostname
      containers:
        - name: pause
          image: registry.k8s.io/sig-storage/hostpathplugin:v1.17.0
          command: [/bin/sh, -c, while true; do sleep 10000; done]
          volumeMounts:
            - {mountPath: /var/lib/kubelet/plugins/test-driver.dra.k8s.io, name: socket-dir}
            - {mountPath: /var/lib/kubelet/plugins_registry, name: registration-dir}
            - {mountPath: /cdi, name: cdi-dir}
          securityContext:
            privileged: true
      volumes:
        - {hostPath: {path: /var/lib/kubelet/plugins/test-driver.dra.k8s.io, type: DirectoryOrCreate}, name: socket-dir}
        - {hostPath: {path: /var/lib/kubelet/plugins_registry, type: DirectoryOrCreate}, name: registration-dir}
        - {hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}, name: cdi-dir}
"""


def target_available(admin: httpx.Client, path: str, replicas: int) -> bool:
    """test/e2e/framework/replicaset's WaitForReplicaSetTargetAvailableReplicas: the generation
    observed and that many available."""
    rs = admin.get(path).json()
    status = rs.get("status") or {}
    return bool(rs["metadata"]["generation"] <= status.get("observedGeneration", 0) and status.get("availableReplicas", 0) == replicas)


def test_the_dra_e2e_suites_driver_replica_set(stack: Stack, admin: httpx.Client) -> None:
    """Deployed, waited for, listed and scaled to zero as test/e2e/dra/utils/deploy.go does: one
    replica per node (the scheduler's inter-pod anti-affinity spreads them)."""
    ns = f"e2e-{uuid.uuid4().hex[:8]}"
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
    path = f"{APPS}/namespaces/{ns}/replicasets"
    assert admin.post(path, json=yaml.safe_load(DRA_TEST_DRIVER)).status_code == 201
    eventually(lambda: target_available(admin, f"{path}/dra-test-driver", 2), "all kubelet plugin proxies running", TIMEOUT)
    pods = items(admin, f"/api/v1/namespaces/{ns}/pods", "app.kubernetes.io/instance=test-driver.dra.k8s.io")
    assert len(pods) == 2 and all(ready(p) for p in pods)  # "number of proxy pods"
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["sim-0", "sim-1"]
    rs = admin.get(f"{path}/dra-test-driver").json()
    rs["spec"]["replicas"] = 0
    updated = admin.put(f"{path}/dra-test-driver", json=rs)
    assert updated.status_code == 200, updated.text
    eventually(lambda: target_available(admin, f"{path}/dra-test-driver", 0), "all kubelet plugin proxies stopped", TIMEOUT)
    eventually(lambda: not items(admin, f"/api/v1/namespaces/{ns}/pods"), "the proxy pods gone", TIMEOUT)
    assert admin.delete(f"/api/v1/namespaces/{ns}").status_code == 200
