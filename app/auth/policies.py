"""ValidatingAdmissionPolicy: writes judged by the CEL policies users bind (k8s.io/apiserver's
plugin/policy/validating, on plugin/policy/generic and plugin/policy/matching).

Policies and bindings follow storage synchronously (``Storage.follow``), like the RBAC index: a
policy or binding written is in force for the next request, where upstream's informers take up to
a second. A change marks the set stale; the next write that needs it regroups bindings by policy
and indexes them by the resources their rules name, and a policy's expressions are compiled once
per resourceVersion. So a write no policy can match costs a dictionary look-up, and a server with
no bindings costs one test.

What a request's evaluation reads comes from the same storage at that moment: the namespace
(``namespaceObject``, namespace selectors) and the params a binding's paramRef names, of any kind
this server serves. Policies never judge writes of policies and bindings themselves, nor the
server's own work (only requests reach admission).

A denial is upstream's: ``<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>'
with binding '<binding>' denied request: <message>``, code and reason from the validation's
``reason`` (422 Invalid by default). Warn actions become Warning headers, Audit actions and
auditAnnotations annotations of the request's audit event.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.auth.admission import AdmissionRequest
from app.auth.attributes import Attributes
from app.auth.authorizers import ALLOW, Authorizer
from app.auth.policymatching import (
    GroupVersionKind,
    GroupVersionResource,
    MatchResources,
    Target,
    matches,
    rule_resources,
)
from app.auth.rbac import aggregate_errors
from app.auth.user import UserInfo
from app.registry import lookup, lookup_kind, served_kinds
from app.registry.admissionregistration.common import BINDINGS, GROUP, POLICIES
from app.registry.base import KindStrategy
from app.storage.storage import Storage
from kube.cel.admission import (
    BOOL_RESULT,
    MATCH_CONDITIONS_COST_BUDGET,
    MAX_MESSAGE_EXPRESSION_BYTES,
    REQUEST_RESOURCE_VARIABLE,
    RUNTIME_COST_BUDGET,
    STRING_OR_NULL_RESULT,
    STRING_RESULT,
    AuthorizerValue,
    AuthzAttributes,
    AuthzUser,
    BudgetExceeded,
    Compiled,
    CompositionContext,
    PolicyCompiler,
    namespace_object,
    request_resource_check,
)
from kube.cel.types import type_name
from kube.errors import ApiError, not_found
from kube.labels import selector_from_label_selector_object

log = logging.getLogger("app.auth")

POLICY_STORAGE = f"{POLICIES}.{GROUP}"
BINDING_STORAGE = f"{BINDINGS}.{GROUP}"
# Writes of admission configuration are never judged by policies from the API (upstream's rule:
# a bad policy must not lock its own repair out).
EXEMPT = frozenset(
    (GROUP, resource)
    for resource in (POLICIES, BINDINGS, "mutatingadmissionpolicies", "mutatingadmissionpolicybindings")
)
VALIDATION_FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
MAX_VALIDATION_FAILURES = 50
MAX_AUDIT_ANNOTATION_VALUE = 10 * 1024
_REASON_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


# --- a policy, compiled -------------------------------------------------------------------------------


@dataclass
class CompiledPolicy:
    """One policy's expressions, compiled as upstream's compilePolicy does."""

    failure_policy: str
    variables: dict[str, Compiled]
    match_conditions: list[tuple[str, Compiled]]
    validations: list[tuple[Mapping[str, Any], Compiled, Compiled | None]]
    audit_annotations: list[tuple[str, Compiled]]

    @classmethod
    def of(cls, policy: Mapping[str, Any]) -> CompiledPolicy:
        spec = policy.get("spec") or {}
        compiler = PolicyCompiler(has_params=spec.get("paramKind") is not None)
        variables: dict[str, Compiled] = {}
        for variable in spec.get("variables") or ():
            name = str(variable.get("name") or "")
            variables[name] = compiler.compile_variable(name, str(variable.get("expression") or ""))
        return cls(
            failure_policy=str(spec.get("failurePolicy") or "Fail"),
            variables=variables,
            match_conditions=[
                (str(c.get("name") or ""), compiler.compile(str(c.get("expression") or ""), BOOL_RESULT)) for c in spec.get("matchConditions") or ()
            ],
            validations=[
                (
                    v,
                    compiler.compile(str(v.get("expression") or ""), BOOL_RESULT),
                    compiler.compile(str(v["messageExpression"]), STRING_RESULT, authorizer=False) if v.get("messageExpression") else None,
                )
                for v in spec.get("validations") or ()
            ],
            audit_annotations=[
                (str(a.get("key") or ""), compiler.compile(str(a.get("valueExpression") or ""), STRING_OR_NULL_RESULT)) for a in spec.get("auditAnnotations") or ()
            ],
        )


@dataclass
class PolicyDecision:
    """What one validation (or a policy's configuration) decided: ``deny`` or ``admit``, and
    whether it came from an evaluation, a failed one (``error``) or a denial."""

    action: str
    evaluation: str = ""
    message: str = ""
    reason: str = ""


@dataclass
class AuditAnnotationResult:
    key: str
    action: str  # publish, exclude or error
    value: str = ""
    error: str = ""


def _error_decision(failure_policy: str, message: str) -> PolicyDecision:
    return PolicyDecision("admit" if failure_policy == "Ignore" else "deny", "error", message)


@dataclass
class Inputs:
    """What the expressions of one policy see for one request and one param."""

    obj: Any
    old: Any
    request: dict[str, Any]
    match_request: dict[str, Any]
    namespace: Mapping[str, Any] | None
    params: Any
    has_params: bool
    authorizer: AuthorizerValue
    request_resource: Any

    def activation(self, authorizer: bool, namespace: Any, request: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"object": self.obj, "oldObject": self.old, "request": request or self.request, "namespaceObject": namespace}
        if self.has_params:
            out["params"] = self.params
        if authorizer:
            out["authorizer"] = self.authorizer
            out[REQUEST_RESOURCE_VARIABLE] = self.request_resource
        return out


def validate(policy: CompiledPolicy, inputs: Inputs) -> tuple[list[PolicyDecision], list[AuditAnnotationResult]]:
    """Upstream's validator: match conditions, then validations with their messages, then audit
    annotations, each phase within its cost budget."""
    failure = policy.failure_policy
    namespace = namespace_object(inputs.namespace)
    if policy.match_conditions:
        context = CompositionContext(inputs.activation(True, None, inputs.match_request), policy.variables, MATCH_CONDITIONS_COST_BUDGET)
        problems: list[str] = []
        try:
            for _name, compiled in policy.match_conditions:
                outcome = context.evaluate(compiled)
                assert outcome is not None
                if outcome.error:
                    problems.append(outcome.error)
                elif outcome.value is False:
                    return [], []
        except BudgetExceeded as exc:
            problems = [str(exc)]
        if problems:
            if failure == "Ignore":
                return [], []
            return [_error_decision(failure, aggregate_errors(list(dict.fromkeys(problems))))], []
    context = CompositionContext(inputs.activation(True, namespace), policy.variables, RUNTIME_COST_BUDGET)
    outcomes = []
    try:
        for _validation, compiled, _message in policy.validations:
            outcomes.append(context.evaluate(compiled))
    except BudgetExceeded as exc:
        return [_error_decision(failure, str(exc))], []
    messages: list[Any] = []
    message_failure = ""
    message_context = CompositionContext(inputs.activation(False, namespace), policy.variables, context.remaining)
    try:
        messages = [message_context.evaluate(message) for _validation, _compiled, message in policy.validations]
    except BudgetExceeded as exc:
        message_failure = str(exc)
    decisions: list[PolicyDecision] = []
    for index, (validation, _compiled, _message) in enumerate(policy.validations):
        outcome = outcomes[index]
        assert outcome is not None
        if outcome.error:
            decisions.append(_error_decision(failure, outcome.error))
        elif message_failure:
            decisions.append(_error_decision(failure, f"failed messageExpression: {message_failure}"))
        elif outcome.value is not True:
            decisions.append(PolicyDecision("deny", "deny", _message_of(validation, messages[index] if index < len(messages) else None), str(validation.get("reason") or "Invalid")))
        else:
            decisions.append(PolicyDecision("admit", "admit"))
    annotations: list[AuditAnnotationResult] = []
    audit_context = CompositionContext(inputs.activation(False, inputs.namespace), policy.variables, RUNTIME_COST_BUDGET)
    try:
        for key, compiled in policy.audit_annotations:
            outcome = audit_context.evaluate(compiled)
            assert outcome is not None
            annotations.append(_annotation(key, compiled, outcome.value, outcome.error, failure))
    except BudgetExceeded as exc:
        return [_error_decision(failure, str(exc))], []
    return decisions, annotations


def _message_of(validation: Mapping[str, Any], evaluated: Any) -> str:
    """A denial's message: the messageExpression's when it gave a usable one, else the message,
    else the expression itself."""
    message = ""
    if evaluated is not None and not evaluated.error and isinstance(evaluated.value, str):
        message = evaluated.value.strip()
        if len(message.encode()) > MAX_MESSAGE_EXPRESSION_BYTES or "\n" in message:
            message = ""
    if not message:
        message = str(validation.get("message") or "").strip()
    return message or f"failed expression: {str(validation.get('expression') or '').strip()}"


def _annotation(key: str, compiled: Compiled, value: Any, error: str, failure: str) -> AuditAnnotationResult:
    if error:
        return AuditAnnotationResult(key, "exclude" if failure == "Ignore" else "error", error=error)
    if value is None:
        return AuditAnnotationResult(key, "exclude")
    if isinstance(value, str):
        value = value.strip()
        return AuditAnnotationResult(key, "publish", value) if value else AuditAnnotationResult(key, "exclude")
    return AuditAnnotationResult(
        key,
        "error",
        error=f"valueExpression '{compiled.expression}' resulted in unsupported return type: {type_name(value)}. Return type must be either string or null.",
    )


# --- the policies in force ---------------------------------------------------------------------------


@dataclass
class Hook:
    """A policy with the bindings that put it in force, each with what it matches."""

    name: str
    policy: Mapping[str, Any]
    bindings: list[tuple[Mapping[str, Any], MatchResources | None]]
    compiled: CompiledPolicy
    constraints: MatchResources
    param_kind: KindStrategy | None = None
    configuration_error: str = ""


@dataclass
class _Hooks:
    by_resource: dict[str, list[Hook]] = field(default_factory=dict)
    any_resource: list[Hook] = field(default_factory=list)

    def candidates(self, resource: str) -> list[Hook]:
        named = self.by_resource.get(resource)
        if named is None:
            return self.any_resource
        return sorted(named + self.any_resource, key=lambda h: h.name) if self.any_resource else named


class ValidatingAdmissionPolicies:
    """The ValidatingAdmissionPolicy admission plugin of one server."""

    def __init__(self, storage: Storage, authorizer: Authorizer) -> None:
        self.storage = storage
        self.authorizer = authorizer
        self._policies: dict[str, Mapping[str, Any]] = {}
        self._bindings: dict[str, Mapping[str, Any]] = {}
        self._compiled: dict[str, tuple[str, CompiledPolicy]] = {}
        self._hooks: _Hooks | None = _Hooks()

    def start(self) -> None:
        self.storage.follow(POLICY_STORAGE, self._policy_changed)
        self.storage.follow(BINDING_STORAGE, self._binding_changed)

    def _policy_changed(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if deleted:
            self._policies.pop(name, None)
        else:
            self._policies[name] = obj
        self._hooks = None

    def _binding_changed(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if deleted:
            self._bindings.pop(name, None)
        else:
            self._bindings[name] = obj
        self._hooks = None

    def hooks(self) -> _Hooks:
        """The policies bound now, indexed by the resources they can match."""
        hooks = self._hooks
        if hooks is None:
            hooks = self._hooks = self._build()
        return hooks

    def _build(self) -> _Hooks:
        by_policy: dict[str, list[Mapping[str, Any]]] = {}
        for name in sorted(self._bindings):
            binding = self._bindings[name]
            by_policy.setdefault(str((binding.get("spec") or {}).get("policyName") or ""), []).append(binding)
        hooks = _Hooks()
        for policy_name in sorted(by_policy):
            policy = self._policies.get(policy_name)
            if policy is None:
                continue  # a binding may come before its policy
            spec = policy.get("spec") or {}
            bindings = [(b, _match_resources((b.get("spec") or {}).get("matchResources"))) for b in by_policy[policy_name]]
            hook = Hook(policy_name, policy, bindings, self._compile(policy), MatchResources(spec.get("matchConstraints") or {}))
            param_kind = spec.get("paramKind")
            if isinstance(param_kind, dict):
                api_version, kind = str(param_kind.get("apiVersion") or ""), str(param_kind.get("kind") or "")
                hook.param_kind = lookup_kind(api_version, kind)
                if hook.param_kind is None:
                    group, _, version = api_version.rpartition("/")
                    hook.configuration_error = f"failed to find resource referenced by paramKind: '{GroupVersionKind(group, version, kind)}'"
            resources = rule_resources(spec.get("matchConstraints") or {})
            if resources is None:
                hooks.any_resource.append(hook)
            else:
                for resource in resources:
                    hooks.by_resource.setdefault(resource, []).append(hook)
        # Evaluated in policy name order, whatever index a policy came from.
        for listed in hooks.by_resource.values():
            listed.sort(key=lambda h: h.name)
        self._compiled = {name: self._compiled[name] for name in self._compiled if name in self._policies}
        return hooks

    def _compile(self, policy: Mapping[str, Any]) -> CompiledPolicy:
        """The policy compiled once per spec: its generation moves with every spec change, and a
        status write (the type checker's) leaves it as it is."""
        meta = policy["metadata"]
        name = meta["name"]
        version = f"{meta.get('uid')}/{meta.get('generation')}"
        cached = self._compiled.get(name)
        if cached is None or cached[0] != version:
            cached = self._compiled[name] = (version, CompiledPolicy.of(policy))
        return cached[1]

    # ---- admission --------------------------------------------------------------------------------

    def admit(self, request: AdmissionRequest) -> None:
        if (request.group, request.resource) in EXEMPT:
            return
        hooks = self.hooks()
        if not hooks.by_resource and not hooks.any_resource:
            return
        candidates = hooks.candidates(request.resource)
        if candidates:
            _Dispatch(self, request).run(candidates)

    # What a dispatch reads from the server.

    def namespace(self, name: str) -> Mapping[str, Any] | None:
        stored = self.storage.cached("namespaces", "", name)
        return stored.obj if stored is not None else None

    def authorize(self, attributes: AuthzAttributes, requester: UserInfo) -> tuple[bool, str, str]:
        user = attributes.user
        info = requester if user.name == requester.name and user.groups == requester.groups else UserInfo(user.name, user.uid, user.groups, dict(user.extra))
        question = Attributes(
            info,
            attributes.verb,
            attributes.resource_request,
            path=attributes.path,
            api_group=attributes.group,
            api_version="*",
            resource=attributes.resource,
            subresource=attributes.subresource,
            namespace=attributes.namespace,
            name=attributes.name,
        )
        decision, reason = self.authorizer.authorize(question)
        return decision is ALLOW, reason, ""


def _match_resources(raw: Any) -> MatchResources | None:
    return MatchResources(raw) if isinstance(raw, dict) else None


def _equivalents(resource: GroupVersionResource, subresource: str) -> list[tuple[GroupVersionResource, GroupVersionKind]]:
    """Every served version and group of the storage ``resource`` is in, with the kind each
    serves there (a subresource's own kind where it has one)."""
    own = lookup(resource.group, resource.version, resource.resource)
    if own is None:
        return []
    out: list[tuple[GroupVersionResource, GroupVersionKind]] = []
    for kind in served_kinds():
        if kind.stored_resource != own.stored_resource:
            continue
        gvk = GroupVersionKind(kind.group, kind.version, kind.kind)
        if subresource:
            sub = next((s for s in kind.subresources if s.name == subresource), None)
            if sub is None:
                continue
            gvk = GroupVersionKind(*sub.group_version_kind(kind))
        out.append((GroupVersionResource(kind.group, kind.version, kind.plural), gvk))
    return out


class _Dispatch:
    """One request judged by the policies that may match it (upstream's dispatcher)."""

    def __init__(self, plugin: ValidatingAdmissionPolicies, request: AdmissionRequest) -> None:
        self.plugin = plugin
        self.request = request
        is_namespace = request.group == "" and request.resource == "namespaces"
        self.target = Target(
            request.operation,
            GroupVersionResource(request.group, request.version, request.resource),
            request.subresource,
            GroupVersionKind(request.group, request.version, request.kind),
            # Upstream's request info names a namespace's own requests by it (not its create).
            request.name if is_namespace and request.operation != "CREATE" else request.namespace,
            request.name,
            request.obj,
            request.old,
        )
        self.denied: list[tuple[str, str | None, PolicyDecision]] = []
        self.failures: list[dict[str, Any]] = []
        self._namespace: tuple[Mapping[str, Any] | None] | None = None
        self._versioned: dict[GroupVersionKind, tuple[Any, Any]] = {}
        self._authorizer: AuthorizerValue | None = None
        self._decisions: dict[AuthzAttributes, tuple[bool, str, str]] = {}

    # ---- what evaluations read, each looked up once ---------------------------------------------

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        namespace = self.plugin.namespace(name)
        if namespace is None:
            raise not_found("namespaces", name, "", "namespaces")
        return (namespace.get("metadata") or {}).get("labels") or {}

    def namespace(self) -> Mapping[str, Any] | None:
        """The namespace of a namespaced request (None for cluster-scoped ones and namespaces)."""
        if self._namespace is None:
            name = self.target.namespace if not self.target.is_namespace else ""
            found = self.plugin.namespace(name) if name else None
            if name and found is None:
                raise not_found("namespaces", name, "", "namespaces")
            self._namespace = (found,)
        return self._namespace[0]

    def versioned(self, kind: GroupVersionKind, resource: GroupVersionResource) -> tuple[Any, Any]:
        """The request's object and old object in the version a policy matched them as."""
        if kind == self.target.kind:
            return self.request.obj, self.request.old
        cached = self._versioned.get(kind)
        if cached is None:
            source = lookup(self.request.group, self.request.version, self.request.resource)
            target = lookup(resource.group, resource.version, resource.resource)

            def convert(obj: Any) -> Any:
                if obj is None or source is None or target is None or (self.request.subresource and target.kind != kind.kind):
                    return obj
                return target.from_stored(source.to_stored(obj))

            cached = self._versioned[kind] = (convert(self.request.obj), convert(self.request.old))
        return cached

    def authorizer(self) -> AuthorizerValue:
        if self._authorizer is None:
            user = self.request.user
            self._authorizer = AuthorizerValue(AuthzUser(user.name, user.uid, tuple(user.groups), dict(user.extra)), self._authorize)
        return self._authorizer

    def _authorize(self, attributes: AuthzAttributes) -> tuple[bool, str, str]:
        decision = self._decisions.get(attributes)
        if decision is None:
            decision = self._decisions[attributes] = self.plugin.authorize(attributes, self.request.user)
        return decision

    def request_object(self, resource: GroupVersionResource, kind: GroupVersionKind) -> dict[str, Any]:
        """``request``: the AdmissionRequest upstream builds (empty optional fields left out)."""
        r = self.request
        user: dict[str, Any] = {"username": r.user.name}
        if r.user.uid:
            user["uid"] = r.user.uid
        if r.user.groups:
            user["groups"] = list(r.user.groups)
        if r.user.extra:
            user["extra"] = {key: list(values) for key, values in r.user.extra.items()}
        if not user["username"]:
            del user["username"]
        out: dict[str, Any] = {
            "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
            "resource": {"group": resource.group, "version": resource.version, "resource": resource.resource},
            "requestKind": {"group": r.group, "version": r.version, "kind": r.kind},
            "requestResource": {"group": r.group, "version": r.version, "resource": r.resource},
            "operation": r.operation,
            "userInfo": user,
            "dryRun": r.dry_run,
            "options": r.options() if r.options is not None else None,
        }
        for key, value in (("subResource", r.subresource), ("requestSubResource", r.subresource), ("name", r.name), ("namespace", self.target.namespace)):
            if value:
                out[key] = value
        return out

    # ---- the dispatch ------------------------------------------------------------------------------

    def run(self, hooks: list[Hook]) -> None:
        for hook in hooks:
            try:
                matched = matches(hook.constraints, self.target, self.namespace_labels, _equivalents)
            except ApiError as exc:
                self.configuration_error(hook, None, exc.message)
                continue
            if matched is None:
                continue
            if hook.configuration_error:
                self.configuration_error(hook, None, hook.configuration_error)
                continue
            annotations: dict[str, list[str]] = {}
            for binding, constraints in hook.bindings:
                self.run_binding(hook, binding, constraints, matched, annotations)
            for key in sorted(annotations):
                self.request.annotate(f"{hook.name}/{key}", ", ".join(annotations[key]))
        if self.failures:
            self.request.annotate(VALIDATION_FAILURE_ANNOTATION, _go_json(self.failures[:MAX_VALIDATION_FAILURES]))
        if self.denied:
            raise self.refusal(*self.denied[0])

    def run_binding(
        self,
        hook: Hook,
        binding: Mapping[str, Any],
        constraints: MatchResources | None,
        matched: tuple[GroupVersionResource, GroupVersionKind],
        annotations: dict[str, list[str]],
    ) -> None:
        spec = binding.get("spec") or {}
        binding_name = binding["metadata"]["name"]
        if constraints is not None:
            try:
                if matches(constraints, self.target, self.namespace_labels, _equivalents) is None:
                    return
            except ApiError as exc:
                self.configuration_error(hook, binding_name, exc.message)
                return
        try:
            params = self.params(hook, spec.get("paramRef"))
        except _ConfigurationError as exc:
            self.configuration_error(hook, binding_name, str(exc))
            return
        if not params:
            return
        resource, kind = matched
        obj, old = self.versioned(kind, resource)
        namespace = self.namespace()
        request = self.request_object(resource, kind)
        authorizer = self.authorizer()
        r = self.request
        check = request_resource_check(authorizer, r.group, r.resource, r.subresource, self.target.namespace, r.name)
        actions = [str(a) for a in spec.get("validationActions") or ()]
        has_params = (hook.policy.get("spec") or {}).get("paramKind") is not None
        # Match conditions see the request's own resource with the matched kind (upstream's quirk).
        own = GroupVersionResource(r.group, r.version, r.resource)
        match_request = request if own == resource else self.request_object(own, kind)
        for param in params:
            inputs = Inputs(obj, old, request, match_request, namespace, param, has_params, authorizer, check)
            decisions, results = validate(hook.compiled, inputs)
            for index, decision in enumerate(decisions):
                if decision.action != "deny":
                    continue
                for action in actions:
                    if action == "Deny":
                        self.denied.append((hook.name, binding_name, decision))
                    elif action == "Audit":
                        self.failures.append(
                            {"message": decision.message, "policy": spec.get("policyName") or "", "binding": binding_name, "expressionIndex": index, "validationActions": actions}
                        )
                    elif action == "Warn":
                        self.request.warn(f"Validation failed for ValidatingAdmissionPolicy '{hook.name}' with binding '{binding_name}': {decision.message}")
            for result in results:
                if result.action == "publish":
                    values = annotations.setdefault(result.key, [])
                    value = result.value[:MAX_AUDIT_ANNOTATION_VALUE]
                    if value not in values:
                        values.append(value)
                elif result.action == "error":
                    # Under failurePolicy Fail, an annotation that cannot be computed denies.
                    self.denied.append((hook.name, binding_name, PolicyDecision("deny", "error", result.error)))

    def params(self, hook: Hook, ref: Any) -> list[Any]:
        """The params a binding's paramRef names ([None]: none declared), as upstream's CollectParams."""
        kind = hook.param_kind
        if (hook.policy.get("spec") or {}).get("paramKind") is None or not isinstance(ref, dict):
            return [None]
        assert kind is not None  # an unresolved paramKind is the hook's configuration error
        ref_namespace = str(ref.get("namespace") or "")
        namespace = ""
        if kind.namespaced:
            namespace = ref_namespace or self.target.namespace
            if not namespace:
                raise _ConfigurationError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        elif ref_namespace:
            raise _ConfigurationError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
        name = str(ref.get("name") or "")
        if name:
            stored = self.plugin.storage.cached(kind.stored_resource, namespace, name)
            found = [kind.from_stored(stored.obj)] if stored is not None else []
        else:
            selector = selector_from_label_selector_object(ref.get("selector"), nil_selects_all=True)
            found = [
                kind.from_stored(item.obj)
                for item in self.plugin.storage.cached_all(kind.stored_resource)
                if (not kind.namespaced or item.namespace == namespace) and selector.matches(item.labels or {})
            ]
            found.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if not found and ref.get("parameterNotFoundAction") == "Deny":
            raise _ConfigurationError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return found

    def configuration_error(self, hook: Hook, binding: str | None, why: str) -> None:
        """A policy or binding that cannot be applied: its failure policy says whether that denies."""
        if str((hook.policy.get("spec") or {}).get("failurePolicy") or "Fail") == "Ignore":
            return
        what = "policy" if binding is None else "binding"
        self.denied.append((hook.name, binding, PolicyDecision("deny", "", f"failed to configure {what}: {why}")))

    def refusal(self, policy: str, binding: str | None, decision: PolicyDecision) -> ApiError:
        """Upstream's denial: a Forbidden about the request's resource, with the validation's reason and code."""
        if binding is not None:
            message = f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {decision.message}"
        else:
            message = f"ValidatingAdmissionPolicy '{policy}' denied request: {decision.message}"
        r = self.request
        name = r.name
        if not name:
            metadata = (r.obj or {}).get("metadata") or {}
            name = str(metadata.get("name") or metadata.get("generateName") or "Unknown")
        error = r.forbidden(message) if name == r.name else dataclasses.replace(r, name=name).forbidden(message)
        reason = decision.reason or "Invalid"
        error.reason = reason
        error.code = _REASON_CODES.get(reason, 422)
        error.details = {**(error.details or {}), "causes": [{"message": message}]}
        return error


class _ConfigurationError(Exception):
    """A binding that cannot be applied to this request (its params cannot be found)."""


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it (HTML-sensitive characters escaped)."""
    text = orjson.dumps(value).decode()
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text

