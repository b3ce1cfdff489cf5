"""The heap policy: survivors leave the collector's scans; garbage cycles are still reclaimed."""

from __future__ import annotations

import asyncio
import gc
import weakref

from kube.heap import collect_everything, freeze_survivors, keep_heap_frozen


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> _Node:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a


def test_frozen_garbage_cycle_is_reclaimed_by_the_full_collection() -> None:
    try:
        alive = _cycle()
        probe = weakref.ref(alive)
        freeze_survivors()  # frozen while still in use ...
        assert gc.get_freeze_count() > 0
        del alive  # ... then garbage
        gc.collect()
        assert probe() is not None, "a frozen cycle is invisible to ordinary collections"
        collect_everything()
        assert probe() is None
    finally:
        gc.unfreeze()


def test_loop_freezes_survivors() -> None:
    async def run() -> int:
        gc.unfreeze()
        task = asyncio.create_task(keep_heap_frozen(interval=0.01, full_every=3600))
        await asyncio.sleep(0.1)
        task.cancel()
        return gc.get_freeze_count()

    try:
        assert asyncio.run(run()) > 0
    finally:
        gc.unfreeze()
