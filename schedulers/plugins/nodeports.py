"""NodePorts: the host ports the pod asks for must be free on the node (upstream's NodePorts).

A container port with a ``hostPort`` takes that port, protocol (TCP when not given) and host IP
(all addresses, ``0.0.0.0``, when not given) on the node. Two pods conflict when they take the
same port and protocol on the same address, or when either takes it on all addresses. Ports of
the regular containers count, and of the init containers that run beside them (sidecars:
``restartPolicy: Always``). A node where the ports are taken is ``Unschedulable`` with upstream's
``node(s) didn't have free ports for the requested pod ports``: removing the pods that hold them
can help, so preemption looks there.

docs/scheduler-plugins.md builds this plugin step by step as its worked example.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from kube.objects import Obj, meta
from schedulers.framework import SKIP, CycleState, ExplainContext, Reason, Status

NAME = "NodePorts"
KIND = "HostPortsTaken"  # an explanation's reason kind
REASON = "node(s) didn't have free ports for the requested pod ports"
ALL_ADDRESSES = "0.0.0.0"

_REJECTED = Status.unschedulable(REASON, plugin=NAME)

HostPort = tuple[str, str, int]  # (host IP, protocol, port)


def host_ports(pod: Mapping[str, Any]) -> list[HostPort]:
    """The host ports the pod takes (upstream's GetHostPorts, with its defaults filled in)."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or []
    return [
        (p.get("hostIP") or ALL_ADDRESSES, p.get("protocol") or "TCP", int(p["hostPort"]))
        for c in containers
        for p in c.get("ports") or []
        if int(p.get("hostPort") or 0) > 0
    ]


def conflicts(wanted: HostPort, taken: HostPort) -> bool:
    """Whether two host ports cannot both be bound (upstream's HostPortInfo.CheckConflict)."""
    ip, protocol, port = wanted
    taken_ip, taken_protocol, taken_port = taken
    if (protocol, port) != (taken_protocol, taken_port):
        return False
    return ip == ALL_ADDRESSES or taken_ip in (ALL_ADDRESSES, ip)


class PodsOnNodes(Protocol):
    """What this plugin reads of the scheduler's cache."""

    def pods_on(self, node: str) -> Sequence[tuple[Obj, Any]]: ...


class PortsState:
    """The pod's host ports, the pods preemption takes away (their ports are free), and the pods
    nominated to the node asked about (their ports are taken)."""

    __slots__ = ("added", "ports", "removed")

    def __init__(self, ports: list[HostPort], removed: frozenset[str] = frozenset(), added: tuple[Obj, ...] = ()) -> None:
        self.ports = ports
        self.removed = removed
        self.added = added


class NodePorts:
    """The plugin; see the module docstring."""

    name = NAME

    def __init__(self, cache: PodsOnNodes) -> None:
        self.cache = cache

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        ports = host_ports(pod)
        if not ports:
            return SKIP  # most pods: the filter is left out of the cycle
        state.write(NAME, PortsState(ports))
        return None

    def taken_by(self, state: CycleState, node: Obj) -> list[tuple[HostPort, Obj]]:
        """The pod's host ports that pods on ``node`` hold, with a pod holding each."""
        s: PortsState = state.data[NAME]
        found = []
        others = [other for other, _ in self.cache.pods_on(meta(node).get("name", ""))]
        for other in [*others, *s.added] if s.added else others:
            if meta(other).get("uid", "") in s.removed:
                continue
            for taken in host_ports(other):
                for wanted in s.ports:
                    if conflicts(wanted, taken):
                        found.append((wanted, other))
        return found

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        return _REJECTED if self.taken_by(state, node) else None

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        taken = self.taken_by(state, node)
        if not taken:
            return []
        details = [f"hostPort {port}/{protocol} on {ip} is taken by pod {meta(other).get('name', '')}" for (ip, protocol, port), other in taken]
        return [Reason(KIND, REASON, details=list(dict.fromkeys(details)))]

    def without(self, state: CycleState, removed: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``removed`` (placed pods and their nodes) were gone: preemption asks the
        filter again with its victims' ports free. Call it on a copy of the cycle state."""
        s: PortsState | None = state.data.get(NAME)
        if s is not None:
            state.data[NAME] = PortsState(s.ports, s.removed | {meta(p).get("uid", "") for p, _ in removed}, s.added)

    def adding(self, state: CycleState, added: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``added`` (pods nominated to the node asked about) held their ports there.
        Call it on a copy of the cycle state."""
        s: PortsState | None = state.data.get(NAME)
        if s is not None:
            state.data[NAME] = PortsState(s.ports, s.removed, (*s.added, *(p for p, _ in added)))
