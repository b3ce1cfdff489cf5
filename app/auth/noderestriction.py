"""NodeRestriction: a node may only write what is its own (its Node, its Lease, pods bound to
it, ResourceSlices naming it), which the Node authorizer cannot tell before it sees the object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.auth.admission import CREATE, DELETE, UPDATE, AdmissionRequest
from app.auth.user import node_identity
from kube.errors import not_found
from kube.objects import meta as _meta
from kube.objects import spec as _spec

NODE_LEASE_NAMESPACE = "kube-node-lease"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_RESTRICTION_LABEL_NAMESPACE = "node-restriction.kubernetes.io"
# Labels in kubernetes.io / k8s.io namespaces a kubelet may set on its Node.
_KUBELET_LABELS = frozenset(
    (
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    )
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")

# (group, resource, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str, str], dict[str, Any] | None]


def _label_namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _is_kubernetes_label(key: str) -> bool:
    ns = _label_namespace(key)
    return ns in ("kubernetes.io", "k8s.io") or ns.endswith((".kubernetes.io", ".k8s.io"))


def _is_kubelet_label(key: str) -> bool:
    ns = _label_namespace(key)
    return key in _KUBELET_LABELS or any(ns == allowed or ns.endswith("." + allowed) for allowed in _KUBELET_LABEL_NAMESPACES)


def _forbidden_labels(new: dict[str, str], old: dict[str, str]) -> list[str]:
    modified = {k for k in set(new) | set(old) if new.get(k) != old.get(k)}
    forbidden = set()
    for key in modified:
        ns = _label_namespace(key)
        if ns == NODE_RESTRICTION_LABEL_NAMESPACE or ns.endswith("." + NODE_RESTRICTION_LABEL_NAMESPACE):
            forbidden.add(key)
        if _is_kubernetes_label(key) and not _is_kubelet_label(key):
            forbidden.add(key)
    return sorted(forbidden)


class NodeRestriction:
    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup

    def admit(self, request: AdmissionRequest) -> None:
        node, is_node = node_identity(request.user)
        if not is_node:
            return
        if not node:
            raise request.forbidden(f'could not determine node from user "{request.user.name}"')
        group, resource = request.group, request.resource
        if group == "" and resource == "pods":
            if request.subresource == "":
                self._pod(node, request)
            elif request.subresource == "status":
                self._pod_status(node, request)
            elif request.subresource == "eviction":
                self._existing_pod_on(node, request, "node {node} can only evict pods with spec.nodeName set to itself", quote=False)
            else:
                raise request.forbidden(f"unexpected pod subresource \"{request.subresource}\", only 'status' and 'eviction' are allowed")
        elif group == "" and resource == "nodes":
            self._node(node, request)
        elif group == "" and resource == "serviceaccounts":
            self._token(node, request)
        elif group == "coordination.k8s.io" and resource == "leases":
            self._lease(node, request)
        elif group == "resource.k8s.io" and resource == "resourceslices":
            self._slice(node, request)

    def _existing_pod_on(self, node: str, request: AdmissionRequest, message: str, quote: bool = True) -> None:
        pod = self.lookup("", "pods", request.namespace, request.name)
        if pod is None:
            raise not_found("pods", request.name, "", "pods")
        if _spec(pod).get("nodeName") != node:
            raise request.forbidden(message.format(node=f'"{node}"' if quote else node))

    def _pod(self, node: str, request: AdmissionRequest) -> None:
        quoted = f'"{node}"'
        if request.operation == DELETE:
            self._existing_pod_on(node, request, "node {node} can only delete pods with spec.nodeName set to itself")
            return
        if request.operation != CREATE:
            raise request.forbidden(f'unexpected operation "{request.operation}", node {quoted} can only create and delete mirror pods')
        pod = request.obj or {}
        meta, spec = _meta(pod), _spec(pod)
        if MIRROR_POD_ANNOTATION not in (meta.get("annotations") or {}):
            raise request.forbidden(f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node {quoted} can only create mirror pods')
        if spec.get("nodeName") != node:
            raise request.forbidden(f"node {quoted} can only create pods with spec.nodeName set to itself")
        owners = meta.get("ownerReferences") or []
        if len(owners) > 1:
            raise request.forbidden(f"node {quoted} can only create pods with a single owner reference set to itself")
        if not owners:
            raise request.forbidden(f"node {quoted} can only create pods with an owner reference set to itself")
        owner = owners[0]
        if owner.get("apiVersion") != "v1" or owner.get("kind") != "Node" or owner.get("name") != node:
            raise request.forbidden(f"node {quoted} can only create pods with an owner reference set to itself")
        if not owner.get("controller"):
            raise request.forbidden(f"node {quoted} can only create pods with a controller owner reference set to itself")
        if owner.get("blockOwnerDeletion"):
            raise request.forbidden(f"node {quoted} must not set blockOwnerDeletion on an owner reference")
        stored_node = self.lookup("", "nodes", "", node)
        if stored_node is None:
            raise not_found("nodes", node, "", "nodes")
        if owner.get("uid") != _meta(stored_node).get("uid"):
            raise request.forbidden(f"node {node} UID mismatch: expected {owner.get('uid')} got {_meta(stored_node).get('uid')}")
        if spec.get("serviceAccountName"):
            raise request.forbidden(f"node {quoted} can not create pods that reference a service account")

    def _pod_status(self, node: str, request: AdmissionRequest) -> None:
        quoted = f'"{node}"'
        if request.operation != UPDATE:
            raise request.forbidden(f'unexpected operation "{request.operation}"')
        if _spec(request.old).get("nodeName") != node:
            raise request.forbidden(f"node {quoted} can only update pod status for pods with spec.nodeName set to itself")
        if (_meta(request.obj).get("labels") or {}) != (_meta(request.old).get("labels") or {}):
            raise request.forbidden(f"node {quoted} cannot update labels through pod status")

        def claim_statuses(pod: dict[str, Any] | None) -> list[tuple[Any, Any]]:
            entries = ((pod or {}).get("status") or {}).get("resourceClaimStatuses") or []
            return [(e.get("name"), e.get("resourceClaimName")) for e in entries if isinstance(e, dict)]

        if claim_statuses(request.obj) != claim_statuses(request.old):
            # (sic: upstream's wording)
            raise request.forbidden(f"node {quoted} cannot update resource claim statues")
        if ((request.obj or {}).get("status") or {}).get("extendedResourceClaimStatus") != ((request.old or {}).get("status") or {}).get("extendedResourceClaimStatus"):
            raise request.forbidden(f"node {quoted} cannot update extended resource claim status")

    def _node(self, node: str, request: AdmissionRequest) -> None:
        quoted = f'"{node}"'
        name = request.name or str(_meta(request.obj).get("name") or "")
        if name != node:
            raise request.forbidden(f'node {quoted} is not allowed to modify node "{name}"')
        if request.operation == CREATE:
            if _spec(request.obj).get("configSource") is not None:
                raise request.forbidden(f"node {quoted} is not allowed to create pods with a non-nil configSource")
            labels = _forbidden_labels(_meta(request.obj).get("labels") or {}, {})
            if labels:
                raise request.forbidden(f"node {quoted} is not allowed to set the following labels: {', '.join(labels)}")
        elif request.operation == UPDATE:
            new_spec, old_spec = _spec(request.obj), _spec(request.old)
            if new_spec.get("configSource") is not None and new_spec.get("configSource") != old_spec.get("configSource"):
                raise request.forbidden(f"node {quoted} is not allowed to update configSource to a new non-nil configSource")
            if (new_spec.get("taints") or None) != (old_spec.get("taints") or None):
                raise request.forbidden(f"node {quoted} is not allowed to modify taints")
            labels = _forbidden_labels(_meta(request.obj).get("labels") or {}, _meta(request.old).get("labels") or {})
            if labels:
                raise request.forbidden(f"is not allowed to modify labels: {', '.join(labels)}")

    def _token(self, node: str, request: AdmissionRequest) -> None:
        if request.operation != CREATE or request.subresource != "token":
            return
        ref = _spec(request.obj).get("boundObjectRef") or {}
        if not isinstance(ref, dict) or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
            raise request.forbidden("node requested token not bound to a pod")
        if not ref.get("uid"):
            raise request.forbidden("node requested token with a pod binding without a uid")
        pod = self.lookup("", "pods", request.namespace, str(ref["name"]))
        if pod is None:
            raise not_found("pods", str(ref["name"]), "", "pods")
        if ref["uid"] != _meta(pod).get("uid"):
            raise request.forbidden(
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. The object might have been deleted and then recreated"
            )
        if _spec(pod).get("nodeName") != node:
            raise request.forbidden("node requested token bound to a pod scheduled on a different node")

    def _lease(self, node: str, request: AdmissionRequest) -> None:
        if request.namespace != NODE_LEASE_NAMESPACE:
            raise request.forbidden(f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
        name = _meta(request.obj).get("name") if request.operation == CREATE else request.name
        if name != node:
            raise request.forbidden("can only access node lease with the same name as the requesting node")

    def _slice(self, node: str, request: AdmissionRequest) -> None:
        # Create and delete are checked on the object itself: the authorizer cannot see a new
        # slice, nor each slice a deletecollection removes. An update may not move a slice away.
        verb = {CREATE: "create", UPDATE: "update", DELETE: "delete"}[request.operation]
        target = request.old if request.operation == DELETE else request.obj
        if _spec(target).get("nodeName") != node:
            raise request.forbidden(f"can only {verb} ResourceSlice with the same NodeName as the requesting node")
