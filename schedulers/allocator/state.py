"""AllocatedState: the devices, shares and capacity already taken."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.quantity import Quantity
from schedulers.allocator.devices import _Device, _quantity
from schedulers.allocator.index import _NodeView
from schedulers.allocator.results import DeviceID, PoolID


@dataclass
class AllocatedState:
    """Devices already taken: exclusive devices, shares and aggregated consumed capacity."""

    devices: set[DeviceID] = field(default_factory=set)
    shared_ids: set[tuple[str, str, str, str]] = field(default_factory=set)
    shared_devices: set[DeviceID] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)
    # Allocations added per pool (exclusive or shared): what was worked out for a node's pools
    # (free devices, a search) stays valid while their counts do not move.
    pool_changes: dict[PoolID, int] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[Mapping[str, Any]], in_flight: Iterable[Mapping[str, Any]] | Mapping[str, Any] = ()) -> AllocatedState:
        """Build from allocated claims plus in-flight ones (uid -> claim, or claims); in-flight wins per uid."""
        by_uid: dict[str, Mapping[str, Any]] = {}
        for c in claims:
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        flight = in_flight.values() if isinstance(in_flight, Mapping) else in_flight
        for c in flight:
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        state = cls()
        for c in by_uid.values():
            state.add_allocation((c.get("status") or {}).get("allocation"))
        return state

    def add_allocation(self, allocation: Mapping[str, Any] | None) -> None:
        """Account one ``status.allocation``; admin-access results never block others."""
        if not allocation:
            return
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            dev_id = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            self.pool_changes[dev_id[:2]] = self.pool_changes.get(dev_id[:2], 0) + 1
            if r.get("shareID"):
                self.shared_ids.add((*dev_id, r["shareID"]))
                self.shared_devices.add(dev_id)
                agg = self.capacity.setdefault(dev_id, {})
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) + _quantity(value)
            else:
                self.devices.add(dev_id)

    def changed(self, add: Iterable[Mapping[str, Any]] = (), remove: Iterable[Mapping[str, Any]] = ()) -> AllocatedState:
        """A copy with ``remove``'s devices released and ``add``'s taken (a what-if for preemption;
        the copy moves every pool's change count, so no cached search of this state is reused)."""
        state = AllocatedState(
            set(self.devices), set(self.shared_ids), set(self.shared_devices),
            {dev: dict(amounts) for dev, amounts in self.capacity.items()}, {pool: n + 1 for pool, n in self.pool_changes.items()},
        )  # fmt: skip
        for allocation in remove:
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
                agg = state.capacity.get(dev_id, {})
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) - _quantity(value)
        for allocation in add:
            state.add_allocation(allocation)
        return state

    def stamp(self, view: _NodeView) -> int:
        """Changes to the view's pools so far; counts only grow, so their sum moves whenever one does."""
        changes = self.pool_changes
        pools = view.pools
        return changes.get(pools[0].id, 0) if len(pools) == 1 else sum(changes.get(p.id, 0) for p in pools)

    def free_candidates(self, view: _NodeView) -> list[_Device]:
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
