"""ValidatingAdmissionPolicy status: the server type-checks each policy's validations against the
schemas of the kinds it matches and writes what it finds to ``status.typeChecking``, as
kube-apiserver's validatingadmissionpolicy-status controller does (k8s.io/apiserver's
policy/validating TypeChecker).

Admission compiles ``object`` as dyn, so a misspelled field only fails when a request comes; the
type checker gives ``object`` and ``oldObject`` the kind's schema (each kind the rules name
exactly, at most 10) and ``params`` the paramKind's, and reports what no longer compiles:
``<group>/<version>, Kind=<kind>: ERROR: <input>:1:8: undefined field 'foo' ...`` per
expression and kind. A policy is checked once per generation (``status.observedGeneration``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import Any

from app.api import schemas
from app.api.generic import GenericStore
from app.api.options import PATCH_OPTIONS, WriteOptions
from app.auth.policymatching import GroupVersionKind
from app.controlplane.loop import ControlLoop
from app.registry import lookup, lookup_kind
from app.registry.admissionregistration import validatingadmissionpolicy
from kube.cel.admission import PolicyCompiler
from kube.cel.types import BOOL, BYTES, DOUBLE, DURATION, DYN, INT, STRING, TIMESTAMP, Type, list_of, map_of, struct
from kube.errors import ApiError

log = logging.getLogger("app.policystatus")
POLICY_STORAGE = validatingadmissionpolicy.STRATEGY.qualified_resource
CONTROLLER_NAME = "validatingadmissionpolicy-status"
MAX_TYPES_TO_CHECK = 10
# Deeper than this a schema is recursive (JSONSchemaProps): what lies below is dyn.
_MAX_DEPTH = 24
_RESERVED = frozenset(
    ("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return")
)
_COMPILATION_FAILED = "compilation failed: "

# --- schemas as CEL types (apiserver's cel/common SchemaDeclType) ------------------------------------


def _escape(name: str) -> str | None:
    """A property name as CEL can select it (upstream's Escape), None when it cannot be."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    out = name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")
    return out if out.replace("_", "a").isalnum() and out.isascii() else None


class _Converter:
    def __init__(self, root: str) -> None:
        self.structs: dict[str, dict[str, Type]] = {}
        self.root = root

    def convert(self, node: schemas.SchemaNode, name: str, depth: int = 0) -> Type | None:
        raw = node.raw
        if depth > _MAX_DEPTH or node.is_free_form or "oneOf" in raw or "anyOf" in raw:
            return DYN  # int-or-string, quantities, raw JSON
        if node.is_array:
            items = node.items()
            item = self.convert(items, f"{name}.@idx", depth + 1) if items is not None else None
            return list_of(item) if item is not None else None
        if node.is_object:
            values = node.additional_properties()
            if values is not None and not node.has_properties:
                value = self.convert(values, f"{name}.@elem", depth + 1)
                return map_of(STRING, value) if value is not None else None
            fields: dict[str, Type] = {}
            self.structs[name] = fields
            for prop in node.property_names():
                child = node.property(prop)
                escaped = _escape(prop)
                if child is None or escaped is None:
                    continue
                field_type = self.convert(child, f"{name}.{escaped}", depth + 1)
                if field_type is not None:
                    fields[escaped] = field_type
            return struct(name)
        t = raw.get("type")
        kinds = t if isinstance(t, list) else [t]
        if "string" in kinds:
            return {"byte": BYTES, "duration": DURATION, "date": TIMESTAMP, "date-time": TIMESTAMP}.get(str(raw.get("format") or ""), STRING)
        if "boolean" in kinds:
            return BOOL
        if "number" in kinds:
            return DOUBLE
        if "integer" in kinds:
            return INT
        return None


@functools.lru_cache(maxsize=64)
def kind_type(api_version: str, kind: str) -> tuple[Type, dict[str, dict[str, Type]]] | None:
    """The CEL type of a kind's objects and the object types it declares, from its schema."""
    node = schemas.schema_for_kind(api_version, kind)
    if node is None:
        return None
    converter = _Converter(kind)
    root = converter.convert(node, kind)
    return (root, converter.structs) if root is not None else None


# --- the type checker -----------------------------------------------------------------------------


def types_to_check(policy: Mapping[str, Any]) -> list[GroupVersionKind]:
    """The kinds a policy's resource rules name without wildcards, served here, at most 10, sorted."""
    rules = ((policy.get("spec") or {}).get("matchConstraints") or {}).get("resourceRules") or []
    found: list[GroupVersionKind] = []
    for rule in rules:
        groups = [str(g) for g in rule.get("apiGroups") or ()]
        versions = [str(v) for v in rule.get("apiVersions") or ()]
        if any("*" in g for g in groups) or any("*" in v for v in versions):
            continue
        resources = sorted(str(r) for r in rule.get("resources") or () if "*" not in str(r) and "/" not in str(r))
        for group in sorted(groups):
            for version in sorted(versions):
                for resource in resources:
                    served = lookup(group, version, resource)
                    if served is None:
                        continue
                    gvk = GroupVersionKind(served.group, served.version, served.kind)
                    if gvk not in found:
                        found.append(gvk)
                        if len(found) == MAX_TYPES_TO_CHECK:
                            return sorted(found, key=lambda k: (k.group, k.version, k.kind))
    return sorted(found, key=lambda k: (k.group, k.version, k.kind))


def check(policy: Mapping[str, Any]) -> list[dict[str, str]]:
    """The expression warnings of a policy: for each validation expression and messageExpression
    that does not compile with the matched kinds' types, what cel-go says, per kind."""
    spec = policy.get("spec") or {}
    kinds = [(gvk, typed) for gvk in types_to_check(policy) if (typed := kind_type(_api_version(gvk), gvk.kind)) is not None]
    param_kind = spec.get("paramKind")
    params_type: Type = DYN
    structs: dict[str, dict[str, Type]] = {}
    if isinstance(param_kind, dict):
        served = lookup_kind(str(param_kind.get("apiVersion") or ""), str(param_kind.get("kind") or ""))
        typed_params = kind_type(served.api_version, served.kind) if served is not None else None
        if typed_params is not None:
            params_type, structs = typed_params[0], dict(typed_params[1])
    warnings: list[dict[str, str]] = []
    for index, validation in enumerate(spec.get("validations") or ()):
        for field in ("expression", "messageExpression"):
            expression = str(validation.get(field) or "")
            if field == "messageExpression" and not expression:
                continue
            results = []
            for gvk, (object_type, object_structs) in kinds:
                problem = _check_expression(spec, expression, object_type, {**structs, **object_structs}, param_kind is not None, params_type)
                if problem:
                    results.append(f"{gvk}: {problem}\n")
            if results:
                warnings.append({"fieldRef": f"spec.validations[{index}].{field}", "warning": "\n".join(results)})
    return warnings


def _api_version(gvk: GroupVersionKind) -> str:
    return f"{gvk.group}/{gvk.version}" if gvk.group else gvk.version


def _check_expression(spec: Mapping[str, Any], expression: str, object_type: Type, structs: dict[str, dict[str, Type]], has_params: bool, params_type: Type) -> str:
    """What cel-go says of ``expression`` with typed objects ("" when it compiles). As upstream's
    checker, the authorizer is declared without its requestResource, and results are not judged."""
    compiler = PolicyCompiler(has_params, object_type, params_type, structs, request_resource=False)
    for variable in spec.get("variables") or ():
        compiler.compile_variable(str(variable.get("name") or ""), str(variable.get("expression") or ""))
    compiled = compiler.compile(expression, ())
    if compiled.program is not None:
        return ""
    error = compiled.error.removeprefix(_COMPILATION_FAILED)
    return f"type checking error: {error}" if compiled.error_kind == "internal" else error


# --- the controller ---------------------------------------------------------------------------------


class PolicyTypeChecking(ControlLoop):
    """Writes ``status.typeChecking`` and ``status.observedGeneration`` of every policy whose
    generation it has not checked yet."""

    name = CONTROLLER_NAME

    def __init__(self, registry: GenericStore) -> None:
        super().__init__()
        self.registry = registry
        self._pending: set[str] = set()
        self._changed = asyncio.Event()

    def start(self) -> None:
        self.registry.storage.follow(POLICY_STORAGE, self._policy_changed)
        super().start()

    def _policy_changed(self, deleted: bool, obj: Mapping[str, Any]) -> None:
        if deleted:
            return
        if int(obj["metadata"].get("generation") or 0) > int((obj.get("status") or {}).get("observedGeneration") or 0):
            self._pending.add(obj["metadata"]["name"])
            self._changed.set()

    async def run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            names, self._pending = sorted(self._pending), set()
            for name in names:
                try:
                    await self.reconcile(name)
                except asyncio.CancelledError:
                    raise
                except ApiError as exc:
                    if exc.code == 409:
                        self._pending.add(name)
                        self._changed.set()
                except Exception:
                    log.exception("type checking of ValidatingAdmissionPolicy %s failed", name)

    async def reconcile(self, name: str) -> None:
        stored = self.registry.storage.cached(POLICY_STORAGE, "", name)
        if stored is None:
            return
        policy = stored.obj
        generation = int(policy["metadata"].get("generation") or 0)
        if generation <= int((policy.get("status") or {}).get("observedGeneration") or 0):
            return
        warnings = check(policy)
        applied = {
            "apiVersion": validatingadmissionpolicy.STRATEGY.api_version,
            "kind": validatingadmissionpolicy.STRATEGY.kind,
            "metadata": {"name": name},
            "status": {"observedGeneration": generation, "typeChecking": {"expressionWarnings": warnings} if warnings else {}},
        }
        options = WriteOptions(field_manager=CONTROLLER_NAME, force=True, kind=PATCH_OPTIONS)
        await self.registry.patch(validatingadmissionpolicy.STATUS_STRATEGY, "", name, applied, "apply", options)
