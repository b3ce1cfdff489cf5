"""A keyed work queue in the style of client-go's workqueue.

A key is queued at most once; a key that is being processed is not handed to a second
worker, and a key added while it is processed is queued again when that processing ends.
So informer handlers can add keys freely without starting duplicate work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class WorkQueue:
    """Deduplicating FIFO of keys with "at most one worker per key"."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._delayed: dict[Hashable, asyncio.TimerHandle] = {}

    def add(self, key: Hashable) -> None:
        """Queue ``key`` unless it is already waiting."""
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (an earlier pending delay for the key wins)."""
        loop = asyncio.get_running_loop()
        handle = self._delayed.get(key)
        if handle is not None and handle.when() <= loop.time() + delay:
            return
        if handle is not None:
            handle.cancel()

        def fire() -> None:
            self._delayed.pop(key, None)
            self.add(key)

        self._delayed[key] = loop.call_later(max(0.0, delay), fire)

    def cancel_delayed(self, key: Hashable) -> None:
        """Forget a pending ``add_after`` for ``key``."""
        handle = self._delayed.pop(key, None)
        if handle is not None:
            handle.cancel()

    async def get(self) -> Hashable:
        """The next key; the caller must call ``done(key)`` when finished with it."""
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        """Mark ``key`` processed; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(self._queued)

    def close(self) -> None:
        """Cancel every delayed add."""
        for handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
