"""CEL as Kubernetes admission policies see it (k8s.io/apiserver's plugin/cel, policy/validating).

What an expression of a ValidatingAdmissionPolicy may name: ``object`` and ``oldObject`` (dyn
unless a type checker gives them a schema), ``request`` (kubernetes.AdmissionRequest),
``namespaceObject`` (a trimmed kubernetes.Namespace), ``params`` when the policy has a paramKind,
``authorizer`` and ``authorizer.requestResource`` where upstream declares them (not in a
messageExpression), and ``variables``: the policy's variables, each typed by what its expression
returns, declared to the expressions compiled after it (upstream's composited compiler).

The authorizer library (``authorizer.group(g).resource(r).check(verb).allowed()``...) calls back
into whoever evaluates: an ``Authorize`` function the server gives per evaluation.

``PolicyCompiler`` compiles one policy's expressions as upstream does (return types checked,
cel-go's messages); ``CompositionContext`` evaluates them against one request, with the variables
evaluated lazily, once, and charged to the budget of the expression that first reads them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.cel import (
    PER_CALL_LIMIT,
    CELCompileError,
    CELRuntimeError,
    Environment,
    Library,
    Program,
    kubernetes_environment,
)
from kube.cel.checker import Function
from kube.cel.cost import ONE, AstNode, CallEstimate, Estimate
from kube.cel.kubernetes import _dns_label, _dns_subdomain
from kube.cel.library import fn, ov
from kube.cel.types import (
    BOOL,
    DYN,
    INT,
    LIBRARY_TYPES,
    NULL,
    STRING,
    TIMESTAMP,
    EvalError,
    Type,
    list_of,
    map_of,
    struct,
    type_string,
)

# Upstream's budgets (k8s.io/apiserver/pkg/apis/cel): one expression, a policy's validations (and
# its audit annotations), its match conditions; and the longest message a messageExpression may give.
RUNTIME_COST_BUDGET = 10_000_000
MATCH_CONDITIONS_COST_BUDGET = 2_500_000
MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"

# --- the admission request and namespace (plugin/cel BuildRequestType, BuildNamespaceType) -------

GVK = struct("kubernetes.GroupVersionKind")
GVR = struct("kubernetes.GroupVersionResource")
USER_INFO = struct("kubernetes.UserInfo")
REQUEST = struct("kubernetes.AdmissionRequest")
NAMESPACE = struct("kubernetes.Namespace")
_NAMESPACE_SPEC = struct("kubernetes.NamespaceSpec")
_NAMESPACE_STATUS = struct("kubernetes.NamespaceStatus")
_NAMESPACE_CONDITION = struct("kubernetes.NamespaceCondition")
_NAMESPACE_METADATA = struct("kubernetes.NamespaceMetadata")
VARIABLES = "kubernetes.variables"

ADMISSION_STRUCTS: dict[str, dict[str, Type]] = {
    GVK.name: {"group": STRING, "version": STRING, "kind": STRING},
    GVR.name: {"group": STRING, "version": STRING, "resource": STRING},
    USER_INFO.name: {"username": STRING, "uid": STRING, "groups": list_of(STRING), "extra": map_of(STRING, list_of(STRING))},
    REQUEST.name: {
        "kind": GVK,
        "resource": GVR,
        "subResource": STRING,
        "requestKind": GVK,
        "requestResource": GVR,
        "requestSubResource": STRING,
        "name": STRING,
        "namespace": STRING,
        "operation": STRING,
        "userInfo": USER_INFO,
        "dryRun": BOOL,
        "options": DYN,
    },
    _NAMESPACE_SPEC.name: {"finalizers": list_of(STRING)},
    _NAMESPACE_CONDITION.name: {"status": STRING, "type": STRING, "lastTransitionTime": TIMESTAMP, "message": STRING, "reason": STRING},
    _NAMESPACE_STATUS.name: {"conditions": list_of(_NAMESPACE_CONDITION), "phase": STRING},
    _NAMESPACE_METADATA.name: {
        "name": STRING,
        "generateName": STRING,
        "namespace": STRING,
        "labels": map_of(STRING, STRING),
        "annotations": map_of(STRING, STRING),
        "UID": STRING,
        "creationTimestamp": TIMESTAMP,
        "deletionGracePeriodSeconds": INT,
        "deletionTimestamp": TIMESTAMP,
        "generation": INT,
        "resourceVersion": STRING,
        "finalizers": list_of(STRING),
    },
    NAMESPACE.name: {"metadata": _NAMESPACE_METADATA, "spec": _NAMESPACE_SPEC, "status": _NAMESPACE_STATUS},
}

# The metadata a namespaceObject shows (upstream's CreateNamespaceObject leaves out the rest).
_NAMESPACE_METADATA_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "finalizers",
)


def namespace_object(namespace: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``namespaceObject`` of a request in ``namespace`` (None: a cluster-scoped request)."""
    if namespace is None:
        return None
    metadata = namespace.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: metadata[k] for k in _NAMESPACE_METADATA_FIELDS if metadata.get(k) not in (None, "", [], {})}}
    out["spec"] = namespace.get("spec") or {}
    out["status"] = namespace.get("status") or {}
    return out


