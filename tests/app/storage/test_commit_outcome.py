"""A write whose connection is lost at COMMIT: the server finds out from the event log whether it
was stored and answers accordingly (stored: the object; not stored: the usual retry-later error),
and says it cannot tell (upstream's 504 Timeout) only when the database does not answer in time.

The connection is cut by a test double around the writer's connection, after or before the
commit reached the database, on both backends."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any

import asyncpg
import pytest

from app.api.storagestatus import storage_status
from app.registry import KINDS
from app.storage.cache import ADDED, MODIFIED, WatchCache
from app.storage.db import create_engine, run_migrations
from app.storage.errors import CommitOutcomeUnknown, KeyExists, StorageError, StorageUnavailable
from app.storage.store import Store, WriteOp
from kube.tasks import wait_for
from tests.conftest import Databases

CLAIMS = "resourceclaims.resource.k8s.io"

# commit (the real one, awaited) -> what the double does around it
Cut = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


@pytest.fixture
def url(databases: Databases) -> str:
    database = databases.new()
    run_migrations(database)
    return database


@contextlib.asynccontextmanager
async def running(url: str) -> AsyncIterator[Store]:
    engine = create_engine(url)
    store = Store(engine, WatchCache(1000), compaction_interval=0, outcome_timeout=30.0)
    await store.start()
    try:
        yield store
    finally:
        await store.stop()
        await engine.dispose()


def _claim(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}}


class _PostgresCommit:
    """The writer's asyncpg connection, its ``dra_commit`` calls going through ``cut``."""

    def __init__(self, connection: Any, cut: Cut) -> None:
        self._connection = connection
        self._cut = cut

    async def fetchval(self, query: str, *args: Any) -> Any:
        if not query.startswith("SELECT dra_commit"):
            return await self._connection.fetchval(query, *args)

        async def commit() -> Any:
            return await self._connection.fetchval(query, *args)

        return await self._cut(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


class _Pooled:
    def __init__(self, pooled: Any, driver_connection: Any) -> None:
        self._pooled = pooled
        self.driver_connection = driver_connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pooled, name)


class _SQLiteTransaction:
    """SQLAlchemy's transaction of the writer's connection, its COMMIT going through ``cut``
    (begun by ``await`` or ``async with``)."""

    def __init__(self, transaction: Any, cut: Cut) -> None:
        self._transaction = transaction
        self._cut = cut

    def __await__(self) -> Generator[Any, None, _SQLiteTransaction]:
        yield from self._transaction.start().__await__()
        return self

    async def __aenter__(self) -> _SQLiteTransaction:
        return await self

    async def __aexit__(self, kind: type[BaseException] | None, *_rest: object) -> None:
        if kind is None:
            await self.commit()
        else:
            await self._transaction.rollback()

    async def commit(self) -> None:
        await self._cut(self._transaction.commit)

    async def rollback(self) -> None:
        await self._transaction.rollback()


class _SQLiteConnection:
    def __init__(self, connection: Any, cut: Cut) -> None:
        self._connection = connection
        self._cut = cut

    def begin(self) -> _SQLiteTransaction:
        return _SQLiteTransaction(self._connection.begin(), self._cut)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


async def _cut_next_commit(store: Store, lost_after_commit: bool) -> None:
    """Lose the connection of the writer's next commit, after it took place or before it reached
    the database; later commits go through."""
    dialect: Any = store.dialect
    connection = await dialect._writer_connection()
    used = False

    def lose() -> BaseException:
        if dialect.backend == "postgresql":
            connection.terminate()
            return asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        error = sqlite3.OperationalError("disk I/O error")
        error.sqlite_errorname = "SQLITE_IOERR"  # type: ignore[attr-defined]
        return error

    async def cut(commit: Callable[[], Awaitable[Any]]) -> Any:
        nonlocal used
        if used:
            return await commit()
        used = True
        if lost_after_commit:
            await commit()
        raise lose()

    if dialect.backend == "postgresql":
        dialect._writer = _Pooled(dialect._writer, _PostgresCommit(connection, cut))
    else:
        dialect._writer = _SQLiteConnection(connection, cut)


async def _stored(url: str, name: str) -> int | None:
    """The revision of ``name`` as a server started afresh on the database reads it."""
    async with running(url) as fresh:
        found = fresh.cache.get(CLAIMS, "default", name)
        return found.revision if found is not None else None


async def test_a_write_whose_connection_was_lost_after_its_commit_is_answered_as_stored(url: str) -> None:
    async with running(url) as store:
        await store.write(WriteOp(ADDED, CLAIMS, "default", "before", _claim("before")))
        await _cut_next_commit(store, lost_after_commit=True)
        written = await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))
        assert written.obj["metadata"]["resourceVersion"] == str(written.revision)
        # This server serves what it answered, and goes on writing.
        assert store.cache.get(CLAIMS, "default", "c") is not None
        assert store.cache.get(CLAIMS, "default", "c").revision == written.revision  # type: ignore[union-attr]
        again = written.obj | {"metadata": {**written.obj["metadata"], "labels": {"a": "b"}}}
        await store.write(WriteOp(MODIFIED, CLAIMS, "default", "c", again, written.revision))
        with pytest.raises(KeyExists):
            await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))
    assert await _stored(url, "c") is not None


