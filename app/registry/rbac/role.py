"""Role (rbac.authorization.k8s.io/v1, namespaced): rules within one namespace."""

from __future__ import annotations

from app.registry.base import Obj, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.rbac.common import RBACStrategy, check_role_grant, only_gc_fields_changed
from app.registry.rbac.rbac_validation import validate_rules
from kube.errors import FieldError


class RoleStrategy(RBACStrategy):
    kind = "Role"
    plural = "roles"
    singular = "role"
    namespaced = True
    create_example: Obj = {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    printer_columns = (name_column(), age_column())

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_rules(obj.get("rules"), namespaced=True)
        if not errs:
            check_role_grant(self, obj, ctx, obj["metadata"].get("namespace", ""))
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_rules(new.get("rules"), namespaced=True)
        if not errs and not only_gc_fields_changed(new, old):
            check_role_grant(self, new, ctx, new["metadata"].get("namespace", ""))
        return errs


STRATEGY = RoleStrategy()
