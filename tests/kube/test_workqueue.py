"""The shared work queue: order, de-duplication, one worker per key, delays and back-off."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kube.tasks import wait_for
from kube.workqueue import ExponentialBackoff, WorkQueue
from tests.processes import in_background


async def _next(queue: WorkQueue[str], timeout: float = 1.0) -> str:
    return await wait_for(queue.get(), timeout)


async def _nothing_queued(queue: WorkQueue[str], wait: float = 0.05) -> bool:
    with contextlib.suppress(TimeoutError):
        await wait_for(queue.get(), wait)
        return False
    return True


def _workers(queue: WorkQueue[str], handle: Callable[[str], Awaitable[bool | None]], count: int = 1, **kw: Any) -> Any:
    return in_background(queue.run(handle, count, **kw))


async def _until(check: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def test_keys_come_out_in_order_and_once_while_queued() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "c", "b"):
        queue.add(key)
    assert len(queue) == 3
    assert [await _next(queue) for _ in range(3)] == ["a", "b", "c"]
    assert await _nothing_queued(queue)


async def test_a_key_added_while_processed_waits_until_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await _next(queue) == "a"
    queue.add("a")  # changed while a worker has it: a second worker must not get it now
    queue.add("a")
    queue.add("b")
    assert await _next(queue) == "b"
    assert await _nothing_queued(queue)
    queue.done("a")
    assert await _next(queue) == "a"  # once, for both adds
    queue.done("a")
    assert await _nothing_queued(queue)


async def test_no_key_is_processed_by_two_workers_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    running: set[str] = set()
    overlaps: list[str] = []
    calls: list[str] = []

    async def handle(key: str) -> bool:
        if key in running:
            overlaps.append(key)
        running.add(key)
        calls.append(key)
        await asyncio.sleep(0.02)
        running.discard(key)
        return True

    async with _workers(queue, handle, count=4):
        queue.add("a")
        await _until(lambda: "a" in running)
        for _ in range(5):
            queue.add("a")
            queue.add("b")
        await _until(lambda: len(calls) >= 3 and not running and len(queue) == 0)
        await asyncio.sleep(0.05)
    assert overlaps == []
    # The first run of "a", one more for everything added during it; "b" once.
    assert sorted(calls) == ["a", "a", "b"]


async def test_add_after_keeps_the_earliest_time() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("a", 0.3)
    queue.add_after("a", 0.05)  # earlier: replaces the pending add
    queue.add_after("a", 0.2)  # later than the pending one: ignored
    assert len(queue) == 0
    assert await _next(queue) == "a"
    assert 0.04 <= loop.time() - start < 0.29  # not the 0.3 first asked for
    queue.done("a")
    assert await _nothing_queued(queue, 0.4)  # neither later time fires again
    queue.add_after("b", 0)  # not positive: at once
    assert len(queue) == 1


async def test_cancel_delayed_and_shut_down_drop_pending_adds() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.05)
    queue.add_after("b", 0.05)
    queue.cancel_delayed("a")
    assert await _next(queue, 0.5) == "b"
    queue.add_after("c", 0.05)
    queue.shut_down()
    assert await _nothing_queued(queue, 0.15)


def test_backoff_doubles_up_to_the_cap() -> None:
    backoff = ExponentialBackoff(base=0.005, cap=30.0)
    assert [backoff.delay(n) for n in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert backoff.delay(20) == 30.0
    assert backoff.delay(10_000) == 30.0  # a key failing for ever does not overflow


async def test_rate_limited_adds_back_off_until_forgotten() -> None:
    queue: WorkQueue[str] = WorkQueue(ExponentialBackoff(base=0.02, cap=0.05))
    assert [queue.add_rate_limited("a") for _ in range(3)] == [0.02, 0.04, 0.05]
    assert queue.num_requeues("a") == 3
    assert await _next(queue) == "a"  # the earliest of the pending times
    queue.done("a")
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == 0.02


async def test_worker_retries_failures_with_back_off_and_forgets_on_success() -> None:
    queue: WorkQueue[str] = WorkQueue(ExponentialBackoff(base=0.01, cap=1.0))
    loop = asyncio.get_running_loop()
    seen: list[tuple[str, float]] = []
    errors: list[tuple[str, str, float]] = []

    async def handle(key: str) -> bool:
        seen.append((key, loop.time()))
        attempt = sum(1 for k, _ in seen if k == key)
        if key == "raises" and attempt < 3:
            raise RuntimeError(f"attempt {attempt}")
        return key != "fails" or attempt >= 3

    async with _workers(queue, handle, on_error=lambda key, exc, delay: errors.append((key, str(exc), delay))):
        queue.add("fails")
        queue.add("raises")
        queue.add("ok")
        await _until(lambda: len(seen) == 7)
        await asyncio.sleep(0.05)
    assert [k for k, _ in seen].count("fails") == 3 and [k for k, _ in seen].count("raises") == 3 and [k for k, _ in seen].count("ok") == 1
    assert len(seen) == 7
    # Only exceptions are reported, each with the back-off the retry waits.
    assert errors == [("raises", "attempt 1", 0.01), ("raises", "attempt 2", 0.02)]
    times = [t for k, t in seen if k == "fails"]
    assert times[1] - times[0] >= 0.009 and times[2] - times[1] >= 0.019
    # Success forgot the failures: the next failure starts from the base delay again.
    assert queue.num_requeues("fails") == 0 and queue.num_requeues("raises") == 0


@pytest.mark.parametrize("result", [True, None])
async def test_worker_counts_anything_but_false_as_success(result: bool | None) -> None:
    queue: WorkQueue[str] = WorkQueue(ExponentialBackoff(base=0.01, cap=0.01))
    calls: list[str] = []

    async def handle(key: str) -> bool | None:
        calls.append(key)
        return result

    async with _workers(queue, handle):
        queue.add("a")
        await _until(lambda: calls == ["a"])
        await asyncio.sleep(0.05)
    assert calls == ["a"]
