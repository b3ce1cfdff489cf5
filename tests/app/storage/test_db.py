"""The embedded SQLite database under faults: a damaged or read-only file stops the server with a
clear message (a full disk at start too); a full disk or a file turned read-only while serving refuses the write with a
StorageFailure, writes nothing, and the next write succeeds once the fault is gone."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from app.storage.cache import ADDED
from app.storage.db import run_migrations
from app.storage.dialects import SQLiteDialect, WriteOp
from app.storage.errors import StorageFailure
from app.storage.storage import Storage
from app.storage.store import Store
from devtools.ports import free_port
from devtools.server import REPO_ROOT
from kube.tasks import wait_for
from tests.app.storage.test_storage import running

CLAIMS = "resourceclaims.resource.k8s.io"


def serve_once(url: str, *, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m app serve`` on ``url``, expected to refuse and exit."""
    command = [sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{free_port()}", "--database-url", url]
    return subprocess.run([*(prefix or []), *command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def test_a_damaged_file_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    database = tmp_path / "dra.sqlite"
    database.write_bytes(b"not a database at all " * 500)
    result = serve_once(f"sqlite:///{database}")
    assert result.returncode == 3
    assert f"the database file {database} is damaged or is not a SQLite database" in result.stderr
    assert "move it away" in result.stderr
    assert database.read_bytes().startswith(b"not a database"), "the file is left as it was"


# Linux's capability that lets root write whatever a file's mode says (capabilities(7)).
CAP_DAC_OVERRIDE = 1


def overrides_file_modes() -> bool:
    """Whether this process may write a file its mode makes read-only (root, with CAP_DAC_OVERRIDE)."""
    if os.geteuid() != 0:
        return False
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_DAC_OVERRIDE & 1)
    return True


@pytest.fixture
def file_modes_enforced() -> list[str]:
    """A command prefix under which a process cannot write what a file's mode makes read-only.

    An ordinary user needs none. Root keeps its identity, so it still reads the checkout and the
    virtualenv wherever they live (a private home, a ``mktemp -d`` folder), but loses
    CAP_DAC_OVERRIDE, the one capability that writes past a file's mode. (Run as another user,
    as this test once was, the server could not import itself from a checkout only its owner reads.)"""
    if not overrides_file_modes():
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): a read-only file is writable")
    # Out of the inheritable and bounding sets, it is not in the permitted set after exec.
    return [setpriv, "--inh-caps=-dac_override", "--bounding-set=-dac_override", "--"]


def test_a_read_only_file_is_refused_with_a_clear_error(tmp_path: Path, file_modes_enforced: list[str]) -> None:
    database = tmp_path / "dra.sqlite"
    run_migrations(f"sqlite:///{database}")
    database.chmod(0o444)
    result = serve_once(f"sqlite:///{database}", prefix=file_modes_enforced)
    assert result.returncode == 3, result.stderr
    assert f"the database file {database} cannot be written" in result.stderr, result.stderr
    assert database.stat().st_mode & 0o777 == 0o444, "the file is left as it was"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dra.sqlite'}"
    run_migrations(url)
    return url


def claim(name: str, padding: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "annotations": {"pad": "x" * padding}}}


async def write(storage: Storage, name: str, padding: int = 0) -> Any:
    return await storage.write(WriteOp(ADDED, CLAIMS, "default", name, claim(name, padding)))


@contextlib.asynccontextmanager
async def fault(store: Store, pragma: Callable[[Any], str]) -> AsyncIterator[None]:
    """Every new connection of ``store`` runs the PRAGMA ``pragma(cursor)`` returns; the writer reconnects to get it."""

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(pragma(cursor))
        cursor.close()

    async def reconnect() -> None:
        await store.dialect.reset_writer()
        await store.engine.dispose()  # pooled connections go: the next ones are new

    event.listen(store.engine.sync_engine, "connect", on_connect)
    await reconnect()
    try:
        yield
    finally:
        event.remove(store.engine.sync_engine, "connect", on_connect)
        await reconnect()


def _full(cursor: Any) -> str:
    cursor.execute("PRAGMA page_count")
    pages = cursor.fetchone()[0]
    return f"PRAGMA max_page_count = {pages}"  # not one page more: as a full disk


@pytest.mark.parametrize(
    ("pragma", "reason"),
    [(_full, "database or disk is full (SQLITE_FULL)"), (lambda _cursor: "PRAGMA query_only = ON", "attempt to write a readonly database (SQLITE_READONLY)")],
    ids=["full-disk", "read-only"],
)
async def test_a_refused_write_writes_nothing(sqlite_url: str, pragma: Callable[[Any], str], reason: str) -> None:
    url = sqlite_url
    async with running(url) as (storage, store):
        await write(storage, "before")
        revision = storage.revision
        async with fault(store, pragma):
            with pytest.raises(StorageFailure) as refused:
                await write(storage, "refused", padding=200_000)
            assert str(refused.value) == reason
            assert storage.cached(CLAIMS, "default", "refused") is None
            assert storage.revision == revision
        assert (await write(storage, "after", padding=200_000)).revision == revision + 1, "writes resume when the fault is gone"
    async with running(url) as (storage, _store):
        names = [item.obj["metadata"]["name"] for item in (await storage.list(CLAIMS, "default")).items]
        assert names == ["after", "before"], "nothing of the refused write reached the file"


def test_a_full_disk_at_start_is_explained(tmp_path: Path) -> None:
    """What the server says when starting hits a full disk (made here with a page limit)."""
    database = tmp_path / "dra.sqlite"
    conn = sqlite3.connect(database)
    try:
        conn.execute("CREATE TABLE t (x)")
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(sqlite3.OperationalError) as full:
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    finally:
        conn.close()
    assert SQLiteDialect.explain(make_url(f"sqlite:///{database}"), full.value) == (
        f"the disk holding the database file {database} is full (database or disk is full (SQLITE_FULL)); free some space"
    )


async def test_reads_never_wait_for_a_writer_even_on_connections_that_wrote(sqlite_url: str) -> None:
    """WAL lets reads run beside another's write transaction. The connections that wrote (the
    compactor's, a replaced writer's) go back to the pool, and a read that takes one must not begin
    a write transaction: it would wait for the write lock, up to the 30-s busy timeout."""
    async with running(sqlite_url) as (storage, store):
        await write(storage, "a")
        await store.compact()
        await store.dialect.reset_writer()  # the writer's connection goes back to the pool
        await write(storage, "b")  # on a new writer connection
        holder = sqlite3.connect(make_url(sqlite_url).database or "", isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")  # someone else is writing
        try:
            # Sequential reads take the pooled connections in turn (the pool hands out the oldest first).
            for _ in range(store.engine.pool.size() + 2):  # type: ignore[attr-defined]
                await wait_for(store.ping(), 5)
                assert (await wait_for(store.read_object(CLAIMS, "default", "a"), 5)) is not None
        finally:
            holder.execute("ROLLBACK")
            holder.close()
