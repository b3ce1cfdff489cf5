"""A de-duplicating work queue with delayed retries, like client-go's rate-limited workqueue."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Each key is queued at most once and processed by at most one worker at a time."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._failures: dict[K, int] = {}

    def add(self, key: K) -> None:
        """Queue ``key`` (again after its current processing ends, if it is being processed)."""
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds."""
        asyncio.get_running_loop().call_later(delay, self.add, key)

    def retry(self, key: K) -> None:
        """Queue ``key`` with exponential backoff (5 ms doubling, at most 30 s)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(0.005 * 2**failures, 30.0))

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` after a success."""
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._queued)

    async def worker(self, handle: Callable[[K], Awaitable[bool]]) -> None:
        """Process keys forever; ``handle`` returns False (or raises) to have the key retried."""
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._processing.add(key)
            try:
                ok = await handle(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                ok = False
            finally:
                self._processing.discard(key)
            if ok:
                self.forget(key)
            else:
                self.retry(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
