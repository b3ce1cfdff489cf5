"""Upstream kube-apiserver's default RBAC policy (v1.37): its bootstrap ClusterRoles, controller
roles, namespaced Roles and their bindings, with the rules its feature gates add where this server
knows the gate.

Every rule is kept as upstream has it, also those on resources this server does not serve: a
request for such a resource is answered 404 whatever RBAC says, so the rule grants nothing here,
while keeping it means the policy reads (``kubectl get clusterrole -o yaml``) exactly as on
kube-apiserver, a comparison with upstream's own record of its policy needs no exceptions, and a
kind served later needs no edit here. tests/app/auth/test_default_policy_upstream.py compares this
module with upstream's record, entry by entry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube.features import Gate

GROUP = "rbac.authorization.k8s.io"
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"
CONTROLLER_ROLE_PREFIX = "system:controller:"
SYSTEM_NAMESPACE = "kube-system"

Obj = dict[str, Any]


def rule(
    verbs: list[str],
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    names: list[str] | None = None,
    urls: list[str] | None = None,
) -> Obj:
    """A PolicyRule (empty parts left out, as upstream serialises them)."""
    out: Obj = {"verbs": verbs}
    if groups is not None:
        out["apiGroups"] = groups
    if resources is not None:
        out["resources"] = resources
    if names:
        out["resourceNames"] = names
    if urls:
        out["nonResourceURLs"] = urls
    return out


def r(verbs: str, groups: str | list[str], resources: str, names: str = "") -> Obj:
    """A resource rule from space-separated verbs, resources and names (``""`` is the core group)."""
    return rule(verbs.split(), [groups] if isinstance(groups, str) else groups, resources.split(), names.split() or None)


def urls(verbs: str, paths: str) -> Obj:
    """A non-resource rule from space-separated verbs and paths."""
    return rule(verbs.split(), urls=paths.split())


def cluster_role(name: str, rules: list[Obj], label: str = "", aggregate: str = "") -> Obj:
    """A bootstrap ClusterRole; ``label`` aggregates it into that role, ``aggregate`` makes it the
    union of the roles labelled for it."""
    labels = {**BOOTSTRAP_LABELS, **({f"{AGGREGATE_TO}{label}": "true"} if label else {})}
    role: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels, "annotations": dict(AUTOUPDATE)},
        "rules": rules,
    }
    if aggregate:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {f"{AGGREGATE_TO}{aggregate}": "true"}}]}
    return role


def namespaced_role(namespace: str, name: str, rules: list[Obj]) -> Obj:
    role = cluster_role(name, rules)
    role["kind"] = "Role"
    role["metadata"]["namespace"] = namespace
    return role


def binding(name: str, role: str, subjects: list[Obj] | None) -> Obj:
    """A bootstrap ClusterRoleBinding (upstream's ``system:node`` has no subjects at all)."""
    out: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
    }
    if subjects is not None:
        out["subjects"] = subjects
    return out


def namespaced_binding(namespace: str, name: str, role: str, subjects: list[Obj]) -> Obj:
    out = binding(name, role, subjects)
    out["kind"] = "RoleBinding"
    out["roleRef"]["kind"] = "Role"
    out["metadata"]["namespace"] = namespace
    return out


def user(name: str) -> Obj:
    return {"apiGroup": GROUP, "kind": "User", "name": name}


def group(name: str) -> Obj:
    return {"apiGroup": GROUP, "kind": "Group", "name": name}


def service_account(name: str, namespace: str = SYSTEM_NAMESPACE) -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def _events() -> Obj:
    """Recording events, in the core and in the events API."""
    return r("create patch update", ["", "events.k8s.io"], "events")


def _on(gates: Mapping[str, bool], gate: str, *rules: Obj) -> list[Obj]:
    """``rules`` when ``gate`` is enabled, else none."""
    return list(rules) if gates.get(gate, False) else []


