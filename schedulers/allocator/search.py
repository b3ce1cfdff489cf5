"""The depth-first search of one ``Allocator.allocate`` call, and the cache of searches per node.

The search is upstream's ``allocateOne``: depth first over claims, requests and device slots,
trying devices in a deterministic order (pools by driver/pool, binding-condition pools last,
slices by name, devices in slice order), combinations only within a request, first full
solution wins, everything undone on backtrack. Like upstream it gives up on a path as soon as
a claim cannot stay within the result limit whatever the devices. A search still running
after ``BOUND_AFTER_STEPS`` starts over with supply checks that drop paths without any
solution, so it finds the same first solution as the plain search, usually far sooner; the
filter timeout stays the last resort.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol, cast

from kube.apitypes import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClaimConfiguration,
    DeviceClassConfiguration,
    DeviceConfiguration,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from kube.quantity import Quantity
from schedulers.allocator.claims import Constraint, PreparedClaim, PreparedRequest, attribute_value, share_consumption, untolerated
from schedulers.allocator.devices import Device
from schedulers.allocator.index import NodeView
from schedulers.allocator.results import MAX_RESULTS, Allocated, AllocationError, AllocatorFeatures, DeviceID, PoolID
from schedulers.allocator.state import AllocatedState


class _Allocating(Protocol):
    """What a search reads of the ``Allocator`` that runs it."""

    features: AllocatorFeatures
    allocated: AllocatedState
    timeout: float | None
    bound_after: int

    def selectable(self, req: PreparedRequest, dev: Device) -> bool: ...

    def available_counters(self, pool_id: PoolID) -> dict[tuple[str, str], Fraction]: ...

    def free_candidates(self, view: NodeView) -> list[Device]: ...


_CHECKPOINT_STEPS = 256  # deadline (and supply check) checks this often


class TimedOut(Exception):
    """The search on one node ran past the allocator's timeout."""


class _Restart(Exception):
    """The search starts over with its supply checks on."""


@dataclass
class _Pick:
    device: Device
    request: PreparedRequest
    consumed: dict[str, Quantity] | None  # shared device: capacity taken by this share


_NO_CONSTRAINTS: list[Constraint] = []
_NO_CHANGES: list[Any] = []  # shared, never appended to

# What a search step answers: a solution, no solution on this path, or no solution whatever
# devices are chosen because the claim would exceed MAX_RESULTS (callers then stop trying other
# devices and move on to the next subrequest, as upstream does). 0 is "no verdict yet".
_FOUND, _FAILED, _EXCEEDED = 1, 2, 3

# What taking a device changes: shared?, consumed capacity, counter deltas, constraint values.
_Fit = tuple[bool, dict[str, Quantity] | None, list[tuple[PoolID, tuple[str, str], Fraction]], list[tuple[Constraint, Any]]]


def found_allocation(search: Search, timestamp: str | None, share_id: Callable[[], str]) -> Allocated:
    """A found solution; the result dicts (fresh share IDs included) are built only if asked for."""
    exclusive = search.exclusive_picks()
    return Allocated(build=lambda: search.build(timestamp, share_id), exclusive=exclusive, free_left=len(search.free) - exclusive)


class SearchCache:
    """The last search per node, reused by later cycles whose claims have the same specs.

    Pods from one ResourceClaimTemplate ask for the same thing, and most nodes a cycle visits did
    not change since an earlier cycle searched them, so the depth-first search would find the
    same devices again, or fail again: once most nodes are full, failures are most of the nodes
    a cycle visits. An entry is valid for the same node view (slices, taint rules and node
    labels; a change replaces the view), the same AllocatedState at the same change count of the
    view's pools, the same DeviceClasses and the same claim specs. A reused failure is explained
    with the current claims (messages name them); timed-out searches and errors are not kept.
    The scheduler owns one; the allocator's result for a node is identical with or without it.
    """

    __slots__ = ("_entries", "hits")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[NodeView, AllocatedState, int, int, bytes, Search]] = {}
        self.hits = 0

    def get(self, node: str, view: NodeView, state: AllocatedState, stamp: int, classes: int, signature: bytes) -> Search | None:
        entry = self._entries.get(node)
        if entry is None or entry[0] is not view or entry[1] is not state or entry[2] != stamp or entry[3] != classes or entry[4] != signature:
            return None
        self.hits += 1
        return entry[5]

    def put(self, node: str, view: NodeView, state: AllocatedState, stamp: int, classes: int, signature: bytes, search: Search) -> None:
        self._entries[node] = (view, state, stamp, classes, signature, search)

    def discard(self, node: str) -> None:
        """Forget a node's entry (the node is gone)."""
        self._entries.pop(node, None)


