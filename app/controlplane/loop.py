"""The start and stop of a loop the server runs beside requests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from kube.tasks import cancel_and_wait


class ControlLoop:
    """Runs ``run()`` as a task of the server's event loop from ``start`` until ``stop``."""

    name = "control-loop"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def run(self) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
