"""ValidatingAdmissionPolicy: defaults and validation, CEL expressions compiled as upstream does
(a policy whose expressions do not compile is refused with cel-go's message on the field), and
who may name a paramKind."""

from __future__ import annotations

import re
from typing import Any

from app.registry.accessors import Errs, dict_entries, get_list
from app.registry.admissionregistration.common import default_match_resources, go_user, split_api_version, validate_match_resources
from app.registry.base import Obj
from app.registry.objectmeta import dns1123_subdomain_problems, validate_qualified_name
from kube.cel.admission import BOOL_RESULT, STRING_OR_NULL_RESULT, STRING_RESULT, Compiled, PolicyCompiler, is_cel_identifier
from kube.errors import INTERNAL, FieldError, duplicate, invalid, not_supported, required, too_many

SUPPORTED_FAILURE_POLICIES = ("Fail", "Ignore")
SUPPORTED_REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")
MAX_MATCH_CONDITIONS = 64
MAX_AUDIT_ANNOTATIONS = 20
MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_BYTES = 5 * 1024
_NEWLINES = re.compile(r"[\n\r]+")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_PROBLEM = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an "
    "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def default_policy(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    default_match_resources(spec.get("matchConstraints"))


def _dns1035_label_problems(value: str) -> list[str]:
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _DNS1035_LABEL.match(value):
        problems.append(_DNS1035_PROBLEM)
    return problems


def _compile_error(path: str, compiled: Compiled) -> list[FieldError]:
    if compiled.program is not None:
        return []
    if compiled.error_kind == "internal":
        return [FieldError(INTERNAL, path, compiled.error)]
    return [invalid(path, compiled.expression, compiled.error)]


