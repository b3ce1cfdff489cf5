"""The database health probe: a timeout, at most one probe per half timeout, the last outcome between."""

from __future__ import annotations

import asyncio

import pytest

from app.storage.errors import StorageUnavailable
from app.storage.probe import StorageProbe


class Database:
    def __init__(self) -> None:
        self.pings = 0
        self.down = False
        self.delay = 0.0

    async def ping(self) -> None:
        self.pings += 1
        await asyncio.sleep(self.delay)
        if self.down:
            raise StorageUnavailable("connection refused")


async def test_probes_are_rate_limited_and_the_last_outcome_stands_between() -> None:
    database = Database()
    probe = StorageProbe(database, timeout=0.4)  # type: ignore[arg-type]
    await probe.check()
    database.down = True
    await probe.check()  # within half the timeout: the last outcome, no new probe
    assert database.pings == 1
    await asyncio.sleep(0.25)
    with pytest.raises(StorageUnavailable, match="connection refused"):
        await probe.check()
    with pytest.raises(StorageUnavailable):
        await probe.check()
    assert database.pings == 2
    database.down = False
    await asyncio.sleep(0.25)
    await probe.check()
    assert database.pings == 3


async def test_a_database_that_does_not_answer_in_time_fails_the_probe() -> None:
    database = Database()
    database.delay = 5
    probe = StorageProbe(database, timeout=0.1)  # type: ignore[arg-type]
    with pytest.raises(StorageUnavailable, match=r"did not answer within 0\.1s"):
        await probe.check()


async def test_nothing_is_healthy_before_the_first_probe_is_answered() -> None:
    database = Database()
    database.delay = 0.3
    probe = StorageProbe(database, timeout=1)  # type: ignore[arg-type]
    first = asyncio.create_task(probe.check())
    await asyncio.sleep(0.05)
    with pytest.raises(StorageUnavailable, match="no probe of the database sent yet"):
        await probe.check()
    await first
