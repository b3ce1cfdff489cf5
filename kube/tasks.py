"""Ending asyncio tasks without losing the caller's own cancellation, and awaiting several at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel ``tasks`` (``None`` entries are skipped) and wait until each has ended.

    What the tasks end with (their CancelledError, a failure) is not raised here, but a
    cancellation of the caller while it waits is: ``contextlib.suppress(CancelledError)`` around
    ``await task`` would swallow it, and a loop that was told to stop would carry on forever."""
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled():
            task.exception()  # retrieved, so a failure at shutdown is not reported as never retrieved


async def together(*awaitables: Awaitable[T]) -> list[T]:
    """The results of ``awaitables``, run concurrently; when one fails, its error (the first in
    argument order) is raised once every one has ended, so none is left running unwatched as
    ``asyncio.gather`` leaves the others when it raises."""
    results = await asyncio.gather(*awaitables, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


async def wait_for(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``awaitable``'s result, or TimeoutError after ``timeout`` seconds (None: no limit).

    Use this rather than ``asyncio.wait_for``: on Python 3.11 that one drops a cancellation
    that arrives while the awaitable completes, so a loop cancelled at that moment (its
    wake-up came with the stop) keeps running and whoever waits for it to end waits forever."""
    async with asyncio.timeout(timeout):
        return await awaitable