def cluster_roles(gates: Mapping[str, bool]) -> list[Obj]:
    """Upstream's ClusterRoles other than the controllers'."""
    return [
        cluster_role("admin", [], aggregate="admin"),
        cluster_role(
            "cluster-admin",
            [
                r("*", "*", "*"),
                urls("*", "*"),
            ],
        ),
        cluster_role("edit", [], label="admin", aggregate="edit"),
        cluster_role(
            "system:aggregate-to-admin",
            [
                r("create", "authorization.k8s.io", "localsubjectaccessreviews"),
                r("create delete deletecollection get list patch update watch", "rbac.authorization.k8s.io", "rolebindings roles"),
            ],
            label="admin",
        ),
        cluster_role(
            "system:aggregate-to-edit",
            [
                r("get list watch", "", "pods/attach pods/exec pods/portforward pods/proxy secrets services/proxy"),
                r("impersonate", "", "serviceaccounts"),
                r("create delete deletecollection patch update", "", "pods pods/attach pods/exec pods/portforward pods/proxy"),
                r("create", "", "pods/eviction"),
                r(
                    "create delete deletecollection patch update",
                    "",
                    "configmaps persistentvolumeclaims replicationcontrollers replicationcontrollers/scale secrets serviceaccounts services services/proxy",
                ),
                r("create", "", "serviceaccounts/token"),
                r("create delete deletecollection patch update", ["", "events.k8s.io"], "events"),
                r(
                    "create delete deletecollection patch update",
                    "apps",
                    "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale statefulsets statefulsets/scale",
                ),
                r("create delete deletecollection patch update", "autoscaling", "horizontalpodautoscalers"),
                r("create delete deletecollection patch update", "batch", "cronjobs jobs"),
                r(
                    "create delete deletecollection patch update",
                    "extensions",
                    "daemonsets deployments deployments/rollback deployments/scale ingresses networkpolicies replicasets replicasets/scale replicationcontrollers/scale",
                ),
                r("create delete deletecollection patch update", "policy", "poddisruptionbudgets"),
                r("create delete deletecollection patch update", "networking.k8s.io", "ingresses networkpolicies"),
                r("create delete deletecollection get list patch update watch", "coordination.k8s.io", "leases"),
                r("create delete deletecollection patch update", "resource.k8s.io", "resourceclaims resourceclaimtemplates"),
                *_on(
                    gates, Gate.GenericWorkload, r("create delete deletecollection patch update", "scheduling.k8s.io", "podgroups workloads")
                ),
            ],
            label="edit",
        ),
        cluster_role(
            "system:aggregate-to-view",
            [
                r(
                    "get list watch",
                    "",
                    "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods replicationcontrollers replicationcontrollers/scale serviceaccounts services services/status",
                ),
                r(
                    "get list watch",
                    "",
                    "bindings limitranges namespaces/status pods/log pods/status replicationcontrollers/status resourcequotas resourcequotas/status",
                ),
                r("get list watch", "", "namespaces"),
                r("get list watch", ["", "events.k8s.io"], "events"),
                r("get list watch", "discovery.k8s.io", "endpointslices"),
                r(
                    "get list watch",
                    "apps",
                    "controllerrevisions daemonsets daemonsets/status deployments deployments/scale deployments/status replicasets replicasets/scale replicasets/status statefulsets statefulsets/scale statefulsets/status",
                ),
                r("get list watch", "autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status"),
                r("get list watch", "batch", "cronjobs cronjobs/status jobs jobs/status"),
                r(
                    "get list watch",
                    "extensions",
                    "daemonsets daemonsets/status deployments deployments/scale deployments/status ingresses ingresses/status networkpolicies replicasets replicasets/scale replicasets/status replicationcontrollers/scale",
                ),
                r("get list watch", "policy", "poddisruptionbudgets poddisruptionbudgets/status"),
                r("get list watch", "networking.k8s.io", "ingresses ingresses/status networkpolicies"),
                r("get list watch", "resource.k8s.io", "resourceclaims resourceclaims/status resourceclaimtemplates"),
                *_on(gates, Gate.GenericWorkload, r("get list watch", "scheduling.k8s.io", "podgroups podgroups/status workloads")),
            ],
            label="view",
        ),
        cluster_role(
            "system:auth-delegator",
            [
                r("create", "authentication.k8s.io", "tokenreviews"),
                r("create", "authorization.k8s.io", "subjectaccessreviews"),
            ],
        ),
        cluster_role(
            "system:basic-user",
            [
                r("create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews"),
                r("create", "authentication.k8s.io", "selfsubjectreviews"),
            ],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            [r("create", "certificates.k8s.io", "certificatesigningrequests/nodeclient")],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            [r("create", "certificates.k8s.io", "certificatesigningrequests/selfnodeclient")],
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            [r("approve", "certificates.k8s.io", "signers", names="kubernetes.io/kube-apiserver-client")],
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            [r("approve", "certificates.k8s.io", "signers", names="kubernetes.io/kube-apiserver-client-kubelet")],
        ),
        cluster_role(
            "system:certificates.k8s.io:kubelet-serving-approver",
            [r("approve", "certificates.k8s.io", "signers", names="kubernetes.io/kubelet-serving")],
        ),
        cluster_role(
            "system:certificates.k8s.io:legacy-unknown-approver",
            [r("approve", "certificates.k8s.io", "signers", names="kubernetes.io/legacy-unknown")],
        ),
        cluster_role("system:cluster-trust-bundle-discovery", [r("get list watch", "certificates.k8s.io", "clustertrustbundles")]),
        cluster_role(
            "system:discovery", [urls("get", "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version /version/")]
        ),
        cluster_role(
            "system:heapster",
            [
                r("get list watch", "", "events namespaces nodes pods"),
                r("get list watch", "extensions", "deployments"),
            ],
        ),
        cluster_role("system:kube-aggregator", [r("get list watch", "", "endpoints services")]),
        cluster_role(
            "system:kube-controller-manager",
            [
                _events(),
                r("create", "coordination.k8s.io", "leases"),
                r("get update", "coordination.k8s.io", "leases", names="kube-controller-manager"),
                r("create", "", "secrets serviceaccounts"),
                r("delete", "", "secrets"),
                r("get", "", "configmaps namespaces secrets serviceaccounts"),
                r("update", "", "secrets serviceaccounts"),
                r("create", "authentication.k8s.io", "tokenreviews"),
                r("create", "authorization.k8s.io", "subjectaccessreviews"),
                r("list watch", "*", "*"),
                r("create", "", "serviceaccounts/token"),
            ],
        ),
        cluster_role("system:kube-dns", [r("list watch", "", "endpoints services")]),
        cluster_role(
            "system:kube-scheduler",
            [
                _events(),
                r("create", "coordination.k8s.io", "leases"),
                r("get list update watch", "coordination.k8s.io", "leases", names="kube-scheduler"),
                r("create delete deletecollection get list patch update watch", "coordination.k8s.io", "leasecandidates"),
                r("get list watch", "", "nodes"),
                r("delete get list watch", "", "pods"),
                r("create", "", "bindings pods/binding"),
                r("patch update", "", "pods/status"),
                r("get list watch", "", "replicationcontrollers services"),
                r("get list watch", ["apps", "extensions"], "replicasets"),
                r("get list watch", "apps", "statefulsets"),
                r("get list watch", "policy", "poddisruptionbudgets"),
                r("get list watch", "", "persistentvolumeclaims persistentvolumes"),
                r("create", "authentication.k8s.io", "tokenreviews"),
                r("create", "authorization.k8s.io", "subjectaccessreviews"),
                r("get list watch", "storage.k8s.io", "csinodes"),
                r("get list watch", "storage.k8s.io", "volumeattachments"),
                r("get list watch", "", "namespaces"),
                r("get list watch", "storage.k8s.io", "csidrivers"),
                r("get list watch", "storage.k8s.io", "csistoragecapacities"),
                r("get list watch", "resource.k8s.io", "deviceclasses"),
                r("get list patch update watch", "resource.k8s.io", "resourceclaims"),
                r("get list patch update watch", "resource.k8s.io", "resourceclaims/status"),
                r("update", "", "pods/finalizers"),
                r("get list watch", "resource.k8s.io", "resourceslices"),
                r("create delete", "resource.k8s.io", "resourceclaims"),
                *_on(gates, Gate.DRADeviceTaintRules, r("get list watch", "resource.k8s.io", "devicetaintrules")),
                *_on(gates, Gate.DRAResourceClaimGranularStatusAuthorization, r("patch update", "resource.k8s.io", "resourceclaims/binding")),
                *_on(
                    gates,
                    Gate.GenericWorkload,
                    r("get list watch", "scheduling.k8s.io", "podgroups"),
                    r("patch update", "scheduling.k8s.io", "podgroups/status"),
                ),
            ],
        ),
        cluster_role(
            "system:kubelet-api-admin",
            [
                r("get list watch", "", "nodes"),
                r("proxy", "", "nodes"),
                r("*", "", "nodes/log nodes/metrics nodes/proxy nodes/stats"),
                r("*", "", "nodes/configz nodes/healthz nodes/pods"),
            ],
        ),
        cluster_role(
            "system:monitoring",
            [
                urls("get", "/flagz /healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/* /statusz"),
                r("get", "", "nodes/metrics"),
            ],
        ),
        cluster_role(
            "system:node",
            [
                r("create", "authentication.k8s.io", "tokenreviews"),
                r("create", "authorization.k8s.io", "localsubjectaccessreviews subjectaccessreviews"),
                r("get list watch", "", "services"),
                r("create get list watch", "", "nodes"),
                r("patch update", "", "nodes/status"),
                r("patch update", "", "nodes"),
                _events(),
                r("get list watch", "", "pods"),
                r("create delete", "", "pods"),
                r("patch update", "", "pods/status"),
                r("create", "", "pods/eviction"),
                r("get list watch", "", "configmaps secrets"),
                r("get", "", "persistentvolumeclaims persistentvolumes"),
                r("get", "", "endpoints"),
                r("create get list watch", "certificates.k8s.io", "certificatesigningrequests"),
                r("create delete get patch update", "coordination.k8s.io", "leases"),
                r("get", "storage.k8s.io", "volumeattachments"),
                r("create", "", "serviceaccounts/token"),
                r("get patch update", "", "persistentvolumeclaims/status"),
                r("get list watch", "storage.k8s.io", "csidrivers"),
                r("create delete get patch update", "storage.k8s.io", "csinodes"),
                r("get list watch", "node.k8s.io", "runtimeclasses"),
                r("get", "resource.k8s.io", "resourceclaims"),
                r("deletecollection", "resource.k8s.io", "resourceslices"),
                r("get list watch", "certificates.k8s.io", "clustertrustbundles"),
                r("get", "", "serviceaccounts"),
                r("create get list watch", "certificates.k8s.io", "podcertificaterequests"),
            ],
        ),
        cluster_role("system:node-bootstrapper", [r("create get list watch", "certificates.k8s.io", "certificatesigningrequests")]),
        cluster_role(
            "system:node-problem-detector",
            [
                r("get", "", "nodes"),
                r("patch", "", "nodes/status"),
                _events(),
            ],
        ),
        cluster_role(
            "system:node-proxier",
            [
                r("list watch", "", "endpoints services"),
                r("get list watch", "", "nodes"),
                _events(),
                r("list watch", "networking.k8s.io", "servicecidrs"),
                r("list watch", "discovery.k8s.io", "endpointslices"),
            ],
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            [
                r("create delete get list watch", "", "persistentvolumes"),
                r("get list update watch", "", "persistentvolumeclaims"),
                r("get list watch", "storage.k8s.io", "storageclasses"),
                r("watch", "", "events"),
                _events(),
            ],
        ),
        cluster_role("system:public-info-viewer", [urls("get", "/healthz /livez /readyz /version /version/")]),
        cluster_role(
            "system:service-account-issuer-discovery",
            [urls("get", "/.well-known/openid-configuration /.well-known/openid-configuration/ /openid/v1/jwks /openid/v1/jwks/")],
        ),
        cluster_role(
            "system:volume-scheduler",
            [
                r("get list patch update watch", "", "persistentvolumes"),
                r("get list watch", "storage.k8s.io", "storageclasses"),
                r("get list patch update watch", "", "persistentvolumeclaims"),
            ],
        ),
        cluster_role("view", [], label="edit", aggregate="view"),
    ]


