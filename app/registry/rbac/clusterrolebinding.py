"""ClusterRoleBinding (rbac.authorization.k8s.io/v1, cluster-scoped): a ClusterRole granted to
subjects in every namespace."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.rbac.common import RBACStrategy, check_binding_grant, only_gc_fields_changed
from app.registry.rbac.rbac_validation import validate_role_ref, validate_role_ref_update, validate_subjects
from app.registry.rbac.rolebinding import role_column, subject_column
from kube.errors import FieldError


class ClusterRoleBindingStrategy(RBACStrategy):
    kind = "ClusterRoleBinding"
    plural = "clusterrolebindings"
    singular = "clusterrolebinding"
    namespaced = False
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
        errs = validate_role_ref(obj.get("roleRef"), ("ClusterRole",)) + validate_subjects(obj.get("subjects"), cluster=True)
        if not errs:
            check_binding_grant(self, obj, ctx, "")
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_role_ref_update(new, old) + validate_subjects(new.get("subjects"), cluster=True)
        if not errs and not only_gc_fields_changed(new, old):
            check_binding_grant(self, new, ctx, "")
        return errs


STRATEGY = ClusterRoleBindingStrategy()
