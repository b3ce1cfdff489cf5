"""RoleBinding (rbac.authorization.k8s.io/v1, namespaced): a Role or ClusterRole granted to
subjects within one namespace."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.rbac.common import RBACStrategy, check_binding_grant, only_gc_fields_changed
from app.registry.rbac.rbac_validation import validate_role_ref, validate_role_ref_update, validate_subjects
from kube.errors import FieldError


def role_column(obj: Obj) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def subject_column(kind: str, namespaced_accounts: bool = True) -> PrinterColumn:
    def cell(obj: Obj) -> str:
        names = []
        for s in obj.get("subjects") or ():
            if s.get("kind") == kind:
                names.append(f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount" and namespaced_accounts else s.get("name", ""))
        return ", ".join(names)

    label = {"User": "Users", "Group": "Groups", "ServiceAccount": "ServiceAccounts"}[kind]
    return PrinterColumn(label, "string", "", cell, priority=1)


class RoleBindingStrategy(RBACStrategy):
    kind = "RoleBinding"
    plural = "rolebindings"
    singular = "rolebinding"
    namespaced = True
    create_example: Obj = {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "example"}]}
    printer_columns = (
        name_column(),
        PrinterColumn("Role", "string", "", role_column),
        age_column(),
        subject_column("User"),
        subject_column("Group"),
        subject_column("ServiceAccount"),
    )

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_role_ref(obj.get("roleRef"), ("Role", "ClusterRole")) + validate_subjects(obj.get("subjects"), cluster=False)
        if not errs:
            check_binding_grant(self, obj, ctx, obj["metadata"].get("namespace", ""))
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_role_ref_update(new, old) + validate_subjects(new.get("subjects"), cluster=False)
        if not errs and not only_gc_fields_changed(new, old):
            check_binding_grant(self, new, ctx, new["metadata"].get("namespace", ""))
        return errs


STRATEGY = RoleBindingStrategy()
