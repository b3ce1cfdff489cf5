"""The default roles and bindings the server ensures at start, after upstream's bootstrap
policy for what this server serves, plus the roles of this project's own scheduler and
controller (modelled on ``system:kube-scheduler`` and the resource claim controller's role).

Upstream's kube-scheduler and kube-controller-manager run against this server as the same users
(docs/upstream-components.md), so those roles also grant what upstream's grant them on the kinds
this server serves, and the controller roles are bound, as upstream binds them, to the service
accounts kube-controller-manager acts as with ``--use-service-account-credentials``."""

from __future__ import annotations

from typing import Any

from app.auth.user import (
    ALL_AUTHENTICATED,
    ALL_UNAUTHENTICATED,
    SYSTEM_PRIVILEGED_GROUP,
)

GROUP = "rbac.authorization.k8s.io"
READ = ["get", "list", "watch"]
READ_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
# The identities of this project's workers (their client certificates or tokens name these).
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_USER = "system:kube-controller-manager"
# The kubelet simulator's own identity (its reads; each node writes as itself).
KUBELETSIM_USER = "system:kubeletsim"
# The service account a simulated node's DRA drivers act as.
DRIVER_NAMESPACE = "kube-system"
SYSTEM_NAMESPACE = "kube-system"
# The configmap components with delegated authentication read (and its reader role).
AUTHENTICATION_CONFIGMAP = "extension-apiserver-authentication"
DRIVER_SERVICE_ACCOUNT = "dra-kubeletsim-driver"


def service_accounts() -> list[dict[str, Any]]:
    """Service accounts the bootstrap bindings name."""
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DRIVER_SERVICE_ACCOUNT, "namespace": DRIVER_NAMESPACE}}]


def rule(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None, names: list[str] | None = None, urls: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": verbs}
    if groups is not None:
        out["apiGroups"] = groups
    if resources is not None:
        out["resources"] = resources
    if names:
        out["resourceNames"] = names
    if urls:
        out["nonResourceURLs"] = urls
    return out


def _role(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None, aggregate: list[str] | None = None) -> dict[str, Any]:
    role: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {**BOOTSTRAP_LABELS, **(labels or {})}, "annotations": dict(AUTOUPDATE)},
        "rules": rules,
    }
    if aggregate is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {f"{AGGREGATE_TO}{a}": "true"}} for a in aggregate]}
    return role


def _binding(name: str, role: str, subjects: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    }


def _controller_binding(controller: str) -> dict[str, Any]:
    """A controller role's binding: to this project's controller, and to the service account
    upstream's kube-controller-manager runs that controller as."""
    name = f"system:controller:{controller}"
    return _binding(name, name, [_user(CONTROLLER_USER), {"kind": "ServiceAccount", "name": controller, "namespace": SYSTEM_NAMESPACE}])


def _group(name: str) -> dict[str, str]:
    return {"apiGroup": GROUP, "kind": "Group", "name": name}


def _user(name: str) -> dict[str, str]:
    return {"apiGroup": GROUP, "kind": "User", "name": name}


def _events() -> dict[str, Any]:
    return rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"])


