"""The API server's garbage-collector thresholds (kube.heap.SERVER_THRESHOLDS)."""

from __future__ import annotations

import gc
from pathlib import Path

from app.config import Settings
from app.server import ApiServer
from devtools.server import migrated_sqlite
from kube.heap import SERVER_THRESHOLDS


async def test_a_started_server_collects_young_objects_less_often(tmp_path: Path) -> None:
    before = gc.get_threshold()
    # Python's defaults, whatever a server started earlier in this test process left behind.
    gc.set_threshold(700, 10, 10)
    server = ApiServer(Settings(database_url=migrated_sqlite(tmp_path / "dra.sqlite")))
    try:
        await server.start()
        assert gc.get_threshold() == SERVER_THRESHOLDS
        assert SERVER_THRESHOLDS[0] > 700
    finally:
        await server.stop()
        gc.set_threshold(*before)
