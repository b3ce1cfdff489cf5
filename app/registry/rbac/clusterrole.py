"""ClusterRole (rbac.authorization.k8s.io/v1, cluster-scoped): rules in every namespace and on
cluster-scoped resources and non-resource URLs; an aggregationRule makes its rules the union of
the ClusterRoles it selects (kept so by the server's aggregation loop)."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn, RequestContext
from app.registry.columns import name_column
from app.registry.rbac.common import RBACStrategy, check_role_grant, only_gc_fields_changed
from app.registry.rbac.rbac_validation import validate_rules
from kube.errors import FieldError, invalid


def _aggregation_errors(obj: Obj) -> list[FieldError]:
    rule = obj.get("aggregationRule")
    if rule is None:
        return []
    selectors = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
    if selectors is not None and not isinstance(selectors, list):
        return [invalid("aggregationRule.clusterRoleSelectors", selectors, "must be a list")]
    return []


class ClusterRoleStrategy(RBACStrategy):
    kind = "ClusterRole"
    plural = "clusterroles"
    singular = "clusterrole"
    namespaced = False
    create_example: Obj = {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    printer_columns = (
        name_column(),
        PrinterColumn("Created At", "date", "", lambda o: o["metadata"].get("creationTimestamp")),
    )

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_rules(obj.get("rules"), namespaced=False) + _aggregation_errors(obj)
        if not errs:
            self._check_grant(obj, ctx)
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_rules(new.get("rules"), namespaced=False) + _aggregation_errors(new)
        if not errs and not only_gc_fields_changed(new, old):
            self._check_grant(new, ctx)
        return errs

    def _check_grant(self, obj: Obj, ctx: RequestContext) -> None:
        check_role_grant(self, obj, ctx, "", aggregation=obj.get("aggregationRule") is not None)

STRATEGY = ClusterRoleStrategy()
