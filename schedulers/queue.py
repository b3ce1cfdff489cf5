"""The scheduling queue: active pods, backoff, unschedulable pods and pods waiting for claims.

Modelled on upstream's PriorityQueue, simplified:

* ``active``: pods ready for a scheduling attempt, highest ``spec.priority`` first and in the
  order they became active within a priority (upstream's PrioritySort: priority, then queue time).
* ``backoff``: pods that failed recently; they become active when their backoff ends
  (1 s doubling per failed attempt, at most 10 s, like upstream's defaults). While nothing is
  active, the pod whose backoff ends first is popped early (upstream's SchedulerPopFromBackoffQ,
  beta and on since v1.33: an idle scheduler does not wait out a backoff), by the second its
  backoff ends in and then priority, except pods backing off after an error, which always wait.
* ``unschedulable``: pods no node fits. They stay there until :meth:`move_all` reports a cluster
  event that could make them schedulable (then they go to backoff or, if their backoff already
  expired, straight to active), or :meth:`move_rejected_by` one that concerns the plugins that
  rejected them (upstream's queueing hints). Nothing retries them on a timer, except a long
  safety flush.
* ``waiting``: pods whose claims do not exist yet (or are being allocated for another pod). They
  are not attempts at all: no backoff, and :meth:`claim_ready` makes them active at once.
"""

from __future__ import annotations

import asyncio
import math
import time
from bisect import insort
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
C = TypeVar("C", bound=Hashable)

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
# Upstream flushes pods that sat in the unschedulable queue this long, in case an event was missed.
UNSCHEDULABLE_FLUSH = 300.0


class _ActiveQueue(Generic[K]):
    """Active pods, highest priority first, FIFO within a priority: one ordered dict per priority
    present (almost always just one, so a pop costs what a plain FIFO does)."""

    def __init__(self) -> None:
        self._buckets: dict[int, OrderedDict[K, None]] = {}
        self._order: list[int] = []  # negated priorities of the buckets, ascending
        self._where: dict[K, int] = {}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def push(self, key: K, priority: int) -> None:
        bucket = self._buckets.get(priority)
        if bucket is None:
            bucket = self._buckets[priority] = OrderedDict()
            insort(self._order, -priority)
        bucket[key] = None
        self._where[key] = priority

    def discard(self, key: K) -> None:
        priority = self._where.pop(key, None)
        if priority is not None:
            bucket = self._buckets[priority]
            del bucket[key]
            if not bucket:
                self._drop_bucket(priority)

    def _drop_bucket(self, priority: int) -> None:
        del self._buckets[priority]
        self._order.remove(-priority)

    def pop(self) -> K:
        priority = -self._order[0]
        bucket = self._buckets[priority]
        key, _ = bucket.popitem(last=False)
        del self._where[key]
        if not bucket:
            self._drop_bucket(priority)
        return key


