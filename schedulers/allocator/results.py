"""What callers get from the allocator and tell it: outcomes, input errors, feature switches, limits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kube.features import KNOWN_FEATURES, Gate
from kube.gatedfields import ALLOCATOR_FIELD_GATES

DeviceID = tuple[str, str, str]  # (driver, pool, device)
PoolID = tuple[str, str]  # (driver, pool)

MAX_RESULTS = 32  # AllocationResultsMaxSize: results per claim
# A search still running after this many steps also checks supply before trying devices
# (``Allocator(bound_after=...)``); searches that finish sooner never pay for those checks.
BOUND_AFTER_STEPS = 256
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"

# Unschedulable reasons the scheduler and its explanations compare with.
TIMED_OUT = "timed out trying to allocate devices"
CANNOT_ALLOCATE = "cannot allocate all claims"


class AllocationError(Exception):
    """The input cannot be allocated on any node (bad CEL, unknown class, disabled feature...).

    Upstream aborts the scheduling attempt with an Error status for these. ``device`` names the
    device a failing selector was evaluated on (not part of upstream's message; for logs and tests).
    """

    device: str | None = None


class Allocated:
    """A solution: one ``status.allocation`` dict per input claim, same order.

    The dicts are built on first access, so filtering many nodes only pays for the search.
    """

    __slots__ = ("_allocations", "_build", "_exclusive", "free_left")

    def __init__(
        self,
        allocations: list[dict[str, Any]] | None = None,
        build: Callable[[], list[dict[str, Any]]] | None = None,
        exclusive: int | None = None,
        free_left: int | None = None,
    ) -> None:
        self._allocations = allocations
        self._build = build
        self._exclusive = exclusive
        # Devices of the node nobody has allocated exclusively, minus this solution's (the score).
        self.free_left = free_left

    @property
    def exclusive_devices(self) -> int:
        """Results that take a device exclusively (neither admin access nor a share).

        Known from the search without building the dicts, so scoring many nodes stays cheap.
        """
        if self._exclusive is None:
            self._exclusive = sum(
                1 for a in self.allocations for r in (a.get("devices") or {}).get("results") or [] if not r.get("adminAccess") and not r.get("shareID")
            )
        return self._exclusive

    @property
    def allocations(self) -> list[dict[str, Any]]:
        """The ``status.allocation`` dicts (built once)."""
        if self._allocations is None:
            self._allocations = self._build() if self._build is not None else []
            self._build = None
        return self._allocations

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Allocated) and self.allocations == other.allocations

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Allocated({self.allocations!r})"


class Unschedulable:
    """No solution on this node; ``message`` says what the user can change.

    ``reason`` is the short per-node form the scheduler counts; the details after it are worked
    out only when ``message`` is read, because most nodes that fail are never explained.
    """

    __slots__ = ("_details", "_message", "reason")

    def __init__(self, message: str | None = None, *, reason: str = "", details: Callable[[], str] | None = None) -> None:
        self.reason = reason or (message or "").split(": ", 1)[0]
        self._message = message
        self._details = details

    @property
    def message(self) -> str:
        """The whole explanation (built once)."""
        if self._message is None:
            self._message = f"{self.reason}: {self._details()}" if self._details is not None else self.reason
            self._details = None
        return self._message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unschedulable) and self.message == other.message

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Unschedulable({self.message!r})"


AllocationOutcome = Allocated | Unschedulable


def _needs(*gates: str) -> Any:
    """A feature on when all of ``gates`` are; by default when their defaults all are."""
    return field(default=all(KNOWN_FEATURES[g].default for g in gates), metadata={"gates": gates})


@dataclass(frozen=True)
class AllocatorFeatures:
    """The allocator's view of the feature gates (upstream ``AllocatorFeatures()``).

    Each named feature states the gates it needs, once; the defaults are the gates' own
    (kube.features). A gated field the allocator honours without a named feature is read with
    ``enabled(gate)``: ``field_gates`` holds the gates of kube.gatedfields' allocator rows that are on.
    """

    admin_access: bool = _needs(Gate.DRAAdminAccess)
    prioritized_list: bool = _needs(Gate.DRAPrioritizedList)
    partitionable_devices: bool = _needs(Gate.DRAPartitionableDevices)
    device_taints: bool = _needs(Gate.DRADeviceTaints)
    device_taint_rules: bool = _needs(Gate.DRADeviceTaints, Gate.DRADeviceTaintRules)
    binding_conditions: bool = _needs(Gate.DRADeviceBindingConditions, Gate.DRAResourceClaimDeviceStatus)
    consumable_capacity: bool = _needs(Gate.DRAConsumableCapacity)
    list_attributes: bool = _needs(Gate.DRAListTypeAttributes)
    node_allocatable_resources: bool = _needs(Gate.DRANodeAllocatableResources)
    # KEP-5194: not an allocator rule, but the scheduler reads all its gates from here.
    reserved_for_workloads: bool = _needs(Gate.DRAReservedForWorkloads)
    # The Workload API (PodGroups, gangs) and KEP-5729's PodGroup claims, likewise.
    generic_workload: bool = _needs(Gate.GenericWorkload)
    workload_resource_claims: bool = _needs(Gate.GenericWorkload, Gate.DRAWorkloadResourceClaims)
    # KEP-5690 (DRAPreemption): preemption may free devices, not only cpu, memory and pod slots.
    dra_preemption: bool = _needs(Gate.DRAPreemption)
    # Extended resources backed by devices (DRAExtendedResource): the scheduler's special claim.
    extended_resource: bool = _needs(Gate.DRAExtendedResource)
    field_gates: frozenset[str] = frozenset(g for g in ALLOCATOR_FIELD_GATES if KNOWN_FEATURES[g].default)

    def enabled(self, gate: str) -> bool:
        """Whether the allocator honours the fields of ``gate`` (an allocator row of kube.gatedfields)."""
        return gate in self.field_gates

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool]) -> AllocatorFeatures:
        """Map feature gates (e.g. ``kube.features.FeatureGates``) to allocator features."""

        def on(gate: str) -> bool:
            return bool(gates.get(gate, KNOWN_FEATURES[gate].default))

        named = {f.name: all(on(g) for g in f.metadata["gates"]) for f in fields(cls) if "gates" in f.metadata}
        return cls(**named, field_gates=frozenset(g for g in ALLOCATOR_FIELD_GATES if on(g)))
