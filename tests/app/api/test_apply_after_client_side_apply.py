"""Server-side apply over a ResourceClaim made by ``kubectl create`` or client-side ``kubectl
apply`` (an Update by ``kubectl-create`` or ``kubectl-client-side-apply``), as kube-apiserver
v1.37.2 answers it.

``spec.devices.requests`` is ``+listType=atomic`` in k8s.io/api resource/v1: the creating manager
owns the list as one value, and an apply by another manager that changes any request conflicts on
the whole list (``.spec.devices.requests``, no item key). The managed fields of the create are
computed against the kind's Go zero value, whose structs exist: they hold no ``.`` for
``f:devices``, as upstream's.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.helpers import assert_status, claim

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _claim(device_class: str) -> dict[str, Any]:
    return claim("gpu-claim", device_class=device_class)


def _create(api: httpx.Client, ns: str, manager: str) -> dict[str, Any]:
    """What kubectl sends: ``create`` the object, client-side ``apply`` it with its last-applied annotation."""
    body = _claim("gpu")
    if manager == "kubectl-client-side-apply":
        body["metadata"]["annotations"] = {LAST_APPLIED: orjson.dumps(_claim("gpu")).decode() + "\n"}
    created = api.post(CLAIMS.format(ns=ns), params={"fieldManager": manager}, json=body)
    assert created.status_code == 201, created.text
    return created.json()  # type: ignore[no-any-return]


def _apply(api: httpx.Client, ns: str, body: dict[str, Any]) -> httpx.Response:
    return api.patch(
        f"{CLAIMS.format(ns=ns)}/gpu-claim", params={"fieldManager": "platform"}, content=orjson.dumps(body), headers={"Content-Type": "application/apply-patch+yaml"}
    )


@pytest.mark.parametrize(
    ("manager", "owned"),
    [
        ("kubectl-create", {"f:spec": {"f:devices": {"f:requests": {}}}}),
        (
            "kubectl-client-side-apply",
            {"f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}}}, "f:spec": {"f:devices": {"f:requests": {}}}},
        ),
    ],
)
def test_apply_changing_a_request_conflicts_on_the_atomic_list(api: httpx.Client, ns: str, manager: str, owned: dict[str, Any]) -> None:
    created = _create(api, ns, manager)
    entries = created["metadata"]["managedFields"]
    assert [(e["manager"], e["operation"], e["fieldsV1"]) for e in entries] == [(manager, "Update", owned)]

    refused = assert_status(_apply(api, ns, _claim("other-class")), 409, "Conflict")
    conflict = f'conflict with "{manager}" using resource.k8s.io/v1'
    assert refused["message"] == f"Apply failed with 1 conflict: {conflict}: .spec.devices.requests"
    assert refused["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": conflict, "field": ".spec.devices.requests"}]

    unchanged = api.get(f"{CLAIMS.format(ns=ns)}/gpu-claim").json()
    assert unchanged["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert unchanged["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu"
