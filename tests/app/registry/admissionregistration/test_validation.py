"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding validation as upstream's
pkg/apis/admissionregistration/validation words it: each case one invalid field of a valid object,
with the exact messages (field path, reason and detail), after the strategy's defaults."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from app.registry.admissionregistration import validatingadmissionpolicy, validatingadmissionpolicybinding
from app.registry.base import KindStrategy, RequestContext
from kube.features import FeatureGates, Gate
from kube.objects import Obj

RULE = {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["resourceslices"]}


def policy(**spec: Any) -> Obj:
    base = {"matchConstraints": {"resourceRules": [copy.deepcopy(RULE)]}, "validations": [{"expression": "object.spec.nodeName != ''"}]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": {**base, **spec}}


def binding(**spec: Any) -> Obj:
    base = {"policyName": "p", "validationActions": ["Deny"]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"}, "spec": {**base, **spec}}


def errors(strategy: KindStrategy, obj: Obj) -> list[str]:
    """What creating ``obj`` is refused for, as the generic store runs the hooks."""
    context = RequestContext(feature_gates=FeatureGates())
    strategy.prepare_for_create(obj, context)
    strategy.default(obj, context)
    return [str(e) for e in strategy.validate_create(obj, context)]


def rule(**fields: Any) -> dict[str, Any]:
    return {**RULE, **fields}


def test_valid_objects_are_defaulted_as_upstream() -> None:
    p = policy()
    assert errors(validatingadmissionpolicy.STRATEGY, p) == []
    assert p["spec"]["failurePolicy"] == "Fail"
    assert p["spec"]["matchConstraints"] == {
        "resourceRules": [{**RULE, "scope": "*"}],
        "matchPolicy": "Equivalent",
        "namespaceSelector": {},
        "objectSelector": {},
    }
    b = binding(matchResources={"excludeResourceRules": [dict(RULE)]})
    assert errors(validatingadmissionpolicybinding.STRATEGY, b) == []
    assert b["spec"]["matchResources"]["excludeResourceRules"][0]["scope"] == "*"
    assert b["spec"]["matchResources"]["matchPolicy"] == "Equivalent"


POLICY_CASES: list[tuple[str, Callable[[], Obj], list[str]]] = [
    ("no constraints", lambda: policy(matchConstraints=None), ["spec.matchConstraints: Required value"]),
    (
        "no rules",
        lambda: policy(matchConstraints={"namespaceSelector": {}}),
        ["spec.matchConstraints.resourceRules: Required value"],
    ),
    (
        "bad failure policy",
        lambda: policy(failurePolicy="Sometimes"),
        ['spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'],
    ),
    (
        "bad match policy",
        lambda: policy(matchConstraints={"resourceRules": [rule()], "matchPolicy": "Fuzzy"}),
        ['spec.matchConstraints.matchPolicy: Unsupported value: "Fuzzy": supported values: "Equivalent", "Exact"'],
    ),
    (
        "rule parts",
        lambda: policy(matchConstraints={"resourceRules": [{"operations": ["*", "CREATE", "PATCH"], "apiGroups": ["*", "apps"], "apiVersions": [""], "resources": [], "scope": "Everywhere"}]}),
        [
            "spec.matchConstraints.resourceRules[0].operations: Invalid value: [\"*\",\"CREATE\",\"PATCH\"]: if '*' is present, must not specify other operations",
            'spec.matchConstraints.resourceRules[0].operations[2]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
            "spec.matchConstraints.resourceRules[0].apiGroups: Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other API groups",
            "spec.matchConstraints.resourceRules[0].apiVersions[0]: Required value",
            "spec.matchConstraints.resourceRules[0].resources: Required value",
            'spec.matchConstraints.resourceRules[0].scope: Unsupported value: "Everywhere": supported values: "*", "Cluster", "Namespaced"',
        ],
    ),
    (
        "overlapping resources",
        lambda: policy(matchConstraints={"resourceRules": [rule(resources=["pods/*", "pods/status", "*/*"])]}),
        [
            "spec.matchConstraints.resourceRules[0].resources[1]: Invalid value: \"pods/status\": if 'pods/*' is present, must not specify pods/status",
            "spec.matchConstraints.resourceRules[0].resources: Invalid value: [\"pods/*\",\"pods/status\",\"*/*\"]: if '*/*' is present, must not specify other resources",
        ],
    ),
    (
        "resource names",
        lambda: policy(matchConstraints={"resourceRules": [rule(resourceNames=["a/b", "x", "x"])]}),
        [
            "spec.matchConstraints.resourceRules[0].resourceNames[0]: Invalid value: \"a/b\": may not contain '/'",
            'spec.matchConstraints.resourceRules[0].resourceNames[2]: Duplicate value: "x"',
        ],
    ),
    (
        "selectors",
        lambda: policy(
            matchConstraints={
                "resourceRules": [rule()],
                "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Exists", "values": ["x"]}]},
                "objectSelector": {"matchLabels": {"bad key!": "v"}},
            }
        ),
        [
            "spec.matchConstraints.namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "spec.matchConstraints.namespaceSelector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            "spec.matchConstraints.objectSelector.matchLabels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ],
    ),
    (
        "nothing to validate",
        lambda: policy(validations=[]),
        [
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
        ],
    ),
    (
        "expressions",
        lambda: policy(validations=[{"expression": " "}, {"expression": "object.x", "messageExpression": "1", "message": "a\nb", "reason": "Conflict"}]),
        [
            "spec.validations[0].expression: Required value: expression is not specified",
            'spec.validations[1].expression: Invalid value: "object.x": must evaluate to bool but got dyn',
            'spec.validations[1].messageExpression: Invalid value: "1": must evaluate to string but got int',
            'spec.validations[1].message: Invalid value: "a\\nb": must not contain line breaks',
            'spec.validations[1].reason: Unsupported value: "Conflict": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge"',
        ],
    ),
    (
        "a syntax error",
        lambda: policy(validations=[{"expression": "object.spec.nodeName =="}]),
        [
            'spec.validations[0].expression: Invalid value: "object.spec.nodeName ==": compilation failed: ERROR: <input>:1:24: Syntax error: '
            "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n"
            " | object.spec.nodeName ==\n"
            " | .......................^"
        ],
    ),
    (
        "match conditions",
        lambda: policy(matchConditions=[{"name": "a", "expression": "variables.x"}, {"name": "a", "expression": "true"}, {"name": "", "expression": ""}]),
        [
            "spec.matchConditions[0].expression: Invalid value: \"variables.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n"
            " | variables.x\n"
            " | ^",
            'spec.matchConditions[1].name: Duplicate value: "a"',
            "spec.matchConditions[2].expression: Required value",
            "spec.matchConditions[2].name: Required value",
        ],
    ),
    (
        "variables",
        lambda: policy(variables=[{"name": "1st", "expression": "1"}, {"name": "ok", "expression": ""}]),
        [
            'spec.variables[0].name: Invalid value: "1st": must be a valid CEL identifier',
            "spec.variables[1].expression: Required value: expression is not specified",
        ],
    ),
    (
        "param kind",
        lambda: policy(paramKind={"apiVersion": "Example.com/v1/x", "kind": "config_map"}),
        [
            'spec.paramKind.apiVersion: Invalid value: "Example.com/v1/x": unexpected GroupVersion string: Example.com/v1/x',
            "spec.paramKind.kind: Invalid value: \"config_map\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case "
            "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
            "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ],
    ),
    (
        "audit annotations",
        lambda: policy(validations=None, auditAnnotations=[{"key": "a b", "valueExpression": "object.x"}, {"key": "k", "valueExpression": "'v'"}, {"key": "k", "valueExpression": "1"}]),
        [
            'spec.auditAnnotations[0].key: Invalid value: "p/a b": name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start '
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            'spec.auditAnnotations[0].valueExpression: Invalid value: "object.x": must evaluate to one of [string null_type] but got dyn',
            'spec.auditAnnotations[2].valueExpression: Invalid value: "1": must evaluate to one of [string null_type] but got int',
            'spec.auditAnnotations[2].key: Duplicate value: "k"',
        ],
    ),
    (
        "a reserved name",
        lambda: {**policy(), "metadata": {"name": "p.static.k8s.io"}},
        ['metadata.name: Invalid value: "p.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API'],
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_policy_refusals(case: str, build: Callable[[], Obj], expected: list[str]) -> None:
    assert errors(validatingadmissionpolicy.STRATEGY, build()) == expected


BINDING_CASES: list[tuple[str, Callable[[], Obj], list[str]]] = [
    ("no policy", lambda: binding(policyName=""), ["spec.policyName: Required value"]),
    (
        "a policy name that is no name",
        lambda: binding(policyName="Not_A_Name"),
        [
            'spec.policyName: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', '
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ],
    ),
    ("no actions", lambda: binding(validationActions=[]), ["spec.validationActions: Required value: at least one validation action is required"]),
    (
        "bad actions",
        lambda: binding(validationActions=["Deny", "Warn", "Deny", "Log"]),
        [
            'spec.validationActions[2]: Duplicate value: "Deny"',
            'spec.validationActions[3]: Unsupported value: "Log": supported values: "Audit", "Deny", "Warn"',
            'spec.validationActions: Invalid value: ["Deny","Warn","Deny","Log"]: must not contain both Deny and Warn (repeating the same validation failure '
            "information in the API response and headers serves no purpose)",
        ],
    ),
    (
        "param ref with both",
        lambda: binding(paramRef={"name": "x", "selector": {}, "parameterNotFoundAction": "Ignore"}),
        [
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            'spec.paramRef.parameterNotFoundAction: Unsupported value: "Ignore": supported values: "Deny", "Allow"',
        ],
    ),
    (
        "param ref with neither",
        lambda: binding(paramRef={"namespace": "ns"}),
        ["spec.paramRef: Required value: one of name or selector must be specified", "spec.paramRef.parameterNotFoundAction: Required value"],
    ),
    (
        "match resources",
        lambda: binding(matchResources={"resourceRules": [rule(operations=[])]}),
        ["spec.matchResources.resourceRules[0].operations: Required value"],
    ),
]


@pytest.mark.parametrize(("case", "build", "expected"), BINDING_CASES, ids=[c[0] for c in BINDING_CASES])
def test_binding_refusals(case: str, build: Callable[[], Obj], expected: list[str]) -> None:
    assert errors(validatingadmissionpolicybinding.STRATEGY, build()) == expected


def test_unchanged_match_conditions_are_not_judged_again_on_update() -> None:
    context = RequestContext(feature_gates=FeatureGates())
    stored = policy(matchConditions=[{"name": "old", "expression": "object.legacy"}])
    changed = policy(matchConditions=[{"name": "old", "expression": "object.legacy"}], validations=[{"expression": "true"}])
    edited = policy(matchConditions=[{"name": "old", "expression": "object.other"}])
    for obj in (stored, changed, edited):
        validatingadmissionpolicy.STRATEGY.default(obj, context)
    assert validatingadmissionpolicy.STRATEGY.validate_update(changed, stored, context) == []
    assert [e.field for e in validatingadmissionpolicy.STRATEGY.validate_update(edited, stored, context)] == ["spec.matchConditions[0].expression"]


def test_a_reserved_name_is_only_a_warning_on_update() -> None:
    context = RequestContext(feature_gates=FeatureGates())
    reserved = {**binding(), "metadata": {"name": "b.static.k8s.io"}}
    assert validatingadmissionpolicybinding.STRATEGY.validate_update(reserved, reserved, context) == []
    assert context.warnings == ['metadata.name: names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API']
    off = RequestContext(feature_gates=FeatureGates({Gate.ManifestBasedAdmissionControlConfig: False}))
    assert validatingadmissionpolicybinding.STRATEGY.validate_create(reserved, off) == []
