"""A keyed work queue with delayed and rate-limited re-adds, after client-go's workqueue.

Informer handlers add keys freely; workers take them one at a time. A key is queued at most
once, and a key that is being processed is not handed to a second worker: added meanwhile, it
is queued again when that processing ends ("dirty"). So duplicate events never start
duplicate work, and a change that arrives during a sync is never lost.

Delayed adds keep only the earliest pending time of a key. A failed key comes back after an
exponential back-off per key, which a success resets (``forget``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import httpx

from kube.errors import ApiError

K = TypeVar("K", bound=Hashable)
OnError = Callable[[K, Exception, float], None]

log = logging.getLogger("workqueue")


def _key_text(key: Hashable) -> str:
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)


def log_failures(logger: logging.Logger) -> Callable[[Hashable, Exception, float], None]:
    """An ``on_error`` for ``WorkQueue.worker``: API and connection errors (to be expected now
    and then) as warnings, anything else with its traceback."""

    def report(key: Hashable, exc: Exception, delay: float) -> None:
        extra = {"key": _key_text(key), "error": str(exc), "retryIn": delay}
        if isinstance(exc, ApiError | httpx.TransportError | OSError):
            logger.warning("sync failed, will retry", extra=extra)
        else:
            logger.error("sync crashed, will retry", extra=extra, exc_info=exc)

    return report


@dataclass(frozen=True)
class ExponentialBackoff:
    """The delay before retry number ``n`` (from 0) of one key: ``base * 2**n``, at most ``cap`` seconds."""

    base: float = 0.005
    cap: float = 30.0

    def delay(self, failures: int) -> float:
        # The exponent is bounded so that a key failing for days does not overflow the float.
        return min(self.base * 2.0 ** min(failures, 64), self.cap)


class WorkQueue(Generic[K]):
    """Deduplicating FIFO of keys with "at most one worker per key"; ``worker()`` runs the loop."""

    def __init__(self, backoff: ExponentialBackoff | None = None) -> None:
        self.backoff = backoff or ExponentialBackoff()
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._delayed: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is waiting already; while it is processed, queue it when that ends."""
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (at once when not positive); an earlier pending time of the key wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        pending = self._delayed.get(key)
        if pending is not None:
            if pending.when() <= loop.time() + delay:
                return
            pending.cancel()

        def fire() -> None:
            self._delayed.pop(key, None)
            self.add(key)

        self._delayed[key] = loop.call_later(delay, fire)

    def cancel_delayed(self, key: K) -> None:
        """Drop a pending ``add_after`` of ``key``."""
        pending = self._delayed.pop(key, None)
        if pending is not None:
            pending.cancel()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its back-off, which doubles with every call until ``forget``; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = self.backoff.delay(failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset the back-off of ``key`` (after it was processed successfully)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How often ``key`` was re-added with back-off since it was last forgotten."""
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key; the caller owns it until it calls ``done(key)``."""
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """End the processing of ``key``; queue it again if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(self._queued)

    def shut_down(self) -> None:
        """Drop every pending delayed add (the queue itself stays usable)."""
        for pending in self._delayed.values():
            pending.cancel()
        self._delayed.clear()

    async def run(self, handle: Callable[[K], Awaitable[bool | None]], workers: int, on_error: OnError[K] | None = None) -> None:
        """Run ``workers`` workers until cancelled, then drop the pending delayed adds."""
        try:
            await asyncio.gather(*(self.worker(handle, on_error) for _ in range(workers)))
        finally:
            self.shut_down()

    async def worker(self, handle: Callable[[K], Awaitable[bool | None]], on_error: OnError[K] | None = None) -> None:
        """Process keys until cancelled. ``handle(key)`` returning False, or raising, re-adds the key with
        back-off (``on_error(key, exception, delay)`` hears of an exception, by default ``log_failures``);
        anything else forgets its back-off."""
        report = on_error or log_failures(log)
        while True:
            key = await self.get()
            try:
                error: Exception | None = None
                try:
                    ok = await handle(key) is not False
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    ok, error = False, exc
                if ok:
                    self.forget(key)
                else:
                    delay = self.add_rate_limited(key)
                    if error is not None:
                        report(key, error, delay)
            finally:
                self.done(key)
            # A non-empty queue hands out the next key without suspending, and a key with nothing to do
            # never awaits: without this, thousands of queued keys would hold the event loop for seconds.
            await asyncio.sleep(0)
