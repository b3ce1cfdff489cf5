"""kube.tasks: ending tasks without swallowing the caller's cancellation, and awaiting several together."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kube.tasks import cancel_and_wait, together, wait_for


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
        await wait_for(outer, 2)
    assert outer.cancelled()


@pytest.mark.parametrize("yields", range(4))
async def test_a_loop_woken_as_it_is_cancelled_stops(yields: int) -> None:
    # A poll loop's wake-up often comes with the stop (a last write asks for a poll, then the
    # server stops). On Python 3.11 asyncio.wait_for lost the cancellation in that moment and
    # the loop, and whoever waited for it to end, ran on forever.
    wakeup = asyncio.Event()
    rounds = 0

    async def poll_loop() -> None:
        nonlocal rounds
        while True:
            with contextlib.suppress(TimeoutError):
                await wait_for(wakeup.wait(), 60)
            wakeup.clear()
            rounds += 1

    loop = asyncio.create_task(poll_loop())
    await asyncio.sleep(0.01)
    wakeup.set()
    for _ in range(yields):
        await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await cancel_and_wait(loop)
    assert loop.cancelled()
    assert rounds <= 1


async def test_together_answers_in_order_and_raises_the_first_failure_once_all_have_ended() -> None:
    ended: list[str] = []

    async def after(delay: float, name: str, failure: Exception | None = None) -> str:
        await asyncio.sleep(delay)
        ended.append(name)
        if failure is not None:
            raise failure
        return name

    assert await together(after(0.02, "a"), after(0, "b")) == ["a", "b"]
    ended.clear()
    with pytest.raises(KeyError):
        await together(after(0.01, "fails first", KeyError("k")), after(0, "fails", ValueError("v")), after(0.05, "slow"))
    assert sorted(ended) == ["fails", "fails first", "slow"], "every one ran to its end before the failure was raised"
