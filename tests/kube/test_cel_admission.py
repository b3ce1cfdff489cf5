"""The CEL environment of admission policies (k8s.io/apiserver plugin/cel and cel/library/authz):
what each kind of expression may name, the result types upstream demands with its messages,
variables composed and evaluated lazily once, the authorizer library and the cost budgets."""

from __future__ import annotations

from typing import Any

import pytest

from kube.cel.admission import (
    BOOL_RESULT,
    CHECK_COST,
    MATCH_CONDITIONS_COST_BUDGET,
    REQUEST_RESOURCE_VARIABLE,
    RUNTIME_COST_BUDGET,
    STRING_OR_NULL_RESULT,
    STRING_RESULT,
    AuthorizerValue,
    AuthzAttributes,
    AuthzUser,
    BudgetExceeded,
    CompositionContext,
    PolicyCompiler,
    is_cel_identifier,
    namespace_object,
    request_resource_check,
)

# The variables of the policy upstream recommends for DRA drivers' kubelet plugins.
USER_NODE = "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')"
OBJECT_NODE = '(request.operation == "DELETE" ? oldObject : object).spec.?nodeName.orValue("")'
MESSAGE = (
    "\"this user running on node '\"+variables.userNodeName+\"' may not modify \" + "
    '(variables.objectNodeName == "" ?"cluster resourceslices" : "resourceslices on node \'"+variables.objectNodeName+"\'")'
)


class Authorizations:
    """An authorizer answering from a set of (user, verb, resource) it allows, recording the questions."""

    def __init__(self, allowed: set[tuple[str, str, str]]) -> None:
        self.allowed = allowed
        self.asked: list[AuthzAttributes] = []

    def __call__(self, attributes: AuthzAttributes) -> tuple[bool, str, str]:
        self.asked.append(attributes)
        ok = (attributes.user.name, attributes.verb, attributes.resource or attributes.path) in self.allowed
        return ok, "allowed by a test" if ok else "", ""


def _activation(
    obj: Any = None, old: Any = None, operation: str = "CREATE", extra: dict[str, list[str]] | None = None, authorize: Authorizations | None = None
) -> dict[str, Any]:
    user: dict[str, Any] = {"username": "system:serviceaccount:ns:plugin"}
    if extra:
        user["extra"] = extra
    authorizer = AuthorizerValue(AuthzUser(user["username"]), authorize or Authorizations(set()))
    return {
        "object": obj,
        "oldObject": old,
        "request": {"operation": operation, "userInfo": user, "name": "slice", "dryRun": False},
        "namespaceObject": None,
        "authorizer": authorizer,
        REQUEST_RESOURCE_VARIABLE: request_resource_check(authorizer, "resource.k8s.io", "resourceslices", "", "", "slice"),
    }


def _driver_policy() -> tuple[PolicyCompiler, dict[str, Any]]:
    compiler = PolicyCompiler(has_params=False)
    variables = {"userNodeName": compiler.compile_variable("userNodeName", USER_NODE), "objectNodeName": compiler.compile_variable("objectNodeName", OBJECT_NODE)}
    return compiler, variables


def test_variables_are_typed_by_what_they_give_and_messages_compile_against_them() -> None:
    compiler, variables = _driver_policy()
    assert [v.error for v in variables.values()] == ["", ""]
    assert str(compiler.variable_types["userNodeName"]) == "string"
    assert str(compiler.variable_types["objectNodeName"]) == "dyn"  # object is dyn at admission
    message = compiler.compile(MESSAGE, STRING_RESULT, authorizer=False)
    assert message.error == ""


def test_the_driver_policy_judges_the_node_of_the_user_against_the_node_of_the_slice() -> None:
    compiler, variables = _driver_policy()
    same = compiler.compile("variables.userNodeName == variables.objectNodeName", BOOL_RESULT)
    message = compiler.compile(MESSAGE, STRING_RESULT, authorizer=False)
    extra = {"authentication.kubernetes.io/node-name": ["node-a"]}

    other = CompositionContext(_activation({"spec": {"nodeName": "node-b"}}, extra=extra), variables, RUNTIME_COST_BUDGET)
    outcome = other.evaluate(same)
    assert outcome is not None and outcome.value is False
    text = other.evaluate(message)
    assert text is not None and text.value == "this user running on node 'node-a' may not modify resourceslices on node 'node-b'"

    deleted = CompositionContext(_activation(None, {"spec": {"nodeName": "node-a"}}, operation="DELETE", extra=extra), variables, RUNTIME_COST_BUDGET)
    outcome = deleted.evaluate(same)
    assert outcome is not None and outcome.value is True

    cluster = CompositionContext(_activation({"spec": {"allNodes": True}}, extra=extra), variables, RUNTIME_COST_BUDGET)
    text = cluster.evaluate(message)
    assert text is not None and text.value == "this user running on node 'node-a' may not modify cluster resourceslices"