# --- the authorizer library (k8s.io/apiserver/pkg/cel/library/authz.go) --------------------------

AUTHORIZER = struct("kubernetes.authorization.Authorizer")
PATH_CHECK = struct("kubernetes.authorization.PathCheck")
GROUP_CHECK = struct("kubernetes.authorization.GroupCheck")
RESOURCE_CHECK = struct("kubernetes.authorization.ResourceCheck")
DECISION = struct("kubernetes.authorization.Decision")
AUTHORIZER_VARIABLE = "authorizer"
REQUEST_RESOURCE_VARIABLE = "authorizer.requestResource"
# A check costs this much: two fit in one expression's limit.
CHECK_COST = 350_000


@dataclass(frozen=True)
class AuthzUser:
    """Who a check is about: the requester, or the service account ``serviceAccount()`` names."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class AuthzAttributes:
    """One authorization question, as upstream's AttributesRecord asks it."""

    user: AuthzUser
    verb: str
    resource_request: bool
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    field_selector: str = ""
    label_selector: str = ""


# (attributes) -> (allowed, reason, error): the server's authorizers answer it.
Authorize = Callable[[AuthzAttributes], tuple[bool, str, str]]


class AuthorizerValue:
    """``authorizer``: checks on behalf of one user."""

    __slots__ = ("authorize", "user")
    go_type_name = "library.authorizerVal"

    def __init__(self, user: AuthzUser, authorize: Authorize) -> None:
        self.user = user
        self.authorize = authorize


@dataclass(frozen=True)
class PathCheck:
    authorizer: AuthorizerValue
    path: str
    go_type_name = "library.pathCheckVal"


@dataclass(frozen=True)
class GroupCheck:
    authorizer: AuthorizerValue
    group: str
    go_type_name = "library.groupCheckVal"


@dataclass(frozen=True)
class ResourceCheck:
    authorizer: AuthorizerValue
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    field_selector: str = ""
    label_selector: str = ""
    go_type_name = "library.resourceCheckVal"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    error: str
    go_type_name = "library.decisionVal"


# The authorizer's types have no fields to select.
ADMISSION_STRUCTS.update({t.name: {} for t in (AUTHORIZER, PATH_CHECK, GROUP_CHECK, RESOURCE_CHECK, DECISION)})
LIBRARY_TYPES.update({AuthorizerValue: AUTHORIZER, PathCheck: PATH_CHECK, GroupCheck: GROUP_CHECK, ResourceCheck: RESOURCE_CHECK, Decision: DECISION})


def request_resource_check(authorizer: AuthorizerValue, group: str, resource: str, subresource: str, namespace: str, name: str) -> ResourceCheck:
    """``authorizer.requestResource``: a check of the resource the request is about."""
    return ResourceCheck(authorizer, group, resource, subresource, namespace, name)


