"""Server-side apply and managedFields bookkeeping against structured-merge-diff behaviour."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api import schemas
from app.api.apply import apply_patch, fields_v1_of, update_managed_fields
from kube.errors import ApiError

POD = schemas.schema_for_kind("v1", "Pod")
CLAIM = schemas.schema_for_kind("resource.k8s.io/v1", "ResourceClaim")
T0, T1, T2, T3 = "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z", "2025-01-04T00:00:00Z"


def pod_config(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": spec or {"containers": [{"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]}]},
    }


def claim_config(*requests: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": r, "exactly": {"deviceClassName": "gpu"}} for r in requests]}},
    }


def stored(obj: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update({"uid": "u-1", "resourceVersion": rv, "creationTimestamp": T0})
    return out


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def fields(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any]:
    return entries(obj)[(manager, operation)]["fieldsV1"]


def apply(live: dict[str, Any] | None, config: dict[str, Any], manager: str = "kubectl", **kw: Any) -> dict[str, Any]:
    schema = POD if config.get("kind") == "Pod" else CLAIM
    now = kw.pop("now", T1)
    force = kw.pop("force", False)
    return apply_patch(live, config, manager, force, schema, config["apiVersion"], now, **kw)


def updated(old: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str = T2, **kw: Any) -> dict[str, Any]:
    new = copy.deepcopy(new)
    update_managed_fields(old, new, manager, "Update", new["apiVersion"], now, **kw)
    return new


# ------------------------------------------------------------------------------------------ managedFields shape


def test_apply_create_records_upstream_shape() -> None:
    obj = apply(None, pod_config())
    assert obj["metadata"]["managedFields"] == [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                        }
                    }
                },
            },
        }
    ]
    assert obj["spec"]["containers"][0]["image"] == "nginx:1"


def test_update_on_create_owns_every_field_but_system_metadata() -> None:
    obj = updated(None, pod_config(), "kubectl-create", now=T0)
    [entry] = obj["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["time"]) == (
        "kubectl-create",
        "Update",
        "v1",
        T0,
    )
    fv = entry["fieldsV1"]
    assert fv["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert "." not in fv["f:spec"]
    assert fv["f:spec"]["f:containers"] == {
        ".": {},
        'k:{"name":"app"}': {
            ".": {},
            "f:image": {},
            "f:name": {},
            "f:ports": {".": {}, 'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
        },
    }


def test_update_takes_changed_fields_from_other_managers() -> None:
    live = stored(apply(None, pod_config()))
    new = copy.deepcopy(live)
    new["spec"]["containers"][0]["image"] = "nginx:2"
    new["metadata"]["labels"]["team"] = "a"
    result = updated(live, new, "kubectl-edit")
    assert fields(result, "kubectl-edit", "Update") == {
        "f:metadata": {"f:labels": {"f:team": {}}},
        "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:image": {}}}},
    }
    assert "f:image" not in fields(result, "kubectl")["f:spec"]["f:containers"]['k:{"name":"app"}']


def test_update_without_changes_adds_no_entry() -> None:
    live = stored(apply(None, pod_config()))
    new = copy.deepcopy(live)
    new["metadata"]["resourceVersion"] = "2"
    result = updated(live, new, "noop")
    assert list(entries(result)) == [("kubectl", "Apply")]


def test_update_reset_managed_fields_with_empty_list() -> None:
    live = stored(apply(None, pod_config()))
    new = copy.deepcopy(live)
    new["metadata"]["managedFields"] = []
    result = updated(live, new, "cleaner")
    assert "managedFields" not in result["metadata"]


def test_update_removed_fields_leave_every_manager() -> None:
    live = stored(apply(None, pod_config()))
    new = copy.deepcopy(live)
    del new["metadata"]["labels"]
    result = updated(live, new, "kubectl-edit")
    assert "f:metadata" not in fields(result, "kubectl")
    assert ("kubectl-edit", "Update") not in entries(result)


def test_status_subresource_entry() -> None:
    live = stored(apply(None, claim_config("r1")))
    new = copy.deepcopy(live)
    new["status"] = {"allocation": {"devices": {"results": []}}}
    result = updated(live, new, "scheduler", subresource="status")
    [entry] = [e for e in result["metadata"]["managedFields"] if e["manager"] == "scheduler"]
    assert entry["subresource"] == "status"
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"]


def test_subresource_update_ignores_managed_fields_in_request() -> None:
    live = stored(apply(None, claim_config("r1")))
    new = copy.deepcopy(live)
    new["metadata"]["managedFields"] = []
    new["status"] = {"devices": []}
    result = updated(live, new, "kubelet", subresource="status")
    assert ("kubectl", "Apply") in entries(result)


def test_reset_fields_are_not_owned() -> None:
    live = stored(apply(None, claim_config("r1")))
    new = copy.deepcopy(live)
    new["status"] = {"devices": []}
    new["metadata"]["labels"] = {"x": "y"}
    result = updated(live, new, "editor", reset_fields=[("status",)])
    assert fields(result, "editor", "Update") == {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}}


def test_entries_sorted_apply_first_then_by_time() -> None:
    live = stored(apply(None, pod_config()))
    a = copy.deepcopy(live)
    a["metadata"]["labels"]["b"] = "1"
    a = updated(live, a, "zeta", now=T2)
    b = copy.deepcopy(a)
    b["metadata"]["labels"]["c"] = "1"
    b = updated(a, b, "alpha", now=T3)
    assert [(e["operation"], e["manager"]) for e in b["metadata"]["managedFields"]] == [
        ("Apply", "kubectl"),
        ("Update", "zeta"),
        ("Update", "alpha"),
    ]


def test_update_managers_are_capped() -> None:
    obj = stored(apply(None, pod_config()))
    for i in range(12):
        new = copy.deepcopy(obj)
        new["metadata"]["labels"][f"l{i}"] = "x"
        obj = updated(obj, new, f"m{i:02d}", now=f"2025-02-{i + 1:02d}T00:00:00Z")
    managers = [e["manager"] for e in obj["metadata"]["managedFields"] if e["operation"] == "Update"]
    assert len(managers) == 10
    assert "ancient-changes" in managers
    ancient = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == "ancient-changes")
    assert set(ancient["fieldsV1"]["f:metadata"]["f:labels"]) >= {"f:l0", "f:l1", "f:l2"}


def test_fields_v1_of_strips_system_metadata() -> None:
    fv = fields_v1_of(stored(pod_config()), POD)
    assert fv["f:metadata"] == {"f:labels": {"f:app": {}}}
    assert "f:apiVersion" not in fv and "f:kind" not in fv


# ------------------------------------------------------------------------------------------------ apply merge


def test_apply_adds_container_and_keeps_others() -> None:
    live = stored(apply(None, pod_config()))
    other = copy.deepcopy(live)
    other["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    other = updated(live, other, "injector")
    config = pod_config(
        containers=[
            {"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]},
            {"name": "log", "image": "fluent"},
        ]
    )
    result = apply(stored(other, "2"), config, now=T3)
    assert [c["name"] for c in result["spec"]["containers"]] == ["app", "sidecar", "log"]


def test_apply_prunes_item_no_longer_applied() -> None:
    two = pod_config(containers=[{"name": "app", "image": "a"}, {"name": "extra", "image": "b"}])
    live = stored(apply(None, two))
    result = apply(live, pod_config(containers=[{"name": "app", "image": "a"}]), now=T2)
    assert [c["name"] for c in result["spec"]["containers"]] == ["app"]


def test_apply_prunes_label_only_when_no_one_else_owns_it() -> None:
    live = stored(apply(None, pod_config()))
    shared = copy.deepcopy(live)
    shared["metadata"]["labels"]["team"] = "a"
    shared = updated(live, shared, "labeler")
    config = pod_config()
    config["metadata"]["labels"] = {"app": "web", "team": "a"}
    owned_by_both = apply(stored(shared, "2"), config, now=T3)
    config["metadata"]["labels"] = {"app": "web"}
    result = apply(stored(owned_by_both, "3"), config, now=T3)
    assert result["metadata"]["labels"] == {"app": "web", "team": "a"}
    config["metadata"].pop("labels")
    result = apply(stored(result, "4"), config, now=T3)
    assert result["metadata"]["labels"] == {"team": "a"}


def test_apply_keeps_unowned_fields() -> None:
    live = stored(apply(None, pod_config()))
    live["spec"]["restartPolicy"] = "Always"  # defaulted by the server, owned by no one
    result = apply(live, pod_config(), now=T2)
    assert result["spec"]["restartPolicy"] == "Always"


def test_apply_atomic_list_is_replaced() -> None:
    live = stored(apply(None, claim_config("r1", "r2")))
    result = apply(live, claim_config("r3"), now=T2)
    assert [r["name"] for r in result["spec"]["devices"]["requests"]] == ["r3"]
    assert fields(result, "kubectl") == {"f:spec": {"f:devices": {"f:requests": {}}}}


def test_apply_set_list_tracks_values() -> None:
    config = pod_config()
    config["metadata"]["finalizers"] = ["example.com/x"]
    result = apply(None, config)
    assert fields(result, "kubectl")["f:metadata"]["f:finalizers"] == {'v:"example.com/x"': {}}


def test_apply_null_removes_field_but_keeps_ownership() -> None:
    live = stored(apply(None, pod_config(containers=[{"name": "app", "image": "a"}], hostname="h")))
    result = apply(live, pod_config(containers=[{"name": "app", "image": "a"}], hostname=None), now=T2)
    assert "hostname" not in result["spec"]
    assert "f:hostname" in fields(result, "kubectl")["f:spec"]


def test_noop_apply_keeps_time() -> None:
    live = stored(apply(None, pod_config(), now=T1))
    result = apply(live, pod_config(), now=T3)
    assert entries(result)[("kubectl", "Apply")]["time"] == T1
    assert {k: v for k, v in result.items() if k != "metadata"} == {k: v for k, v in live.items() if k != "metadata"}


def test_apply_does_not_modify_inputs() -> None:
    live = stored(apply(None, pod_config()))
    config = pod_config(containers=[{"name": "other", "image": "x"}])
    before_live, before_config = copy.deepcopy(live), copy.deepcopy(config)
    apply(live, config, force=True)
    assert (live, config) == (before_live, before_config)


# --------------------------------------------------------------------------------------------------- conflicts


def test_conflict_with_update_manager() -> None:
    live = stored(apply(None, pod_config()))
    edited = copy.deepcopy(live)
    edited["spec"]["containers"][0]["image"] = "nginx:2"
    edited = updated(live, edited, "kubectl-client-side-apply")
    with pytest.raises(ApiError) as info:
        apply(stored(edited, "2"), pod_config(), now=T3)
    status = info.value.status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .spec.containers[name="app"].image'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-client-side-apply" using v1',
            "field": '.spec.containers[name="app"].image',
        }
    ]


def test_conflict_with_apply_manager_and_many_fields() -> None:
    live = stored(apply(None, pod_config(), manager="team-a"))
    config = pod_config(containers=[{"name": "app", "image": "nginx:9", "ports": [{"containerPort": 80}]}])
    config["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiError) as info:
        apply(live, config, manager="team-b", now=T2)
    assert info.value.message == (
        'Apply failed with 2 conflicts: conflicts with "team-a":\n'
        "- .metadata.labels.app\n"
        '- .spec.containers[name="app"].image'
    )
    assert [c["message"] for c in info.value.status()["details"]["causes"]] == ['conflict with "team-a"'] * 2


def test_conflict_names_subresource() -> None:
    live = stored(apply(None, claim_config("r1")))
    with_status = copy.deepcopy(live)
    with_status["metadata"]["labels"] = {"owner": "driver"}
    with_status = updated(live, with_status, "driver", subresource="status")
    config = claim_config("r1")
    config["metadata"]["labels"] = {"owner": "me"}
    with pytest.raises(ApiError) as info:
        apply(stored(with_status, "2"), config, now=T3)
    assert 'conflict with "driver" with subresource "status" using resource.k8s.io/v1' in info.value.message


def test_force_takes_ownership() -> None:
    live = stored(apply(None, pod_config(), manager="team-a"))
    config = pod_config(containers=[{"name": "app", "image": "nginx:9", "ports": [{"containerPort": 80}]}])
    result = apply(live, config, manager="team-b", force=True, now=T2)
    assert result["spec"]["containers"][0]["image"] == "nginx:9"
    assert "f:image" in fields(result, "team-b")["f:spec"]["f:containers"]['k:{"name":"app"}']
    assert "f:image" not in fields(result, "team-a")["f:spec"]["f:containers"]['k:{"name":"app"}']


def test_same_value_is_shared_without_conflict() -> None:
    live = stored(apply(None, pod_config(), manager="team-a"))
    result = apply(live, pod_config(), manager="team-b", now=T2)
    assert fields(result, "team-a") == fields(result, "team-b")


def test_atomic_list_conflict_is_reported_on_the_list() -> None:
    live = stored(apply(None, claim_config("r1"), manager="team-a"))
    with pytest.raises(ApiError) as info:
        apply(live, claim_config("r2"), manager="team-b", now=T2)
    assert info.value.message.endswith(": .spec.devices.requests")


# ------------------------------------------------------------------------------------------ rejected configs

REJECTED: list[tuple[str, Any, int, str]] = [
    ("not an object", ["x"], 400, "error decoding YAML"),
    (
        "wrong kind",
        {**claim_config("r1"), "kind": "DeviceClass"},
        400,
        "invalid object type: resource.k8s.io/v1, Kind=DeviceClass",
    ),
    (
        "wrong version",
        {**claim_config("r1"), "apiVersion": "resource.k8s.io/v1beta1"},
        400,
        "invalid object type: resource.k8s.io/v1beta1",
    ),
    (
        "managedFields set",
        {**claim_config("r1"), "metadata": {"name": "gpu", "managedFields": []}},
        400,
        "metadata.managedFields must be nil",
    ),
    (
        "unknown field",
        {**claim_config("r1"), "spec": {"devices": {}, "foo": 1}},
        400,
        "failed to create typed patch object (default/gpu; resource.k8s.io/v1, Kind=ResourceClaim): .spec.foo: field not declared in schema",
    ),
]


@pytest.mark.parametrize(("name", "config", "code", "message"), REJECTED, ids=[c[0] for c in REJECTED])
def test_apply_rejects(name: str, config: Any, code: int, message: str) -> None:
    with pytest.raises(ApiError) as info:
        apply_patch(None, config, "kubectl", False, CLAIM, "resource.k8s.io/v1", T1, kind="ResourceClaim")
    assert info.value.code == code
    assert info.value.message.startswith(message)


def test_apply_rejects_list_item_without_key() -> None:
    with pytest.raises(ApiError) as info:
        apply(None, pod_config(containers=[{"image": "x"}]))
    assert info.value.code == 400
    assert info.value.message.endswith(
        '.spec.containers: element 0: associative list with keys has an element that omits key field "name" '
        "(and doesn't have default value)"
    )


def test_update_leaves_other_managers_entries_as_they_were() -> None:
    live = stored(apply(None, pod_config()))
    before = copy.deepcopy(fields(live, "kubectl"))
    new = copy.deepcopy(live)
    new["metadata"]["labels"]["team"] = "a"
    result = updated(live, new, "labeller")
    assert fields(result, "kubectl") == before
    assert fields(result, "labeller", "Update") == {"f:metadata": {"f:labels": {"f:team": {}}}}


def test_update_from_number_to_boolean_is_a_change() -> None:
    config = claim_config("gpu")
    config["spec"]["devices"]["config"] = [{"opaque": {"driver": "gpu.example.com", "parameters": {"shared": 1}}}]
    live = stored(apply(None, config))
    new = copy.deepcopy(live)
    new["spec"]["devices"]["config"][0]["opaque"]["parameters"]["shared"] = True
    result = updated(live, new, "flipper")
    assert ("flipper", "Update") in entries(result)


def test_update_sharing_sub_trees_with_the_stored_object_records_the_same_fields() -> None:
    # A status write keeps the stored spec (the same objects, not a copy): the comparison must
    # settle shared sub-trees as unchanged and still find what changed beside them.
    live = stored(apply(None, pod_config()))
    status = {"conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}
    shared = {**live, "metadata": copy.deepcopy(live["metadata"]), "status": copy.deepcopy(status)}
    copied = {**copy.deepcopy(live), "status": copy.deepcopy(status)}
    assert shared["spec"] is live["spec"]
    results = []
    for new in (shared, copied):
        update_managed_fields(live, new, "kubelet", "Update", "v1", T2, "status", reset_fields=[("spec",)])
        results.append(new["metadata"]["managedFields"])
    assert results[0] == results[1]
    assert fields(shared, "kubelet", "Update") == {
        "f:status": {".": {}, "f:conditions": {".": {}, 'k:{"type":"Ready"}': {".": {}, "f:status": {}, "f:type": {}}}, "f:phase": {}}
    }


def test_update_from_integer_to_float_is_a_change_only_inside_an_atomic_value() -> None:
    # A leaf compares numbers as numbers (30 == 30.0); an atomic list compares as JSON, where 1 is not 1.0.
    live = stored(apply(None, pod_config(terminationGracePeriodSeconds=30, containers=[{"name": "app", "image": "nginx:1"}])))
    new = copy.deepcopy(live)
    new["spec"]["terminationGracePeriodSeconds"] = 30.0
    assert ("flipper", "Update") not in entries(updated(live, new, "flipper"))
    config = claim_config("gpu")
    config["spec"]["devices"]["config"] = [{"opaque": {"driver": "gpu.example.com", "parameters": {"count": 1}}}]
    live = stored(apply(None, config))
    new = copy.deepcopy(live)
    new["spec"]["devices"]["config"][0]["opaque"]["parameters"]["count"] = 1.0
    assert fields(updated(live, new, "flipper"), "flipper", "Update") == {"f:spec": {"f:devices": {"f:config": {}}}}


@pytest.mark.parametrize(
    ("lhs", "rhs"),
    [
        (1, True), (0, False), (1, 1.0), (0.0, -0.0), (-0.0, -0.0), (2**70, 2**70), (2**70, 2**70 + 1), ("a", "a"), (None, None),
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}), ({"a": 1}, {"a": True}), ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}),
        ({"a": [1, {"b": None}]}, {"a": [1, {}]}), ([1, 2], [2, 1]), ([{"x": 1.5}], [{"x": 1.5}]), ({"a": 1}, {"a": 1, "b": 2}),
        ([], {}), ({}, {}), ([[True]], [[1]]), ({"n": 2**70}, {"n": 2**70}), ((1, 2), [1, 2]),
    ],
)  # fmt: skip
def test_json_equality_matches_serialized_equality(lhs: Any, rhs: Any) -> None:
    from app.api.apply import _json_equal, _strictly_equal

    assert _json_equal(lhs, rhs) == _strictly_equal(lhs, rhs)
    assert _json_equal(rhs, lhs) == _strictly_equal(rhs, lhs)
    shared = {"x": lhs}
    assert _json_equal(shared, shared)


def _zero_compared(obj: dict[str, Any], schema: schemas.SchemaNode | None) -> dict[str, Any]:
    """What a create records by the general comparison with the kind's zero value."""
    from app.api.apply import _compare, _Comparison, _shape_of, zero_structs
    from app.api.fieldsets import set_union, to_fields_v1

    comparison = _Comparison({}, {}, {})
    _compare(zero_structs(obj["apiVersion"], obj["kind"]), obj, _shape_of(schema), (), comparison)
    return to_fields_v1(set_union(comparison.modified, comparison.added))


