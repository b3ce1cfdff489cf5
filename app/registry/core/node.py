"""Node (v1, cluster-scoped, status subresource)."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, dig, name_column
from app.registry.core.node_validation import validate_node, validate_node_update
from kube.errors import FieldError

ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"


def node_status(node: Obj) -> str:
    ready = "Unknown"
    for condition in dig(node, "status", "conditions", default=[]) or []:
        if condition.get("type") == "Ready":
            ready = "Ready" if condition.get("status") == "True" else "NotReady"
    if dig(node, "spec", "unschedulable"):
        return f"{ready},SchedulingDisabled"
    return ready


def node_roles(node: Obj) -> str:
    roles = sorted(
        key[len(ROLE_LABEL_PREFIX):]
        for key in (node["metadata"].get("labels") or {})
        if key.startswith(ROLE_LABEL_PREFIX) and key[len(ROLE_LABEL_PREFIX):]
    )
    return ",".join(roles) or "<none>"


def node_address(node: Obj, kind: str) -> str:
    for address in dig(node, "status", "addresses", default=[]) or []:
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return "<none>"


def node_info(node: Obj, key: str) -> str:
    return str(dig(node, "status", "nodeInfo", key, default="") or "<unknown>")


class NodeStrategy(KindStrategy):
    group = ""
    kind = "Node"
    plural = "nodes"
    singular = "node"
    namespaced = False
    create_example: Obj = {}
    short_names = ("no",)
    has_status = True
    tracks_generation = False
    field_selectors = {"spec.unschedulable": lambda o: "true" if dig(o, "spec", "unschedulable") else "false"}
    printer_columns = (
        name_column(),
        PrinterColumn("Status", "string", "The status of the node", node_status),
        PrinterColumn("Roles", "string", "The roles of the node", node_roles),
        age_column(),
        PrinterColumn("Version", "string", "Kubelet Version reported by the node.", lambda o: node_info(o, "kubeletVersion")),
        PrinterColumn("Internal-IP", "string", "List of addresses reachable to the node.", lambda o: node_address(o, "InternalIP"), priority=1),
        PrinterColumn("External-IP", "string", "List of addresses reachable to the node.", lambda o: node_address(o, "ExternalIP"), priority=1),
        PrinterColumn("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", lambda o: node_info(o, "osImage"), priority=1),
        PrinterColumn("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", lambda o: node_info(o, "kernelVersion"), priority=1),
        PrinterColumn("Container-Runtime", "string", "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).", lambda o: node_info(o, "containerRuntimeVersion"), priority=1),
    )

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_node(obj)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_node_update(new, old)


class NodeStatusStrategy(StatusStrategy, NodeStrategy):
    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        # Upstream validates a node status write with the same rules as a node update.
        return validate_node_update(new, old)


STATUS_STRATEGY = NodeStatusStrategy()
STRATEGY: NodeStrategy = NodeStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
