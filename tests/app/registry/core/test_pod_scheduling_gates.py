"""Pod scheduling readiness (KEP-3521, GA) over HTTP: the SchedulingGated condition set at
creation, gates that may only be removed, and the scheduling directives a gated pod may tighten.

Messages, reasons and field paths are upstream's (pkg/registry/core/pod/strategy.go and
pkg/apis/core/validation ValidatePodCreate/ValidatePodUpdate).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import assert_status, pod

JSON_PATCH = {"content-type": "application/json-patch+json"}
MERGE_PATCH = {"content-type": "application/merge-patch+json"}
STRATEGIC = {"content-type": "application/strategic-merge-patch+json"}
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
UPDATABLE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def pods_path(ns: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{ns}/pods"
    return f"{base}/{name}" if name else base


def create(api: httpx.Client, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post(pods_path(ns), json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def gate_names(obj: dict[str, Any]) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or []]


def scheduled_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == "PodScheduled"), None)


def causes(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]]


def invalid_update(api: httpx.Client, ns: str, name: str, patch: Any, headers: dict[str, str] = JSON_PATCH) -> dict[str, Any]:
    return assert_status(api.patch(pods_path(ns, name), json=patch, headers=headers), 422, "Invalid")


def patched(api: httpx.Client, ns: str, name: str, patch: Any, headers: dict[str, str] = JSON_PATCH) -> dict[str, Any]:
    response = api.patch(pods_path(ns, name), json=patch, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


# ---- creation ----------------------------------------------------------------------------


def test_gated_pod_gets_scheduling_gated_condition(api: httpx.Client, ns: str) -> None:
    body = pod("gated", gates=["example.com/quota", "example.com/topology"])
    # Whatever status a client sends is replaced, as upstream's PrepareForCreate does.
    body["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    created = create(api, ns, body)
    assert gate_names(created) == ["example.com/quota", "example.com/topology"]
    assert created["status"]["phase"] == "Pending"
    assert created["status"]["conditions"] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": GATED_MESSAGE,
            "lastProbeTime": None,
            "lastTransitionTime": created["metadata"]["creationTimestamp"],
        }
    ]
    assert api.get(pods_path(ns, "gated")).json()["status"] == created["status"]

    ungated = create(api, ns, pod("plain"))
    assert "conditions" not in ungated["status"]
    assert ungated["status"]["phase"] == "Pending"


def test_table_shows_scheduling_gated(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("gated", gates=["example.com/wait"]))
    create(api, ns, pod("plain"))
    table = api.get(pods_path(ns), headers={"accept": TABLE}).json()
    assert table["kind"] == "Table"
    names = [c["name"] for c in table["columnDefinitions"]]
    rows = {row["cells"][0]: row["cells"][names.index("Status")] for row in table["rows"]}
    assert rows == {"gated": "SchedulingGated", "plain": "Pending"}


def test_gated_pod_with_node_name_is_refused(api: httpx.Client, ns: str) -> None:
    status = assert_status(api.post(pods_path(ns), json=pod("bound", node="node-1", gates=["example.com/wait"])), 422, "Invalid")
    assert causes(status) == [("spec.nodeName", "FieldValueForbidden", "Forbidden: cannot be set until all schedulingGates have been cleared")]
    assert status["message"] == 'Pod "bound" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared'


@pytest.mark.parametrize(
    ("gates", "field", "reason"),
    [
        ([{"name": "example.com/a"}, {"name": "example.com/a"}], "spec.schedulingGates[1]", "FieldValueDuplicate"),
        ([{"name": "not/a/qualified/name"}], "spec.schedulingGates[0]", "FieldValueInvalid"),
    ],
    ids=["duplicate", "not-qualified"],
)
def test_bad_gates_are_refused(api: httpx.Client, ns: str, gates: list[dict[str, str]], field: str, reason: str) -> None:
    body = pod("bad")
    body["spec"]["schedulingGates"] = gates
    status = assert_status(api.post(pods_path(ns), json=body), 422, "Invalid")
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [(field, reason)]


# ---- removing and adding gates ---------------------------------------------------------------


def test_gates_are_removed_one_by_one_in_any_order(api: httpx.Client, ns: str) -> None:
    created = create(api, ns, pod("gated", gates=["example.com/a", "example.com/b", "example.com/c"]))
    condition = scheduled_condition(created)

    # The middle one first, by JSON patch.
    pod1 = patched(api, ns, "gated", [{"op": "remove", "path": "/spec/schedulingGates/1"}])
    assert gate_names(pod1) == ["example.com/a", "example.com/c"]
    # The condition is the scheduler's to change; a spec update leaves status alone.
    assert scheduled_condition(pod1) == condition

    # Then the last, by strategic merge patch (schedulingGates merges by name).
    pod2 = patched(api, ns, "gated", {"spec": {"schedulingGates": [{"$patch": "delete", "name": "example.com/c"}]}}, STRATEGIC)
    assert gate_names(pod2) == ["example.com/a"]

    # The gated pod still cannot be bound.
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "gated"}, "target": {"kind": "Node", "name": "node-1"}}
    body = assert_status(api.post(pods_path(ns, "gated") + "/binding", json=binding), 409, "Conflict")
    assert body["message"] == 'Operation cannot be fulfilled on pods/binding "gated": pod gated has non-empty .spec.schedulingGates'

    # The first one last, by PUT without the field.
    pod2["spec"].pop("schedulingGates")
    response = api.put(pods_path(ns, "gated"), json=pod2)
    assert response.status_code == 200, response.text
    pod3 = response.json()
    assert gate_names(pod3) == []
    assert scheduled_condition(pod3) == condition

    # Ungated: binding works and replaces the condition.
    response = api.post(pods_path(ns, "gated") + "/binding", json=binding)
    assert response.status_code == 201, response.text
    bound = api.get(pods_path(ns, "gated")).json()
    assert bound["spec"]["nodeName"] == "node-1"
    assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [("PodScheduled", "True")]


def test_all_gates_removed_at_once_by_merge_patch(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("gated", gates=["example.com/a", "example.com/b"]))
    cleared = patched(api, ns, "gated", {"spec": {"schedulingGates": None}}, MERGE_PATCH)
    assert gate_names(cleared) == []


def test_adding_a_gate_is_refused(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("gated", gates=["example.com/a", "example.com/b"]))
    status = invalid_update(api, ns, "gated", [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/new"}}])
    message = "Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/new'"
    assert causes(status) == [("spec.schedulingGates[2].name", "FieldValueForbidden", message)]
    assert status["message"] == f'Pod "gated" is invalid: spec.schedulingGates[2].name: {message}'
    assert status["details"] == {"name": "gated", "kind": "Pod", "causes": status["details"]["causes"]}

    # Renaming one is an addition too (the removal alone would be fine).
    status = invalid_update(api, ns, "gated", [{"op": "replace", "path": "/spec/schedulingGates/0/name", "value": "example.com/z"}])
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.schedulingGates[0].name"]

    # Nothing was stored.
    assert gate_names(api.get(pods_path(ns, "gated")).json()) == ["example.com/a", "example.com/b"]


def test_ungated_pod_cannot_gain_a_gate(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("plain"))
    status = invalid_update(api, ns, "plain", {"spec": {"schedulingGates": [{"name": "example.com/late"}]}}, MERGE_PATCH)
    assert causes(status) == [
        ("spec.schedulingGates[0].name", "FieldValueForbidden", "Forbidden: only deletion is allowed, but found new scheduling gate 'example.com/late'")
    ]


# ---- what else a gated pod may change -----------------------------------------------------------


def test_gated_pod_node_selector_may_only_grow(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("gated", gates=["example.com/wait"], nodeSelector={"zone": "a"}))
    grown = patched(api, ns, "gated", {"spec": {"nodeSelector": {"rack": "r1"}}}, MERGE_PATCH)
    assert grown["spec"]["nodeSelector"] == {"zone": "a", "rack": "r1"}

    status = invalid_update(api, ns, "gated", {"spec": {"nodeSelector": {"zone": "b"}}}, MERGE_PATCH)
    detail = "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
    [(field, reason, message)] = causes(status)
    assert (field, reason) == ("spec.nodeSelector", "FieldValueInvalid")
    assert message.startswith("Invalid value: ") and message.endswith(f": {detail}")
    status = invalid_update(api, ns, "gated", {"spec": {"nodeSelector": {"zone": None}}}, MERGE_PATCH)
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [("spec.nodeSelector", "FieldValueInvalid")]

    # Once ungated, the selector is as immutable as the rest of the spec.
    patched(api, ns, "gated", {"spec": {"schedulingGates": None}}, MERGE_PATCH)
    status = invalid_update(api, ns, "gated", {"spec": {"nodeSelector": {"extra": "x"}}}, MERGE_PATCH)
    [(field, reason, message)] = causes(status)
    assert (field, reason) == ("spec", "FieldValueForbidden")
    assert message.startswith(f"Forbidden: {UPDATABLE}\n")


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


ZONE_A = {"key": "zone", "operator": "In", "values": ["a"]}
RACK_1 = {"key": "rack", "operator": "In", "values": ["r1"]}
GPU = {"key": "gpu", "operator": "Exists"}


def test_gated_pod_node_affinity_may_be_tightened(api: httpx.Client, ns: str) -> None:
    # No affinity yet: any node affinity may be set.
    create(api, ns, pod("free", gates=["example.com/wait"]))
    set_now = patched(api, ns, "free", {"spec": {"affinity": _required({"matchExpressions": [ZONE_A]})}}, MERGE_PATCH)
    assert set_now["spec"]["affinity"] == _required({"matchExpressions": [ZONE_A]})

    create(api, ns, pod("gated", gates=["example.com/wait"], affinity=_required({"matchExpressions": [ZONE_A]}, {"matchExpressions": [GPU]})))
    base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
    # Appending requirements to existing terms, and any preferred term, is allowed.
    tightened = patched(
        api,
        ns,
        "gated",
        [
            {"op": "add", "path": f"{base}/0/matchExpressions/-", "value": RACK_1},
            {"op": "add", "path": f"{base}/1/matchFields", "value": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution",
                "value": [{"weight": 10, "preference": {"matchExpressions": [GPU]}}],
            },
        ],
    )
    terms = tightened["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [ZONE_A, RACK_1]
    assert terms[1]["matchFields"][0]["key"] == "metadata.name"
    patched(api, ns, "gated", [{"op": "remove", "path": "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution"}])

    # Another term (or one fewer) would widen placement.
    status = invalid_update(api, ns, "gated", [{"op": "add", "path": f"{base}/-", "value": {"matchExpressions": [GPU]}}])
    [(field, reason, message)] = causes(status)
    assert (field, reason) == (TERMS, "FieldValueInvalid")
    assert message.endswith(": no additions/deletions to non-empty NodeSelectorTerms list are allowed")
    status = invalid_update(api, ns, "gated", [{"op": "remove", "path": "/spec/affinity"}])
    assert [c["field"] for c in status["details"]["causes"]] == [TERMS]

    # Changing or dropping an existing requirement is refused, per term.
    status = invalid_update(api, ns, "gated", [{"op": "replace", "path": f"{base}/0/matchExpressions/0/values", "value": ["b"]}])
    [(field, reason, message)] = causes(status)
    assert (field, reason) == (f"{TERMS}[0]", "FieldValueInvalid")
    assert message.endswith(": only additions are allowed (no mutations or deletions)")
    status = invalid_update(api, ns, "gated", [{"op": "remove", "path": f"{base}/1/matchExpressions/0"}])
    assert [c["field"] for c in status["details"]["causes"]] == [f"{TERMS}[1]"]


def test_gated_pod_other_fields_stay_immutable(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("gated", gates=["example.com/wait"]))
    # Pod affinity is not a scheduling directive a gated pod may change.
    pod_affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}]}}
    status = invalid_update(api, ns, "gated", {"spec": {"affinity": pod_affinity}}, MERGE_PATCH)
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [("spec", "FieldValueForbidden")]
    status = invalid_update(api, ns, "gated", {"spec": {"nodeName": "node-1"}}, MERGE_PATCH)
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [("spec", "FieldValueForbidden")]
    # The generally updatable fields stay updatable.
    updated = patched(api, ns, "gated", {"spec": {"activeDeadlineSeconds": 60, "tolerations": [{"key": "k", "operator": "Exists"}]}}, MERGE_PATCH)
    assert updated["spec"]["activeDeadlineSeconds"] == 60


def test_ungated_pod_node_affinity_is_immutable(api: httpx.Client, ns: str) -> None:
    create(api, ns, pod("plain", affinity=_required({"matchExpressions": [ZONE_A]})))
    base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
    status = invalid_update(api, ns, "plain", [{"op": "add", "path": f"{base}/0/matchExpressions/-", "value": RACK_1}])
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [("spec", "FieldValueForbidden")]