async def test_a_write_whose_connection_was_lost_before_its_commit_is_answered_as_not_stored(url: str) -> None:
    async with running(url) as store:
        await store.write(WriteOp(ADDED, CLAIMS, "default", "before", _claim("before")))
        await _cut_next_commit(store, lost_after_commit=False)
        with pytest.raises(StorageError) as caught:
            await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))
        assert not isinstance(caught.value, CommitOutcomeUnknown)
        assert store.cache.get(CLAIMS, "default", "c") is None
        # Not stored, so the client's retry creates it.
        await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))


async def test_a_write_whose_outcome_cannot_be_learned_in_time_is_a_504_timeout(url: str) -> None:
    async with running(url) as store:
        await store.write(WriteOp(ADDED, CLAIMS, "default", "before", _claim("before")))
        await _cut_next_commit(store, lost_after_commit=True)
        store.outcome_timeout = 0.3

        async def unreachable(_conn: Any, _doubt: Any) -> bool:
            raise ConnectionRefusedError(111, "Connection refused")

        store.dialect.settle = unreachable  # type: ignore[method-assign,assignment]
        with pytest.raises(CommitOutcomeUnknown) as caught:
            await wait_for(store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c"))), 10)
    strategy = next(kind for kind in KINDS if kind.qualified_resource == CLAIMS)
    status = storage_status(caught.value, strategy, "create", "default")
    assert (status.code, status.reason) == (504, "Timeout")
    assert status.message == (
        "the server was unable to return a response in the time allotted, but may still be processing the request (create resourceclaims.resource.k8s.io)"
    )
    assert status.details == {"group": "resource.k8s.io", "kind": "resourceclaims", "retryAfterSeconds": 2}


def test_an_unreachable_database_is_still_a_500_server_timeout() -> None:
    strategy = next(kind for kind in KINDS if kind.qualified_resource == CLAIMS)
    status = storage_status(StorageUnavailable("refused"), strategy, "create", "default")
    assert (status.code, status.reason) == (500, "ServerTimeout")


async def test_a_commit_is_answered_as_stored_though_the_log_before_it_cannot_be_read(backend: str, url: str) -> None:
    """Another replica committed just before: the writer reads the log up to its own commit to
    keep the cache in order, and the database goes away in between. The write was stored, and is
    answered so; the cache gets it once the log can be read again."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    async with running(url) as store, running(url) as other:
        catch_up = store._catch_up

        async def unreachable(up_to: int | None = None) -> int:
            raise ConnectionRefusedError(111, "Connection refused")

        store._catch_up = unreachable  # type: ignore[method-assign]
        await other.write(WriteOp(ADDED, CLAIMS, "default", "elsewhere", _claim("elsewhere")))
        written = await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))
        store._catch_up = catch_up  # type: ignore[method-assign]
        store.request_poll()
        assert await store.cache.wait_for_revision(written.revision, 10)
        assert store.cache.get(CLAIMS, "default", "elsewhere") is not None
        assert store.cache.get(CLAIMS, "default", "c").revision == written.revision  # type: ignore[union-attr]


async def test_another_replicas_write_at_the_revision_a_lost_commit_expected_is_not_taken_for_it(backend: str, url: str) -> None:
    """The writer's commit never reached the database; before the writer reads the log, another
    replica commits a different object into the revision the lost commit would have had. The log's
    row at that revision is not this write (other key, other bytes): the write is answered as not
    stored, and the client's retry creates it."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    async with running(url) as store, running(url) as other:
        await store.write(WriteOp(ADDED, CLAIMS, "default", "before", _claim("before")))
        await _cut_next_commit(store, lost_after_commit=False)
        settle = store.dialect.settle
        taken: list[int] = []

        async def after_another_replica_wrote(conn: Any, doubt: Any) -> bool:
            if not taken:
                taken.append((await other.write(WriteOp(ADDED, CLAIMS, "default", "elsewhere", _claim("elsewhere")))).revision)
            return await settle(conn, doubt)

        store.dialect.settle = after_another_replica_wrote  # type: ignore[method-assign]
        with pytest.raises(StorageError) as caught:
            await wait_for(store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c"))), 30)
        assert not isinstance(caught.value, CommitOutcomeUnknown)
        assert taken == [(await _revision_of(url, "before")) + 1], "the other replica's write took the revision the lost commit expected"
        assert store.cache.get(CLAIMS, "default", "c") is None
        written = await store.write(WriteOp(ADDED, CLAIMS, "default", "c", _claim("c")))
        assert written.revision > taken[0]
    assert await _stored(url, "c") == written.revision


async def _revision_of(url: str, name: str) -> int:
    revision = await _stored(url, name)
    assert revision is not None, f"{name} is stored"
    return revision
