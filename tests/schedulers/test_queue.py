"""The scheduling queue on its own: pop order, attempts in flight, backoff, parking and waking.

Backoffs are scaled down (50 ms doubling, at most 200 ms) so timers run out within a test.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import schedulers.queue
from kube.tasks import wait_for
from schedulers.queue import SchedulingQueue

INITIAL = 0.05
MAX = 0.2

Queue = SchedulingQueue[str, str]


def new_queue(*, pop_from_backoff: bool = True) -> Queue:
    return SchedulingQueue(initial_backoff=INITIAL, max_backoff=MAX, pop_from_backoff=pop_from_backoff)


async def pop_now(queue: Queue) -> str | None:
    """The next active pod, or None when nothing is active right now."""
    try:
        return await wait_for(queue.pop(), 0.01)
    except TimeoutError:
        return None


async def popped_after(queue: Queue, limit: float = 2.0) -> tuple[str, float]:
    start = time.monotonic()
    key = await wait_for(queue.pop(), limit)
    return key, time.monotonic() - start


async def test_pods_pop_in_the_order_they_were_added() -> None:
    queue = new_queue()
    for key in ("b", "a", "c"):
        queue.add(key)
    assert [await queue.pop() for _ in range(3)] == ["b", "a", "c"]
    assert await pop_now(queue) is None


async def test_higher_priority_pods_pop_first_fifo_within_a_priority() -> None:
    queue = new_queue()
    for key, priority in (("low-1", -5), ("mid-1", 0), ("high-1", 1000), ("mid-2", 0), ("high-2", 1000), ("low-2", -5)):
        queue.add(key, priority)
    assert [await queue.pop() for _ in range(6)] == ["high-1", "high-2", "mid-1", "mid-2", "low-1", "low-2"]
    # A pod that comes back (woken, backed off) keeps its priority.
    queue.add("late-high", 1000)
    queue.add("mid-3")
    first = await queue.pop()
    queue.unschedulable(first)
    queue.move_all()
    await asyncio.sleep(INITIAL * 2)
    assert [await queue.pop() for _ in range(2)] == ["late-high", "mid-3"]
    assert await pop_now(queue) is None


async def test_pop_waits_for_a_pod() -> None:
    queue = new_queue()
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.add("p")
    assert await wait_for(waiter, 1) == "p"
    assert queue.state("p") == "in-flight"


async def test_a_pod_changed_during_its_attempt_is_tried_again_after_it() -> None:
    queue = new_queue()
    queue.add("p")
    assert await queue.pop() == "p"
    queue.add("p")  # an update while in flight is not a second concurrent attempt
    assert await pop_now(queue) is None
    assert queue.done("p") is True
    assert await pop_now(queue) == "p"
    assert queue.done("p") is False  # no change this time: nothing queued
    assert "p" not in queue and len(queue) == 0


async def test_failed_attempts_back_off_doubling_up_to_the_maximum() -> None:
    queue = new_queue()
    queue.add("p")
    assert await queue.pop() == "p"
    waits = []
    for _ in range(4):
        queue.retry("p")
        waits.append(queue.backoff_for("p"))
        assert queue.state("p") == "backoff"  # not active before the backoff ends
        key, waited = await popped_after(queue)
        assert key == "p" and waited >= waits[-1] - 0.02
    assert waits == [0.05, 0.1, 0.2, 0.2]


async def test_an_update_does_not_cut_a_backoff_short() -> None:
    queue = new_queue()
    queue.add("p")
    await queue.pop()
    queue.retry("p")
    queue.add("p")
    assert queue.state("p") == "backoff"


async def test_success_forgets_the_backoff_history() -> None:
    queue = new_queue()
    queue.add("p")
    await queue.pop()
    queue.retry("p")
    await popped_after(queue)
    queue.succeeded("p")
    assert queue.backoff_for("p") == 0
    assert queue.state("p") is None


async def test_unschedulable_pods_wait_for_a_cluster_event() -> None:
    queue = new_queue()
    queue.add("p")
    queue.add("q")
    await queue.pop()
    queue.unschedulable("p")
    assert queue.state("p") == "unschedulable"
    assert await queue.pop() == "q"
    assert await pop_now(queue) is None  # nothing retries p on a timer
    await asyncio.sleep(INITIAL * 2)  # its backoff has run out meanwhile
    assert queue.move_all() == 1
    assert queue.state("p") == "active"
    assert await pop_now(queue) == "p"


async def test_a_cluster_event_right_after_the_attempt_still_waits_for_the_backoff() -> None:
    queue = new_queue(pop_from_backoff=False)
    queue.add("p")
    await queue.pop()
    queue.unschedulable("p")
    queue.move_all()
    assert queue.state("p") == "backoff"
    key, waited = await popped_after(queue)
    assert key == "p" and waited >= INITIAL * 0.5


async def test_an_idle_queue_pops_the_pod_whose_backoff_ends_first() -> None:
    """SchedulerPopFromBackoffQ: with nothing active, a backoff is not waited out; active pods
    still go first, and a pod backing off after an error still waits."""
    queue = SchedulingQueue[str, str](initial_backoff=5.0, max_backoff=10.0)
    for key, priority in (("second", 0), ("first", 0), ("high", 100), ("failed", 1000), ("next", 0)):
        queue.add(key, priority)
    for _ in range(5):
        await queue.pop()
    queue.retry("failed")  # an error: backs off 5 s whatever the queue does
    queue.unschedulable("second")
    queue.unschedulable("first")
    queue.unschedulable("high")
    queue.unschedulable("next")
    queue.move_rejected_by((), lambda _: True, unrecorded=True)  # a cluster event: all three back off 5 s
    queue.add("new")
    assert [await pop_now(queue) for _ in range(5)] == ["new", "high", "second", "first", "next"]
    assert await pop_now(queue) is None
    assert queue.state("failed") == "backoff"


async def test_without_pop_from_backoff_an_idle_queue_waits_the_backoff_out() -> None:
    queue = SchedulingQueue[str, str](initial_backoff=5.0, max_backoff=10.0, pop_from_backoff=False)
    queue.add("p")
    await queue.pop()
    queue.unschedulable("p")
    queue.move_all()
    assert await pop_now(queue) is None
    assert queue.state("p") == "backoff"


async def test_a_pod_entering_backoff_wakes_an_idle_pop() -> None:
    queue = SchedulingQueue[str, str](initial_backoff=5.0, max_backoff=10.0)
    queue.add("p")
    await queue.pop()
    queue.unschedulable("p")
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.move_all()
    assert await wait_for(waiter, 1) == "p"


async def test_a_pod_changed_during_an_unschedulable_attempt_is_not_parked() -> None:
    queue = new_queue()
    queue.add("p")
    await queue.pop()
    queue.add("p")  # e.g. its labels changed: maybe it fits now
    queue.unschedulable("p")
    assert queue.state("p") == "backoff"
    assert (await popped_after(queue))[0] == "p"


async def test_long_parked_pods_are_flushed(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = new_queue()
    queue.add("p")
    await queue.pop()
    queue.unschedulable("p")
    queue.flush()
    assert queue.state("p") == "unschedulable"  # not parked for long yet
    monkeypatch.setattr(schedulers.queue, "UNSCHEDULABLE_FLUSH", 0.0)
    await asyncio.sleep(INITIAL * 2)
    queue.flush()
    assert await pop_now(queue) == "p"


async def test_pods_waiting_for_claims_wake_when_one_of_them_is_ready() -> None:
    queue = new_queue()
    for key in ("p", "q"):
        queue.add(key)
        await queue.pop()
    queue.wait_for("p", ["claim-a", "claim-b"])
    queue.wait_for("q", ["claim-b"])
    assert queue.state("p") == "waiting" and len(queue) == 2
    queue.claim_ready("claim-x")
    assert await pop_now(queue) is None
    queue.claim_ready("claim-a")
    assert await pop_now(queue) == "p"
    # Waiting is not an attempt: no backoff accrues, and the pod stops waiting for its other claims.
    assert queue.backoff_for("p") == 0
    queue.done("p")
    queue.claim_ready("claim-b")
    assert await pop_now(queue) == "q"
    assert await pop_now(queue) is None


async def test_a_pod_changed_while_it_was_resolving_claims_is_tried_again_at_once() -> None:
    queue = new_queue()
    queue.add("p")
    await queue.pop()
    queue.add("p")
    queue.wait_for("p", ["claim-a"])
    assert await pop_now(queue) == "p"


async def test_deleted_pods_leave_every_state() -> None:
    queue = new_queue()
    for key in ("active", "backoff", "parked", "waiting", "flying"):
        queue.add(key)
    for _ in range(5):
        await queue.pop()
    queue.add("active")
    queue.done("active")
    queue.retry("backoff")
    queue.unschedulable("parked")
    queue.wait_for("waiting", ["claim"])
    states = {key: queue.state(key) for key in ("active", "backoff", "parked", "waiting", "flying")}
    assert states == {"active": "active", "backoff": "backoff", "parked": "unschedulable", "waiting": "waiting", "flying": "in-flight"}
    for key in states:
        queue.delete(key)
    assert len(queue) == 0 and all(queue.state(key) is None for key in states)
    queue.claim_ready("claim")
    queue.move_all()
    await asyncio.sleep(INITIAL * 2)
    assert await pop_now(queue) is None


async def test_an_event_moves_the_pods_its_plugins_rejected_and_optionally_those_parked_without_rejectors() -> None:
    queue = new_queue()
    for key in ("by-fit", "by-dra", "preemptor"):
        queue.add(key)
        assert await pop_now(queue) == key
    queue.unschedulable("by-fit", ["NodeResourcesFit"])
    queue.unschedulable("by-dra", ["DynamicResources"])
    queue.unschedulable("preemptor")  # parked by preemption: no rejecting plugin recorded
    assert queue.move_rejected_by(["NodeResourcesFit"], lambda _key: True) == 1
    assert [queue.state(k) for k in ("by-fit", "by-dra", "preemptor")] == ["backoff", "unschedulable", "unschedulable"]
    assert queue.move_rejected_by(["NodePorts"], lambda _key: True, unrecorded=True) == 1
    assert [queue.state(k) for k in ("by-dra", "preemptor")] == ["unschedulable", "backoff"]
