"""End-to-end fixtures: ``start_server`` as in ``tests/conftest.py``, but a new SQLite database
starts as a copy of one migrated once (``tests.stack.migrated_sqlite``) instead of running
``python -m app migrate`` for every stack."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.credentials import ClusterCredentials
from devtools.server import ServerProcess
from tests.conftest import Databases
from tests.stack import SQLITE, migrated_sqlite


@pytest.fixture(scope="session")
def start_server(start_server: Callable[..., ServerProcess], databases: Databases) -> Callable[..., ServerProcess]:
    if databases.backend != "sqlite":
        return start_server

    def start(
        *flags: str, database_url: str | None = None, migrate_first: bool = True, credentials: ClusterCredentials | None = None
    ) -> ServerProcess:
        if database_url is None and migrate_first:
            database_url, migrate_first = migrated_sqlite(Path(databases.new().removeprefix(SQLITE))), False
        return start_server(*flags, database_url=database_url, migrate_first=migrate_first, credentials=credentials)

    return start
