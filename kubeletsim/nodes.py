"""Node and node-Lease objects of simulated nodes (pure builders, no I/O)."""

from __future__ import annotations

import hashlib
import ipaddress
import uuid
from collections.abc import Sequence

from kube.features import Gate
from kube.objects import Obj
from kube.timeutil import now_micro, now_rfc3339

# kwok marks its nodes with `type: kwok`; this project's nodes say who simulates them the same way.
NODE_TYPE_LABEL = "type"
NODE_TYPE_VALUE = "kubeletsim"
PROFILE_LABEL = "dra.example.dev/profile"
SIMULATED_ANNOTATION = "dra.example.dev/kubeletsim"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
KUBELET_VERSION = "v1.37.0"

CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
DEFAULT_MAX_PODS = 110  # the kubelet's --max-pods default
# KEP-5517's gate: with it on, the nodes declare it and admission counts what claims charge.
NODE_ALLOCATABLE_FEATURE = Gate.DRANodeAllocatableResources
# Pod addresses: node i gets the i-th block of 10.64.0.0/10, a /24 unless --max-pods needs more.
POD_NETWORK = ipaddress.IPv4Network("10.64.0.0/10")


def node_ip(index: int) -> str:
    """The InternalIP of node ``index`` (172.16.0.0/12 holds a million nodes; .0.0 is skipped)."""
    n = index + 1
    return f"172.{16 + (n >> 16)}.{(n >> 8) & 255}.{n & 255}"


def _pod_block_bits(max_pods: int) -> int:
    """Host bits of a node's pod range: 8 (a /24, upstream's default node CIDR size), or enough for
    ``max_pods`` addresses besides the network, the gateway (.1) and the broadcast address."""
    return max(8, (max_pods + 2).bit_length())


def pod_cidr(index: int, max_pods: int = DEFAULT_MAX_PODS) -> ipaddress.IPv4Network:
    """Node ``index``'s pod range (10.64.0.0/24 for node 0, 10.64.1.0/24 for node 1, ... by default)."""
    bits = _pod_block_bits(max_pods)
    return ipaddress.IPv4Network((int(POD_NETWORK.network_address) + (index << bits), 32 - bits))


def max_host(max_pods: int = DEFAULT_MAX_PODS) -> int:
    """The highest host number a pod address may have in a node's range (254 in a /24)."""
    return (1 << _pod_block_bits(max_pods)) - 2


def pod_ip(index: int, host: int, max_pods: int = DEFAULT_MAX_PODS) -> str:
    """Pod address ``host`` (2 .. :func:`max_host`) in node ``index``'s pod range."""
    return str(pod_cidr(index, max_pods).network_address + host)


def pod_host(index: int, ip: str | None, max_pods: int = DEFAULT_MAX_PODS) -> int | None:
    """The host number of ``ip`` in node ``index``'s pod range, or None when it is not in it."""
    try:
        address = ipaddress.IPv4Address(ip or "")
    except ValueError:
        return None
    network = pod_cidr(index, max_pods)
    return int(address) - int(network.network_address) if address in network else None


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


def node_status(
    name: str,
    index: int,
    now: str | None = None,
    transition: dict[str, str] | None = None,
    *,
    max_pods: int = DEFAULT_MAX_PODS,
    declared_features: Sequence[str] = (),
) -> Obj:
    """The status a kubelet reports for a simulated node.

    ``declared_features``: the node's ``status.declaredFeatures`` (gated features this kubelet
    supports, which the scheduler checks, e.g. DRANodeAllocatableResources); None when there are
    none, so a merge patch removes a list an earlier run declared.
    """
    capacity = {**CAPACITY, "pods": str(max_pods)}
    return {
        "capacity": dict(capacity),
        "allocatable": dict(capacity),
        "declaredFeatures": sorted(declared_features) or None,
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


def build_node(
    name: str, index: int, profile_name: str, *, max_pods: int = DEFAULT_MAX_PODS, declared_features: Sequence[str] = ()
) -> Obj:
    """A Node object as a kubelet registers it."""
    cidr = str(pod_cidr(index, max_pods))
    status = node_status(name, index, max_pods=max_pods, declared_features=declared_features)
    if status["declaredFeatures"] is None:
        del status["declaredFeatures"]
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
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"kubeletsim://{name}"},
        "status": status,
    }


def lease_spec(name: str) -> Obj:
    """The spec of node ``name``'s Lease, renewed now."""
    return {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now_micro()}


def build_lease(node: Obj) -> Obj:
    """The node's heartbeat Lease in kube-node-lease, owned by the Node as upstream's kubelet does."""
    meta = node["metadata"]
    lease: Obj = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": meta["name"], "namespace": NODE_LEASE_NAMESPACE},
        "spec": lease_spec(meta["name"]),
    }
    if meta.get("uid"):
        lease["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}]
    return lease


def node_index(name: str, prefix: str) -> int | None:
    """The simulator's number of a node named ``<prefix><n>``, or None for other nodes."""
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(rest) if rest.isdigit() and str(int(rest)) == rest else None
