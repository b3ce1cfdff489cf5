"""Upstream's kube-controller-manager v1.37.2 (resourceclaim, device-taint-eviction, garbage
collector, namespace and resource quota controllers) against this server in place of the project's controller,
with the project's scheduler and kubelet simulators: claims made from templates, reservations
released when pods go (``tests/e2e/test_examples.py`` unchanged), and the controller manager's
log free of anything kube-apiserver would not have caused."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_examples import (  # noqa: F401  (the examples' tests, collected here too)
    CLASSES,
    RESOURCE,
    apply,
    test_admin_access,
    test_match_attribute,
    test_pod_with_claim_template,
    test_prioritized_list,
    test_shared_claim,
)
from tests.interop.golang import needs_go
from tests.interop.mixed import MixedStack, mixed_stack
from tests.processes import eventually

pytestmark = [needs_go, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedStack]:
    nodes = (("sim-", 2, "gpu,nic"),)
    with mixed_stack(tmp_path_factory.mktemp("upstream-kcm"), nodes, upstream_controllers=True) as running:
        for name in CLASSES:
            apply(running.client, name)
        yield running


@pytest.fixture(scope="module")
def stack(mixed: MixedStack) -> httpx.Client:
    return mixed.client


def test_a_claim_from_a_template_is_released_and_deleted_with_its_pod(stack: httpx.Client) -> None:
    template = {"metadata": {"name": "kcm-one-gpu"}, "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}
    assert stack.post(f"{RESOURCE}/namespaces/default/resourceclaimtemplates", json=template).status_code == 201
    shared = {"metadata": {"name": "kcm-shared"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    assert stack.post(f"{RESOURCE}/namespaces/default/resourceclaims", json=shared).status_code == 201
    pod = {
        "metadata": {"name": "kcm-pod"},
        "spec": {
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "own"}, {"name": "shared"}]}}],
            "resourceClaims": [{"name": "own", "resourceClaimTemplateName": "kcm-one-gpu"}, {"name": "shared", "resourceClaimName": "kcm-shared"}],
        },
    }
    assert stack.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201
    eventually(lambda: stack.get("/api/v1/namespaces/default/pods/kcm-pod").json().get("status", {}).get("phase") == "Running", "kcm-pod Running")
    statuses = stack.get("/api/v1/namespaces/default/pods/kcm-pod").json()["status"]["resourceClaimStatuses"]
    [generated] = [s["resourceClaimName"] for s in statuses if s["name"] == "own"]
    claim = stack.get(f"{RESOURCE}/namespaces/default/resourceclaims/{generated}").json()
    assert claim["metadata"]["ownerReferences"][0]["name"] == "kcm-pod"
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "own"

    assert stack.delete("/api/v1/namespaces/default/pods/kcm-pod").status_code == 200
    eventually(lambda: stack.get(f"{RESOURCE}/namespaces/default/resourceclaims/{generated}").status_code == 404, "the generated claim deleted")

    def released() -> bool:
        status = stack.get(f"{RESOURCE}/namespaces/default/resourceclaims/kcm-shared").json().get("status", {})
        return not status.get("reservedFor") and not status.get("allocation")

    eventually(released, "the shared claim released and deallocated")


def test_upstreams_quota_controller_keeps_the_status_this_servers_admission_enforces(stack: httpx.Client) -> None:
    """Upstream's e2e "supports count/resourceclaims.resource.k8s.io ResourceQuota" with upstream's
    controller (it watches every resource this server serves) and this server's admission."""
    count = "count/resourceclaims.resource.k8s.io"
    assert stack.post("/api/v1/namespaces", json={"metadata": {"name": "kcm-quota"}}).status_code == 201
    claim = {"metadata": {"name": "claim-0"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    assert stack.post(f"{RESOURCE}/namespaces/kcm-quota/resourceclaims", json=claim).status_code == 201
    assert stack.post("/api/v1/namespaces/kcm-quota/resourcequotas", json={"metadata": {"name": "object-count"}, "spec": {"hard": {count: "1"}}}).status_code == 201

    def counted() -> bool:
        return stack.get("/api/v1/namespaces/kcm-quota/resourcequotas/object-count").json().get("status") == {"hard": {count: "1"}, "used": {count: "1"}}

    eventually(counted, "upstream's controller counted the claim", timeout=60)
    refused = stack.post(f"{RESOURCE}/namespaces/kcm-quota/resourceclaims", json={**claim, "metadata": {"generateName": "claim-1-"}})
    assert refused.status_code == 403, refused.text
    assert f"exceeded quota: object-count, requested: {count}=1, used: {count}=1, limited: {count}=1" in refused.json()["message"]


def test_each_controller_acts_as_its_service_account(stack: httpx.Client) -> None:
    """--use-service-account-credentials: kube-controller-manager made each controller's account
    (the bootstrap policy binds the controller roles to those accounts only)."""
    for account in ("resource-claim-controller", "device-taint-eviction-controller", "generic-garbage-collector", "namespace-controller", "resourcequota-controller"):
        path = f"/api/v1/namespaces/kube-system/serviceaccounts/{account}"

        def made(path: str = path) -> bool:
            return stack.get(path).status_code == 200

        eventually(made, f"{account} made")


def test_kube_controller_manager_logged_nothing_this_server_caused(mixed: MixedStack) -> None:
    """Runs last in this file."""
    assert mixed.upstream_findings() == []
