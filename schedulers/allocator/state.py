"""AllocatedState: the devices, shares and capacity already taken."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableSet
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from kube.apitypes import AllocationResult, ResourceClaim
from kube.quantity import Quantity
from schedulers.allocator.devices import Device, as_quantity
from schedulers.allocator.index import NodeView
from schedulers.allocator.results import DeviceID, PoolID

_T = TypeVar("_T")


class _Layered(MutableSet[_T], Generic[_T]):
    """A set seen through changes to it (what was added, what was taken out) without copying it:
    a what-if on a cluster's allocations costs what it changes, not the cluster's size."""

    __slots__ = ("_added", "_base", "_removed")

    def __init__(self, base: MutableSet[_T]) -> None:
        self._base = base
        self._added: set[_T] = set()
        self._removed: set[_T] = set()

    def __contains__(self, item: object) -> bool:
        return item in self._added or (item in self._base and item not in self._removed)

    def __iter__(self) -> Iterator[_T]:
        yield from (item for item in self._base if item not in self._removed and item not in self._added)
        yield from self._added

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def add(self, item: _T) -> None:
        self._removed.discard(item)
        if item not in self._base:
            self._added.add(item)

    def discard(self, item: _T) -> None:
        self._added.discard(item)
        if item in self._base:
            self._removed.add(item)


@dataclass
class AllocatedState:
    """Devices already taken: exclusive devices, shares and aggregated consumed capacity."""

    devices: MutableSet[DeviceID] = field(default_factory=set)
    shared_ids: MutableSet[tuple[str, str, str, str]] = field(default_factory=set)
    shared_devices: MutableSet[DeviceID] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)
    # Allocations added per pool (exclusive or shared): what was worked out for a node's pools
    # (free devices, a search) stays valid while their counts do not move.
    pool_changes: dict[PoolID, int] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[Mapping[str, Any]], in_flight: Iterable[Mapping[str, Any]] | Mapping[str, Any] = ()) -> AllocatedState:
        """Build from allocated claims plus in-flight ones (uid -> claim, or claims); in-flight wins per uid."""
        by_uid: dict[str, ResourceClaim] = {}
        for c in cast("Iterable[ResourceClaim]", claims):
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        flight = in_flight.values() if isinstance(in_flight, Mapping) else in_flight
        for c in cast("Iterable[ResourceClaim]", flight):
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        state = cls()
        for c in by_uid.values():
            state.add_allocation((c.get("status") or {}).get("allocation"))
        return state

    def add_allocation(self, allocation: Mapping[str, Any] | None) -> None:
        """Account one ``status.allocation``; admin-access results never block others."""
        typed = cast("AllocationResult | None", allocation)  # typed from here on (kube/apitypes.pyi)
        if not typed:
            return
        for r in (typed.get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            dev_id = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            self.pool_changes[dev_id[:2]] = self.pool_changes.get(dev_id[:2], 0) + 1
            if r.get("shareID"):
                self.shared_ids.add((*dev_id, r["shareID"]))
                self.shared_devices.add(dev_id)
                # A fresh dict: a what-if copy (:meth:`changed`) shares the original's sums.
                agg = self.capacity[dev_id] = dict(self.capacity.get(dev_id, {}))
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) + as_quantity(value)
            else:
                self.devices.add(dev_id)

    def changed(self, add: Iterable[Mapping[str, Any]] = (), remove: Iterable[Mapping[str, Any]] = ()) -> AllocatedState:
        """A copy with ``remove``'s devices released and ``add``'s taken (a what-if for preemption).

        Layered sets and shallow dicts (a device's capacity sums are copied where they change):
        the copy costs what it changes, not the cluster's size. Cached searches and free lists are
        keyed by the state object itself, so the copy never reuses the original's."""
        state = AllocatedState(
            _Layered(self.devices), _Layered(self.shared_ids), _Layered(self.shared_devices), dict(self.capacity), dict(self.pool_changes)
        )
        for allocation in cast("Iterable[AllocationResult]", remove):
            for r in (allocation.get("devices") or {}).get("results") or []:
                if r.get("adminAccess"):
                    continue
                dev_id = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                if not r.get("shareID"):
                    state.devices.discard(dev_id)
                    continue
                state.shared_ids.discard((*dev_id, r["shareID"]))
                if not any(s[:3] == dev_id for s in state.shared_ids):
                    state.shared_devices.discard(dev_id)
                agg = state.capacity[dev_id] = dict(state.capacity.get(dev_id, {}))
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) - as_quantity(value)
        for added in add:
            state.add_allocation(added)
        return state

    def stamp(self, view: NodeView) -> int:
        """Changes to the view's pools so far; counts only grow, so their sum moves whenever one does."""
        changes = self.pool_changes
        pools = view.pools
        return changes.get(pools[0].id, 0) if len(pools) == 1 else sum(changes.get(p.id, 0) for p in pools)

    def free_candidates(self, view: NodeView) -> list[Device]:
        """The view's candidates minus devices allocated exclusively.

        Kept on the view across scheduling cycles and recomputed only when an allocation lands
        in one of its pools (the scheduler's state only grows between rebuilds), instead of once
        per node per cycle.
        """
        stamp = self.stamp(view)
        cached = view.free
        if cached is not None and cached[0] is self and cached[1] == stamp:
            return cached[2]
        taken = self.devices
        free = [d for d in view.candidates if d.id not in taken]
        if len(free) == len(view.candidates):
            free = view.candidates  # nothing taken: the same list, not a copy
        view.free = (self, stamp, free)
        return free
