"""kube.tasks: ending tasks without swallowing the caller's cancellation."""

from __future__ import annotations

import asyncio

import pytest

from kube.tasks import cancel_and_wait


async def _slow_to_stop(stopping: asyncio.Event) -> None:
    """A task that takes a moment to clean up once cancelled, as a closing gRPC channel does."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        stopping.set()
        await asyncio.sleep(0.05)
        raise


async def test_the_tasks_end_cancelled_and_their_failures_are_not_raised() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    quiet, failing = asyncio.create_task(asyncio.Event().wait()), asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    await cancel_and_wait(quiet, None, failing)
    assert quiet.cancelled()
    assert isinstance(failing.exception(), RuntimeError)


async def test_a_loop_told_to_stop_while_it_closes_a_task_stops() -> None:
    # A watcher loop closes a plugin (waiting for the plugin's own task) at the moment it is told
    # to stop; the stop must end the loop, not be taken for the plugin task's cancellation.
    stopping = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            inner = asyncio.create_task(_slow_to_stop(stopping))
            await asyncio.sleep(0)
            await cancel_and_wait(inner)
            await asyncio.sleep(0.01)

    outer = asyncio.create_task(loop())
    await stopping.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(outer, 2)
    assert outer.cancelled()
