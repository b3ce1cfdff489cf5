"""The default roles and bindings the server ensures at start: upstream kube-apiserver's bootstrap
policy (``app.auth.defaultpolicy``, unchanged, so upstream's kube-scheduler and
kube-controller-manager find what they find there), plus what this project's own workers need
beyond it, under names of their own.

The project's scheduler runs as ``system:kube-scheduler``; beyond upstream's scheduler roles it
needs only to have the API server check a what-if's pod as the asker (a dry run create, made by
impersonating the asker with constrained impersonation: pods, create, nothing else). Its controller process runs as ``system:kube-controller-manager``; with
``--use-service-account-credentials`` each controller acts as its service account, which upstream's
controller roles are bound to, and without it the process acts for every controller, so the roles
of the controllers it runs are also bound to that user (``system:dra-controller-manager:<name>``).
The kubelet simulator and its simulated nodes' drivers have roles of their own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.auth.defaultpolicy import (
    CONTROLLER_ROLE_PREFIX,
    SYSTEM_NAMESPACE,
    binding,
    cluster_role,
    controller_role_bindings,
    controller_roles,
    r,
    service_account,
    user,
)
from app.auth.defaultpolicy import cluster_role_bindings as upstream_cluster_role_bindings
from app.auth.defaultpolicy import cluster_roles as upstream_cluster_roles
from app.auth.defaultpolicy import role_bindings as upstream_role_bindings
from app.auth.defaultpolicy import roles as upstream_roles
from kube.features import FeatureGates

# The identities of this project's workers (their client certificates or tokens name these).
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_USER = "system:kube-controller-manager"
# The scheduler's impersonation of the askers of what-if questions (schedulers/whatifserver.py).
SCHEDULER_WHATIF_ROLE = "system:dra-scheduler-whatif"
# The kubelet simulator's own identity (its reads; each node writes as itself).
KUBELETSIM_USER = "system:kubeletsim"
# The service account a simulated node's DRA drivers act as.
DRIVER_NAMESPACE = SYSTEM_NAMESPACE
DRIVER_SERVICE_ACCOUNT = "dra-kubeletsim-driver"
# The controllers of ``python -m controllers`` (upstream's names), and the prefix of the bindings
# that grant their roles to the process's own user.
PROJECT_CONTROLLERS = (
    "resource-claim-controller",
    "generic-garbage-collector",
    "device-taint-eviction-controller",
    "resourcepoolstatusrequest-controller",
    "resourcequota-controller",
    "service-account-controller",
    "root-ca-cert-publisher",
    "replicaset-controller",
    "deployment-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "daemon-set-controller",
    "statefulset-controller",
)
CONTROLLER_MANAGER_BINDING_PREFIX = "system:dra-controller-manager:"


def service_accounts() -> list[dict[str, Any]]:
    """Service accounts the bootstrap bindings name."""
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DRIVER_SERVICE_ACCOUNT, "namespace": DRIVER_NAMESPACE}}]


def _gates(gates: Mapping[str, bool] | None) -> Mapping[str, bool]:
    return gates if gates is not None else FeatureGates()


def project_cluster_roles() -> list[dict[str, Any]]:
    """The roles of this project's workers that upstream's policy has no counterpart of."""
    return [
        # The simulator watches every simulated node's objects at once (a kubelet watches its own
        # only) and gets its nodes' drivers tokens bound to their node.
        cluster_role(
            "system:kubeletsim",
            [
                r("get list watch", "", "nodes pods"),
                r("get list watch", "resource.k8s.io", "resourceslices resourceclaims deviceclasses"),
                r("create", "", "serviceaccounts/token", names=DRIVER_SERVICE_ACCOUNT),
            ],
        ),
        # The scheduler's what-if: the asker's pod dry-run created as the asker, any user or
        # service account (upstream never lets these modes act as a node or system:masters).
        # "*": users, groups, uids and every key of userextras (RBAC has no wildcard for a
        # subresource of one resource, and the extras' keys are the subresources).
        cluster_role(
            SCHEDULER_WHATIF_ROLE,
            [
                r("impersonate:user-info", "authentication.k8s.io", "*"),
                r("impersonate:serviceaccount", "authentication.k8s.io", "serviceaccounts"),
                r("impersonate-on:user-info:create impersonate-on:serviceaccount:create", "", "pods"),
            ],
        ),
        # A node's DRA drivers: device status of the claims allocated on their own node.
        cluster_role(
            f"system:{DRIVER_SERVICE_ACCOUNT}",
            [
                r("get", "resource.k8s.io", "resourceclaims"),
                r("patch update", "resource.k8s.io", "resourceclaims/status"),
                r("associated-node:patch associated-node:update", "resource.k8s.io", "resourceclaims/driver"),
            ],
        ),
    ]


def project_cluster_role_bindings(gates: Mapping[str, bool]) -> list[dict[str, Any]]:
    bound = {role["metadata"]["name"] for role in controller_roles(gates)}
    controllers = [
        binding(f"{CONTROLLER_MANAGER_BINDING_PREFIX}{name}", f"{CONTROLLER_ROLE_PREFIX}{name}", [user(CONTROLLER_USER)])
        for name in PROJECT_CONTROLLERS
        if f"{CONTROLLER_ROLE_PREFIX}{name}" in bound
    ]
    return [
        *controllers,
        binding(SCHEDULER_WHATIF_ROLE, SCHEDULER_WHATIF_ROLE, [user(SCHEDULER_USER)]),
        binding("system:kubeletsim", "system:kubeletsim", [user(KUBELETSIM_USER)]),
        binding(
            f"system:{DRIVER_SERVICE_ACCOUNT}",
            f"system:{DRIVER_SERVICE_ACCOUNT}",
            [service_account(DRIVER_SERVICE_ACCOUNT, DRIVER_NAMESPACE)],
        ),
    ]


def cluster_roles(gates: Mapping[str, bool] | None = None) -> list[dict[str, Any]]:
    gates = _gates(gates)
    return [*upstream_cluster_roles(gates), *controller_roles(gates), *project_cluster_roles()]


def cluster_role_bindings(gates: Mapping[str, bool] | None = None) -> list[dict[str, Any]]:
    gates = _gates(gates)
    return [*upstream_cluster_role_bindings(), *controller_role_bindings(gates), *project_cluster_role_bindings(gates)]


def roles() -> list[dict[str, Any]]:
    """Namespaced bootstrap roles: upstream's (the reader of the configmap delegated authentication
    reads, the leader election roles of the scheduler and the controller manager, ...)."""
    return upstream_roles()


def role_bindings() -> list[dict[str, Any]]:
    return upstream_role_bindings()