def test_a_variable_that_fails_fails_every_expression_reading_it_with_upstreams_words() -> None:
    compiler, variables = _driver_policy()
    check = compiler.compile('variables.userNodeName != ""', BOOL_RESULT)
    # A user without extra has none in its UserInfo at all (omitempty), as upstream's request shows.
    context = CompositionContext(_activation({"spec": {}}), variables, RUNTIME_COST_BUDGET)
    outcome = context.evaluate(check)
    assert outcome is not None
    assert outcome.error == (
        "expression 'variables.userNodeName != \"\"' resulted in error: composited variable \"userNodeName\" fails to evaluate: no such key: extra"
    )


def test_variables_are_declared_in_order_and_match_conditions_do_not_see_them() -> None:
    compiler = PolicyCompiler(has_params=False)
    early = compiler.compile_variable("early", "variables.late + 1")
    compiler.compile_variable("late", "1")
    assert "undefined field 'late'" in early.error
    assert compiler.compile("variables.late > 0", BOOL_RESULT).error == ""
    hidden = compiler.compile("variables.late > 0", BOOL_RESULT, variables=False)
    assert "undeclared reference to 'variables'" in hidden.error


def test_result_types_are_upstreams_with_its_messages() -> None:
    compiler = PolicyCompiler(has_params=False)
    assert compiler.compile("object.spec.replicas", BOOL_RESULT).error == "must evaluate to bool but got dyn"
    assert compiler.compile("1", STRING_RESULT).error == "must evaluate to string but got int"
    assert compiler.compile("1", STRING_OR_NULL_RESULT).error == "must evaluate to one of [string null_type] but got int"
    assert compiler.compile("null", STRING_OR_NULL_RESULT).error == ""
    broken = compiler.compile("object.x ==", BOOL_RESULT)
    assert broken.error.startswith("compilation failed: ERROR: <input>:1:12: Syntax error:")


def test_params_are_declared_only_with_a_param_kind() -> None:
    assert "undeclared reference to 'params'" in PolicyCompiler(has_params=False).compile("params.x == 1", BOOL_RESULT).error
    assert PolicyCompiler(has_params=True).compile("params == null || params.data.max == '1'", BOOL_RESULT).error == ""


def test_messages_have_no_authorizer() -> None:
    compiler = PolicyCompiler(has_params=False)
    assert compiler.compile("authorizer.group('').resource('pods').check('get').allowed()", BOOL_RESULT).error == ""
    refused = compiler.compile("authorizer.path('/x').check('get').reason()", STRING_RESULT, authorizer=False)
    assert "undeclared reference to 'authorizer'" in refused.error


def test_the_authorizer_asks_the_servers_authorizers() -> None:
    compiler = PolicyCompiler(has_params=False)
    authorize = Authorizations({("system:serviceaccount:ns:plugin", "get", "pods"), ("system:serviceaccount:other:reader", "list", "nodes")})
    cases = {
        "authorizer.group('').resource('pods').namespace('ns').name('p').check('get').allowed()": True,
        "authorizer.group('').resource('pods').check('delete').allowed()": False,
        "authorizer.group('').resource('pods').check('get').reason()": "allowed by a test",
        "authorizer.group('').resource('pods').check('get').errored()": False,
        "authorizer.serviceAccount('other', 'reader').group('').resource('nodes').check('list').allowed()": True,
        "authorizer.requestResource.check('get').allowed()": False,
        "authorizer.path('/healthz').check('get').allowed()": False,
    }
    for expression, expected in cases.items():
        compiled = compiler.compile(expression, ())
        assert compiled.error == "", expression
        outcome = CompositionContext(_activation({}, authorize=authorize), {}, RUNTIME_COST_BUDGET).evaluate(compiled)
        assert outcome is not None and outcome.value == expected, expression
    first = authorize.asked[0]
    assert (first.verb, first.group, first.resource, first.namespace, first.name) == ("get", "", "pods", "ns", "p")
    account = next(a for a in authorize.asked if a.user.name == "system:serviceaccount:other:reader")
    assert account.user.groups == ("system:serviceaccounts", "system:serviceaccounts:other")
    request = next(a for a in authorize.asked if a.resource == "resourceslices")
    assert (request.group, request.name) == ("resource.k8s.io", "slice")
    path = authorize.asked[-1]
    assert (path.resource_request, path.path) == (False, "/healthz")


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("authorizer.path(' ').check('get').allowed()", "path must not be empty"),
        ("authorizer.group('').resource('').check('get').allowed()", "resource must not be empty"),
        ("authorizer.serviceAccount('ns', 'Bad_Name').group('').resource('pods').check('get').allowed()", "Invalid service account name"),
        ("authorizer.serviceAccount('Bad.NS', 'sa').group('').resource('pods').check('get').allowed()", "Invalid service account namespace"),
    ],
)
def test_the_authorizer_refuses_what_upstream_refuses(expression: str, error: str) -> None:
    compiled = PolicyCompiler(has_params=False).compile(expression, BOOL_RESULT)
    outcome = CompositionContext(_activation({}), {}, RUNTIME_COST_BUDGET).evaluate(compiled)
    assert outcome is not None and outcome.error == f"expression '{expression}' resulted in error: {error}"


