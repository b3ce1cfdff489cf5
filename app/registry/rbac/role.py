"""Role (rbac.authorization.k8s.io/v1, namespaced): rules within one namespace."""

from __future__ import annotations

from app.registry.columns import age_column, name_column
from app.registry.rbac.common import RoleKindStrategy


class RoleStrategy(RoleKindStrategy):
    kind = "Role"
    plural = "roles"
    singular = "role"
    namespaced = True
    printer_columns = (name_column(), age_column())


STRATEGY: RoleStrategy = RoleStrategy()
