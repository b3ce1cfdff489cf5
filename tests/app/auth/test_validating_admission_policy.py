"""ValidatingAdmissionPolicy enforced on both backends (upstream's plugin/policy/validating): what a
denial answers, the actions of a binding, match conditions and selectors, params, the failure
policy, what an expression sees of a request, and that a policy or binding written is in force
for the next request.

Every policy here selects only its test's namespace or objects labelled for it, and is deleted
after the test: the shared server serves other tests in between.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import assert_status

GROUP = "/apis/admissionregistration.k8s.io/v1"
POLICIES = f"{GROUP}/validatingadmissionpolicies"
BINDINGS = f"{GROUP}/validatingadmissionpolicybindings"
CONFIGMAPS_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["configmaps"]}


class Policies:
    """Policies and bindings of one test, named after it, removed when it ends."""

    def __init__(self, api: httpx.Client, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.prefix = f"vap-{uuid.uuid4().hex[:6]}"
        self.made: list[str] = []

    def add(self, suffix: str, spec: dict[str, Any], actions: tuple[str, ...] = ("Deny",), binding: dict[str, Any] | None = None) -> str:
        """A policy (its constraints narrowed to the test's namespace unless given) and its binding."""
        name = f"{self.prefix}-{suffix}"
        spec = {"matchConstraints": {"resourceRules": [CONFIGMAPS_RULE]}, **spec}
        spec["matchConstraints"].setdefault("namespaceSelector", {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}})
        created = self.api.post(POLICIES, json={"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec})
        assert created.status_code == 201, created.text
        self.made.append(name)
        bound = {"policyName": name, "validationActions": list(actions), **(binding or {})}
        created = self.api.post(BINDINGS, json={"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": bound})
        assert created.status_code == 201, created.text
        return name

    def remove(self) -> None:
        for name in self.made:
            self.api.delete(f"{BINDINGS}/{name}")
            self.api.delete(f"{POLICIES}/{name}")


@pytest.fixture
def policies(api: httpx.Client, ns: str) -> Iterator[Policies]:
    made = Policies(api, ns)
    yield made
    made.remove()


def configmap(name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def create(api: httpx.Client, ns: str, obj: dict[str, Any], **params: str) -> httpx.Response:
    return api.post(f"/api/v1/namespaces/{ns}/configmaps", json=obj, params=params)


def test_a_denial_answers_upstreams_status(api: httpx.Client, ns: str, policies: Policies) -> None:
    name = policies.add(
        "size",
        {
            "validations": [
                {"expression": "size(object.data) <= 2", "messageExpression": "'at most 2 entries, not ' + string(size(object.data))"},
                {"expression": "!('secret' in object.data)", "message": "no secrets here", "reason": "Forbidden"},
                {"expression": "object.metadata.name != 'forbidden-name'"},
            ]
        },
    )
    assert create(api, ns, configmap("small", {"a": "1"})).status_code == 201
    refused = assert_status(create(api, ns, configmap("big", {"a": "1", "b": "2", "c": "3"})), 422, "Invalid")
    message = f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: at most 2 entries, not 3"
    assert refused["message"] == f'configmaps "big" is forbidden: {message}'
    assert refused["details"] == {"name": "big", "kind": "configmaps", "causes": [{"message": message}]}
    refused = assert_status(create(api, ns, configmap("s", {"secret": "x"})), 403, "Forbidden")
    assert refused["message"].endswith("denied request: no secrets here")
    refused = assert_status(create(api, ns, configmap("forbidden-name")), 422, "Invalid")
    assert refused["message"].endswith("denied request: failed expression: object.metadata.name != 'forbidden-name'")
    # Judged on dry runs too, and nothing refused is stored.
    assert_status(create(api, ns, configmap("dry", {"a": "", "b": "", "c": ""}), dryRun="All"), 422, "Invalid")
    assert api.get(f"/api/v1/namespaces/{ns}/configmaps/big").status_code == 404


def test_a_create_by_generate_name_is_named_by_the_generated_name(api: httpx.Client, ns: str, policies: Policies) -> None:
    # No name in the request (upstream leaves it out, so only has() can ask), the generated one in the object.
    policies.add("generated", {"validations": [{"expression": "!has(request.name) && object.metadata.name.startsWith('gen-')", "message": "judged"}]})
    obj = configmap("")
    obj["metadata"] = {"generateName": "other-"}
    refused = assert_status(create(api, ns, obj), 422, "Invalid")
    assert refused["message"].startswith('configmaps "other-') and refused["message"].endswith("denied request: judged")
    obj["metadata"] = {"generateName": "gen-"}
    assert create(api, ns, obj).status_code == 201


def test_warn_actions_are_warning_headers_on_every_verb(api: httpx.Client, ns: str, policies: Policies) -> None:
    name = policies.add("warn", {"validations": [{"expression": "request.operation == 'CREATE'", "messageExpression": "request.operation + ' is discouraged'"}]}, actions=("Warn",))
    created = create(api, ns, configmap("w"))
    assert created.status_code == 201 and "warning" not in created.headers
    updated = api.patch(f"/api/v1/namespaces/{ns}/configmaps/w", json={"data": {"a": "1"}}, headers={"Content-Type": "application/merge-patch+json"})
    assert updated.status_code == 200
    assert updated.headers["warning"] == f"299 - \"Validation failed for ValidatingAdmissionPolicy '{name}' with binding '{name}': UPDATE is discouraged\""
    deleted = api.delete(f"/api/v1/namespaces/{ns}/configmaps/w")
    assert deleted.status_code == 200
    assert deleted.headers["warning"].endswith(': DELETE is discouraged"')


def test_update_and_delete_see_the_old_object(api: httpx.Client, ns: str, policies: Policies) -> None:
    assert create(api, ns, configmap("kept", {"owner": "alice"}, {"protected": "true"})).status_code == 201
    assert create(api, ns, configmap("loose", {"owner": "bob"}, {"protected": "true"})).status_code == 201
    policies.add(
        "immutable",
        {
            "matchConstraints": {"resourceRules": [{**CONFIGMAPS_RULE, "operations": ["UPDATE", "DELETE"]}], "objectSelector": {"matchLabels": {"protected": "true"}}},
            "validations": [
                {"expression": "request.operation != 'UPDATE' || object.data.owner == oldObject.data.owner", "message": "the owner stays"},
                {"expression": "request.operation != 'DELETE' || (object == null && oldObject.data.owner != 'alice')", "message": "alice's stay"},
            ],
        },
    )
    path = f"/api/v1/namespaces/{ns}/configmaps"
    changed = api.patch(f"{path}/kept", json={"data": {"owner": "eve"}}, headers={"Content-Type": "application/merge-patch+json"})
    assert assert_status(changed, 422, "Invalid")["message"].endswith("denied request: the owner stays")
    refused = assert_status(api.delete(f"{path}/kept"), 422, "Invalid")
    assert refused["message"] == f'configmaps "kept" is forbidden: ValidatingAdmissionPolicy \'{policies.made[0]}\' with binding \'{policies.made[0]}\' denied request: alice\'s stay'
    # A deletecollection judges each object as its own delete would; the first refusal answers.
    refused = assert_status(api.delete(path, params={"labelSelector": "protected=true"}), 422, "Invalid")
    assert refused["message"].endswith("alice's stay")
    assert "kept" in [i["metadata"]["name"] for i in api.get(path).json()["items"]]


def test_match_conditions_select_requests_and_their_errors_follow_the_failure_policy(api: httpx.Client, ns: str, policies: Policies) -> None:
    conditions = [{"name": "labelled", "expression": "has(object.metadata.labels) && 'checked' in object.metadata.labels"}]
    policies.add("conditions", {"matchConditions": conditions, "validations": [{"expression": "false", "message": "checked and refused"}]})
    assert create(api, ns, configmap("unchecked")).status_code == 201
    assert assert_status(create(api, ns, configmap("checked", labels={"checked": ""})), 422, "Invalid")["message"].endswith("checked and refused")

    broken = [{"name": "broken", "expression": "object.data.missing == 'x'"}]
    name = policies.add("broken-fail", {"matchConditions": broken, "validations": [{"expression": "true"}]})
    refused = assert_status(create(api, ns, configmap("any")), 422, "Invalid")
    assert refused["message"] == (
        f"configmaps \"any\" is forbidden: ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: "
        "expression 'object.data.missing == 'x'' resulted in error: no such key: missing"
    )
    api.delete(f"{BINDINGS}/{name}")
    policies.add("broken-ignore", {"failurePolicy": "Ignore", "matchConditions": broken, "validations": [{"expression": "false"}]})
    assert create(api, ns, configmap("any")).status_code == 201


def test_runtime_errors_follow_the_failure_policy(api: httpx.Client, ns: str, policies: Policies) -> None:
    name = policies.add("fail", {"validations": [{"expression": "object.data.size == '1'"}]})
    refused = assert_status(create(api, ns, configmap("a", {"other": "x"})), 422, "Invalid")
    assert refused["message"].endswith(f"with binding '{name}' denied request: expression 'object.data.size == '1'' resulted in error: no such key: size")
    api.delete(f"{BINDINGS}/{name}")
    policies.add("ignore", {"failurePolicy": "Ignore", "validations": [{"expression": "object.data.size == '1'"}]})
    assert create(api, ns, configmap("a", {"other": "x"})).status_code == 201


def test_expressions_see_the_request_and_its_namespace(api: httpx.Client, ns: str, policies: Policies) -> None:
    checks = [
        f"request.namespace == '{ns}' && namespaceObject.metadata.name == '{ns}'",
        "namespaceObject.status.phase == 'Active' && namespaceObject.metadata.labels['kubernetes.io/metadata.name'] == request.namespace",
        "request.kind.group == '' && request.kind.version == 'v1' && request.kind.kind == 'ConfigMap'",
        "request.resource.resource == 'configmaps' && request.requestResource.resource == 'configmaps' && !has(request.subResource)",
        "request.name == 'seen' && request.operation == 'CREATE' && request.dryRun == false",
        "request.userInfo.username == 'system:anonymous' && 'system:unauthenticated' in request.userInfo.groups",
        "request.options.kind == 'CreateOptions' && request.options.fieldManager == 'tests'",
        "authorizer.group('').resource('configmaps').namespace(request.namespace).check('get').allowed()",
        "authorizer.requestResource.check('create').allowed()",
    ]
    policies.add("request", {"validations": [{"expression": check, "message": f"check {i}"} for i, check in enumerate(checks)]})
    created = create(api, ns, configmap("seen"), fieldManager="tests")
    assert created.status_code == 201, created.text
    # The same request as a dry run by another manager: two checks fail, the first answers.
    refused = assert_status(create(api, ns, configmap("seen"), fieldManager="other", dryRun="All"), 422, "Invalid")
    assert refused["message"].endswith("denied request: check 4")


def test_params_from_config_maps_by_name_and_selector(api: httpx.Client, ns: str, policies: Policies) -> None:
    limits = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "labels": {"role": "limits"}}, "data": {"max": "2"}}
    validation = {"expression": "size(object.data) <= int(params.data.max)", "messageExpression": "'at most ' + params.data.max + ' entries'"}
    spec: dict[str, Any] = {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        # The params are config maps too: they are not judged.
        "matchConstraints": {"resourceRules": [CONFIGMAPS_RULE], "objectSelector": {"matchExpressions": [{"key": "role", "operator": "DoesNotExist"}]}},
        "validations": [validation],
    }
    ref = {"name": "limits", "parameterNotFoundAction": "Deny"}
    name = policies.add("params", spec, binding={"paramRef": ref})
    # The param is looked up in the request's namespace: none yet, and the binding says Deny.
    refused = assert_status(create(api, ns, configmap("a")), 422, "Invalid")
    assert refused["message"] == (
        f"configmaps \"a\" is forbidden: ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: "
        "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    )
    assert create(api, ns, limits).status_code == 201
    assert create(api, ns, configmap("two", {"a": "", "b": ""})).status_code == 201
    assert assert_status(create(api, ns, configmap("three", {"a": "", "b": "", "c": ""})), 422, "Invalid")["message"].endswith("at most 2 entries")

    # A selector evaluates the policy once per param it selects.
    api.delete(f"{BINDINGS}/{name}")
    strict = {**limits, "metadata": {"name": "strict", "labels": {"role": "limits"}}, "data": {"max": "3"}}
    assert create(api, ns, strict).status_code == 201
    selected = {"selector": {"matchLabels": {"role": "limits"}}, "parameterNotFoundAction": "Allow"}
    policies.add("selected", {**spec, "validations": [{**validation, "messageExpression": "params.metadata.name + ': at most ' + params.data.max"}]}, binding={"paramRef": selected})
    assert assert_status(create(api, ns, configmap("three", {"a": "", "b": "", "c": ""})), 422, "Invalid")["message"].endswith("limits: at most 2")


def test_a_param_kind_not_served_denies_under_fail(api: httpx.Client, ns: str, policies: Policies) -> None:
    name = policies.add(
        "unknown",
        {"paramKind": {"apiVersion": "example.com/v1", "kind": "Limits"}, "validations": [{"expression": "true"}]},
        binding={"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}},
    )
    refused = assert_status(create(api, ns, configmap("a")), 422, "Invalid")
    assert refused["message"] == (
        f"configmaps \"a\" is forbidden: ValidatingAdmissionPolicy '{name}' denied request: "
        "failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Limits'"
    )


def test_equivalent_resources_are_judged_in_the_rules_version(api: httpx.Client, ns: str, policies: Policies) -> None:
    rule = {"apiGroups": ["events.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["events"]}
    checks = [
        {"expression": "object.note != 'forbidden'", "message": "noted"},
        {"expression": "request.kind.group == 'events.k8s.io' && request.requestKind.group == ''", "message": "kinds"},
    ]
    policies.add("events", {"matchConstraints": {"resourceRules": [rule]}, "validations": checks})
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": ns},
        "reason": "Tested",
        "message": "forbidden",
        "type": "Normal",
        "reportingComponent": "tests",
        "source": {"component": "tests"},
    }
    refused = assert_status(api.post(f"/api/v1/namespaces/{ns}/events", json=core), 422, "Invalid")
    assert refused["message"].endswith("denied request: noted")
    assert api.post(f"/api/v1/namespaces/{ns}/events", json={**core, "message": "fine"}).status_code == 201
    # matchPolicy Exact leaves the core version alone.
    policies.add("exact", {"matchConstraints": {"resourceRules": [rule], "matchPolicy": "Exact"}, "validations": [{"expression": "false"}]})
    assert api.post(f"/api/v1/namespaces/{ns}/events", json={**core, "metadata": {"name": "e2"}, "message": "fine"}).status_code == 201


def test_policies_take_effect_and_end_with_their_writes(api: httpx.Client, ns: str, policies: Policies) -> None:
    name = policies.add("now", {"validations": [{"expression": "false", "message": "not now"}]}, binding={"matchResources": {"objectSelector": {"matchLabels": {"judged": "yes"}}}})
    assert create(api, ns, configmap("free")).status_code == 201
    assert_status(create(api, ns, configmap("judged", labels={"judged": "yes"})), 422, "Invalid")
    assert api.delete(f"{BINDINGS}/{name}").status_code == 200
    assert create(api, ns, configmap("judged", labels={"judged": "yes"})).status_code == 201


def test_policies_never_judge_policies(api: httpx.Client, ns: str, policies: Policies) -> None:
    everything = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
    label = policies.prefix
    spec = {"matchConstraints": {"resourceRules": [everything], "objectSelector": {"matchLabels": {"judged": label}}}, "validations": [{"expression": "false"}]}
    policies.add("all", spec)
    assert_status(create(api, ns, configmap("c", labels={"judged": label})), 422, "Invalid")
    body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": f"{label}-free", "labels": {"judged": label}}, "spec": spec}
    assert api.post(POLICIES, json=body).status_code == 201
    policies.made.append(f"{label}-free")