def _path(a: AuthorizerValue, path: str) -> PathCheck:
    if not path.strip():
        raise EvalError("path must not be empty")
    return PathCheck(a, path)


def _resource(g: GroupCheck, resource: str) -> ResourceCheck:
    if not resource.strip():
        raise EvalError("resource must not be empty")
    return ResourceCheck(g.authorizer, g.group, resource)


def _service_account(a: AuthorizerValue, namespace: str, name: str) -> AuthorizerValue:
    if _dns_subdomain(False)(name):
        raise EvalError("Invalid service account name")
    if _dns_label(False, False)(namespace):
        raise EvalError("Invalid service account namespace")
    user = AuthzUser(f"system:serviceaccount:{namespace}:{name}", groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))
    return AuthorizerValue(user, a.authorize)


def _decide(authorizer: AuthorizerValue, attributes: AuthzAttributes) -> Decision:
    allowed, reason, error = authorizer.authorize(attributes)
    return Decision(allowed, reason, error)


def _path_check(p: PathCheck, verb: str) -> Decision:
    return _decide(p.authorizer, AuthzAttributes(p.authorizer.user, verb, False, path=p.path))


def _resource_check(r: ResourceCheck, verb: str) -> Decision:
    attributes = AuthzAttributes(
        r.authorizer.user, verb, True, r.group, r.resource, r.subresource, r.namespace, r.name, field_selector=r.field_selector, label_selector=r.label_selector
    )
    return _decide(r.authorizer, attributes)


