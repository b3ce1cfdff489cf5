"""Periodic per-node work (Lease renewals, node status heartbeats) for thousands of nodes in one loop.

Every key (a node name) owns a fixed slot inside the interval and is due at ``slot + k * interval``.
Slots come from the golden-ratio sequence, so any number of keys, added at any time, spread
evenly over the interval: the server sees a steady trickle instead of one burst per interval,
and a renewal is never more than one interval apart from the previous one unless the process
falls behind. One timer task hands due keys to a few workers (bounded concurrency); when the
workers fall behind, a late key runs as soon as a worker is free and is then due at its next
slot, so an overloaded simulator renews less often instead of queueing without bound.

The timer wakes at most once per ``granularity`` (a hundredth of the interval, at most 0.1 s) and
hands out every key due by then: with thousands of keys, one wake-up per slot was the loop's
largest cost after the requests themselves, and a beat up to 0.1 s late is nothing to a Lease of 40 s.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from collections.abc import Awaitable, Callable

from kube.tasks import cancel_and_wait

log = logging.getLogger("kubeletsim")

_GOLDEN = 0.6180339887498949


class Heartbeats:
    """Calls ``beat(key)`` once per ``interval`` for every added key, at most ``concurrency`` at a time."""

    def __init__(self, name: str, interval: float, beat: Callable[[str], Awaitable[None]], concurrency: int = 16) -> None:
        self.name = name
        self.interval = interval
        self.beat = beat
        self.concurrency = max(1, concurrency)
        self.granularity = min(0.1, interval / 100)
        # Timer wake-ups so far (tests count them).
        self.wakeups = 0
        self._offsets: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self._ready: asyncio.Queue[tuple[str, float]] = asyncio.Queue(maxsize=self.concurrency)
        self._wake = asyncio.Event()
        self._epoch: float | None = None
        self._next_offset = random.random()
        # How many beats ran, and the most any started after its slot (seconds); the simulator logs and resets it.
        self.beats = 0
        self.max_late = 0.0

    def add(self, key: str) -> None:
        """Start beating for ``key`` at its next slot (no-op when it is already scheduled)."""
        if key not in self._offsets:
            self._offsets[key] = self._next_offset * self.interval
            self._next_offset = (self._next_offset + _GOLDEN) % 1.0
        elif key in self._due:
            return
        self._schedule(key, self._next_slot(key, asyncio.get_running_loop().time()))

    def _next_slot(self, key: str, after: float) -> float:
        if self._epoch is None:
            self._epoch = after
        offset = self._offsets[key]
        periods = (after - self._epoch - offset) // self.interval + 1
        return self._epoch + offset + periods * self.interval

    def _schedule(self, key: str, when: float) -> None:
        self._due[key] = when
        heapq.heappush(self._heap, (when, key))
        if self._heap[0][1] == key:
            self._wake.set()

    async def run(self) -> None:
        """Hand due keys to the workers until cancelled."""
        loop = asyncio.get_running_loop()
        workers = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self.concurrency)]
        try:
            while True:
                if not self._heap:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                when, key = self._heap[0]
                if self._due.get(key) != when:
                    heapq.heappop(self._heap)  # removed or rescheduled since
                    continue
                if when > loop.time():
                    # Sleep past this key's slot by the granularity, so the keys due meanwhile go together.
                    self._wake.clear()
                    timer = loop.call_at(when + self.granularity, self._wake.set)
                    try:
                        await self._wake.wait()
                    finally:
                        timer.cancel()
                    self.wakeups += 1
                    continue
                heapq.heappop(self._heap)
                del self._due[key]
                await self._ready.put((key, when))  # blocks while every worker is busy
        finally:
            await cancel_and_wait(*workers)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            key, when = await self._ready.get()
            self.max_late = max(self.max_late, loop.time() - when)
            try:
                await self.beat(key)
                self.beats += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("heartbeat failed", extra={"task": self.name, "node": key, "error": str(exc)})
            if key in self._offsets and key not in self._due:
                self._schedule(key, self._next_slot(key, loop.time()))
