"""Node and node-Lease objects of simulated nodes (pure builders, no I/O)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from app.kube.timeutil import now_micro, now_rfc3339

Obj = dict[str, Any]

# kwok marks its nodes with `type: kwok`; this project's nodes say who simulates them the same way.
NODE_TYPE_LABEL = "type"
NODE_TYPE_VALUE = "kubeletsim"
PROFILE_LABEL = "dra.example.dev/profile"
SIMULATED_ANNOTATION = "dra.example.dev/kubeletsim"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
KUBELET_VERSION = "v1.37.0"

CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def node_ip(index: int) -> str:
    """The InternalIP of node ``index`` (172.16.0.0/12 holds a million nodes; .0.0 is skipped)."""
    n = index + 1
    return f"172.{16 + (n >> 16)}.{(n >> 8) & 255}.{n & 255}"


def pod_cidr_base(index: int) -> str:
    """The first three octets of node ``index``'s /24 pod range (10.64.0.0/10)."""
    return f"10.{64 + (index >> 8)}.{index & 255}"


def pod_ip(index: int, host: int) -> str:
    """Pod address ``host`` (2..254) in node ``index``'s pod range."""
    return f"{pod_cidr_base(index)}.{host}"


def _stable_id(node: str, what: str) -> str:
    return hashlib.sha256(f"{node}/{what}".encode()).hexdigest()[:32]


def node_conditions(now: str | None = None, transition: dict[str, str] | None = None) -> list[Obj]:
    """A healthy kubelet's node conditions; ``transition`` keeps earlier lastTransitionTimes."""
    now = now or now_rfc3339()
    transition = transition or {}
    rows = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    return [
        {
            "type": type_,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": transition.get(type_, now),
            "reason": reason,
            "message": message,
        }
        for type_, status, reason, message in rows
    ]


def node_status(name: str, index: int, now: str | None = None, transition: dict[str, str] | None = None) -> Obj:
    """The status a kubelet reports for a simulated node."""
    return {
        "capacity": dict(CAPACITY),
        "allocatable": dict(CAPACITY),
        "conditions": node_conditions(now, transition),
        "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _stable_id(name, "machine"),
            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.kubeletsim")),
            "bootID": _stable_id(name, "boot"),
            "kernelVersion": "6.8.0-kubeletsim",
            "osImage": "kubeletsim (simulated node)",
            "containerRuntimeVersion": "kubeletsim://1.0.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def build_node(name: str, index: int, profile_name: str) -> Obj:
    """A Node object as a kubelet registers it."""
    base = pod_cidr_base(index)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                NODE_TYPE_LABEL: NODE_TYPE_VALUE,
                PROFILE_LABEL: profile_name.replace("+", "-"),
            },
            "annotations": {SIMULATED_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"{base}.0/24", "podCIDRs": [f"{base}.0/24"], "providerID": f"kubeletsim://{name}"},
        "status": node_status(name, index),
    }


def build_lease(node: Obj) -> Obj:
    """The node's heartbeat Lease in kube-node-lease, owned by the Node as upstream's kubelet does."""
    meta = node["metadata"]
    lease: Obj = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": meta["name"], "namespace": NODE_LEASE_NAMESPACE},
        "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now_micro()},
    }
    if meta.get("uid"):
        lease["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}]
    return lease


def node_index(name: str, prefix: str) -> int | None:
    """The simulator's number of a node named ``<prefix><n>``, or None for other nodes."""
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() and str(int(rest)) == rest else None