@pytest.mark.parametrize(
    "obj",
    [
        pod_config(),
        pod_config(containers=[{"name": "a", "image": "i", "resources": {}, "securityContext": None}], securityContext={}),
        pod_config(containers=[{"name": "a", "resources": {"limits": {"cpu": "1"}}}], nodeSelector={"a": "b"}, overhead=None),
        {**pod_config(), "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "True"}]}},
        {**pod_config(), "spec": "not a struct", "status": None},
        {**pod_config(), "spec": {}, "undeclared": {"a": [1]}},
        claim_config("a", "b"),
        {**claim_config(), "spec": {"devices": {}}, "status": {"allocation": {"devices": {"results": []}}}},
        {**claim_config("a"), "metadata": {"name": "x", "labels": {"a": "1"}, "annotations": None, "finalizers": ["f"]}},
    ],
)
def test_create_records_what_the_comparison_with_the_zero_value_records(obj: dict[str, Any]) -> None:
    from app.api.apply import _mark_created, _shape_of, zero_structs
    from app.api.fieldsets import to_fields_v1

    schema = POD if obj["kind"] == "Pod" else CLAIM
    created: dict[str, Any] = {}
    _mark_created(zero_structs(obj["apiVersion"], obj["kind"]), obj, _shape_of(schema), created)
    assert to_fields_v1(created) == _zero_compared(obj, schema)


def test_create_with_managed_fields_sent_records_the_same_entry_for_the_writer() -> None:
    # A client's managedFields on a create take the general comparison; the writer's entry is the same.
    config = pod_config(containers=[{"name": "a", "image": "i"}], securityContext={})
    sent = copy.deepcopy(config)
    sent["metadata"]["managedFields"] = [
        {"manager": "other", "operation": "Update", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {}}}}
    ]
    assert fields(updated(None, sent, "creator"), "creator", "Update") == fields(updated(None, config, "creator"), "creator", "Update")


def test_update_of_fields_the_writer_owns_moves_only_its_time() -> None:
    # Upstream stamps the writer's entry whenever the write changed something it now owns; the
    # fields it owned already are the same set, stored as they were.
    live = stored(updated(None, claim_config("gpu"), "creator", now=T1))
    new = copy.deepcopy(live)
    new["metadata"]["labels"] = {"a": "1"}
    live = stored(updated(live, new, "labeller", now=T2), rv="2")
    new = copy.deepcopy(live)
    new["metadata"]["labels"]["a"] = "2"
    result = updated(live, new, "labeller", now=T3)
    before, after = entries(live)[("labeller", "Update")], entries(result)[("labeller", "Update")]
    assert after["time"] == T3
    assert {**after, "time": T2} == before
    # The stored object's list was decoded from the write that stored it: the FieldsV1 is reused.
    shared_live = updated(None, claim_config("gpu"), "creator", now=T1)
    new = copy.deepcopy(shared_live)
    new["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic"
    result = updated(shared_live, new, "creator", now=T2)
    assert result["metadata"]["managedFields"][0]["fieldsV1"] is shared_live["metadata"]["managedFields"][0]["fieldsV1"]

