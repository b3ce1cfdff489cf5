"""The real kubectl: ``kubectl apply --server-side`` by another field manager over a
ResourceClaim that ``kubectl create`` made conflicts on the claim's requests (an atomic list in
resource.k8s.io/v1), and kubectl prints upstream's message and its advice."""

from __future__ import annotations

import uuid

import httpx
import yaml

from tests.clients.kubectl_helpers import Kubectl


def _manifest(ns: str, device_class: str) -> str:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }
    return yaml.safe_dump(claim)


def test_server_side_apply_after_kubectl_create_conflicts(kubectl: Kubectl, api: httpx.Client) -> None:
    ns = f"ssa-{uuid.uuid4().hex[:8]}"
    kubectl.ok("create", "namespace", ns)
    assert kubectl.ok("create", "-f", "-", stdin=_manifest(ns, "gpu")).strip() == "resourceclaim.resource.k8s.io/gpu-claim created"
    claim = api.get(f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/gpu-claim").json()
    assert [(m["manager"], m["fieldsV1"]) for m in claim["metadata"]["managedFields"]] == [("kubectl-create", {"f:spec": {"f:devices": {"f:requests": {}}}})]

    refused = kubectl.fails("apply", "--server-side", "--field-manager=platform", "-f", "-", stdin=_manifest(ns, "other-class"))
    first = refused.err.splitlines()[0]
    assert first == 'error: Apply failed with 1 conflict: conflict with "kubectl-create" using resource.k8s.io/v1: .spec.devices.requests'
    assert "--force-conflicts" in refused.err
