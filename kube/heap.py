"""Garbage-collector policy for processes that hold large caches of decoded objects.

The API server's watch cache and the workers' informer caches are millions of long-lived
dicts and lists. CPython's full collections scan all of them, again and again as the caches
grow: 0.1-0.7 s pauses, and about 15% of the server's CPU under a stream of creates. Those
objects are freed by reference counting (JSON data has no cycles), so they need no cycle
collection at all: moving them to the permanent generation (``gc.freeze``) takes them out of
every scan and they are still freed when dropped.

What freezing costs: garbage *cycles* whose objects were frozen while still alive (a request's
task and frames, a closed connection) are not collected until the next unfreeze. A periodic full
collection over everything bounds that.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import time

FREEZE_INTERVAL = 2.0
FULL_COLLECTION_INTERVAL = 600.0
# The API server's collection thresholds (CPython's are 700, 10, 10). A request allocates thousands
# of containers that reference counting frees when it ends; collected every 700 allocations, the
# young ones were scanned again and again while still in use: 8% of the server's CPU under
# kube-scheduler's DRA pods (gc.callbacks timing, bench.scheduler --against-upstream, 500 nodes),
# 3% with these.
SERVER_THRESHOLDS = (10_000, 20, 20)


def freeze_survivors() -> None:
    """Collect the young generations, then exclude every surviving object from future collections."""
    gc.collect(1)
    gc.freeze()


def collect_everything() -> None:
    """A full collection including frozen objects, then freeze what survived."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _malloc_trim() -> object:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Give the C allocator's free pages back to the system (glibc's malloc_trim): a burst of
    requests frees its temporary objects between the long-lived ones, and without this the freed
    pages stay resident."""
    if callable(_TRIM):
        _TRIM(0)


async def keep_heap_frozen(interval: float = FREEZE_INTERVAL, full_every: float = FULL_COLLECTION_INTERVAL) -> None:
    """Run for the life of the process: freeze survivors every ``interval`` seconds and collect
    everything every ``full_every`` seconds."""
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        if time.monotonic() - last_full >= full_every:
            collect_everything()
            last_full = time.monotonic()
        else:
            freeze_survivors()
        release_free_memory()
