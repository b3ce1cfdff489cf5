"""ClusterRoleBinding (rbac.authorization.k8s.io/v1, cluster-scoped): a ClusterRole granted to
subjects in every namespace."""

from __future__ import annotations

from app.registry.rbac.common import BindingKindStrategy


class ClusterRoleBindingStrategy(BindingKindStrategy):
    kind = "ClusterRoleBinding"
    plural = "clusterrolebindings"
    singular = "clusterrolebinding"
    namespaced = False
    role_kinds = ("ClusterRole",)


STRATEGY: ClusterRoleBindingStrategy = ClusterRoleBindingStrategy()
