"""Ending asyncio tasks without losing the caller's own cancellation."""

from __future__ import annotations

import asyncio
from typing import Any


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
