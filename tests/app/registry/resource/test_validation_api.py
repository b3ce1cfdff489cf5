"""resource.k8s.io validation, admin access and feature-gate drops, end to end over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.helpers import RESOURCE, assert_status, claim, claims_path

SLICES = f"{RESOURCE}/resourceslices"


def _slice(name: str, **device: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "node-1", "generation": 0, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [{"name": "gpu-0", **device}],
        },
    }


def test_all_causes_at_once(api: httpx.Client, ns: str) -> None:
    body = claim("bad")
    exactly = body["spec"]["devices"]["requests"][0]["exactly"]
    exactly.update(allocationMode="All", count=2, selectors=[{"cel": {"expression": "device.driver"}}])
    body["spec"]["devices"]["requests"].append({"name": "Bad_Name"})
    status = assert_status(api.post(claims_path(ns), json=body), 422, "Invalid")
    causes = {(c["field"], c["reason"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec.devices.requests[0].exactly.count", "FieldValueInvalid"),
        ("spec.devices.requests[0].exactly.selectors[0].cel.expression", "FieldValueInvalid"),
        ("spec.devices.requests[1].name", "FieldValueInvalid"),
        ("spec.devices.requests[1]", "FieldValueRequired"),
    }
    assert status["message"].startswith('ResourceClaim.resource.k8s.io "bad" is invalid: [')


def test_defaults_applied(api: httpx.Client, ns: str) -> None:
    response = api.post(claims_path(ns), json=claim("defaults"))
    assert response.status_code == 201, response.text
    exactly = response.json()["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["allocationMode"] == "ExactCount"
    assert exactly["count"] == 1


def test_admin_access_needs_labelled_namespace(api: httpx.Client, ns: str) -> None:
    body = claim("admin")
    body["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    status = assert_status(api.post(claims_path(ns), json=body), 422, "Invalid")
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` "
            "label on the containing namespace",
            "field": "spec.devices.requests[0].adminAccess",
        }
    ]
    admin_ns = f"admin-{uuid.uuid4().hex[:8]}"
    created = api.post(
        "/api/v1/namespaces",
        json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": admin_ns, "labels": {"resource.kubernetes.io/admin-access": "true"}}},
    )
    assert created.status_code == 201, created.text
    response = api.post(claims_path(admin_ns), json=body)
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] is True


def test_claim_spec_immutable(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("fixed")).json()
    created["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other"
    status = assert_status(api.put(claims_path(ns, "fixed"), json=created), 422, "Invalid")
    # Upstream's declarative immutable rule (beta, authoritative in v1.37) names no value.
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [("spec", "Invalid value: null: field is immutable")]
    assert status["message"] == 'ResourceClaim.resource.k8s.io "fixed" is invalid: spec: Invalid value: null: field is immutable'


def test_slice_uppercase_driver_warning(api: httpx.Client) -> None:
    name = f"warn-{uuid.uuid4().hex[:8]}"
    body = _slice(name)
    body["spec"]["driver"] = "GPU.example.com"
    response = api.post(SLICES, json=body)
    assert response.status_code == 201, response.text
    assert "driver names should be lowercase" in response.headers.get("warning", "")


def test_gate_guarded_field_dropped_or_kept(start_server: Callable[..., ServerProcess]) -> None:
    allocatable = {"memory": {"overhead": {"perPod": "1Mi"}}}
    for flag, kept in ((gates_flag({Gate.DRANodeAllocatableResources: False}), False), (gates_flag({Gate.DRANodeAllocatableResources: True}), True)):
        server = start_server("--feature-gates", flag)
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            response = client.post(SLICES, json=_slice("alloc", nodeAllocatableResources=allocatable))
            assert response.status_code == 201, response.text
            device = response.json()["spec"]["devices"][0]
            assert ("nodeAllocatableResources" in device) is kept