def validate_policy(obj: Obj, old: Obj | None = None) -> Errs:
    """The spec (``old``: the stored policy, whose unchanged match conditions are not judged again)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    errs: Errs = []
    failure = spec.get("failurePolicy")
    if failure is None:
        errs.append(required("spec.failurePolicy"))
    elif failure not in SUPPORTED_FAILURE_POLICIES:
        errs.append(not_supported("spec.failurePolicy", failure, SUPPORTED_FAILURE_POLICIES))
    param_kind = spec.get("paramKind")
    if param_kind is not None:
        errs += _validate_param_kind(param_kind if isinstance(param_kind, dict) else {})
    match = spec.get("matchConstraints")
    if match is None:
        errs.append(required("spec.matchConstraints"))
    else:
        errs += validate_match_resources(match, "spec.matchConstraints")
        if not (match.get("resourceRules") if isinstance(match, dict) else None):
            errs.append(required("spec.matchConstraints.resourceRules"))
    compiler = PolicyCompiler(has_params=param_kind is not None)
    unchanged = old is not None and (old.get("spec") or {}).get("paramKind") == param_kind and (old.get("spec") or {}).get("matchConditions") == spec.get("matchConditions")
    if not unchanged:
        errs += _validate_match_conditions(spec, compiler)
    variables = get_list(spec, "variables", "spec", errs) or []
    for _, variable, vpath in dict_entries(variables, "spec.variables", errs):
        errs += _validate_variable(variable, vpath, compiler)
    validations = get_list(spec, "validations", "spec", errs) or []
    annotations = get_list(spec, "auditAnnotations", "spec", errs) or []
    if not validations and not annotations:
        detail = "validations or auditAnnotations must contain at least one item"
        return [*errs, required("spec.validations", detail), required("spec.auditAnnotations", detail)]
    for _, validation, vpath in dict_entries(validations, "spec.validations", errs):
        errs += _validate_validation(validation, vpath, compiler)
    if len(annotations) > MAX_AUDIT_ANNOTATIONS:
        errs.append(invalid("spec.auditAnnotations", _go_json_structs(annotations), f"must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"))
    keys: set[str] = set()
    name = str((obj.get("metadata") or {}).get("name") or "")
    for index, annotation, apath in dict_entries(annotations, "spec.auditAnnotations", errs):
        errs += _validate_audit_annotation(annotation, name, apath, compiler)
        key = str(annotation.get("key") or "")
        if key in keys:
            errs.append(duplicate(f"spec.auditAnnotations[{index}].key", key))
        keys.add(key)
    return errs


def _go_json_structs(items: list[Any]) -> list[Any]:
    """Upstream's internal structs have no JSON tags: a list of them reads with Go's field names."""
    return [{k[:1].upper() + k[1:]: v for k, v in item.items()} if isinstance(item, dict) else item for item in items]


def _validate_param_kind(param_kind: Obj) -> Errs:
    errs: Errs = []
    api_version = str(param_kind.get("apiVersion") or "")
    if not api_version:
        errs.append(required("spec.paramKind.apiVersion"))
    else:
        parsed = split_api_version(api_version)
        if parsed is None:
            errs.append(invalid("spec.paramKind.apiVersion", api_version, f"unexpected GroupVersion string: {api_version}"))
        else:
            group, version = parsed
            if group:
                problems = dns1123_subdomain_problems(group)
                if problems:
                    errs.append(invalid("spec.paramKind.apiVersion", group, ",".join(problems)))
            if not version:
                errs.append(invalid("spec.paramKind.apiVersion", api_version, "version must be specified"))
            else:
                problems = _dns1035_label_problems(version)
                if problems:
                    errs.append(invalid("spec.paramKind.apiVersion", version, ",".join(problems)))
    kind = str(param_kind.get("kind") or "")
    if not kind:
        errs.append(required("spec.paramKind.kind"))
    else:
        problems = _dns1035_label_problems(kind.lower())
        if problems:
            errs.append(invalid("spec.paramKind.kind", kind, "may have mixed case, but should otherwise match: " + ",".join(problems)))
    return errs


def _validate_match_conditions(spec: Obj, compiler: PolicyCompiler) -> Errs:
    errs: Errs = []
    conditions = get_list(spec, "matchConditions", "spec", errs) or []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        errs.append(too_many("spec.matchConditions", len(conditions), MAX_MATCH_CONDITIONS))
    names: set[str] = set()
    for index, condition, cpath in dict_entries(conditions, "spec.matchConditions", errs):
        expression = str(condition.get("expression") or "").strip()
        if not expression:
            errs.append(required(f"{cpath}.expression"))
        else:
            # Match conditions never see the variables (upstream compiles them without).
            errs += _compile_error(f"{cpath}.expression", compiler.compile(expression, BOOL_RESULT, variables=False))
        name = str(condition.get("name") or "")
        if not name:
            errs.append(required(f"{cpath}.name"))
        else:
            errs += validate_qualified_name(name, f"{cpath}.name")
            if name in names:
                errs.append(duplicate(f"spec.matchConditions[{index}].name", name))
            names.add(name)
    return errs


def _validate_variable(variable: Obj, path: str, compiler: PolicyCompiler) -> Errs:
    errs: Errs = []
    name = str(variable.get("name") or "")
    if not name.strip():
        errs.append(required(f"{path}.name", "name is not specified"))
    elif not is_cel_identifier(name):
        errs.append(invalid(f"{path}.name", name, "must be a valid CEL identifier"))
    expression = str(variable.get("expression") or "")
    if not expression.strip():
        errs.append(required(f"{path}.expression", "expression is not specified"))
    else:
        errs += _compile_error(f"{path}.expression", compiler.compile_variable(name, expression))
    return errs


def _validate_validation(validation: Obj, path: str, compiler: PolicyCompiler) -> Errs:
    errs: Errs = []
    expression = str(validation.get("expression") or "")
    message = str(validation.get("message") or "")
    message_expression = str(validation.get("messageExpression") or "")
    if not expression.strip():
        errs.append(required(f"{path}.expression", "expression is not specified"))
    else:
        errs += _compile_error(f"{path}.expression", compiler.compile(expression, BOOL_RESULT))
    if message_expression and not message_expression.strip():
        errs.append(invalid(f"{path}.messageExpression", message_expression, "must be non-empty if specified"))
    elif message_expression.strip():
        # Messages are written without the authorizer (upstream declares none for them).
        errs += _compile_error(f"{path}.messageExpression", compiler.compile(message_expression, STRING_RESULT, authorizer=False))
    if message and not message.strip():
        errs.append(invalid(f"{path}.message", message, "must be non-empty if specified"))
    elif _NEWLINES.search(message.strip()):
        errs.append(invalid(f"{path}.message", message, "must not contain line breaks"))
    reason = validation.get("reason")
    if reason is not None and reason not in SUPPORTED_REASONS:
        errs.append(not_supported(f"{path}.reason", reason, SUPPORTED_REASONS))
    return errs


def _validate_audit_annotation(annotation: Obj, policy_name: str, path: str, compiler: PolicyCompiler) -> Errs:
    errs: Errs = []
    key = str(annotation.get("key") or "")
    if policy_name:
        errs += validate_qualified_name(f"{policy_name}/{key}", f"{path}.key")
    else:
        errs.append(invalid(f"{path}.key", key, "requires metadata.name be non-empty"))
    value_expression = str(annotation.get("valueExpression") or "")
    trimmed = value_expression.strip()
    if not trimmed:
        errs.append(required(f"{path}.valueExpression", "valueExpression is not specified"))
    elif len(trimmed.encode()) > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_BYTES:
        errs.append(required(f"{path}.valueExpression", f"must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_BYTES} bytes in length"))
    else:
        compiled = compiler.compile(trimmed, STRING_OR_NULL_RESULT)
        if compiled.program is None:
            compiled.expression = value_expression  # upstream reports the value as written
        errs += _compile_error(f"{path}.valueExpression", compiled)
    return errs


def validate_expression_warnings(status: Any) -> Errs:
    """status.typeChecking.expressionWarnings: each names a field and says something."""
    errs: Errs = []
    type_checking = status.get("typeChecking") if isinstance(status, dict) else None
    warnings = get_list(type_checking, "expressionWarnings", "status.typeChecking", errs) or []
    for _, warning, wpath in dict_entries(warnings, "status.typeChecking.expressionWarnings", errs):
        if not warning.get("warning"):
            errs.append(required(f"{wpath}.warning"))
        if not str(warning.get("fieldRef") or "").strip():
            errs.append(required(f"{wpath}.fieldRef"))
    return errs


def param_kind_refusal(param_kind: Any, requester: Any, resolve: Any) -> str | None:
    """Why the requester may not name ``param_kind``: a policy's author must be able to get every
    object of that kind (upstream's authorizeCreate; system:masters always may)."""
    if requester is None or requester.privileged or not isinstance(param_kind, dict):
        return None
    api_version, kind = str(param_kind.get("apiVersion") or ""), str(param_kind.get("kind") or "")
    group = resource = "*"
    parsed = split_api_version(api_version)
    if parsed is not None:
        group = parsed[0]
        resource = resolve(api_version, kind) or "*"
    if requester.authorize("get", group, resource, namespace="*", name="*") is None:
        return None
    return f'user {go_user(requester.user)} must have "get" permission on all objects of the referenced paramKind (kind={kind}, apiVersion={api_version})'