class SchedulingQueue(Generic[K, C]):
    """Pods (by key) that wait for a scheduling attempt; see the module docstring for the states."""

    def __init__(self, initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF, *, pop_from_backoff: bool = True) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.pop_from_backoff = pop_from_backoff
        self._active: _ActiveQueue[K] = _ActiveQueue()
        self._priority: dict[K, int] = {}  # spec.priority of every pod the queue knows (0 when not given)
        self._backoff: dict[K, asyncio.TimerHandle] = {}  # each timer's when(): the end of that pod's backoff
        self._error_backoff: set[K] = set()  # backoff keys that failed with an error: never popped early
        self._unschedulable: dict[K, float] = {}  # key -> time it was parked
        self._rejected_by: dict[K, frozenset[str]] = {}  # unschedulable key -> the plugins that rejected it
        self._waiting: dict[K, frozenset[C]] = {}
        self._waiters: dict[C, set[K]] = {}
        self._attempts: dict[K, int] = {}
        self._last_attempt: dict[K, float] = {}
        self._in_flight: set[K] = set()  # popped, attempt not finished yet
        self._changed: set[K] = set()  # updated while in flight: retry right after
        self._event = asyncio.Event()

    # --- inspection ---

    def __contains__(self, key: object) -> bool:
        return key in self._active or key in self._backoff or key in self._unschedulable or key in self._waiting

    def state(self, key: K) -> str | None:
        """``active``, ``backoff``, ``unschedulable``, ``waiting``, ``in-flight`` or None."""
        for name, where in (("active", self._active), ("backoff", self._backoff), ("unschedulable", self._unschedulable), ("waiting", self._waiting)):
            if key in where:
                return name
        return "in-flight" if key in self._in_flight else None

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._waiting)

    # --- state changes ---

    def _detach(self, key: K) -> None:
        self._active.discard(key)
        timer = self._backoff.pop(key, None)
        if timer is not None:
            timer.cancel()
            self._error_backoff.discard(key)
        self._unschedulable.pop(key, None)
        self._rejected_by.pop(key, None)
        claims = self._waiting.pop(key, None)
        for c in claims or ():
            keys = self._waiters.get(c)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._waiters[c]

    def _activate(self, key: K) -> None:
        self._detach(key)
        self._active.push(key, self._priority.get(key, 0))
        self._event.set()

    def add(self, key: K, priority: int = 0) -> None:
        """A new or changed pod (of ``spec.priority``): attempt it now (after the running attempt,
        if one is running)."""
        self._priority[key] = priority
        if key in self._in_flight:
            self._changed.add(key)
            return
        if key in self._backoff:
            return  # already scheduled for a retry; the change is seen then
        self._activate(key)

    def delete(self, key: K) -> None:
        """The pod is gone, bound, or no longer ours."""
        self._detach(key)
        self._in_flight.discard(key)
        self._changed.discard(key)
        self._attempts.pop(key, None)
        self._last_attempt.pop(key, None)
        self._priority.pop(key, None)

    async def pop(self) -> K:
        """The next active pod (waits for one), or while none is active the backoff pod next in
        line (module docstring); it is in flight until :meth:`done`."""
        while not self._active:
            early = self._next_in_backoff() if self.pop_from_backoff else None
            if early is not None:
                self._detach(early)
                self._in_flight.add(early)
                return early
            self._event.clear()
            await self._event.wait()
        key = self._active.pop()
        self._in_flight.add(key)
        return key

    def _next_in_backoff(self) -> K | None:
        """The backoff pod (not one after an error) whose backoff ends in the earliest second,
        the highest priority first within it (upstream orders its backoff queue by one-second
        windows, then as the active queue does)."""
        candidates = [(timer.when(), key) for key, timer in self._backoff.items() if key not in self._error_backoff]
        if not candidates:
            return None
        return min(candidates, key=lambda c: (math.floor(c[0]), -self._priority.get(c[1], 0), c[0]))[1]

    def done(self, key: K) -> bool:
        """End an attempt that needs no follow-up (success, or an outcome already filed)."""
        self._in_flight.discard(key)
        if key in self._changed:
            self._changed.discard(key)
            if key not in self:
                self._activate(key)
                return True
        return False

    def succeeded(self, key: K) -> None:
        """The pod was scheduled: forget its backoff history."""
        self._attempts.pop(key, None)
        self._last_attempt.pop(key, None)
        self._in_flight.discard(key)
        self._changed.discard(key)

    def backoff_for(self, key: K) -> float:
        """The backoff after the attempts made so far: 1 s, 2 s, 4 s, ... at most 10 s."""
        attempts = self._attempts.get(key, 0)
        if attempts <= 0:
            return 0.0
        return float(min(self.initial_backoff * 2 ** (attempts - 1), self.max_backoff))

    def _count_attempt(self, key: K) -> None:
        self._attempts[key] = self._attempts.get(key, 0) + 1
        self._last_attempt[key] = time.monotonic()

    def _to_backoff(self, key: K, *, after_error: bool = False) -> None:
        remaining = self._last_attempt.get(key, 0.0) + self.backoff_for(key) - time.monotonic()
        self._detach(key)
        if remaining <= 0:
            self._activate(key)
            return
        self._backoff[key] = asyncio.get_running_loop().call_later(remaining, self._backoff_done, key)
        if after_error:
            self._error_backoff.add(key)
        elif self.pop_from_backoff:
            self._event.set()  # an idle pop may take it now

    def _backoff_done(self, key: K) -> None:
        if self._backoff.pop(key, None) is not None:
            self._error_backoff.discard(key)
            self._activate(key)

    def retry(self, key: K) -> None:
        """The attempt failed for a transient reason (a write failed): retry after the backoff."""
        self._in_flight.discard(key)
        self._changed.discard(key)
        self._count_attempt(key)
        self._to_backoff(key, after_error=True)

    def unschedulable(self, key: K, plugins: Iterable[str] = ()) -> None:
        """No node fits: park the pod until an event could change that (``plugins``: the ones that
        rejected it, for :meth:`move_rejected_by`)."""
        self._in_flight.discard(key)
        self._count_attempt(key)
        if key in self._changed:
            # The pod changed during the attempt; the change may be what makes it fit.
            self._changed.discard(key)
            self._to_backoff(key)
            return
        self._detach(key)
        self._unschedulable[key] = time.monotonic()
        if plugins:
            self._rejected_by[key] = frozenset(plugins)

    def wait_for(self, key: K, claims: Iterable[C]) -> None:
        """Park the pod until one of ``claims`` appears or changes (no backoff, no attempt counted)."""
        self._in_flight.discard(key)
        if key in self._changed:
            self._changed.discard(key)
            self._activate(key)
            return
        self._detach(key)
        wanted = frozenset(claims)
        self._waiting[key] = wanted
        for c in wanted:
            self._waiters.setdefault(c, set()).add(key)

    def claim_ready(self, claim: C) -> None:
        """A claim appeared or changed: pods waiting for it get an attempt now."""
        for key in list(self._waiters.get(claim, ())):
            self._activate(key)

    def move_all(self) -> int:
        """A cluster event may have made unschedulable pods fit: back off, then retry them.

        Pods parked for longer than :data:`UNSCHEDULABLE_FLUSH` are also moved by :meth:`flush`.
        Returns the number of pods moved.
        """
        keys = list(self._unschedulable)
        for key in keys:
            self._to_backoff(key)
        return len(keys)

    def move_rejected_by(self, plugins: Iterable[str], wants: Callable[[K], bool], *, unrecorded: bool = False) -> int:
        """An event that concerns ``plugins``: back off, then retry the unschedulable pods one of
        them rejected and for which ``wants`` (the plugin's queueing hint) says the event may help;
        with ``unrecorded`` also the pods parked without the plugins that rejected them (preemptors
        waiting for their victims)."""
        concerned = frozenset(plugins)
        keys = [key for key, rejected in self._rejected_by.items() if rejected & concerned and wants(key)]
        if unrecorded:
            keys += [key for key in self._unschedulable if key not in self._rejected_by]
        for key in keys:
            self._to_backoff(key)
        return len(keys)

    def flush(self) -> None:
        """Retry pods that have been unschedulable for a long time (a missed event must not strand them)."""
        limit = time.monotonic() - UNSCHEDULABLE_FLUSH
        for key, since in list(self._unschedulable.items()):
            if since < limit:
                self._to_backoff(key)
