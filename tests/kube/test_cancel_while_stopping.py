"""Stopping a background task while being cancelled oneself: the caller's cancellation goes on
(``kube.tasks.cancel_and_wait``), where swallowing it made a shutdown hang.

Each case stops a task that takes a moment to clean up once cancelled, and cancels the stopping
caller meanwhile. A caller that lost its cancellation would carry on to wait forever: the hard
timeout makes that a failure instead of a hang."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import httpx
import pytest

from app.controlplane.loop import ControlLoop
from kube.client import KubeClient
from kube.leaderelection import LeaderElector
from kube.tasks import wait_for
from schedulers.binder import Binder
from tests.kube.test_tasks import _slow_to_stop

HARD_TIMEOUT = 5.0


async def _cancel_while_stopping(stop: Callable[[], Awaitable[Any]], stopping: asyncio.Event) -> None:
    """Cancel a task in the middle of ``stop()``; it must end cancelled, not carry on."""

    async def shut_down() -> None:
        await stop()
        await asyncio.Event().wait()  # where a caller whose cancellation was swallowed stays

    caller = asyncio.create_task(shut_down())
    await wait_for(stopping.wait(), HARD_TIMEOUT)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await wait_for(caller, HARD_TIMEOUT)
    assert caller.cancelled()


async def test_a_control_loop_stopped_by_a_cancelled_caller() -> None:
    stopping = asyncio.Event()

    class Slow(ControlLoop):
        async def run(self) -> None:
            await _slow_to_stop(stopping)

    loop = Slow()
    loop.start()
    await asyncio.sleep(0)
    await _cancel_while_stopping(loop.stop, stopping)


async def test_the_binders_writes_cancelled_by_a_cancelled_caller() -> None:
    stopping = asyncio.Event()
    binder = Binder.__new__(Binder)  # only its task bookkeeping is exercised
    binder._tasks = set()
    binder.spawn(_slow_to_stop(stopping))
    await asyncio.sleep(0)
    await _cancel_while_stopping(binder.cancel, stopping)


async def test_a_leader_that_lost_its_lease_stopped_by_a_cancelled_caller() -> None:
    """Leadership lost: the elector stops the leader's work; a shutdown meanwhile ends the elector
    instead of letting it campaign again."""
    stopping = asyncio.Event()
    client = KubeClient("http://test", user_agent="unit/1", transport=httpx.MockTransport(lambda _request: httpx.Response(500)))
    elector = LeaderElector(client, name="l", identity="me", lease_duration=2, renew_deadline=0.2, retry_period=0.05, release_on_cancel=False)
    attempts = 0

    async def first_wins_then_loses() -> bool:
        nonlocal attempts
        attempts += 1
        return attempts == 1

    elector.try_acquire_or_renew = first_wins_then_loses  # type: ignore[method-assign]

    async def campaign() -> None:
        while True:
            await elector.run(lambda: _slow_to_stop(stopping))

    await _cancel_while_stopping(cast(Callable[[], Awaitable[Any]], campaign), stopping)
