"""The Node authorizer: what a kubelet (``system:node:NAME`` in ``system:nodes``) may do.

Objects a node may read or change by relationship (the ResourceClaims of pods bound to it, its
own ResourceSlices, the service accounts of its pods) are decided from a graph of those
relationships that follows the server's storage; everything else a node may do is a fixed
list of rules. Which object a node creates is NodeRestriction's business (admission), as
upstream splits it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.auth.attributes import Attributes
from app.auth.authorizers import NO_OPINION, Decision
from app.auth.rules import Rule
from app.auth.user import node_identity
from kube.dra.claims import extended_resource_claim_name

PODS = "pods"
RESOURCE_SLICES = "resourceslices.resource.k8s.io"
RESOURCES = (PODS, RESOURCE_SLICES)
NODE_LEASE_NAMESPACE = "kube-node-lease"

READ = ("get", "list", "watch")

# What every node may do regardless of relationships (upstream's node rules, for the kinds served here).
NODE_RULES: tuple[Rule, ...] = (
    Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    Rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews", "localsubjectaccessreviews")),
    Rule(("create", "get", "list", "watch"), ("",), ("nodes",)),
    Rule(("update", "patch"), ("",), ("nodes/status",)),
    Rule(("update", "patch"), ("",), ("nodes",)),
    Rule(("create", "update", "patch"), ("", "events.k8s.io"), ("events",)),
    Rule(READ, ("",), ("pods",)),
    Rule(("create", "delete"), ("",), ("pods",)),
    Rule(("update", "patch"), ("",), ("pods/status",)),
    Rule(("create",), ("",), ("pods/eviction",)),
    Rule(("get",), ("resource.k8s.io",), ("resourceclaims",)),
    Rule(("deletecollection", *READ, "create", "update", "patch", "delete"), ("resource.k8s.io",), ("resourceslices",)),
    Rule(("get", "create", "update", "patch", "delete"), ("coordination.k8s.io",), ("leases",)),
    Rule(("create",), ("",), ("serviceaccounts/token",)),
)


class NodeGraph:
    """Which node each pod is bound to, and through pods which node may see each ResourceClaim
    and ServiceAccount; which node each ResourceSlice belongs to."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], tuple[str, tuple[str, ...], str]] = {}  # key -> (node, claims, service account)
        self._claim_nodes: dict[tuple[str, str], Counter[str]] = {}
        self._account_nodes: dict[tuple[str, str], Counter[str]] = {}
        self._slice_nodes: dict[str, str] = {}
        self._pod_nodes: dict[tuple[str, str], str] = {}

    def apply(self, resource: str, deleted: bool, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if resource == RESOURCE_SLICES:
            node = (obj.get("spec") or {}).get("nodeName") if not deleted else None
            if isinstance(node, str) and node:
                self._slice_nodes[name] = node
            else:
                self._slice_nodes.pop(name, None)
        elif resource == PODS:
            self._remove_pod((namespace, name))
            if not deleted:
                self._add_pod((namespace, name), obj)

    def _add_pod(self, key: tuple[str, str], pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            return  # only pods bound to a node relate anything to one
        claims = set()
        for ref in spec.get("resourceClaims") or ():
            if isinstance(ref, dict) and isinstance(ref.get("resourceClaimName"), str):
                claims.add(ref["resourceClaimName"])
        # Claims made from templates are named in the status (which is why a node may not write it).
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            if isinstance(entry, dict) and isinstance(entry.get("resourceClaimName"), str) and entry["resourceClaimName"]:
                claims.add(entry["resourceClaimName"])
        # So is the scheduler's claim for extended resources backed by devices.
        if extended := extended_resource_claim_name(pod):
            claims.add(extended)
        account = spec.get("serviceAccountName") or "default"
        entry = (node, tuple(sorted(claims)), str(account))
        self._pods[key] = entry
        self._pod_nodes[key] = node
        for claim in entry[1]:
            self._claim_nodes.setdefault((key[0], claim), Counter())[node] += 1
        self._account_nodes.setdefault((key[0], entry[2]), Counter())[node] += 1

    def _remove_pod(self, key: tuple[str, str]) -> None:
        entry = self._pods.pop(key, None)
        self._pod_nodes.pop(key, None)
        if entry is None:
            return
        node, claims, account = entry
        for index_key in [(key[0], c) for c in claims]:
            _decrement(self._claim_nodes, index_key, node)
        _decrement(self._account_nodes, (key[0], account), node)

    # ---- questions ------------------------------------------------------------------

    def pod_on(self, namespace: str, name: str, node: str) -> bool:
        return self._pod_nodes.get((namespace, name)) == node

    def claim_on(self, namespace: str, name: str, node: str) -> bool:
        return node in self._claim_nodes.get((namespace, name), ())

    def account_on(self, namespace: str, name: str, node: str) -> bool:
        return node in self._account_nodes.get((namespace, name), ())

    def slice_on(self, name: str, node: str) -> bool:
        return self._slice_nodes.get(name) == node


def _decrement(index: dict[tuple[str, str], Counter[str]], key: tuple[str, str], node: str) -> None:
    counts = index.get(key)
    if counts is None:
        return
    counts[node] -= 1
    if counts[node] <= 0:
        del counts[node]
    if not counts:
        del index[key]


def _no_relationship(node: str) -> str:
    return f"no relationship found between node '{node}' and this object"


class NodeAuthorizer:
    """``--authorization-mode=Node``: no opinion on anyone but nodes."""

    def __init__(self, graph: NodeGraph) -> None:
        self.graph = graph

    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        node, is_node = node_identity(attrs.user)
        if not is_node:
            return NO_OPINION, ""
        if not node:
            return Decision.NO_OPINION, f'unknown node for user "{attrs.user.name}"'
        if attrs.resource_request:
            group, resource = attrs.api_group, attrs.resource
            if group == "resource.k8s.io" and resource == "resourceclaims":
                return self._get_related(node, attrs, self.graph.claim_on)
            if group == "resource.k8s.io" and resource == "resourceslices":
                return self._slice(node, attrs)
            if group == "" and resource == "serviceaccounts":
                return self._token(node, attrs)
            if group == "coordination.k8s.io" and resource == "leases":
                return self._lease(node, attrs)
            if group == "" and resource == "nodes":
                return self._node(node, attrs)
            if group == "" and resource == "pods":
                return self._pod(node, attrs)
        if any(rule.allows(attrs) for rule in NODE_RULES):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def _related(self, node: str, attrs: Attributes, related: Any) -> tuple[Decision, str]:
        if not attrs.name:
            return Decision.NO_OPINION, "No Object name found"
        if related(attrs.namespace, attrs.name, node):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, _no_relationship(node)

    def _get_related(self, node: str, attrs: Attributes, related: Any) -> tuple[Decision, str]:
        if attrs.verb != "get":
            return Decision.NO_OPINION, "can only get individual resources of this type"
        if attrs.subresource:
            return Decision.NO_OPINION, "cannot get subresource"
        return self._related(node, attrs, related)

    def _slice(self, node: str, attrs: Attributes) -> tuple[Decision, str]:
        if attrs.subresource:
            return Decision.NO_OPINION, "cannot authorize ResourceSlice subresources"
        verb = attrs.verb
        if verb == "create":
            return Decision.ALLOW, ""  # NodeRestriction checks the new slice's nodeName
        if verb in ("get", "update", "patch", "delete"):
            if not attrs.name:
                return Decision.NO_OPINION, "No Object name found"
            if self.graph.slice_on(attrs.name, node):
                return Decision.ALLOW, ""
            return Decision.NO_OPINION, _no_relationship(node)
        if verb in ("list", "watch", "deletecollection"):
            if attrs.field_equals("spec.nodeName", node):
                return Decision.ALLOW, ""
            return Decision.NO_OPINION, "can only list/watch/deletecollection resourceslices with nodeName field selector"
        return Decision.NO_OPINION, "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection"

    def _token(self, node: str, attrs: Attributes) -> tuple[Decision, str]:
        if attrs.verb != "create" or not attrs.name:
            return Decision.NO_OPINION, "can only create tokens for individual service accounts"
        if attrs.subresource != "token":
            return Decision.NO_OPINION, "can only create token subresource of serviceaccount"
        if self.graph.account_on(attrs.namespace, attrs.name, node):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, _no_relationship(node)

    def _lease(self, node: str, attrs: Attributes) -> tuple[Decision, str]:
        if attrs.verb not in ("get", "create", "update", "patch", "delete"):
            return Decision.NO_OPINION, "can only get, create, update, patch, or delete a node lease"
        if attrs.namespace != NODE_LEASE_NAMESPACE:
            return Decision.NO_OPINION, f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
        if attrs.verb != "create" and attrs.name != node:
            return Decision.NO_OPINION, "can only access node lease with the same name as the requesting node"
        return Decision.ALLOW, ""

    def _node(self, node: str, attrs: Attributes) -> tuple[Decision, str]:
        if not attrs.subresource:
            if attrs.verb in ("create", "update", "patch"):
                return Decision.ALLOW, ""  # NodeRestriction keeps a node to its own Node
            if attrs.verb in READ:
                if attrs.name == node:
                    return Decision.ALLOW, ""
                if not attrs.name:
                    return Decision.NO_OPINION, f"node '{node}' cannot read all nodes, only its own Node object"
                return Decision.NO_OPINION, f"node '{node}' cannot read '{attrs.name}', only its own Node object"
        elif attrs.subresource == "status" and attrs.verb in ("update", "patch"):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def _pod(self, node: str, attrs: Attributes) -> tuple[Decision, str]:
        sub, verb = attrs.subresource, attrs.verb
        if not sub:
            if verb == "get":
                return self._get_related(node, attrs, self.graph.pod_on)
            if verb in ("list", "watch"):
                if attrs.field_equals("spec.nodeName", node):
                    return Decision.ALLOW, ""
                if attrs.name:
                    return self._related(node, attrs, self.graph.pod_on)
                return Decision.NO_OPINION, "can only list/watch pods with spec.nodeName field selector"
            if verb in ("create", "delete"):
                return Decision.ALLOW, ""  # NodeRestriction: mirror pods and pods bound to this node only
        elif (sub == "status" and verb in ("update", "patch")) or (sub == "eviction" and verb == "create"):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""
