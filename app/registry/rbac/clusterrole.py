"""ClusterRole (rbac.authorization.k8s.io/v1, cluster-scoped): rules in every namespace and on
cluster-scoped resources and non-resource URLs; an aggregationRule makes its rules the union of
the ClusterRoles it selects (kept so by the server's aggregation loop)."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn, RequestContext
from app.registry.columns import name_column
from app.registry.rbac.common import RoleKindStrategy, check_role_grant
from kube.errors import FieldError, invalid


class ClusterRoleStrategy(RoleKindStrategy):
    kind = "ClusterRole"
    plural = "clusterroles"
    singular = "clusterrole"
    namespaced = False
    printer_columns = (
        name_column(),
        PrinterColumn("Created At", "date", "", lambda o: o["metadata"].get("creationTimestamp")),
    )

    def validation_errors(self, obj: Obj) -> list[FieldError]:
        errs = super().validation_errors(obj)
        rule = obj.get("aggregationRule")
        selectors = rule.get("clusterRoleSelectors") if isinstance(rule, dict) else None
        if selectors is not None and not isinstance(selectors, list):
            errs.append(invalid("aggregationRule.clusterRoleSelectors", selectors, "must be a list"))
        return errs

    def check_grant(self, obj: Obj, ctx: RequestContext) -> None:
        check_role_grant(self, obj, ctx, "", aggregation=obj.get("aggregationRule") is not None)


STRATEGY: ClusterRoleStrategy = ClusterRoleStrategy()
