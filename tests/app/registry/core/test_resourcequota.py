"""ResourceQuota (core/v1): upstream's validation (ValidateResourceQuota and its update rules),
the status subresource strategy, the printer columns and the create warnings."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from app.registry.core.resourcequota_validation import (
    create_warnings,
    validate_resource_quota,
    validate_resource_quota_update,
    validate_status,
)
from kube.errors import INVALID, REQUIRED, FieldError
from kube.objects import Obj
from tests.app.registry.helpers import pairs
from tests.helpers import assert_status

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def quota(hard: Mapping[str, object] | None = None, **spec: object) -> Obj:
    return {"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": dict(hard or {"pods": "10"}), **spec}}


def messages(errs: list[FieldError]) -> list[str]:
    return sorted(str(e) for e in errs)


def test_names_and_amounts_a_quota_may_limit() -> None:
    ok = {"pods": "10", "requests.cpu": "1500m", "limits.memory": "2Gi", "count/resourceclaims.resource.k8s.io": "3",
          "gpu.deviceclass.resource.k8s.io/devices": "4", "requests.example.com/gpu": "2", "hugepages-2Mi": "4Mi",
          "requests.deviceclass.resource.kubernetes.io/gpu": "1", "fast.storageclass.storage.k8s.io/requests.storage": "1Gi"}  # fmt: skip
    assert validate_resource_quota(quota(ok)) == []
    errs = validate_resource_quota(quota({"storage": "1", "foo": "1", "count/pods": "1.5", "pods": "1.5", "cpu": "-1", "bad name!": "1"}))
    assert messages(errs) == [
        'spec.hard[bad name!]: Invalid value: "bad name!": must be a standard resource for quota',
        'spec.hard[bad name!]: Invalid value: "bad name!": name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character (e.g. \'MyName\',  or \'my.name\',  or \'123-abc\', regex used for validation is \'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\')',
        'spec.hard[count/pods]: Invalid value: "1500m": must be an integer',
        'spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        'spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota',
        'spec.hard[foo]: Invalid value: "foo": must be a standard resource type or fully qualified',
        'spec.hard[pods]: Invalid value: "1500m": must be an integer',
        'spec.hard[storage]: Invalid value: "storage": must be a standard resource for quota',
    ]  # fmt: skip


def test_scopes_must_be_known_agree_with_each_other_and_suit_the_resources() -> None:
    assert validate_resource_quota(quota({"pods": "1", "requests.cpu": "1"}, scopes=["NotBestEffort", "Terminating"])) == []
    errs = validate_resource_quota(quota({"pods": "1", "requests.cpu": "1", "services": "1"}, scopes=["BestEffort", "NotBestEffort", "Weekly"]))
    assert messages(errs) == [
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort","Weekly"]: conflicting scopes',
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort","Weekly"]: unsupported scope',
        # BestEffort pods use no cpu; no pod scope suits services.
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort","Weekly"]: unsupported scope applied to resource',
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort","Weekly"]: unsupported scope applied to resource',
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort","Weekly"]: unsupported scope applied to resource',
    ]


def test_scope_selectors() -> None:
    good = [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}, {"scopeName": "NotTerminating", "operator": "Exists"}]
    assert validate_resource_quota(quota({"pods": "1"}, scopeSelector={"matchExpressions": good})) == []
    bad = [
        {"scopeName": "PriorityClass", "operator": "In"},
        {"scopeName": "BestEffort", "operator": "In", "values": ["x"]},
        {"scopeName": "Terminating", "operator": "Exists", "values": ["x"]},
        {"scopeName": "PriorityClass", "operator": "Near", "values": ["x"]},
        {"scopeName": "NotTerminating", "operator": "Exists"},
    ]
    errs = validate_resource_quota(quota({"pods": "1"}, scopeSelector={"matchExpressions": bad}))
    assert pairs(errs) == [
        ("spec.scopeSelector.matchExpressions", INVALID),  # Terminating and NotTerminating together
        ("spec.scopeSelector.matchExpressions.operator", INVALID),  # BestEffort takes Exists only
        ("spec.scopeSelector.matchExpressions.operator", INVALID),  # not an operator
        ("spec.scopeSelector.matchExpressions.values", INVALID),  # Exists takes no values
        ("spec.scopeSelector.matchExpressions.values", REQUIRED),  # In needs some
    ]
    conflict = next(e for e in errs if e.field == "spec.scopeSelector.matchExpressions")
    # Upstream shows the spec's scopes (none here) for a conflict among the selector's.
    assert conflict.message == "Invalid value: null: conflicting scopes"
    unsuited = validate_resource_quota(quota({"services": "1"}, scopeSelector={"matchExpressions": [{"scopeName": "Terminating", "operator": "Exists"}]}))
    assert messages(unsuited) == [
        'spec.scopeSelector.matchExpressions: Invalid value: {"MatchExpressions":[{"ScopeName":"Terminating","Operator":"Exists","Values":null}]}: '
        "unsupported scope applied to resource"
    ]


def test_updates_keep_the_scopes_and_status_writes_check_the_status() -> None:
    old = quota({"pods": "1"}, scopes=["Terminating"])
    assert validate_resource_quota_update(quota({"pods": "2"}, scopes=["Terminating"]), old) == []
    assert messages(validate_resource_quota_update(quota({"pods": "2"}), old)) == ["spec.scopes: Invalid value: null: field is immutable"]
    assert pairs(validate_status({"status": {"hard": {"pods": "1"}, "used": {"pods": "-1", "nope": "1"}}})) == [
        ("status.used[nope]", INVALID), ("status.used[nope]", INVALID), ("status.used[pods]", INVALID)]  # fmt: skip


def test_requests_above_their_limits_are_warned_about() -> None:
    assert create_warnings(quota({"cpu": "2", "limits.cpu": "1", "requests.memory": "1Gi", "limits.memory": "2Gi", "requests.storage": "3", "limits.storage": "2"})) == [
        "ResourceQuota cpu (2) should be less than limits.cpu (1)",
        "ResourceQuota requests.storage (3) should be less than limits.storage (2)",
    ]  # fmt: skip


def test_quotas_round_trip_with_their_status_kept_apart(api: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/resourcequotas"
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute"},
            "spec": {"hard": {"pods": "4", "requests.cpu": "2", "limits.cpu": "1"}}, "status": {"used": {"pods": "9"}}}  # fmt: skip
    created = api.post(path, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["status"] == {}  # a client cannot set the status on create; empty as upstream serialises it
    assert created.headers.get("warning") == '299 - "ResourceQuota requests.cpu (2) should be less than limits.cpu (1)"'
    quota_obj = created.json()
    assert "generation" not in quota_obj["metadata"]
    # The status goes through /status only, and /status leaves the spec alone.
    status = {"hard": {"pods": "4"}, "used": {"pods": "1"}}
    written = api.put(f"{path}/compute/status", json={**quota_obj, "spec": {"hard": {"pods": "99"}}, "status": status})
    assert written.status_code == 200, written.text
    assert (written.json()["spec"]["hard"]["pods"], written.json()["status"]) == ("4", status)
    updated = api.put(f"{path}/compute", json={**written.json(), "spec": {"hard": {"pods": "5"}}, "status": {}})
    assert updated.status_code == 200, updated.text
    assert (updated.json()["spec"]["hard"], updated.json()["status"]) == ({"pods": "5"}, status)
    table = api.get(path, headers=TABLE).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Request", "Limit", "Age"]
    assert table["rows"][0]["cells"][:3] == ["compute", "pods: 1/4", ""]
    assert api.get(f"/api/v1/namespaces/{ns}/quota").status_code == 404  # "quota" is a short name for kubectl, not a path


def test_invalid_quotas_and_status_writes_are_refused_whole(api: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/resourcequotas"
    bad = api.post(path, json={"metadata": {"name": "bad"}, "spec": {"hard": {"count/pods": "1.5"}, "scopes": ["BestEffort", "NotBestEffort"]}})
    status = assert_status(bad, 422, "Invalid")
    assert sorted((c["field"], c["message"]) for c in status["details"]["causes"]) == [
        ("spec.hard[count/pods]", 'Invalid value: "1500m": must be an integer'),
        ("spec.scopes", 'Invalid value: ["BestEffort","NotBestEffort"]: conflicting scopes'),
    ]
    assert api.get(f"{path}/bad").status_code == 404
    good = api.post(path, json={"metadata": {"name": "good"}, "spec": {"hard": {"pods": "1"}, "scopes": ["Terminating"]}})
    assert good.status_code == 201, good.text
    rescoped = api.patch(f"{path}/good", json={"spec": {"scopes": ["NotTerminating"]}}, headers={"Content-Type": "application/merge-patch+json"})
    assert_status(rescoped, 422, "Invalid")
    garbled = api.patch(f"{path}/good/status", json={"status": {"hard": {"pods": "1"}, "used": {"pods": "-2"}}}, headers={"Content-Type": "application/merge-patch+json"})
    assert "status.used[pods]: Invalid value: \"-2\": must be greater than or equal to 0" in assert_status(garbled, 422, "Invalid")["message"]
    stored = api.get(f"{path}/good").json()
    assert (stored["spec"]["scopes"], stored["status"]) == (["Terminating"], {})