def cluster_roles() -> list[dict[str, Any]]:
    health = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    return [
        _role("cluster-admin", [rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])]),
        _role(
            "system:discovery",
            [rule(["get"], urls=["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])],
        ),
        _role(
            "system:basic-user",
            [
                rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
            ],
        ),
        _role("system:public-info-viewer", [rule(["get"], urls=health)]),
        _role("system:monitoring", [rule(["get"], urls=["/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"])]),
        # Namespace roles, filled in by aggregation from the system:aggregate-to-* roles.
        _role("admin", [], aggregate=["admin"]),
        _role("edit", [], labels={f"{AGGREGATE_TO}admin": "true"}, aggregate=["edit"]),
        _role("view", [], labels={f"{AGGREGATE_TO}edit": "true"}, aggregate=["view"]),
        _role(
            "system:aggregate-to-admin",
            [
                rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
                rule(READ_WRITE, [GROUP], ["rolebindings", "roles"]),
            ],
            labels={f"{AGGREGATE_TO}admin": "true"},
        ),
        _role(
            "system:aggregate-to-edit",
            [
                rule(READ_WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
                rule(["create"], [""], ["pods/eviction"]),
                rule(READ_WRITE, [""], ["secrets", "serviceaccounts"]),
                rule(["impersonate"], [""], ["serviceaccounts"]),
                rule(READ_WRITE, ["resource.k8s.io"], ["resourceclaims", "resourceclaimtemplates"]),
            ],
            labels={f"{AGGREGATE_TO}edit": "true"},
        ),
        _role(
            "system:aggregate-to-view",
            [
                rule(READ, [""], ["pods", "pods/status", "serviceaccounts", "events", "namespaces", "namespaces/status"]),
                rule(READ, ["events.k8s.io"], ["events"]),
                rule(READ, ["resource.k8s.io"], ["resourceclaims", "resourceclaims/status", "resourceclaimtemplates"]),
            ],
            labels={f"{AGGREGATE_TO}view": "true"},
        ),
        _role(
            "system:kube-scheduler",
            [
                _events(),
                rule(["create"], ["coordination.k8s.io"], ["leases"]),
                rule(["get", "update", "patch"], ["coordination.k8s.io"], ["leases"], names=["dra-scheduler"]),
                rule(READ, [""], ["nodes", "namespaces"]),
                rule(["delete", "get", "list", "watch"], [""], ["pods"]),
                rule(["create"], [""], ["bindings", "pods/binding"]),
                rule(["patch", "update"], [""], ["pods/status"]),
                rule(READ, ["resource.k8s.io"], ["deviceclasses", "resourceslices", "devicetaintrules"]),
                # The claim itself too: the scheduler adds its finalizer before allocating.
                rule(["get", "list", "watch", "patch", "update"], ["resource.k8s.io"], ["resourceclaims", "resourceclaims/status"]),
                # The claim for a pod's extended resources backed by devices (DRAExtendedResource).
                rule(["create", "delete"], ["resource.k8s.io"], ["resourceclaims"]),
                rule(["patch", "update"], ["resource.k8s.io"], ["resourceclaims/binding"]),
                # Its explanation port asks the server whether a caller may see the pod (as upstream's secure port does).
                rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
                # Upstream kube-scheduler's: its leader election, what selects pods (default
                # topology spreading), what preemption respects, and what volume plugins read.
                rule(["get", "update", "list", "watch"], ["coordination.k8s.io"], ["leases"], names=["kube-scheduler"]),
                rule(READ, [""], ["services", "replicationcontrollers"]),
                rule(READ, ["apps", "extensions"], ["replicasets"]),
                rule(READ, ["apps"], ["statefulsets"]),
                rule(READ, ["policy"], ["poddisruptionbudgets"]),
                rule(READ, [""], ["persistentvolumeclaims", "persistentvolumes"]),
                rule(READ, ["storage.k8s.io"], ["csinodes"]),
                rule(["get", "list", "watch"], ["storage.k8s.io"], ["volumeattachments"]),
                rule(READ, ["storage.k8s.io"], ["csidrivers"]),
                rule(READ, ["storage.k8s.io"], ["csistoragecapacities"]),
                rule(["update"], [""], ["pods/finalizers"]),
            ],
        ),
        # Bound to the scheduler: volume binding reads classes and binds claims to volumes.
        _role(
            "system:volume-scheduler",
            [
                rule([*READ, "update", "patch"], [""], ["persistentvolumes"]),
                rule(READ, ["storage.k8s.io"], ["storageclasses"]),
                rule([*READ, "update", "patch"], [""], ["persistentvolumeclaims"]),
            ],
        ),
        _role(
            "system:controller:resource-claim-controller",
            [
                rule(["get", "list", "watch"], [""], ["pods"]),
                rule(["update"], [""], ["pods/finalizers"]),
                rule(["patch", "update"], [""], ["pods/status"]),
                rule(["get", "list", "watch", "create", "delete", "patch", "update"], ["resource.k8s.io"], ["resourceclaims"]),
                rule(["patch", "update"], ["resource.k8s.io"], ["resourceclaims/status", "resourceclaims/binding"]),
                rule(READ, ["resource.k8s.io"], ["resourceclaimtemplates"]),
                rule(READ, ["", "events.k8s.io"], ["events"]),
                _events(),
            ],
        ),
        _role(
            "system:controller:device-taint-eviction-controller",
            [
                rule(["get", "list", "watch", "delete"], [""], ["pods"]),
                rule(["patch", "update"], [""], ["pods/status"]),
                rule(READ, ["resource.k8s.io"], ["resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules"]),
                rule(["patch", "update"], ["resource.k8s.io"], ["devicetaintrules/status"]),
                _events(),
            ],
        ),
        # Upstream's garbage collector reads, patches and deletes every kind.
        _role("system:controller:generic-garbage-collector", [rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"]), _events()]),
        # Upstream's namespace controller empties a deleted namespace of every resource (this server
        # does that itself; upstream's kube-controller-manager does it again).
        _role(
            "system:controller:namespace-controller",
            [
                rule(["get", "list", "watch", "delete"], [""], ["namespaces"]),
                rule(["update"], [""], ["namespaces/finalize", "namespaces/status"]),
                rule(["get", "list", "watch", "delete", "deletecollection"], ["*"], ["*"]),
            ],
        ),
        # The simulator watches every simulated node's objects at once (a kubelet watches its own
        # only) and gets its nodes' drivers tokens bound to their node.
        _role(
            "system:kubeletsim",
            [
                rule(READ, [""], ["nodes", "pods"]),
                rule(READ, ["resource.k8s.io"], ["resourceslices", "resourceclaims", "deviceclasses"]),
                rule(["create"], [""], ["serviceaccounts/token"], names=[DRIVER_SERVICE_ACCOUNT]),
            ],
        ),
        _role(
            "system:kube-controller-manager",
            [
                _events(),
                rule(["create"], ["coordination.k8s.io"], ["leases"]),
                rule(["get", "update", "patch"], ["coordination.k8s.io"], ["leases"], names=["dra-controller"]),
                rule(READ, [""], ["namespaces"]),
                # Upstream kube-controller-manager's: its leader election, and the service accounts
                # (with their tokens) it acts as for each controller.
                rule(["get", "update"], ["coordination.k8s.io"], ["leases"], names=["kube-controller-manager"]),
                rule(["create"], [""], ["secrets", "serviceaccounts"]),
                rule(["delete"], [""], ["secrets"]),
                rule(["get"], [""], ["namespaces", "secrets", "serviceaccounts", "configmaps"]),
                rule(["update"], [""], ["secrets", "serviceaccounts"]),
                rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
                rule(["create"], [""], ["serviceaccounts/token"]),
            ],
        ),
        # A node's DRA drivers: device status of the claims allocated on their own node.
        _role(
            "system:dra-kubeletsim-driver",
            [
                rule(["get"], ["resource.k8s.io"], ["resourceclaims"]),
                rule(["patch", "update"], ["resource.k8s.io"], ["resourceclaims/status"]),
                rule(["associated-node:patch", "associated-node:update"], ["resource.k8s.io"], ["resourceclaims/driver"]),
            ],
        ),
    ]


def cluster_role_bindings() -> list[dict[str, Any]]:
    return [
        _binding("cluster-admin", "cluster-admin", [_group(SYSTEM_PRIVILEGED_GROUP)]),
        _binding("system:discovery", "system:discovery", [_group(ALL_AUTHENTICATED)]),
        _binding("system:basic-user", "system:basic-user", [_group(ALL_AUTHENTICATED)]),
        _binding("system:public-info-viewer", "system:public-info-viewer", [_group(ALL_AUTHENTICATED), _group(ALL_UNAUTHENTICATED)]),
        _binding("system:monitoring", "system:monitoring", [_group("system:monitoring")]),
        _binding("system:kube-scheduler", "system:kube-scheduler", [_user(SCHEDULER_USER)]),
        _binding("system:volume-scheduler", "system:volume-scheduler", [_user(SCHEDULER_USER)]),
        _binding("system:kube-controller-manager", "system:kube-controller-manager", [_user(CONTROLLER_USER)]),
        _controller_binding("resource-claim-controller"),
        _controller_binding("device-taint-eviction-controller"),
        _controller_binding("generic-garbage-collector"),
        _controller_binding("namespace-controller"),
        _binding("system:kubeletsim", "system:kubeletsim", [_user(KUBELETSIM_USER)]),
        _binding(
            "system:dra-kubeletsim-driver",
            "system:dra-kubeletsim-driver",
            [{"kind": "ServiceAccount", "name": DRIVER_SERVICE_ACCOUNT, "namespace": DRIVER_NAMESPACE}],
        ),
    ]


def roles() -> list[dict[str, Any]]:
    """Namespaced bootstrap roles: the reader of the configmap delegated authentication reads."""
    role = _role("extension-apiserver-authentication-reader", [rule(READ, [""], ["configmaps"], names=[AUTHENTICATION_CONFIGMAP])])
    role["kind"] = "Role"
    role["metadata"]["namespace"] = SYSTEM_NAMESPACE
    return [role]


def role_bindings() -> list[dict[str, Any]]:
    """Namespaced bootstrap bindings: the scheduler and the controller manager read the
    authentication configmap (for their own secure ports' delegated authentication)."""
    binding = _binding("system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader", [_user(CONTROLLER_USER), _user(SCHEDULER_USER)])
    binding["kind"] = "RoleBinding"
    binding["roleRef"]["kind"] = "Role"
    binding["metadata"]["namespace"] = SYSTEM_NAMESPACE
    return [binding]
