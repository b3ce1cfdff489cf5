"""ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1, cluster-scoped): puts a
policy in force, with the actions its failures take and, for a parameterized policy, its params."""

from __future__ import annotations

from app.registry.admissionregistration.common import (
    BINDINGS,
    CATEGORIES,
    GROUP,
    go_label_selector,
    static_name_warnings,
    validate_static_name,
)
from app.registry.admissionregistration.validatingadmissionpolicy import _resolver
from app.registry.admissionregistration.validatingadmissionpolicybinding_validation import (
    default_binding,
    param_ref_refusal,
    validate_binding,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from kube.errors import FieldError, forbidden


def _param_ref_column(binding: Obj) -> str:
    ref = (binding.get("spec") or {}).get("paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    if ref.get("name"):
        # Whether the params are namespaced cannot be told from here: "*" says any namespace.
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if ref.get("selector") is not None:
        return go_label_selector(ref["selector"])
    return "<unset>"


class ValidatingAdmissionPolicyBindingStrategy(KindStrategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicyBinding"
    plural = BINDINGS
    singular = "validatingadmissionpolicybinding"
    categories = CATEGORIES
    namespaced = False
    allow_unconditional_update = False
    create_example: Obj = {"spec": {"policyName": "example-policy", "validationActions": ["Deny"]}}
    printer_columns = (
        name_column(),
        PrinterColumn(
            "PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to",
            lambda o: str((o.get("spec") or {}).get("policyName") or ""),
        ),
        PrinterColumn("ParamRef", "string", "ParamRef indicates the param resource which sets the configuration param", _param_ref_column),
        age_column(),
    )  # fmt: skip

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_binding(obj)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_binding(obj) + validate_static_name(str(obj["metadata"].get("name") or ""), ctx.feature_gates)
        if not errs:
            errs += self._authorize(obj, ctx)
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_binding(new)
        ctx.warnings.extend(static_name_warnings(str(new["metadata"].get("name") or "")))
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        unchanged = old_spec.get("paramRef") is not None and new_spec.get("paramRef") == old_spec.get("paramRef") and new_spec.get("policyName") == old_spec.get("policyName")
        if not errs and not unchanged:
            errs += self._authorize(new, ctx)
        return errs

    @staticmethod
    def _authorize(binding: Obj, ctx: RequestContext) -> list[FieldError]:
        refusal = param_ref_refusal(binding, ctx.requester, ctx.lookup, _resolver(ctx))
        return [forbidden("spec.paramRef", refusal)] if refusal is not None else []


STRATEGY: ValidatingAdmissionPolicyBindingStrategy = ValidatingAdmissionPolicyBindingStrategy()