def _controller_role(name: str, rules: list[Obj]) -> Obj:
    return cluster_role(CONTROLLER_ROLE_PREFIX + name, rules)


def controller_roles(gates: Mapping[str, bool]) -> list[Obj]:
    """The role of each of kube-controller-manager's controllers, ``system:controller:<name>``."""
    roles = [
        _controller_role(
            "attachdetach-controller",
            [
                r("list watch", "", "persistentvolumeclaims persistentvolumes"),
                r("get list watch", "", "nodes"),
                r("patch update", "", "nodes/status"),
                r("list watch", "", "pods"),
                _events(),
                r("create delete get list watch", "storage.k8s.io", "volumeattachments"),
                r("get list watch", "storage.k8s.io", "csidrivers"),
                r("get list watch", "storage.k8s.io", "csinodes"),
            ],
        ),
        _controller_role(
            "certificate-controller",
            [
                r("delete get list watch", "certificates.k8s.io", "certificatesigningrequests"),
                r("update", "certificates.k8s.io", "certificatesigningrequests/approval certificatesigningrequests/status"),
                r("approve", "certificates.k8s.io", "signers", names="kubernetes.io/kube-apiserver-client-kubelet"),
                r(
                    "sign",
                    "certificates.k8s.io",
                    "signers",
                    names="kubernetes.io/kube-apiserver-client kubernetes.io/kube-apiserver-client-kubelet kubernetes.io/kubelet-serving kubernetes.io/legacy-unknown",
                ),
                r("create", "authorization.k8s.io", "subjectaccessreviews"),
                _events(),
            ],
        ),
        _controller_role(
            "clusterrole-aggregation-controller", [r("escalate get list patch update watch", "rbac.authorization.k8s.io", "clusterroles")]
        ),
        _controller_role(
            "cronjob-controller",
            [
                r("get list update watch", "batch", "cronjobs"),
                r("create delete get list patch update watch", "batch", "jobs"),
                r("update", "batch", "cronjobs/status"),
                r("update", "batch", "cronjobs/finalizers"),
                r("delete list watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "daemon-set-controller",
            [
                r("get list watch", ["apps", "extensions"], "daemonsets"),
                r("update", ["apps", "extensions"], "daemonsets/status"),
                r("update", ["apps", "extensions"], "daemonsets/finalizers"),
                r("list watch", "", "nodes"),
                r("create delete list patch watch", "", "pods"),
                r("create", "", "pods/binding"),
                r("create delete get list patch update watch", "apps", "controllerrevisions"),
                _events(),
            ],
        ),
        _controller_role(
            "deployment-controller",
            [
                r("get list update watch", ["apps", "extensions"], "deployments"),
                r("update", ["apps", "extensions"], "deployments/status"),
                r("update", ["apps", "extensions"], "deployments/finalizers"),
                r("create delete get list patch update watch", ["apps", "extensions"], "replicasets"),
                r("get list update watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "device-taint-eviction-controller",
            [
                r("delete get list watch", "", "pods"),
                r("patch update", "", "pods/status"),
                r("get list watch", "resource.k8s.io", "resourceclaims"),
                r("get list watch", "resource.k8s.io", "resourceslices"),
                r("get list watch", "resource.k8s.io", "deviceclasses"),
                _events(),
                *_on(
                    gates,
                    Gate.DRADeviceTaintRules,
                    r("patch update", "resource.k8s.io", "devicetaintrules/status"),
                    r("get list watch", "resource.k8s.io", "devicetaintrules"),
                ),
            ],
        ),
        _controller_role(
            "disruption-controller",
            [
                r("get list watch", ["apps", "extensions"], "deployments"),
                r("get list watch", ["apps", "extensions"], "replicasets"),
                r("get list watch", "", "replicationcontrollers"),
                r("get list watch", "policy", "poddisruptionbudgets"),
                r("get list watch", "apps", "statefulsets"),
                r("update", "policy", "poddisruptionbudgets/status"),
                r("patch update", "", "pods/status"),
                r("get", "*", "*/scale"),
                _events(),
            ],
        ),
        _controller_role(
            "endpoint-controller",
            [
                r("get list watch", "", "pods services"),
                r("create delete get list update watch", "", "endpoints"),
                r("create", "", "endpoints/restricted"),
                _events(),
            ],
        ),
        _controller_role(
            "endpointslice-controller",
            [
                r("get list watch", "", "nodes pods services"),
                r("update", "", "services/finalizers"),
                r("create delete get list update watch", "discovery.k8s.io", "endpointslices"),
                _events(),
            ],
        ),
        _controller_role(
            "endpointslicemirroring-controller",
            [
                r("get list watch", "", "endpoints services"),
                r("update", "", "services/finalizers"),
                r("update", "", "endpoints/finalizers"),
                r("create delete get list update watch", "discovery.k8s.io", "endpointslices"),
                _events(),
            ],
        ),
        _controller_role(
            "ephemeral-volume-controller",
            [
                r("get list watch", "", "pods"),
                r("update", "", "pods/finalizers"),
                r("create get list watch", "", "persistentvolumeclaims"),
                _events(),
            ],
        ),
        _controller_role(
            "expand-controller",
            [
                r("get list patch update watch", "", "persistentvolumes"),
                r("patch update", "", "persistentvolumeclaims/status"),
                r("get list watch", "", "persistentvolumeclaims"),
                _events(),
            ],
        ),
        _controller_role(
            "generic-garbage-collector",
            [
                r("delete get list patch update watch", "*", "*"),
                _events(),
            ],
        ),
        _controller_role(
            "horizontal-pod-autoscaler",
            [
                r("get list watch", "autoscaling", "horizontalpodautoscalers"),
                r("update", "autoscaling", "horizontalpodautoscalers/status"),
                r("get update", "*", "*/scale"),
                r("list watch", "", "pods"),
                r("list watch", "metrics.k8s.io", "pods"),
                r("get list watch", "custom.metrics.k8s.io", "*"),
                r("get list watch", "external.metrics.k8s.io", "*"),
                _events(),
            ],
        ),
        _controller_role(
            "job-controller",
            [
                r("get list patch update watch", "batch", "jobs"),
                r("update", "batch", "jobs/status"),
                r("update", "batch", "jobs/finalizers"),
                r("create delete list patch watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "kube-apiserver-serving-clustertrustbundle-publisher",
            [
                r("attest", "certificates.k8s.io", "signers", names="kubernetes.io/kube-apiserver-serving"),
                r("create delete list update watch", "certificates.k8s.io", "clustertrustbundles"),
                _events(),
            ],
        ),
        _controller_role(
            "legacy-service-account-token-cleaner",
            [
                r("get", "", "configmaps", names="kube-apiserver-legacy-service-account-token-tracking"),
                r("delete patch", "", "secrets"),
            ],
        ),
        _controller_role(
            "namespace-controller",
            [
                r("delete get list watch", "", "namespaces"),
                r("update", "", "namespaces/finalize namespaces/status"),
                r("delete deletecollection get list watch", "*", "*"),
            ],
        ),
        _controller_role(
            "node-controller",
            [
                r("delete get list patch update watch", "", "nodes"),
                r("patch update", "", "nodes/status"),
                r("patch update", "", "pods/status"),
                r("delete get list watch", "", "pods"),
                r("get list watch", "coordination.k8s.io", "leases"),
                _events(),
            ],
        ),
        _controller_role(
            "persistent-volume-binder",
            [
                r("create delete get list update watch", "", "persistentvolumes"),
                r("update", "", "persistentvolumes/status"),
                r("get list update watch", "", "persistentvolumeclaims"),
                r("update", "", "persistentvolumeclaims/status"),
                r("create delete get list watch", "", "pods"),
                r("get list watch", "storage.k8s.io", "storageclasses"),
                r("list watch", "", "nodes"),
                _events(),
                r("watch", "", "events"),
            ],
        ),
        _controller_role(
            "pod-garbage-collector",
            [
                r("delete list watch", "", "pods"),
                r("get list watch", "", "nodes"),
                r("patch", "", "pods/status"),
            ],
        ),
        _controller_role("podcertificaterequestcleaner", [r("delete get list watch", "certificates.k8s.io", "podcertificaterequests")]),
        _controller_role(
            "pv-protection-controller",
            [
                r("get list update watch", "", "persistentvolumes"),
                _events(),
            ],
        ),
        _controller_role(
            "pvc-protection-controller",
            [
                r("get list update watch", "", "persistentvolumeclaims"),
                r("update", "", "persistentvolumeclaims/status"),
                r("get list watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "replicaset-controller",
            [
                r("get list update watch", ["apps", "extensions"], "replicasets"),
                r("update", ["apps", "extensions"], "replicasets/status"),
                r("update", ["apps", "extensions"], "replicasets/finalizers"),
                r("create delete list patch watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "replication-controller",
            [
                r("get list update watch", "", "replicationcontrollers"),
                r("update", "", "replicationcontrollers/status"),
                r("update", "", "replicationcontrollers/finalizers"),
                r("create delete list patch watch", "", "pods"),
                _events(),
            ],
        ),
        _controller_role(
            "resource-claim-controller",
            [
                r("get list watch", "", "pods"),
                r("update", "", "pods/finalizers"),
                r("create delete get list watch", "resource.k8s.io", "resourceclaims"),
                r("patch update", "resource.k8s.io", "resourceclaims resourceclaims/status"),
                r("patch update", "", "pods/status"),
                _events(),
                *_on(
                    gates,
                    Gate.DRAWorkloadResourceClaims,
                    r("get list watch", "scheduling.k8s.io", "podgroups"),
                    r("patch update", "scheduling.k8s.io", "podgroups/status"),
                ),
                *_on(gates, Gate.DRAResourceClaimGranularStatusAuthorization, r("patch update", "resource.k8s.io", "resourceclaims/binding")),
            ],
        ),
        _controller_role(
            "resourcequota-controller",
            [
                r("list watch", "*", "*"),
                r("update", "", "resourcequotas/status"),
                _events(),
            ],
        ),
        _controller_role(
            "root-ca-cert-publisher",
            [
                r("create update", "", "configmaps"),
                _events(),
            ],
        ),
        _controller_role(
            "route-controller",
            [
                r("list watch", "", "nodes"),
                r("patch", "", "nodes/status"),
                _events(),
            ],
        ),
        _controller_role(
            "selinux-warning-controller",
            [
                _events(),
                r("get list watch", "", "persistentvolumes"),
                r("get list watch", "", "persistentvolumeclaims"),
                r("get list watch", "", "pods"),
                r("get list watch", "storage.k8s.io", "csidrivers"),
            ],
        ),
        _controller_role(
            "service-account-controller",
            [
                r("create", "", "serviceaccounts"),
                _events(),
            ],
        ),
        _controller_role(
            "service-cidrs-controller",
            [
                r("get list patch update watch", "networking.k8s.io", "servicecidrs"),
                r("patch update", "networking.k8s.io", "servicecidrs/finalizers"),
                r("patch update", "networking.k8s.io", "servicecidrs/status"),
                r("get list watch", "networking.k8s.io", "ipaddresses"),
                _events(),
            ],
        ),
        _controller_role(
            "service-controller",
            [
                r("get list watch", "", "services"),
                r("patch update", "", "services/status"),
                r("list watch", "", "nodes"),
                _events(),
            ],
        ),
        _controller_role(
            "statefulset-controller",
            [
                r("list watch", "", "pods"),
                r("get list watch", "apps", "statefulsets"),
                r("update", "apps", "statefulsets/status"),
                r("update", "apps", "statefulsets/finalizers"),
                r("create delete get patch update", "", "pods"),
                r("create delete get list patch update watch", "apps", "controllerrevisions"),
                r("create get list watch", "", "persistentvolumeclaims"),
                r("delete update", "", "persistentvolumeclaims"),
                r("update", "", "pods/finalizers"),
                _events(),
            ],
        ),
        _controller_role(
            "storage-version-migrator-controller",
            [
                r("list patch", "*", "*"),
                r("get", "apiextensions.k8s.io", "customresourcedefinitions"),
                r("patch", "apiextensions.k8s.io", "customresourcedefinitions/status"),
                r("update", "storagemigration.k8s.io", "storageversionmigrations/status"),
            ],
        ),
        _controller_role(
            "ttl-after-finished-controller",
            [
                r("delete get list watch", "batch", "jobs"),
                _events(),
            ],
        ),
        _controller_role(
            "ttl-controller",
            [
                r("list patch update watch", "", "nodes"),
                _events(),
            ],
        ),
        _controller_role(
            "validatingadmissionpolicy-status-controller",
            [
                r("get list watch", "admissionregistration.k8s.io", "validatingadmissionpolicies"),
                r("get patch update", "admissionregistration.k8s.io", "validatingadmissionpolicies/status"),
                _events(),
            ],
        ),
        _controller_role(
            "volumeattributesclass-protection-controller",
            [
                r("get list watch", "", "persistentvolumeclaims"),
                r("get list watch", "", "persistentvolumes"),
                r("get list update watch", "storage.k8s.io", "volumeattributesclasses"),
                _events(),
            ],
        ),
    ]
    if not gates.get(Gate.DRADeviceTaints, False):
        roles = [role for role in roles if role["metadata"]["name"] != f"{CONTROLLER_ROLE_PREFIX}device-taint-eviction-controller"]
    if gates.get(Gate.DRAResourcePoolStatus, False):
        roles.append(
            _controller_role(
                "resourcepoolstatusrequest-controller",
                [
                    r("delete get list watch", "resource.k8s.io", "resourcepoolstatusrequests"),
                    r("patch update", "resource.k8s.io", "resourcepoolstatusrequests/status"),
                    r("get list watch", "resource.k8s.io", "resourceslices"),
                    r("get list watch", "resource.k8s.io", "resourceclaims"),
                    r("get list watch", "resource.k8s.io", "devicetaintrules"),
                    _events(),
                ],
            )
        )
    if gates.get(Gate.GenericWorkload, False):
        roles.append(
            _controller_role(
                "podgroup-protection-controller",
                [r("get list update watch", "scheduling.k8s.io", "podgroups"), r("get list watch", "", "pods")],
            )
        )
    return roles


def cluster_role_bindings() -> list[Obj]:
    return [
        binding("cluster-admin", "cluster-admin", [group("system:masters")]),
        binding("system:basic-user", "system:basic-user", [group("system:authenticated")]),
        binding("system:cluster-trust-bundle-discovery", "system:cluster-trust-bundle-discovery", [group("system:serviceaccounts")]),
        binding("system:discovery", "system:discovery", [group("system:authenticated")]),
        binding("system:kube-controller-manager", "system:kube-controller-manager", [user("system:kube-controller-manager")]),
        binding("system:kube-dns", "system:kube-dns", [service_account("kube-dns")]),
        binding("system:kube-scheduler", "system:kube-scheduler", [user("system:kube-scheduler")]),
        binding("system:monitoring", "system:monitoring", [group("system:monitoring")]),
        binding("system:node", "system:node", None),
        binding("system:node-proxier", "system:node-proxier", [user("system:kube-proxy")]),
        binding("system:public-info-viewer", "system:public-info-viewer", [group("system:authenticated"), group("system:unauthenticated")]),
        binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", [group("system:serviceaccounts")]),
        binding("system:volume-scheduler", "system:volume-scheduler", [user("system:kube-scheduler")]),
    ]


def controller_role_bindings(gates: Mapping[str, bool]) -> list[Obj]:
    """Each controller role bound to the service account the controller runs as, ``kube-system/<name>``
    (kube-controller-manager acts as it with ``--use-service-account-credentials``)."""
    out = []
    for role in controller_roles(gates):
        name = role["metadata"]["name"]
        out.append(binding(name, name, [service_account(name.removeprefix(CONTROLLER_ROLE_PREFIX))]))
    return out


def roles() -> list[Obj]:
    """Upstream's namespaced Roles in kube-system and kube-public."""
    return [
        namespaced_role(
            "kube-public",
            "system:controller:bootstrap-signer",
            [
                r("get list watch", "", "configmaps"),
                r("update", "", "configmaps", names="cluster-info"),
                _events(),
            ],
        ),
        namespaced_role(
            "kube-system",
            "extension-apiserver-authentication-reader",
            [r("get list watch", "", "configmaps", names="extension-apiserver-authentication")],
        ),
        namespaced_role(
            "kube-system",
            "system::leader-locking-kube-controller-manager",
            [
                r("create get list update watch", "coordination.k8s.io", "leases"),
                r("create get list update watch", "coordination.k8s.io", "leasecandidates"),
            ],
        ),
        namespaced_role(
            "kube-system",
            "system::leader-locking-kube-scheduler",
            [
                r("create get list update watch", "coordination.k8s.io", "leases"),
                r("create get list update watch", "coordination.k8s.io", "leasecandidates"),
            ],
        ),
        namespaced_role("kube-system", "system:controller:bootstrap-signer", [r("get list watch", "", "secrets")]),
        namespaced_role("kube-system", "system:controller:cloud-provider", [r("create get list watch", "", "configmaps")]),
        namespaced_role(
            "kube-system",
            "system:controller:token-cleaner",
            [
                r("delete get list watch", "", "secrets"),
                _events(),
            ],
        ),
    ]


def role_bindings() -> list[Obj]:
    scheduler, manager = user("system:kube-scheduler"), user("system:kube-controller-manager")
    return [
        namespaced_binding(
            "kube-public", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer", [service_account("bootstrap-signer")]
        ),
        namespaced_binding(
            "kube-system",
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            [manager, scheduler],
        ),
        namespaced_binding(
            "kube-system",
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            [manager, service_account("kube-controller-manager"), service_account("leader-election-controller")],
        ),
        namespaced_binding(
            "kube-system",
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            [scheduler, service_account("kube-scheduler")],
        ),
        namespaced_binding(
            "kube-system", "system:controller:bootstrap-signer", "system:controller:bootstrap-signer", [service_account("bootstrap-signer")]
        ),
        namespaced_binding(
            "kube-system", "system:controller:cloud-provider", "system:controller:cloud-provider", [service_account("cloud-provider")]
        ),
        namespaced_binding(
            "kube-system", "system:controller:token-cleaner", "system:controller:token-cleaner", [service_account("token-cleaner")]
        ),
    ]