def test_two_authorization_checks_fit_in_one_expression_three_do_not() -> None:
    compiler = PolicyCompiler(has_params=False)
    check = "authorizer.group('').resource('pods').check('get').allowed()"
    two = compiler.compile(f"{check} || !{check}", BOOL_RESULT)
    context = CompositionContext(_activation({}), {}, RUNTIME_COST_BUDGET)
    outcome = context.evaluate(two)
    assert outcome is not None and outcome.error == "" and RUNTIME_COST_BUDGET - context.remaining > 2 * CHECK_COST
    three = compiler.compile(f"{check} || {check} || !{check}", BOOL_RESULT)
    outcome = CompositionContext(_activation({}), {}, RUNTIME_COST_BUDGET).evaluate(three)
    assert outcome is not None and outcome.error.endswith("resulted in error: operation cancelled: actual cost limit exceeded")


def test_a_variable_is_evaluated_once_and_charged_to_the_expression_that_reads_it_first() -> None:
    compiler = PolicyCompiler(has_params=False)
    authorize = Authorizations({("system:serviceaccount:ns:plugin", "get", "pods")})
    variables = {"allowed": compiler.compile_variable("allowed", "authorizer.group('').resource('pods').check('get').allowed()")}
    reads = compiler.compile("variables.allowed", BOOL_RESULT)
    context = CompositionContext(_activation({}, authorize=authorize), variables, RUNTIME_COST_BUDGET)
    for _ in range(3):
        outcome = context.evaluate(reads)
        assert outcome is not None and outcome.value is True
    assert len(authorize.asked) == 1
    spent = RUNTIME_COST_BUDGET - context.remaining
    assert CHECK_COST < spent < 2 * CHECK_COST


def test_a_phase_stops_when_its_budget_is_spent() -> None:
    compiler = PolicyCompiler(has_params=False)
    check = compiler.compile("authorizer.group('').resource('pods').check('get').allowed() || true", BOOL_RESULT)
    context = CompositionContext(_activation({}), {}, MATCH_CONDITIONS_COST_BUDGET)
    spent = 0
    with pytest.raises(BudgetExceeded, match="validation failed due to running out of cost budget, no further validation rules will be run"):
        for _ in range(10):
            context.evaluate(check)
            spent += 1
    assert spent == MATCH_CONDITIONS_COST_BUDGET // CHECK_COST


def test_namespace_object_shows_upstreams_subset_of_the_namespace() -> None:
    namespace = {
        "metadata": {"name": "ns", "uid": "u", "labels": {"a": "b"}, "managedFields": [{}], "ownerReferences": [{}], "resourceVersion": "7"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert namespace_object(namespace) == {
        "metadata": {"name": "ns", "uid": "u", "labels": {"a": "b"}, "resourceVersion": "7"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert namespace_object(None) is None
    compiled = PolicyCompiler(has_params=False).compile("namespaceObject.metadata.labels['a'] == 'b'", BOOL_RESULT)
    outcome = CompositionContext({**_activation({}), "namespaceObject": namespace_object(namespace)}, {}, RUNTIME_COST_BUDGET).evaluate(compiled)
    assert outcome is not None and outcome.value is True


def test_variable_names_are_cel_identifiers() -> None:
    assert is_cel_identifier("userNodeName") and is_cel_identifier("_x1")
    assert not is_cel_identifier("1x") and not is_cel_identifier("a-b") and not is_cel_identifier("namespace") and not is_cel_identifier("")
