"""The default roles and bindings the server ensures at start, after upstream's bootstrap
policy for what this server serves, plus the roles of this project's own scheduler and
controller (modelled on ``system:kube-scheduler`` and the resource claim controller's role)."""

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
                rule(["patch", "update"], ["resource.k8s.io"], ["resourceclaims/binding"]),
                # Its explanation port asks the server whether a caller may see the pod (as upstream's secure port does).
                rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
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
        _role("system:controller:generic-garbage-collector", [rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"])]),
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
        _binding("system:kube-controller-manager", "system:kube-controller-manager", [_user(CONTROLLER_USER)]),
        _binding("system:controller:resource-claim-controller", "system:controller:resource-claim-controller", [_user(CONTROLLER_USER)]),
        _binding("system:controller:device-taint-eviction-controller", "system:controller:device-taint-eviction-controller", [_user(CONTROLLER_USER)]),
        _binding("system:controller:generic-garbage-collector", "system:controller:generic-garbage-collector", [_user(CONTROLLER_USER)]),
        _binding("system:kubeletsim", "system:kubeletsim", [_user(KUBELETSIM_USER)]),
        _binding(
            "system:dra-kubeletsim-driver",
            "system:dra-kubeletsim-driver",
            [{"kind": "ServiceAccount", "name": DRIVER_SERVICE_ACCOUNT, "namespace": DRIVER_NAMESPACE}],
        ),
    ]
