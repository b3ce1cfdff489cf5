"""The example driver as ``make run --example-driver`` starts it (HTTPS, Node,RBAC): one driver
process per node as the service account of ``examples/exampledriver/rbac.yaml`` with a token
bound to that node, nodes without built-in devices, scheduler and controller. The README's
example pod runs on the driver's device, every write of the driver is its own, and its token is
refused what is not its job (another node's claims, anything beyond its role)."""

from __future__ import annotations

import ssl
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from devtools.credentials import ClusterCredentials
from devtools.devstack import EXAMPLE_DRIVER_MANIFESTS, apply_manifest, example_driver_commands, node_names, worker_commands
from devtools.server import REPO_ROOT, ServerProcess, stop_process
from exampledriver.driver import DEFAULT_DRIVER
from tests.processes import eventually

pytestmark = [pytest.mark.slow]

NODES = 2
DRIVER_USER = "system:serviceaccount:kube-system:dra-example-driver"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


@dataclass
class Stack:
    server: ServerProcess
    audit: Path

    def admin(self) -> httpx.Client:
        return httpx.Client(**self.server.httpx_options(), timeout=30.0)  # type: ignore[arg-type]

    def driver(self, node: str) -> httpx.Client:
        """A client with the token make run gave the driver of ``node``."""
        assert self.server.credentials is not None
        config = yaml.safe_load((self.server.credentials.directory / f"exampledriver-{node}.kubeconfig").read_text())
        token = config["users"][0]["user"]["token"]
        trust = ssl.create_default_context(cafile=str(self.server.credentials.ca_cert))
        return httpx.Client(base_url=self.server.url, verify=trust, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)


@pytest.fixture(scope="module")
def stack(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("driver-identity")
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(node_names(NODES))
    audit = tmp / "audit.log"
    # Privileged pods allowed, as make run's server: the driver's DaemonSet is privileged.
    server = start_server("--audit-log-path", str(audit), "--allow-privileged=true", credentials=credentials)
    workers: list[subprocess.Popen[bytes]] = []
    with pytest.MonkeyPatch.context() as env:
        # The nodes' kubelet directories of this stack alone (unix socket paths are short).
        env.setenv("DRA_KUBELET_ROOT_DIR", tempfile.mkdtemp(prefix="xi-", dir="/tmp"))
        try:
            # The drivers' tokens are bound to the Nodes, so they start once the simulator registered them.
            for commands in (lambda: worker_commands(server, "", NODES, "none"), lambda: example_driver_commands(server, node_names(NODES))):
                for name, command in commands():
                    with open(tmp / f"{name}.log", "ab") as log:
                        workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
            yield Stack(server, audit)
        finally:
            for worker in workers:
                stop_process(worker)


def writers(audit: Path) -> dict[tuple[str, str], set[str]]:
    """(resource, subresource) -> the users whose writes of it succeeded."""
    found: dict[tuple[str, str], set[str]] = {}
    for line in audit.read_bytes().splitlines():
        event = orjson.loads(line)
        ref = event.get("objectRef") or {}
        if event["verb"] in ("create", "update", "patch", "delete") and event["responseStatus"]["code"] < 300:
            found.setdefault((ref.get("resource", ""), ref.get("subresource", "")), set()).add(event["user"]["username"])
    return found


def test_the_example_pod_runs_on_the_drivers_device_and_the_driver_writes_as_itself(stack: Stack) -> None:
    with stack.admin() as admin:
        eventually(
            lambda: {s["spec"]["nodeName"] for s in admin.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]} == set(node_names(NODES)),
            "each node's driver publishes its slice",
            timeout=60,
        )
        apply_manifest(admin, EXAMPLE_DRIVER_MANIFESTS / "pod.yaml")

        def running() -> dict[str, Any] | None:
            pod = admin.get("/api/v1/namespaces/default/pods/pydriver-pod").json()
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        pod = eventually(running, "the example pod runs", timeout=60)
        claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = admin.get(f"{CLAIMS}/{claim_name}").json()
    [device] = claim["status"]["devices"]
    assert (device["driver"], device["pool"]) == (DEFAULT_DRIVER, pod["spec"]["nodeName"])
    assert device["data"]["cdiDeviceIDs"] == [f"k8s.{DEFAULT_DRIVER}/gpu={claim['metadata']['uid']}-{device['device']}"]
    written = writers(stack.audit)
    assert written[("resourceslices", "")] == {DRIVER_USER}
    assert DRIVER_USER in written[("resourceclaims", "status")]
    assert "kubernetes-admin" not in written[("resourceclaims", "status")]


