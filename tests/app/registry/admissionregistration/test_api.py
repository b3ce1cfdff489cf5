"""ValidatingAdmissionPolicy and its binding over HTTP on both backends: what is stored (defaults,
an empty status, generations), the type checker's status, the tables kubectl prints, the
status subresource, and refusals that store nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import assert_status

GROUP = "/apis/admissionregistration.k8s.io/v1"
POLICIES = f"{GROUP}/validatingadmissionpolicies"
BINDINGS = f"{GROUP}/validatingadmissionpolicybindings"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def policy(name: str, **spec: Any) -> dict[str, Any]:
    rules = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["replicasets"]}]
    base = {"matchConstraints": {"resourceRules": rules}, "validations": [{"expression": "object.spec.replicas < 10"}]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": {**base, **spec}}


def binding(name: str, policy_name: str, **spec: Any) -> dict[str, Any]:
    base = {"policyName": policy_name, "validationActions": ["Deny"]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": {**base, **spec}}


@pytest.fixture
def name(api: httpx.Client) -> Iterator[str]:
    """A name for this test's policy and binding, both deleted afterwards."""
    name = f"vap-{uuid.uuid4().hex[:8]}"
    yield name
    api.delete(f"{BINDINGS}/{name}")
    api.delete(f"{POLICIES}/{name}")


def type_checked(api: httpx.Client, name: str, generation: int = 1) -> dict[str, Any]:
    """The policy once the server has type-checked this generation (bounded wait)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        current: dict[str, Any] = api.get(f"{POLICIES}/{name}").json()
        if (current.get("status") or {}).get("observedGeneration") == generation:
            return current
        time.sleep(0.05)
    raise AssertionError(f"policy {name} generation {generation} was not type-checked")


def test_a_policy_is_stored_with_upstreams_defaults_and_type_checked(api: httpx.Client, name: str) -> None:
    created = api.post(POLICIES, json=policy(name))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == {} and body["metadata"]["generation"] == 1
    assert body["spec"]["failurePolicy"] == "Fail"
    assert body["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert body["spec"]["matchConstraints"]["resourceRules"][0]["scope"] == "*"
    checked = type_checked(api, name)
    assert checked["status"] == {"observedGeneration": 1, "typeChecking": {}}

    # A spec change is a new generation, checked again: a misspelled field is a warning per kind.
    checked["spec"]["validations"] = [{"expression": "object.spec.replicaz < 10", "messageExpression": "'too many: ' + object.spec.replicas"}]
    updated = api.put(f"{POLICIES}/{name}", json=checked)
    assert updated.status_code == 200, updated.text
    assert updated.json()["metadata"]["generation"] == 2
    warnings = type_checked(api, name, 2)["status"]["typeChecking"]["expressionWarnings"]
    assert warnings == [
        {
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=ReplicaSet: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz < 10\n | ...........^\n",
        },
        {
            "fieldRef": "spec.validations[0].messageExpression",
            "warning": "apps/v1, Kind=ReplicaSet: ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(string, int)'\n"
            " | 'too many: ' + object.spec.replicas\n | .............^\n",
        },
    ]


def test_updates_need_a_resource_version_and_status_writes_keep_the_spec(api: httpx.Client, name: str) -> None:
    assert api.post(POLICIES, json=policy(name)).status_code == 201
    current = type_checked(api, name)
    unconditional = {**current, "metadata": {k: v for k, v in current["metadata"].items() if k != "resourceVersion"}}
    refused = assert_status(api.put(f"{POLICIES}/{name}", json=unconditional), 422, "Invalid")
    assert refused["message"] == f'ValidatingAdmissionPolicy.admissionregistration.k8s.io "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update'

    status = {**current, "spec": {**current["spec"], "validations": [{"expression": "true"}]}, "status": {"observedGeneration": 1, "typeChecking": {"expressionWarnings": [{"fieldRef": "spec.x", "warning": "w"}]}}}
    written = api.put(f"{POLICIES}/{name}/status", json=status)
    assert written.status_code == 200, written.text
    assert written.json()["spec"] == current["spec"]
    assert written.json()["status"]["typeChecking"] == {"expressionWarnings": [{"fieldRef": "spec.x", "warning": "w"}]}
    bad = {**written.json(), "status": {"typeChecking": {"expressionWarnings": [{"fieldRef": " "}]}}}
    refused = assert_status(api.put(f"{POLICIES}/{name}/status", json=bad), 422, "Invalid")
    assert [c["field"] for c in refused["details"]["causes"]] == ["status.typeChecking.expressionWarnings[0].warning", "status.typeChecking.expressionWarnings[0].fieldRef"]


def test_a_policy_whose_cel_does_not_compile_is_refused_and_not_stored(api: httpx.Client, name: str) -> None:
    body = policy(name, variables=[{"name": "replicas", "expression": "object.spec.replicas +"}], validations=[{"expression": "variables.replicas"}])
    refused = assert_status(api.post(POLICIES, json=body), 422, "Invalid")
    assert refused["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"object.spec.replicas +\": compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting "
            "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.spec.replicas +\n | ......................^",
            "field": "spec.variables[0].expression",
        },
        # A variable that does not compile is dyn for what follows, and a validation must be a bool.
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "variables.replicas": must evaluate to bool but got dyn', "field": "spec.validations[0].expression"},
    ]
    assert api.get(f"{POLICIES}/{name}").status_code == 404


def test_tables_show_validations_param_kind_policy_and_param_ref(api: httpx.Client, name: str) -> None:
    assert api.post(POLICIES, json=policy(name, paramKind={"apiVersion": "v1", "kind": "ConfigMap"})).status_code == 201
    table = api.get(f"{POLICIES}/{name}", headers=TABLE).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Validations", "ParamKind", "Age"]
    assert table["rows"][0]["cells"][:3] == [name, 1, "v1/ConfigMap"]
    selected = binding(name, name, paramRef={"selector": {"matchLabels": {"role": "limits"}}, "parameterNotFoundAction": "Deny"})
    assert api.post(BINDINGS, json=selected).status_code == 201
    table = api.get(f"{BINDINGS}/{name}", headers=TABLE).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "PolicyName", "ParamRef", "Age"]
    assert table["rows"][0]["cells"][:3] == [name, name, "&LabelSelector{MatchLabels:map[string]string{role: limits,},MatchExpressions:[]LabelSelectorRequirement{},}"]


def test_a_binding_may_name_a_policy_that_does_not_exist_yet(api: httpx.Client, name: str) -> None:
    created = api.post(BINDINGS, json=binding(name, f"{name}-later"))
    assert created.status_code == 201, created.text
    assert created.json()["metadata"]["generation"] == 1 and "status" not in created.json()
    refused = assert_status(api.post(BINDINGS, json=binding(f"{name}-x", name, validationActions=["Deny", "Warn"])), 422, "Invalid")
    assert refused["details"]["causes"][0]["field"] == "spec.validationActions"
    assert api.get(f"{BINDINGS}/{name}-x").status_code == 404


def test_discovery_lists_both_kinds_in_api_extensions(api: httpx.Client) -> None:
    resources = {r["name"]: r for r in api.get(GROUP).json()["resources"]}
    assert resources["validatingadmissionpolicies"]["categories"] == ["api-extensions"]
    assert resources["validatingadmissionpolicies"]["namespaced"] is False
    assert resources["validatingadmissionpolicies/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["validatingadmissionpolicybindings"]["kind"] == "ValidatingAdmissionPolicyBinding"