class Search:
    """State of one ``allocate`` call: the depth-first search and its undo log.

    The search visits claims, requests, subrequests and device slots in upstream's order and
    stops at the first full solution. It prunes like upstream: a path on which a claim can no
    longer stay within :data:`MAX_RESULTS` answers ``_EXCEEDED``, and every caller up to the
    next choice of subrequest gives up on that path instead of trying other devices. A search
    that runs longer than :data:`BOUND_AFTER_STEPS` starts over and also prunes by supply (see
    ``_enough``): those checks only drop paths without any solution, so the first solution
    stays the same.

    Its per-device checks are public (:meth:`need`, :meth:`in_use`, :meth:`can_take`,
    :meth:`shared`, :meth:`capacity_for`, :meth:`counters_suffice`): an explanation asks them of
    a search that has not run (:meth:`Allocator.probe`), device by device, with nothing taken yet.
    """

    def __init__(self, alloc: _Allocating, claims: list[PreparedClaim], view: NodeView, node_name: str) -> None:
        self.alloc = alloc
        self.features = alloc.features
        self.allocated = alloc.allocated
        self.claims = claims
        self.view = view
        self.node_name = node_name
        self.allocating: dict[DeviceID, set[int]] = {}
        self.shares: dict[DeviceID, int] = {}
        self.capacity: dict[DeviceID, dict[str, Quantity]] = {}
        self.counters: dict[PoolID, dict[tuple[str, str], Fraction]] = {}
        self.results: list[list[_Pick]] = [[] for _ in claims]
        self._attributes: dict[tuple[DeviceID, str], frozenset[Any] | None] = {}
        self.selected: dict[tuple[int, int], int] = {}
        # Constraints keep per-search state; claims without any share one empty list (never appended to).
        self.constraints = [[Constraint(r, a, d) for r, a, d in c.constraints] if c.constraints else _NO_CONSTRAINTS for c in claims]
        self.all_devices: dict[int, list[Device]] = {}  # id(PreparedRequest) -> devices
        self.deepest = (-1, -1)
        self.free = alloc.free_candidates(view)
        self.deadline = time.monotonic() + alloc.timeout if alloc.timeout is not None else None
        # Steps: search calls plus devices tried in vain, so that long loops reach a checkpoint too.
        self.steps = 0
        self._checkpoint_at = _CHECKPOINT_STEPS
        self.bounded = False  # supply checks on (see _bound)
        self._bound_checked = False
        self._exclusive: int | None = None  # set once the search has succeeded (results are final)
        self.found = False  # the outcome of run(), kept for SearchCache

    def run(self) -> bool:
        for claim in self.claims:
            if claim.fewest is None or claim.fewest > MAX_RESULTS:
                self._validate()
                break
        if self.alloc.bound_after <= 0:
            self._bound_checked = True
            if self._bounds_safe():
                self._bound()
        try:
            return self._request(0, 0) == _FOUND
        except _Restart:
            # Checks added near the top prune most; the first steps are cheap to repeat.
            self._restart()
            self._bound()
            return self._request(0, 0) == _FOUND
        finally:
            self._attributes = {}  # a search kept by SearchCache keeps no attribute values

    # --- before the search: what upstream validates per node ---

    def _validate(self) -> None:
        """Fix the devices of "All" requests and check each claim's result limit with them, in upstream's order."""
        for claim in self.claims:
            fewest = claim.fewest
            if fewest is None:
                fewest = sum(min(self.need(req) for req in top.subrequests or [top]) for top in claim.requests)
            if fewest > MAX_RESULTS:
                raise AllocationError(f"claim {claim.ref}: number of requested devices {fewest} exceeds the claim limit of {MAX_RESULTS}")

    def need(self, req: PreparedRequest) -> int:
        """Devices ``req`` takes: its count, or all matching devices (computed on first use)."""
        if not req.all_mode:
            return req.count
        devices = self.all_devices.get(id(req))
        if devices is None:
            devices = self._all_devices(req)
            self.all_devices[id(req)] = devices
        return len(devices)

    def _all_devices(self, req: PreparedRequest) -> list[Device]:
        out = []
        for pool in self.view.pools:
            where = f"claim {req.claim_ref}, request {req.name}: asks for all devices, but resource pool {pool.id[0]}/{pool.id[1]}"
            if pool.incomplete:
                raise AllocationError(f"{where} is currently being updated")
            if pool.invalid:
                raise AllocationError(f"{where} is currently invalid")
            for dev in pool.devices:
                if not self.alloc.selectable(req, dev):
                    continue
                # Upstream filters by capacity here too: a shared device without room is not part of "all".
                if self.features.consumable_capacity and self.capacity_for(dev, req) is False:
                    continue
                out.append(dev)
        return out

    # --- the depth-first search ---

    def _checkpoint(self) -> None:
        """Every 256 steps: give up past the deadline; start over with the supply checks once the search is long."""
        self._checkpoint_at = self.steps + _CHECKPOINT_STEPS
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimedOut
        if not self._bound_checked and self.steps >= self.alloc.bound_after:
            self._bound_checked = True
            if self._bounds_safe():
                raise _Restart

    def _request(self, ci: int, ri: int) -> int:
        """Allocate request ``ri`` of claim ``ci`` and everything after it."""
        self.steps += 1
        if self.steps >= self._checkpoint_at:
            self._checkpoint()
        if ci == len(self.claims):
            return _FOUND
        claim = self.claims[ci]
        if ri == len(claim.requests):
            outcome = self._request(ci + 1, 0)
            # Another claim's limit says nothing about this claim's devices.
            return _FAILED if outcome == _EXCEEDED else outcome
        if (ci, ri) > self.deepest:
            self.deepest = (ci, ri)
        top = claim.requests[ri]
        if not top.subrequests:
            return self._slot(ci, ri, top, 0, 0)
        # Alternatives in order; one that exceeds the limit makes way for the next, which may need fewer.
        all_exceeded = True
        for index, sub in enumerate(top.subrequests):
            self.selected[(ci, ri)] = index
            outcome = self._slot(ci, ri, sub, 0, 0)
            if outcome == _FOUND:
                return _FOUND
            if outcome == _FAILED:
                all_exceeded = False
        return _EXCEEDED if all_exceeded else _FAILED

    def _slot(self, ci: int, ri: int, req: PreparedRequest, di: int, start: int) -> int:
        """Place device ``di`` of ``req`` (request ``ri`` of claim ``ci``), trying candidates from ``start``."""
        self.steps += 1
        if self.steps >= self._checkpoint_at:
            self._checkpoint()
        if req.all_mode:
            need = self.need(req)
            if not need:
                return _FAILED  # "All" needs at least one device
        else:
            need = req.count
        if di >= need:
            return self._request(ci, ri + 1)
        if len(self.results[ci]) + need - di > MAX_RESULTS:
            return _EXCEEDED
        if req.all_mode:
            dev = self.all_devices[id(req)][di]
            if self.in_use(ci, req, dev):
                return _FAILED
            undo = self._take(ci, req, dev, must=True)
            if undo is None:
                return _FAILED
            outcome = self._slot(ci, ri, req, di + 1, 0)
            if outcome != _FOUND:
                undo()
            return outcome
        if self.bounded:
            if self._over_limit(ci, ri, need - di):
                return _EXCEEDED
            if not self._enough(ci, ri, req, need - di, start):
                return _FAILED
        selectable = self.alloc.selectable
        if req.admin:
            candidates = self.view.candidates
            for pos in range(start, len(candidates)):
                dev = candidates[pos]
                if self.in_use(ci, req, dev) or not selectable(req, dev):
                    continue
                undo = self._take(ci, req, dev, must=False)
                if undo is None:
                    self.steps += 1
                    continue
                outcome = self._slot(ci, ri, req, di + 1, pos + 1)
                if outcome == _FOUND:
                    return _FOUND
                undo()
                if outcome == _EXCEEDED:
                    return _EXCEEDED
            return _FAILED
        # Normal requests only look at devices not allocated before this cycle (same relative
        # order, so combinations are tried exactly as over the full list).
        candidates = self.free
        allocating = self.allocating
        for pos in range(start, len(candidates)):
            dev = candidates[pos]
            if dev.id in allocating or not selectable(req, dev):
                continue
            undo = self._take(ci, req, dev, must=False)
            if undo is None:
                self.steps += 1
                continue
            outcome = self._slot(ci, ri, req, di + 1, pos + 1)
            if outcome == _FOUND:
                return _FOUND
            undo()
            if outcome == _EXCEEDED:
                return _EXCEEDED
        return _FAILED

    # --- supply checks (bounded mode) ---

    def _bounds_safe(self) -> bool:
        """Whether the supply checks may skip paths without changing what upstream reports.

        Upstream reports the first CEL runtime error its search runs into and the first "All"
        device that breaks a constraint. So the checks stay off when any selector fails on any
        candidate or an "All" request is constrained: the plain search (and its deadline) decides.
        Called once per search; it starts the caches the checks use.
        """
        self._selectable: dict[int, tuple[list[int], list[Device]]] = {}  # id(PreparedRequest) -> positions, devices
        self._possible: dict[int, list[Device]] = {}  # id(PreparedRequest) -> devices it could take at all
        for ci, claim in enumerate(self.claims):
            for top in claim.requests:
                for req in top.subrequests or [top]:
                    if req.all_mode and any(con.applies(req) for con in self.constraints[ci]):
                        return False
                    try:
                        self._selectable_positions(req)
                    except AllocationError:
                        return False
        return True

    def _bound(self) -> None:
        """Turn the supply checks on (once ``_bounds_safe``); the search state must be empty (nothing taken yet)."""
        # What each request could take at all; later on a path it can only take fewer.
        for ci, claim in enumerate(self.claims):
            for top in claim.requests:
                for req in top.subrequests or [top]:
                    self._possible[id(req)] = self._takeable(ci, req, 0)
        self.bounded = True

    def _restart(self) -> None:
        """Forget everything taken so far (the search starts over)."""
        self.allocating = {}
        self.shares = {}
        self.capacity = {}
        self.counters = {}
        self.results = [[] for _ in self.claims]
        self.selected = {}
        self.constraints = [[Constraint(con.requests, con.attribute, con.distinct) for con in cons] if cons else _NO_CONSTRAINTS for cons in self.constraints]
        self.deepest = (-1, -1)

    def _selectable_positions(self, req: PreparedRequest) -> tuple[list[int], list[Device]]:
        """Positions (in the list ``_slot`` walks for ``req``) and devices that pass its selectors."""
        cached = self._selectable.get(id(req))
        if cached is None:
            candidates = self.view.candidates if req.admin else self.free
            selectable = self.alloc.selectable
            positions = [pos for pos, dev in enumerate(candidates) if selectable(req, dev)]
            cached = (positions, [candidates[pos] for pos in positions])
            self._selectable[id(req)] = cached
        return cached

    def _takeable(self, ci: int, req: PreparedRequest, start: int) -> list[Device]:
        """Devices from position ``start`` on that ``req`` could take now."""
        if req.all_mode:
            devices = self.all_devices[id(req)]
        else:
            positions, selectable = self._selectable_positions(req)
            devices = selectable[bisect_left(positions, start):]
        return [dev for dev in devices if not self.in_use(ci, req, dev) and self._fit(ci, req, dev, must=False) is not None]

    def _still_possible(self, ci: int, req: PreparedRequest) -> list[Device]:
        """A cheap superset of ``_takeable(ci, req, 0)``: possible at the start, not in use, constraints still met."""
        constraints = [con for con in self.constraints[ci] if con.values and con.applies(req)]
        out = []
        for dev in self._possible[id(req)]:
            if self.in_use(ci, req, dev):
                continue
            if all(con.admits(self._attribute(dev, con.attribute)) for con in constraints):
                out.append(dev)
        return out

    def _over_limit(self, ci: int, ri: int, more: int) -> bool:
        """Whether claim ``ci`` exceeds the result limit whatever the devices, taking ``more`` for request ``ri`` and the fewest after it."""
        fewest = len(self.results[ci]) + more
        for top in self.claims[ci].requests[ri + 1:]:
            fewest += min(self.need(req) for req in top.subrequests or [top])
        return fewest > MAX_RESULTS

    def _enough(self, ci: int, ri: int, req: PreparedRequest, need: int, start: int) -> bool:
        """Whether ``need`` more devices for ``req`` from position ``start`` on, and everything after it, may still be found.

        Necessary conditions only, each checked against devices that could still be taken:

        * this request: enough devices, enough distinct values for a distinctAttribute, a large
          enough group of one value for a matchAttribute, the cheapest devices within each
          shared counter;
        * every later request (of this claim and the next ones): enough devices alone;
        * requests that take devices exclusively: enough devices for all of them together;
        * a constraint tying this request to later ones: enough devices (values) for all of them.
        """
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimedOut  # these checks can be slow; do not wait for the next checkpoint
        now = self._takeable(ci, req, start)
        if len(now) < need or not self._values_suffice(ci, req, now, need):
            return False
        if any(dev.consumes for dev in now) and not self.counters_suffice(now, need):
            return False
        later: dict[int, list[Device]] = {}  # id(PreparedRequest) -> still possible devices
        exclusive_need = need if self._takes_exclusively(req, now) else 0
        exclusive_devices = {dev.id for dev in now} if exclusive_need else set()
        # A failure is explained with the last request a check involved, where the plain search would fail.
        last = (ci, ri)
        for cj in range(ci, len(self.claims)):
            requests = self.claims[cj].requests
            for rj in range(ri + 1 if cj == ci else 0, len(requests)):
                top = requests[rj]
                fewest: int | None = None
                union: set[DeviceID] = set()
                exclusive = True
                for alt in top.subrequests or [top]:
                    alt_need = self.need(alt)
                    devices = later[id(alt)] = self._still_possible(cj, alt)
                    if len(devices) < alt_need or (alt.all_mode and not alt_need):
                        continue
                    fewest = alt_need if fewest is None else min(fewest, alt_need)
                    exclusive = exclusive and self._takes_exclusively(alt, devices)
                    union.update(dev.id for dev in devices)
                if fewest is None:
                    self.deepest = max(self.deepest, (cj, rj))
                    return False
                if exclusive:
                    exclusive_need += fewest
                    exclusive_devices |= union
                    last = (cj, rj)
        if exclusive_need > len(exclusive_devices):
            self.deepest = max(self.deepest, last)
            return False
        return all(self._tie_suffices(ci, ri, req, need, now, con, later) for con in self.constraints[ci] if con.applies(req))

    def _takes_exclusively(self, req: PreparedRequest, devices: list[Device]) -> bool:
        """Whether every device ``req`` takes from ``devices`` is then taken from everybody else."""
        return not req.admin and not any(self.shared(dev) for dev in devices)

    def _values_suffice(self, ci: int, req: PreparedRequest, devices: list[Device], need: int) -> bool:
        """Whether each constraint on ``req`` leaves ``need`` of ``devices`` (see ``_values_allow``)."""
        return all(self._values_allow(con, devices, need) for con in self.constraints[ci] if con.applies(req))

    def _attribute(self, dev: Device, name: str) -> frozenset[Any] | None:
        """``attribute_value``, once per device and attribute in this search: a device keeps its
        attributes only while among the last ``VIEWS_KEPT`` read, and a search over more devices
        than that must not read slices again and again."""
        key = (dev.id, name)
        try:
            return self._attributes[key]
        except KeyError:
            value = self._attributes[key] = attribute_value(dev, name, self.features.list_attributes)
            return value

    def _values_allow(self, con: Constraint, devices: list[Device], need: int) -> bool:
        """Enough distinct values for a distinctAttribute, a large enough group of one value for a matchAttribute."""
        if con.values and not con.distinct:
            return len(devices) >= need  # the fixed value already filtered the devices
        values = [self._attribute(dev, con.attribute) for dev in devices]
        if any(v is None or len(v) != 1 for v in values):
            return True  # list attributes: sets intersect in ways counting does not capture
        if con.distinct:
            return len(set(values)) >= need
        return bool(values) and max(Counter(values).values()) >= need

    def _tie_suffices(
        self, ci: int, ri: int, req: PreparedRequest, need: int, now: list[Device], con: Constraint, later: dict[int, list[Device]],
    ) -> bool:
        """Whether ``con`` leaves enough devices for this request and the later requests of the claim it applies to.

        Within one claim a device is taken once, admin access or not, unless it is shared.
        """
        total = need
        devices = {dev.id: dev for dev in now}
        last = ri
        for rj, top in enumerate(self.claims[ci].requests[ri + 1:], ri + 1):
            alternatives = top.subrequests or [top]
            if not any(con.applies(alt) for alt in alternatives):
                continue
            last = rj
            total += min(self.need(alt) if con.applies(alt) else 0 for alt in alternatives)
            for alt in alternatives:
                if not con.applies(alt):
                    continue
                if any(self.shared(dev) for dev in later[id(alt)]):
                    return True  # a shared device may serve two requests
                devices.update((dev.id, dev) for dev in later[id(alt)])
        if total == need:
            return True  # nothing later is tied; _values_suffice covered this request
        if self._values_allow(con, list(devices.values()), total):
            return True
        self.deepest = max(self.deepest, (ci, last))
        return False

    def counters_suffice(self, takeable: list[Device], need: int) -> bool:
        """Whether the ``need`` devices consuming least of each counter fit into what is left of it."""
        amounts: dict[tuple[PoolID, tuple[str, str]], list[Fraction]] = {}
        for dev in takeable:
            if self.shared(dev) and (dev.id in self.allocated.shared_devices or self.shares.get(dev.id)):
                continue  # its counters are consumed already
            pool_id = (dev.id[0], dev.id[1])
            per_device: dict[tuple[PoolID, tuple[str, str]], Fraction] = {}
            for set_name, counters in dev.consumes:
                for c, q in counters.items():
                    counter = (pool_id, (set_name, c))
                    per_device[counter] = per_device.get(counter, Fraction(0)) + q.as_fraction()
            for counter, amount in per_device.items():
                amounts.setdefault(counter, []).append(amount)
        for (pool_id, key), consumed in amounts.items():
            # Devices that do not consume this counter take the first places for free.
            cheapest = need - (len(takeable) - len(consumed))
            if cheapest <= 0:
                continue
            left = self.alloc.available_counters(pool_id).get(key, Fraction(0)) - self.counters.get(pool_id, {}).get(key, Fraction(0))
            if sum(sorted(consumed)[:cheapest]) > left:
                return False
        return True

    # --- taking one device ---

    def shared(self, dev: Device) -> bool:
        """Whether ``dev`` is shared (allocated in shares) rather than taken whole."""
        return dev.allow_multiple and self.features.consumable_capacity

    def in_use(self, ci: int, req: PreparedRequest, dev: Device) -> bool:
        """Whether ``dev`` is taken for ``req`` of claim ``ci``: allocated before, or picked on this path."""
        users = self.allocating.get(dev.id)
        if req.admin:
            return users is not None and ci in users
        return dev.id in self.allocated.devices or bool(users)

    def capacity_for(self, dev: Device, req: PreparedRequest) -> dict[str, Quantity] | bool | None:
        """Consumed capacity for a share (dict), None for an exclusive fit, False if it does not fit."""
        if not self.shared(dev):
            # Capacity requests act as a filter on exclusive devices.
            for key, amount in req.capacity.items():
                if key not in dev.capacity or amount > dev.capacity[key]:
                    return False
            return None
        consumed = share_consumption(dev, req)
        if consumed is None:
            return False
        taken = self.allocated.capacity.get(dev.id) or {}
        pending = self.capacity.get(dev.id) or {}
        for key, amount in consumed.items():
            total = amount + taken.get(key, Quantity(0)) + pending.get(key, Quantity(0))
            if total > dev.capacity[key]:
                return False
        return consumed

    def can_take(self, ci: int, req: PreparedRequest, dev: Device) -> bool:
        """Whether ``req`` of claim ``ci`` could take ``dev`` now, in-use aside (:meth:`in_use`):
        capacity, shared counters, taints and the claim's constraints."""
        return self._fit(ci, req, dev, must=False) is not None

    def _fit(self, ci: int, req: PreparedRequest, dev: Device, must: bool) -> _Fit | None:
        """What taking ``dev`` for ``req`` would change, or None if it cannot be taken now."""
        # A device that allows multiple allocations is shared, with admin access too (upstream).
        shared = self.shared(dev)
        consumed: dict[str, Quantity] | None = None
        if self.features.consumable_capacity and (shared or req.capacity):
            fit = self.capacity_for(dev, req)
            if fit is False:
                return None
            consumed = fit if isinstance(fit, dict) else None
        # Counters: a shared device that already has a share consumed them once.
        counter_delta: list[tuple[PoolID, tuple[str, str], Fraction]] = _NO_CHANGES
        if dev.consumes and not (shared and (dev.id in self.allocated.shared_devices or self.shares.get(dev.id))):
            if not self.features.partitionable_devices:
                return None
            pool_id = (dev.id[0], dev.id[1])
            available = self.alloc.available_counters(pool_id)
            used = self.counters.get(pool_id) or {}
            counter_delta = []
            for set_name, counters in dev.consumes:
                for c, q in counters.items():
                    key = (set_name, c)
                    amount = q.as_fraction()
                    if available.get(key, Fraction(0)) - used.get(key, Fraction(0)) < amount:
                        return None
                    counter_delta.append((pool_id, key, amount))
        if self.features.device_taints and dev.taints and untolerated(dev, req):
            return None
        constraints = self.constraints[ci]
        if not constraints:
            return shared, consumed, counter_delta, _NO_CHANGES
        values: list[tuple[Constraint, Any]] = []
        for con in constraints:
            if not con.applies(req):
                continue
            value = self._attribute(dev, con.attribute)
            if value is None or not con.admits(value):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].ref}, request {req.name}: cannot add device {'/'.join(dev.id)} "
                        "because a claim constraint would not be satisfied"
                    )
                return None
            # matchAttribute keeps the running intersection (list attributes); scalars stay equal.
            values.append((con, value if con.distinct or not con.values else value & con.values[-1]))
        return shared, consumed, counter_delta, values

    def _take(self, ci: int, req: PreparedRequest, dev: Device, must: bool) -> Callable[[], None] | None:
        """Try to add ``dev`` for ``req``; returns an undo function, or None if it cannot be taken."""
        fit = self._fit(ci, req, dev, must)
        if fit is None:
            return None
        shared, consumed, counter_delta, values = fit
        for pool_id, key, amount in counter_delta:
            used = self.counters.setdefault(pool_id, {})
            used[key] = used.get(key, Fraction(0)) + amount
        for con, value in values:
            con.values.append(value)
        if shared:
            self.shares[dev.id] = self.shares.get(dev.id, 0) + 1
            if consumed:
                pending = self.capacity.setdefault(dev.id, {})
                for cap_key, cap_amount in consumed.items():
                    pending[cap_key] = pending.get(cap_key, Quantity(0)) + cap_amount
        else:
            self.allocating.setdefault(dev.id, set()).add(ci)
        picks = self.results[ci]
        picks.append(_Pick(dev, req, consumed if shared else None))

        def undo() -> None:
            picks.pop()
            if shared:
                self.shares[dev.id] -= 1
                if consumed:
                    pending = self.capacity[dev.id]
                    for cap_key, cap_amount in consumed.items():
                        pending[cap_key] = pending[cap_key] - cap_amount
            else:
                users = self.allocating[dev.id]
                users.discard(ci)
                if not users:
                    del self.allocating[dev.id]
            for pool_id, key, amount in counter_delta:
                self.counters[pool_id][key] -= amount
            for con, _ in values:
                con.values.pop()

        return undo

    def exclusive_picks(self) -> int:
        """Picks that become results without adminAccess and shareID (what ``build`` would write); counted once."""
        if self._exclusive is None:
            count = 0
            for picks in self.results:
                for p in picks:
                    if p.consumed is None and not p.request.admin:
                        count += 1
            self._exclusive = count
        return self._exclusive

    # --- result construction ---

    def build(self, timestamp: str | None, share_id: Callable[[], str]) -> list[dict[str, Any]]:
        out: list[AllocationResult] = []
        for ci, claim in enumerate(self.claims):
            picks = self.results[ci]
            results: list[DeviceRequestAllocationResult] = []
            for p in picks:
                r: DeviceRequestAllocationResult = {
                    "request": p.request.name, "driver": p.device.driver, "pool": p.device.pool, "device": p.device.name,
                }  # fmt: skip
                if p.request.admin:
                    r["adminAccess"] = True
                if p.request.tolerations:
                    r["tolerations"] = [{**t} for t in p.request.tolerations]
                if self.features.binding_conditions and p.device.binding_conditions:
                    r["bindingConditions"] = list(p.device.binding_conditions)
                    if p.device.binding_failure_conditions:
                        r["bindingFailureConditions"] = list(p.device.binding_failure_conditions)
                if p.consumed is not None:
                    r["shareID"] = share_id()
                    if p.consumed:
                        r["consumedCapacity"] = {k: v.canonical() for k, v in p.consumed.items()}
                results.append(r)
            devices: DeviceAllocationResult = {"results": results}
            config = self._config(ci, claim)
            if config:
                devices["config"] = config
            allocation: AllocationResult = {"devices": devices}
            selector = self._node_selector(picks)
            if selector is not None:
                allocation["nodeSelector"] = selector
            if timestamp and self.features.binding_conditions:
                allocation["allocationTimestamp"] = timestamp
            out.append(allocation)
        return cast("list[dict[str, Any]]", out)  # handed out as the JSON it is

    def _chosen(self, ci: int, ri: int, top: PreparedRequest) -> PreparedRequest:
        return top.subrequests[self.selected[(ci, ri)]] if top.subrequests else top

    def _config(self, ci: int, claim: PreparedClaim) -> list[DeviceAllocationConfiguration]:
        if not claim.has_config:
            return []
        config: list[DeviceAllocationConfiguration] = []
        by_class: dict[str, list[DeviceAllocationConfiguration]] = {}
        for ri, top in enumerate(claim.requests):
            req = self._chosen(ci, ri, top)
            entries = by_class.get(req.class_name)
            if entries is not None:
                for e in entries:
                    e.setdefault("requests", []).append(req.name)
                continue
            entries = []
            for c in (req.class_obj.get("spec") or {}).get("config") or []:
                entry: DeviceAllocationConfiguration = {"source": "FromClass", "requests": [req.name], **_without_requests(c)}
                entries.append(entry)
                config.append(entry)
            by_class[req.class_name] = entries
        selected_names = {top.name for top in claim.requests}
        selected_names |= {self._chosen(ci, ri, top).name for ri, top in enumerate(claim.requests) if top.subrequests}
        for claim_config in ((claim.obj.get("spec") or {}).get("devices") or {}).get("config") or []:
            names = claim_config.get("requests") or []
            if names and not any(n in selected_names for n in names):
                continue  # names only subrequests that were not chosen
            entry = {"source": "FromClaim", **_without_requests(claim_config)}
            if names:
                entry["requests"] = list(names)
            config.append(entry)
        return config

    def _node_selector(self, picks: list[_Pick]) -> NodeSelector | None:
        local_node: NodeSelector = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node_name]}]}]
        }
        expressions: list[NodeSelectorRequirement] = []
        fields: list[NodeSelectorRequirement] = []
        seen: set[tuple[str, str, str, tuple[str, ...]]] = set()
        for p in picks:
            dev = p.device
            if dev.node_local or (dev.binds_to_node and self.features.binding_conditions):
                return local_node
            if not dev.node_selector:
                continue
            terms = dev.node_selector.get("nodeSelectorTerms") or []
            for term in terms[:1]:  # slices use exactly one term
                for kind, requirements, target in (
                    ("matchExpressions", term.get("matchExpressions"), expressions),
                    ("matchFields", term.get("matchFields"), fields),
                ):
                    for req in requirements or []:
                        key = (kind, req.get("key", ""), req.get("operator", ""), tuple(sorted(req.get("values") or [])))
                        if key not in seen:
                            seen.add(key)
                            target.append({**req})
        if not expressions and not fields:
            return None
        merged: NodeSelectorTerm = {}
        if expressions:
            merged["matchExpressions"] = expressions
        if fields:
            merged["matchFields"] = fields
        return {"nodeSelectorTerms": [merged]}


def _without_requests(config: DeviceClassConfiguration | DeviceClaimConfiguration) -> DeviceConfiguration:
    """A class's or claim's config entry as its allocation result's, ``requests`` left out."""
    return cast("DeviceConfiguration", {k: v for k, v in config.items() if k != "requests"})
