"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, cluster-scoped, status subresource).

What a policy checks is enforced by ``app.auth.policies`` once a binding names it; the server's
type checker (``app.controlplane.policystatus``) writes ``status.typeChecking``.
"""

from __future__ import annotations

from app.registry.admissionregistration.common import CATEGORIES, GROUP, POLICIES, static_name_warnings, validate_static_name
from app.registry.admissionregistration.validatingadmissionpolicy_validation import (
    default_policy,
    param_kind_refusal,
    validate_expression_warnings,
    validate_policy,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource, reset_metadata_for_status
from app.registry.columns import age_column, name_column
from app.registry.common import validate_conditions
from kube.errors import FieldError, forbidden


def _param_kind_column(policy: Obj) -> str:
    kind = (policy.get("spec") or {}).get("paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion') or ''}/{kind.get('kind') or ''}"


def _resolver(ctx: RequestContext) -> object:
    def resolve(api_version: str, kind: str) -> str | None:
        served = ctx.resolve_kind(api_version, kind) if ctx.resolve_kind is not None else None
        return served.plural if served is not None else None

    return resolve


class ValidatingAdmissionPolicyStrategy(KindStrategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicy"
    plural = POLICIES
    singular = "validatingadmissionpolicy"
    categories = CATEGORIES
    namespaced = False
    has_status = True
    allow_unconditional_update = False
    create_example: Obj = {
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.metadata.name.size() < 64"}],
        }
    }
    printer_columns = (
        name_column(),
        PrinterColumn(
            "Validations", "integer", "Validations indicates the number of validation rules defined in this configuration",
            lambda o: len((o.get("spec") or {}).get("validations") or []),
        ),
        PrinterColumn("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy", _param_kind_column),
        age_column(),
    )  # fmt: skip

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_policy(obj)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_policy(obj) + validate_static_name(str(obj["metadata"].get("name") or ""), ctx.feature_gates)
        if not errs:
            errs += self._authorize(obj, ctx)
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_policy(new, old)
        ctx.warnings.extend(static_name_warnings(str(new["metadata"].get("name") or "")))
        if not errs and (new.get("spec") or {}).get("paramKind") != (old.get("spec") or {}).get("paramKind"):
            errs += self._authorize(new, ctx)
        return errs

    @staticmethod
    def _authorize(policy: Obj, ctx: RequestContext) -> list[FieldError]:
        refusal = param_kind_refusal((policy.get("spec") or {}).get("paramKind"), ctx.requester, _resolver(ctx))
        return [forbidden("spec.paramKind", refusal)] if refusal is not None else []


class ValidatingAdmissionPolicyStatusStrategy(StatusStrategy, ValidatingAdmissionPolicyStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        reset_metadata_for_status(new, old)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        status = new.get("status")
        errs = validate_expression_warnings(status)
        conditions = status.get("conditions") if isinstance(status, dict) else None
        if isinstance(conditions, list):
            errs += validate_conditions(conditions, "status.conditions")
        return errs


STATUS_STRATEGY = ValidatingAdmissionPolicyStatusStrategy()
STRATEGY: ValidatingAdmissionPolicyStrategy = ValidatingAdmissionPolicyStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
