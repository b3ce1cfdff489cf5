"""Health probes of the database, as upstream probes etcd: each probe has a timeout, at most one
is sent per half timeout, and a caller in between gets the outcome of the last probe sent."""

from __future__ import annotations

import asyncio

from app.storage.errors import StorageUnavailable
from app.storage.storage import Storage
from kube.tasks import wait_for


class StorageProbe:
    """Whether the database answers a read within ``timeout`` seconds."""

    def __init__(self, storage: Storage, timeout: float) -> None:
        self._storage = storage
        self.timeout = timeout
        self._sent_at = float("-inf")
        self._outcome_at = float("-inf")
        self._error: BaseException | None = StorageUnavailable("no probe of the database sent yet")

    async def check(self) -> None:
        """Raise the reason the database is not healthy; return when it is."""
        loop = asyncio.get_running_loop()
        sent = loop.time()
        if sent - self._sent_at < self.timeout / 2:
            if self._error is not None:
                raise self._error
            return
        self._sent_at = sent
        error: BaseException | None = None
        try:
            await wait_for(self._storage.ping(), self.timeout)
        except TimeoutError:
            error = StorageUnavailable(f"the database did not answer within {self.timeout:g}s")
        except Exception as exc:
            error = exc
        # Probes may finish out of order: only the outcome of a later probe replaces an earlier one.
        if sent >= self._outcome_at:
            self._outcome_at = sent
            self._error = error
        if error is not None:
            raise error