def test_the_drivers_token_is_refused_another_nodes_claims_and_what_its_role_lacks(stack: Stack) -> None:
    with stack.admin() as admin:
        pod = admin.get("/api/v1/namespaces/default/pods/pydriver-pod").json()
    node = pod["spec"]["nodeName"]
    other = next(n for n in node_names(NODES) if n != node)
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    with stack.driver(other) as stranger:
        claim = stranger.get(f"{CLAIMS}/{claim_name}").json()  # reading claims is part of the role
        claim["status"]["devices"][0]["conditions"] = []
        refused = stranger.put(f"{CLAIMS}/{claim_name}/status", json=claim)
        # Off its node, only arbitrary-node:update would do, which the role does not grant.
        assert refused.status_code == 422 and "cannot arbitrary-node:update" in refused.text, refused.text
        assert stranger.get("/api/v1/namespaces/kube-system/secrets").status_code == 403
        assert stranger.post("/api/v1/namespaces/default/pods", json={"metadata": {"name": "x"}}).status_code == 403
        assert stranger.delete("/api/v1/nodes/" + node).status_code == 403
    with stack.driver(node) as owner:
        claim = owner.get(f"{CLAIMS}/{claim_name}").json()
        claim["status"]["devices"][0]["conditions"][0]["message"] = "still prepared"
        assert owner.put(f"{CLAIMS}/{claim_name}/status", json=claim).status_code == 200


def test_shipped_as_a_daemonset_with_its_admission_policy_each_driver_writes_only_its_nodes_slices(stack: Stack) -> None:
    """README's step 5: the DaemonSet rolls out one pod per node, and the admission policy keeps
    each node's driver to the ResourceSlices of its own node, which RBAC alone cannot."""
    examples = REPO_ROOT / "examples" / "exampledriver"
    paths = {
        "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        "DaemonSet": "/apis/apps/v1/namespaces/kube-system/daemonsets",
    }
    with stack.admin() as admin:
        for name in ("admission-policy.yaml", "daemonset.yaml"):
            for doc in yaml.safe_load_all((examples / name).read_text()):
                created = admin.post(paths[doc["kind"]], json=doc)
                assert created.status_code == 201, created.text

        def rolled_out() -> dict[str, Any] | None:
            status = admin.get(f"{paths['DaemonSet']}/dra-example-driver").json().get("status", {})
            return status if status.get("numberReady") == NODES == status.get("desiredNumberScheduled") else None

        eventually(rolled_out, "the driver's DaemonSet ready on every node", timeout=120)
        pods = admin.get("/api/v1/namespaces/kube-system/pods", params={"labelSelector": "app=dra-example-driver"}).json()["items"]
        assert sorted(p["spec"]["nodeName"] for p in pods) == node_names(NODES)
    own, other = node_names(NODES)

    def slice_of(node: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"generateName": "policy-"},
                "spec": {"driver": DEFAULT_DRIVER, "nodeName": node, "pool": {"name": f"extra-{node}", "generation": 1, "resourceSliceCount": 1}, "devices": []}}  # fmt: skip

    with stack.driver(own) as driver:
        def denied() -> httpx.Response | None:
            # A policy is in force for the next request; its binding may reach the cache a moment after.
            answer = driver.post("/apis/resource.k8s.io/v1/resourceslices", json=slice_of(other))
            return answer if answer.status_code == 422 else None

        refused = eventually(denied, "the policy's denial", timeout=30)
        assert refused.json()["message"].endswith(" is forbidden: "
            "ValidatingAdmissionPolicy 'dra-example-driver-slices' with binding 'dra-example-driver-slices' denied request: "
            f"the driver on node {own} may not write a ResourceSlice of node {other}"
        ), refused.text
        mine = driver.post("/apis/resource.k8s.io/v1/resourceslices", json=slice_of(own))
        assert mine.status_code == 201, mine.text
        assert driver.delete(f"/apis/resource.k8s.io/v1/resourceslices/{mine.json()['metadata']['name']}").status_code == 200
