"""RoleBinding (rbac.authorization.k8s.io/v1, namespaced): a Role or ClusterRole granted to
subjects within one namespace."""

from __future__ import annotations

from app.registry.rbac.common import BindingKindStrategy


class RoleBindingStrategy(BindingKindStrategy):
    kind = "RoleBinding"
    plural = "rolebindings"
    singular = "rolebinding"
    namespaced = True
    role_kinds = ("Role", "ClusterRole")


STRATEGY: RoleBindingStrategy = RoleBindingStrategy()
