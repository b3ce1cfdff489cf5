"""PriorityClass over HTTP on both backends: the system classes from the start, validation and
admission answers, the table, and pods' priorities resolved by the Priority admission rules."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import assert_status, pod

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_class(name: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, **fields}


@pytest.fixture
def klass(api: httpx.Client) -> Iterator[str]:
    """A user class of value 1000, gone after the test."""
    name = f"pc-{uuid.uuid4().hex[:8]}"
    assert api.post(CLASSES, json=priority_class(name, 1000, description="test")).status_code == 201
    yield name
    api.delete(f"{CLASSES}/{name}")


def test_system_classes_exist_and_stay(api: httpx.Client) -> None:
    node = api.get(f"{CLASSES}/system-node-critical").json()
    cluster = api.get(f"{CLASSES}/system-cluster-critical").json()
    assert (node["value"], node["preemptionPolicy"], node.get("globalDefault", False)) == (2000001000, "PreemptLowerPriority", False)
    assert cluster["value"] == 2000000000
    assert cluster["description"] == "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
    status = assert_status(api.delete(f"{CLASSES}/system-node-critical"), 403, "Forbidden")
    assert status["message"] == 'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted'
    assert status["details"] == {"name": "system-node-critical", "group": "scheduling.k8s.io", "kind": "priorityclasses"}


def test_table_and_defaults(api: httpx.Client, klass: str) -> None:
    stored = api.get(f"{CLASSES}/{klass}").json()
    assert (stored["preemptionPolicy"], stored["metadata"]["generation"]) == ("PreemptLowerPriority", 1)
    table = api.get(f"{CLASSES}/{klass}", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    assert table["rows"][0]["cells"][:3] == [klass, 1000, False] and table["rows"][0]["cells"][4] == "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (priority_class("too-high", 1_000_000_001), 422, 'PriorityClass.scheduling.k8s.io "too-high" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000'),
        (
            priority_class("out-of-range", 3_000_000_000), 400,
            'PriorityClass in version "v1" cannot be handled as a PriorityClass: json: cannot unmarshal number 3000000000 into Go struct field PriorityClass.value of type int32',
        ),
        (
            priority_class("system-mine", 5), 422,
            'PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: priority class names with \'system-\' prefix are reserved for system use only. error: system-mine is not a known system priority class',
        ),
        (
            priority_class("bad-policy", 5, preemptionPolicy="Sometimes"), 422,
            'PriorityClass.scheduling.k8s.io "bad-policy" is invalid: preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
        ),
    ],
)  # fmt: skip
def test_bad_classes(api: httpx.Client, body: dict[str, Any], code: int, message: str) -> None:
    response = api.post(CLASSES, json=body)
    assert response.status_code == code, response.text
    assert response.json()["message"] == message


def test_negative_value_and_immutable_fields(api: httpx.Client) -> None:
    name = f"neg-{uuid.uuid4().hex[:6]}"
    assert api.post(CLASSES, json=priority_class(name, -10)).status_code == 201
    try:
        response = api.patch(f"{CLASSES}/{name}", json={"value": 5}, headers={"Content-Type": "application/merge-patch+json"})
        assert response.status_code == 422 and "value: Forbidden: may not be changed in an update." in response.json()["message"]
        response = api.patch(f"{CLASSES}/{name}", json={"description": "changed"}, headers={"Content-Type": "application/merge-patch+json"})
        assert response.status_code == 200 and response.json()["metadata"]["generation"] == 2
    finally:
        api.delete(f"{CLASSES}/{name}")


def test_pod_priority_from_class(api: httpx.Client, ns: str, klass: str) -> None:
    created = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("p", priorityClassName=klass)).json()
    assert (created["spec"]["priority"], created["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
    plain = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("plain")).json()
    assert (plain["spec"]["priority"], plain["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    # The system classes are allowed in any namespace (since upstream 1.17).
    critical = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("critical", priorityClassName="system-node-critical")).json()
    assert critical["spec"]["priority"] == 2000001000
    # An update that leaves the priority out keeps it.
    created["spec"].pop("priority")
    updated = api.put(f"/api/v1/namespaces/{ns}/pods/p", json=created)
    assert updated.status_code == 200 and updated.json()["spec"]["priority"] == 1000


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        ({"priorityClassName": "does-not-exist"}, 403, 'pods "bad" is forbidden: no PriorityClass with name does-not-exist was found'),
        (
            {"priority": 7}, 403,
            'pods "bad" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name',
        ),
        (
            {"priority": 3_000_000_000}, 400,
            'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number 3000000000 into Go struct field PodSpec.spec.priority of type int32',
        ),
        (
            {"preemptionPolicy": "Never"}, 403,
            'pods "bad" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name',
        ),
    ],
)  # fmt: skip
def test_bad_pod_priorities(api: httpx.Client, ns: str, spec: dict[str, Any], code: int, message: str) -> None:
    response = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("bad", **spec))
    assert response.status_code == code, response.text
    assert response.json()["message"] == message
    assert api.get(f"/api/v1/namespaces/{ns}/pods/bad").status_code == 404


def test_one_global_default_and_pods_get_it(api: httpx.Client, ns: str) -> None:
    first, second = f"dflt-{uuid.uuid4().hex[:6]}", f"dflt-{uuid.uuid4().hex[:6]}"
    assert api.post(CLASSES, json=priority_class(first, 42, globalDefault=True, preemptionPolicy="Never")).status_code == 201
    try:
        status = assert_status(api.post(CLASSES, json=priority_class(second, 43, globalDefault=True)), 403, "Forbidden")
        assert status["message"] == f'priorityclasses.scheduling.k8s.io "{second}" is forbidden: PriorityClass {first} is already marked as default. Only one default can exist'
        defaulted = api.post(f"/api/v1/namespaces/{ns}/pods", json={**pod(""), "metadata": {"generateName": "d-"}}).json()
        assert (defaulted["spec"]["priorityClassName"], defaulted["spec"]["priority"], defaulted["spec"]["preemptionPolicy"]) == (first, 42, "Never")
        # Admission names a pod created with generateName by that prefix.
        refused = api.post(f"/api/v1/namespaces/{ns}/pods", json={**pod("", priority=1), "metadata": {"generateName": "d-"}}).json()
        assert refused["message"].startswith('pods "d-" is forbidden: the integer value of priority (1)')
    finally:
        api.delete(f"{CLASSES}/{first}")