def _selector_cost(length: int) -> int:
    """A selector's parse: a list, a scan of the text and a struct and list per requirement."""
    parse = -(-length // 10)  # ceil(length * 0.1)
    requirements = -(-length // 2)  # ceil(length * 0.5)
    return 10 + parse + requirements * 50


def authz_library() -> Library:
    """The authorizer library and the field/label selector additions, with Kubernetes' costs."""
    functions: list[Function] = [
        fn("path", ov("authorizer_path", (AUTHORIZER, STRING), PATH_CHECK, _path, member=True)),
        fn("group", ov("authorizer_group", (AUTHORIZER, STRING), GROUP_CHECK, lambda a, g: GroupCheck(a, g), member=True)),
        fn("serviceAccount", ov("authorizer_serviceaccount", (AUTHORIZER, STRING, STRING), AUTHORIZER, _service_account, member=True)),
        fn("resource", ov("groupcheck_resource", (GROUP_CHECK, STRING), RESOURCE_CHECK, _resource, member=True)),
        fn("subresource", ov("resourcecheck_subresource", (RESOURCE_CHECK, STRING), RESOURCE_CHECK, lambda r, v: dataclasses.replace(r, subresource=v), member=True)),
        fn("namespace", ov("resourcecheck_namespace", (RESOURCE_CHECK, STRING), RESOURCE_CHECK, lambda r, v: dataclasses.replace(r, namespace=v), member=True)),
        fn("name", ov("resourcecheck_name", (RESOURCE_CHECK, STRING), RESOURCE_CHECK, lambda r, v: dataclasses.replace(r, name=v), member=True)),
        fn(
            "check",
            ov("pathcheck_check", (PATH_CHECK, STRING), DECISION, _path_check, member=True),
            ov("resourcecheck_check", (RESOURCE_CHECK, STRING), DECISION, _resource_check, member=True),
        ),
        fn("errored", ov("decision_errored", (DECISION,), BOOL, lambda d: bool(d.error), member=True)),
        fn("error", ov("decision_error", (DECISION,), STRING, lambda d: d.error, member=True)),
        fn("allowed", ov("decision_allowed", (DECISION,), BOOL, lambda d: d.allowed, member=True)),
        fn("reason", ov("decision_reason", (DECISION,), STRING, lambda d: d.reason, member=True)),
        fn("fieldSelector", ov("authorizer_fieldselector", (RESOURCE_CHECK, STRING), RESOURCE_CHECK, lambda r, v: dataclasses.replace(r, field_selector=v), member=True)),
        fn("labelSelector", ov("authorizer_labelselector", (RESOURCE_CHECK, STRING), RESOURCE_CHECK, lambda r, v: dataclasses.replace(r, label_selector=v), member=True)),
    ]
    nominal = [o.id for f in functions for o in f.overloads if f.name not in ("check", "fieldSelector", "labelSelector")]
    costs: dict[str, Callable[[list[Any], Any], int]] = {o: (lambda args, result: 1) for o in nominal}
    costs["pathcheck_check"] = costs["resourcecheck_check"] = lambda args, result: CHECK_COST
    costs["authorizer_fieldselector"] = costs["authorizer_labelselector"] = lambda args, result: _selector_cost(len(args[1]))

    def nominal_estimate(function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Callable[[AstNode], Estimate]) -> CallEstimate:
        return CallEstimate(ONE)

    def check_estimate(function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Callable[[AstNode], Estimate]) -> CallEstimate:
        return CallEstimate(Estimate(CHECK_COST, CHECK_COST))

    def selector_estimate(function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Callable[[AstNode], Estimate]) -> CallEstimate:
        length = size(args[0]) if args else ONE
        return CallEstimate(Estimate(_selector_cost(length.min), _selector_cost(length.max)))

    estimators: dict[str, Any] = {o: nominal_estimate for o in nominal}
    estimators["pathcheck_check"] = estimators["resourcecheck_check"] = check_estimate
    estimators["authorizer_fieldselector"] = estimators["authorizer_labelselector"] = selector_estimate
    return Library(functions=functions, overload_estimators=estimators, overload_costs=costs)


@functools.cache
def base_environment() -> Environment:
    """Kubernetes' base environment with the authorizer library and the admission types declared
    (no variables yet: ``PolicyCompiler`` declares them per expression kind)."""
    return kubernetes_environment(structs=ADMISSION_STRUCTS, extra=[authz_library()], cost_limit=PER_CALL_LIMIT)


# --- compiling a policy ----------------------------------------------------------------------------

BOOL_RESULT: tuple[Type, ...] = (BOOL,)
STRING_RESULT: tuple[Type, ...] = (STRING,)
STRING_OR_NULL_RESULT: tuple[Type, ...] = (STRING, NULL)
ANY_RESULT: tuple[Type, ...] = ()  # variables: whatever the expression gives

_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_RESERVED = frozenset(
    ["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"]
)


def is_cel_identifier(name: str) -> bool:
    """Whether a variable name can be written after ``variables.`` (upstream's isCELIdentifier)."""
    return bool(_IDENTIFIER.match(name)) and name not in _RESERVED


@dataclass
class Compiled:
    """One compiled expression, or why it did not compile (``error``: upstream's detail, of kind
    "invalid" or "internal")."""

    expression: str
    program: Program | None = None
    error: str = ""
    error_kind: str = "invalid"
    output_type: Type = DYN


class PolicyCompiler:
    """Compiles the expressions of one policy in upstream's environments: variables first (each
    declared, with the type it gives, to what is compiled after it), then match conditions (no
    variables), validations, message expressions (no authorizer) and audit annotations.

    ``object_type`` and ``params_type`` are dyn for admission; a type checker gives the schema's
    types (declared with ``structs``)."""

    def __init__(
        self,
        has_params: bool,
        object_type: Type = DYN,
        params_type: Type = DYN,
        structs: Mapping[str, Mapping[str, Type]] | None = None,
        *,
        request_resource: bool = True,
    ) -> None:
        self.has_params = has_params
        self.variable_types: dict[str, Type] = {}
        declared: dict[str, Type] = {"object": object_type, "oldObject": object_type, "namespaceObject": NAMESPACE, "request": REQUEST}
        if has_params:
            declared["params"] = params_type
        self._base = base_environment().extend(declared, structs)
        authorizer: dict[str, Type] = {AUTHORIZER_VARIABLE: AUTHORIZER}
        if request_resource:  # upstream's type checker leaves it out
            authorizer[REQUEST_RESOURCE_VARIABLE] = RESOURCE_CHECK
        self._with_authorizer = self._base.extend(authorizer)

    def environment(self, authorizer: bool, variables: bool) -> Environment:
        env = self._with_authorizer if authorizer else self._base
        if not variables:
            return env
        return env.extend({"variables": struct(VARIABLES)}, {VARIABLES: self.variable_types})

    def compile(self, expression: str, results: tuple[Type, ...], *, authorizer: bool = True, variables: bool = True) -> Compiled:
        """Compile as upstream's CompileCELExpression: cel-go's issues, then the result type."""
        env = self.environment(authorizer, variables)
        try:
            program = env.compile(expression)
        except CELCompileError as exc:
            return Compiled(expression, error=str(exc), error_kind="internal" if exc.kind == "internal" else "invalid")
        output = program.output_type
        if results and output not in results:
            if len(results) == 1:
                reason = f"must evaluate to {type_string(results[0])} but got {type_string(output)}"
            else:
                reason = f"must evaluate to one of [{' '.join(type_string(t) for t in results)}] but got {type_string(output)}"
            return Compiled(expression, error=reason, output_type=output)
        return Compiled(expression, program, output_type=output)

    def compile_variable(self, name: str, expression: str) -> Compiled:
        """Compile a variable and declare it (dyn when it did not compile) to what follows."""
        compiled = self.compile(expression, ANY_RESULT)
        self.variable_types[name] = compiled.output_type if compiled.program is not None else DYN
        return compiled


# --- evaluating ------------------------------------------------------------------------------------


class BudgetExceeded(Exception):
    """The expressions of one phase went over its budget: none after it run."""

    def __init__(self) -> None:
        super().__init__(OUT_OF_BUDGET)


@dataclass
class Evaluation:
    """One expression's outcome: its value, or upstream's error text."""

    value: Any = None
    error: str = ""


class _LazyVariables(dict[str, Any]):
    """``variables``: each evaluated when first read, once per phase, its cost charged to the
    phase (upstream's lazy map on a composition context)."""

    cel_type_name = VARIABLES

    def __init__(self, context: CompositionContext, activation: Mapping[str, Any]) -> None:
        super().__init__()
        self._context = context
        self._activation = activation
        self._failed: dict[str, str] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._context.variables

    def __missing__(self, name: str) -> Any:
        compiled = self._context.variables.get(name)
        if compiled is None:
            raise KeyError(name)
        failure = self._failed.get(name)
        if failure is None:
            if compiled.program is None:
                failure = f'composited variable "{name}" fails to compile: {compiled.error}'
            else:
                try:
                    value, cost = compiled.program.evaluate_with_cost(self._activation)
                except CELRuntimeError as exc:
                    self._context.cost += exc.cost
                    failure = f'composited variable "{name}" fails to evaluate: {exc.detail}'
                else:
                    self._context.cost += cost
                    self[name] = value
                    return value
            self._failed[name] = failure
        raise EvalError(failure)


class CompositionContext:
    """Evaluates expressions of one phase against one request within a budget."""

    def __init__(self, activation: dict[str, Any], variables: Mapping[str, Compiled], budget: int) -> None:
        self.variables = variables
        self.cost = 0  # what variables cost since the last expression
        self.remaining = budget
        self.activation = dict(activation)
        self.activation["variables"] = _LazyVariables(self, self.activation)

    def evaluate(self, compiled: Compiled | None) -> Evaluation | None:
        """One expression's outcome (None for a placeholder); raises BudgetExceeded."""
        if compiled is None:
            return None
        if compiled.program is None:
            return Evaluation(error=f"compilation error: {compiled.error}")
        self.cost = 0
        error = ""
        value: Any = None
        try:
            value, cost = compiled.program.evaluate_with_cost(self.activation)
        except CELRuntimeError as exc:
            cost, error = exc.cost, exc.detail
        for spent in (self.cost, cost):
            if spent > self.remaining:
                raise BudgetExceeded()
            self.remaining -= spent
        if error:
            return Evaluation(error=f"expression '{compiled.expression}' resulted in error: {error}")
        return Evaluation(value)
