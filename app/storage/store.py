"""The storage contract: one global ordered revision, an event log written in the
same transaction as each change, optimistic concurrency, compaction, and a poller
that brings other replicas' writes into the watch cache.

Writes are group-committed: one writer task per process drains the queue of pending
writes into one transaction. The transaction locks the single ``revision_state`` row
first, so revisions are handed out and committed in the same order across every
process sharing the database (docs/architecture.md, storage contract 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.storage.cache import ADDED, MODIFIED, Event, StoredObject, WatchCache

log = logging.getLogger("app.storage")

NOTIFY_CHANNEL = "dra_revisions"
MAX_BATCH = 256
POLL_BATCH = 1000


class StorageError(Exception):
    """Base class for outcomes the request layer turns into API errors."""


class KeyExists(StorageError):
    pass


class RevisionMismatch(StorageError):
    """The stored object is not at the revision the write expected (or is gone)."""


class RevisionCompacted(StorageError):
    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"too old resource version: {requested} ({compacted})")
        self.requested = requested
        self.compacted = compacted


@dataclass(slots=True)
class WriteOp:
    type: str  # ADDED (create), MODIFIED (update) or DELETED (delete)
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    expected_revision: int = 0
    future: asyncio.Future[StoredObject] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Store:
    """Owns the database connection(s), the writer, the poller and the watch cache."""

    def __init__(
        self,
        engine: AsyncEngine,
        cache: WatchCache,
        *,
        poll_interval: float = 1.0,
        compaction_interval: float = 60.0,
        compaction_window: float = 300.0,
        compaction_min_retain: int = 1000,
    ) -> None:
        self.engine = engine
        self.cache = cache
        self.is_postgres = engine.dialect.name == "postgresql"
        self.poll_interval = poll_interval
        self.compaction_interval = compaction_interval
        self.compaction_window = compaction_window
        self.compaction_min_retain = compaction_min_retain
        self.compacted_revision = 0
        self.commits = 0
        self.written_events = 0
        self._queue: asyncio.Queue[WriteOp] = asyncio.Queue()
        self._apply_lock = asyncio.Lock()
        self._poll_wakeup = asyncio.Event()
        self._own_committed = 0  # newest revision this process's writer committed (or is committing)
        self._tasks: list[asyncio.Task[None]] = []
        self._writer_conn: AsyncConnection | None = None
        self._listen_conn: Any = None
        self._rev_conn: Any = None
        self._pg_writer: Any = None
        self._pg_base = 0  # the current revision as this writer last saw it (dra_commit's guess)
        self._rev_waiters: list[asyncio.Future[int]] = []
        self._rev_task: asyncio.Task[None] | None = None
        self.ready = False

    # ---- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        await self._load_snapshot()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._writer_loop(), name="storage-writer"),
            loop.create_task(self._poll_loop(), name="storage-poller"),
        ]
        if self.compaction_interval > 0:
            self._tasks.append(loop.create_task(self._compaction_loop(), name="storage-compactor"))
        if self.is_postgres:
            await self._listen()
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._listen_conn is not None:
            with contextlib.suppress(Exception):
                await self._listen_conn.close()
            self._listen_conn = None
        if self._writer_conn is not None:
            with contextlib.suppress(Exception):
                await self._writer_conn.close()
            self._writer_conn = None
        for raw in (self._rev_conn, self._pg_writer):
            if raw is not None:
                with contextlib.suppress(Exception):
                    raw.close()
        self._rev_conn = self._pg_writer = None
        self.cache.close_all_watchers()

    async def _load_snapshot(self) -> None:
        async with self.engine.connect() as conn:
            if self.is_postgres:
                await conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            state = (await conn.execute(text("SELECT current_revision, compacted_revision FROM revision_state WHERE id = 1"))).one()
            rows = (await conn.execute(text("SELECT resource, namespace, name, revision, data FROM objects"))).all()
            await conn.rollback()
        self.compacted_revision = int(state[1])
        self._pg_base = int(state[0])  # dra_commit's first guess (a stale one costs one retry)
        self.cache.load(int(state[0]), [tuple(r) for r in rows])  # type: ignore[misc]
        log.info("loaded %d objects at revision %d", len(rows), state[0])

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        # Our own commits notify us too; only a revision the cache lacks needs a poll.
        # The notification of our own commit can arrive before the writer has applied it to the
        # cache; the writer catches up on anything older itself (see _finish_commit).
        if not payload.isdigit() or int(payload) > max(self.cache.revision, self._own_committed):
            self._poll_wakeup.set()

    async def _listen(self) -> None:
        """LISTEN for revisions other replicas commit, so their writes reach watchers at once."""
        raw = await self.engine.raw_connection()
        try:
            driver: Any = raw.driver_connection  # asyncpg connection
            await driver.add_listener(NOTIFY_CHANNEL, self._on_notify)
            self._listen_conn = raw
        except Exception:  # pragma: no cover - fall back to polling only
            log.exception("LISTEN failed; other replicas' writes arrive by polling only")
            raw.close()

    # ---- writes ----------------------------------------------------------------

    async def write(self, op: WriteOp) -> StoredObject:
        """Queue a write for the next group commit and wait for its outcome."""
        if not self.ready:
            raise RuntimeError("storage is not running")
        self._queue.put_nowait(op)
        return await op.future

    async def _writer_loop(self) -> None:
        carry: WriteOp | None = None
        while True:
            op = carry if carry is not None else await self._queue.get()
            carry = None
            batch = [op]
            keys = {(op.resource, op.namespace, op.name)}
            while len(batch) < MAX_BATCH and not self._queue.empty():
                nxt = self._queue.get_nowait()
                key = (nxt.resource, nxt.namespace, nxt.name)
                if key in keys:
                    # Two writes to one key go in separate commits, so each sees the other's outcome.
                    carry = nxt
                    break
                keys.add(key)
                batch.append(nxt)
            try:
                if self.is_postgres:
                    await self._commit_postgres(batch)
                else:
                    await self._commit(batch)
            except asyncio.CancelledError:
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(RuntimeError("storage stopped"))
                raise
            except Exception as exc:
                log.exception("group commit of %d writes failed", len(batch))
                await self._reset_writer_connection()
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(exc)

    async def _pg_connection(self) -> Any:
        if self._pg_writer is None:
            self._pg_writer = await self.engine.raw_connection()
        return self._pg_writer.driver_connection

    async def _commit_postgres(self, batch: list[WriteOp]) -> None:
        """One group commit in one round trip (the ``dra_commit`` function, migration 0002).

        Every write gets a tentative revision up front; a write whose precondition fails
        just leaves its number unused (revisions stay ordered, not necessarily dense).
        """
        conn = await self._pg_connection()
        now = time.time()
        own_before = self._own_committed
        try:
            committed, failed, base, revision = await self._pg_transaction(conn, batch, now)
        except BaseException:
            # Nothing of ours committed: a notification up to that revision is another replica's.
            self._own_committed = own_before
            self._poll_wakeup.set()
            raise
        await self._finish_commit(base, revision, committed, failed)

    async def _pg_transaction(
        self, conn: Any, batch: list[WriteOp], now: float
    ) -> tuple[list[tuple[WriteOp, Event]], list[tuple[WriteOp, StorageError]], int, int]:
        """(committed, failed, base revision, new revision) of one batch, in one ``dra_commit`` call.

        Objects are serialised with the revisions they get if the current revision is still the
        one this writer last saw. When another replica moved it, nothing was written; the batch
        is then committed inside a transaction that first locks the revision row, so the guess
        is exact and a writer always gets through however busy the other replicas are.
        """
        kinds = [op.type for op in batch]
        resources = [op.resource for op in batch]
        namespaces = [op.namespace for op in batch]
        names = [op.name for op in batch]
        expected = [op.expected_revision for op in batch]
        own_before = self._own_committed

        async def attempt(base: int) -> tuple[list[int], list[bytes]]:
            """dra_commit's answer, and the objects as serialised for revisions from ``base``."""
            raws = []
            for index, op in enumerate(batch):
                op.obj["metadata"]["resourceVersion"] = str(base + index + 1)
                raws.append(orjson.dumps(op.obj))
            # Our own notification may arrive before the result: don't poll the log for it.
            self._own_committed = max(own_before, base + len(batch))
            result: list[int] = await conn.fetchval(
                _PG_COMMIT, base, kinds, resources, namespaces, names, [raw.decode() for raw in raws], expected, now, NOTIFY_CHANNEL
            )
            return result, raws

        base = self._pg_base
        result, raws = await attempt(base)
        attempted_twice = result[0] != base
        if attempted_twice:
            async with conn.transaction():
                base = int(await conn.fetchval("SELECT current_revision FROM revision_state WHERE id = 1 FOR UPDATE"))
                result, raws = await attempt(base)
            if result[0] != base:
                raise RuntimeError(f"revision moved under the lock ({base} -> {result[0]})")
        succeeded = {revision - base - 1 for revision in result[1:]}
        revision = result[-1] if len(result) > 1 else base
        self._pg_base = revision
        self._own_committed = max(own_before, revision) if succeeded else own_before
        if revision < base + len(batch) or attempted_twice:
            # Another replica's revisions may lie in the range taken for ours while we waited, and
            # its notification been ignored as ours: read the log rather than wait for the timer.
            self._poll_wakeup.set()
        committed = [
            (batch[i], Event(base + i + 1, batch[i].type, batch[i].resource, batch[i].namespace, batch[i].name, StoredObject(batch[i].obj, base + i + 1, raws[i])))
            for i in sorted(succeeded)
        ]
        failed: list[tuple[WriteOp, StorageError]] = [(op, KeyExists() if op.type == ADDED else RevisionMismatch()) for i, op in enumerate(batch) if i not in succeeded]
        return committed, failed, base, revision

    async def _reset_writer_connection(self) -> None:
        if self._pg_writer is not None:
            with contextlib.suppress(Exception):
                self._pg_writer.invalidate()
            self._pg_writer = None
        if self._writer_conn is not None:
            with contextlib.suppress(Exception):
                await self._writer_conn.close()
        self._writer_conn = None

    async def _connection(self) -> AsyncConnection:
        if self._writer_conn is None or self._writer_conn.closed:
            self._writer_conn = await self.engine.connect()
            self._writer_conn.info["write"] = True
        return self._writer_conn

    async def _commit(self, batch: list[WriteOp]) -> None:
        conn = await self._connection()
        now = time.time()
        committed: list[tuple[WriteOp, Event]] = []
        failed: list[tuple[WriteOp, StorageError]] = []
        async with conn.begin():
            lock = " FOR UPDATE" if self.is_postgres else ""
            base = int((await conn.execute(text(f"SELECT current_revision FROM revision_state WHERE id = 1{lock}"))).scalar_one())
            revision = base
            for op in batch:
                candidate = revision + 1
                op.obj["metadata"]["resourceVersion"] = str(candidate)
                raw = orjson.dumps(op.obj)
                data = raw.decode()
                params = {"resource": op.resource, "namespace": op.namespace, "name": op.name, "revision": candidate, "data": data, "expected": op.expected_revision}
                if op.type == ADDED:
                    result = await conn.execute(_INSERT, params)
                    error: StorageError = KeyExists()
                elif op.type == MODIFIED:
                    result = await conn.execute(_UPDATE, params)
                    error = RevisionMismatch()
                else:
                    result = await conn.execute(_DELETE, params)
                    error = RevisionMismatch()
                if result.rowcount == 1:  # type: ignore[attr-defined]
                    revision = candidate
                    stored = StoredObject(op.obj, candidate, raw)
                    committed.append((op, Event(candidate, op.type, op.resource, op.namespace, op.name, stored)))
                else:
                    failed.append((op, error))
            if committed:
                await conn.execute(text("UPDATE revision_state SET current_revision = :rev WHERE id = 1"), {"rev": revision})
                await conn.execute(
                    _INSERT_EVENT,
                    [
                        {"revision": e.revision, "resource": e.resource, "namespace": e.namespace, "name": e.name, "type": e.type, "data": e.obj.raw.decode(), "created_at": now}
                        for _, e in committed
                    ],
                )
                if self.is_postgres:
                    # One notification per group commit, not per write: NOTIFY serialises commits.
                    await conn.execute(text("SELECT pg_notify(:channel, :rev)"), {"channel": NOTIFY_CHANNEL, "rev": str(revision)})
        await self._finish_commit(base, revision, committed, failed)

    async def _finish_commit(
        self, base: int, revision: int, committed: list[tuple[WriteOp, Event]], failed: list[tuple[WriteOp, StorageError]]
    ) -> None:
        """Apply a committed batch to the cache (after anything older) and answer its writers."""
        self.commits += 1
        self.written_events += len(committed)
        if committed:
            async with self._apply_lock:
                if self.cache.revision < revision:
                    if self.cache.revision < base:
                        await self._catch_up(base)
                    self.cache.apply([e for _, e in committed])
        for op, event in committed:
            if not op.future.done():
                op.future.set_result(event.obj)
        for op, exc in failed:
            if not op.future.done():
                op.future.set_exception(exc)

    # ---- reading the log ---------------------------------------------------------

    async def _catch_up(self, up_to: int | None = None) -> int:
        """Apply committed events newer than the cache (caller holds the apply lock)."""
        applied = 0
        while up_to is None or self.cache.revision < up_to:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(_EVENTS_AFTER, {"after": self.cache.revision, "limit": POLL_BATCH})).all()
            if not rows:
                break
            first = int(rows[0][0])
            if first != self.cache.revision + 1 and self.cache.revision < self.compacted_revision:
                log.warning("cache fell behind compaction (%d < %d); reloading", self.cache.revision, first)
            events = [Event(int(r[0]), r[4], r[1], r[2], r[3], StoredObject(orjson.loads(r[5]), int(r[0]), r[5].encode())) for r in rows]
            self.cache.apply(events)
            applied += len(events)
            if len(rows) < POLL_BATCH:
                break
        return applied

    async def _poll_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poll_wakeup.wait(), self.poll_interval)
            self._poll_wakeup.clear()
            try:
                async with self._apply_lock:
                    await self._catch_up()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("polling the event log failed")
                await asyncio.sleep(self.poll_interval)

    async def database_revision(self) -> int:
        """The newest committed revision. Concurrent callers share one query that started
        after they asked, so the answer is never older than their request."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._rev_waiters.append(future)
        if self._rev_task is None or self._rev_task.done():
            self._rev_task = asyncio.get_running_loop().create_task(self._revision_round())
        return await future

    async def _revision_round(self) -> None:
        while self._rev_waiters:
            waiters, self._rev_waiters = self._rev_waiters, []
            try:
                rev = await self._read_current_revision()
            except Exception as exc:
                for w in waiters:
                    if not w.done():
                        w.set_exception(exc)
                continue
            for w in waiters:
                if not w.done():
                    w.set_result(rev)

    async def _read_current_revision(self) -> int:
        if self.is_postgres:
            # A dedicated driver connection: this query runs for every consistent read round.
            if self._rev_conn is None:
                self._rev_conn = await self.engine.raw_connection()
            try:
                driver: Any = self._rev_conn.driver_connection
                return int(await driver.fetchval("SELECT current_revision FROM revision_state WHERE id = 1"))
            except Exception:
                with contextlib.suppress(Exception):
                    self._rev_conn.close()
                self._rev_conn = None
                raise
        # SQLite serves one server process (its writes go through this process's writer,
        # which applies them to the cache before answering), so the cache is current.
        return self.cache.revision

    async def sync_to_database(self, timeout: float = 3.0) -> int:
        """Make the cache at least as new as the database now is (a consistent read)."""
        rev = await self.database_revision()
        if self.cache.revision < rev:
            self._poll_wakeup.set()
            if not await self.cache.wait_for_revision(rev, timeout):
                raise TimeoutError(f"watch cache did not reach revision {rev}")
        return rev

    async def events_between(self, resource: str, after: int, up_to: int) -> list[Event]:
        """Events of ``resource`` in (after, up_to] from the log, for watches older than memory."""
        if after < self.compacted_revision:
            raise RevisionCompacted(after, self.compacted_revision)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(_RESOURCE_EVENTS, {"resource": resource, "after": after, "upto": up_to})).all()
            compacted = int((await conn.execute(text("SELECT compacted_revision FROM revision_state WHERE id = 1"))).scalar_one())
        if after < compacted:
            self.compacted_revision = compacted
            raise RevisionCompacted(after, compacted)
        return [Event(int(r[0]), r[4], r[1], r[2], r[3], StoredObject(orjson.loads(r[5]), int(r[0]), r[5].encode())) for r in rows]

    async def read_object(self, resource: str, namespace: str, name: str) -> StoredObject | None:
        """Read one object straight from the database (used to retry after a conflict)."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(_GET_OBJECT, {"resource": resource, "namespace": namespace, "name": name})).first()
        if row is None:
            return None
        return StoredObject(orjson.loads(row[1]), int(row[0]), row[1].encode())

    # ---- compaction --------------------------------------------------------------

    async def compact(self, now: float | None = None) -> int:
        """Drop log entries older than the window and beyond the retained count."""
        now = time.time() if now is None else now
        async with self.engine.connect() as conn:
            conn.info["write"] = True
            async with conn.begin():
                lock = " FOR UPDATE" if self.is_postgres else ""
                current, compacted = (await conn.execute(text(f"SELECT current_revision, compacted_revision FROM revision_state WHERE id = 1{lock}"))).one()
                by_time = (await conn.execute(
                    text("SELECT MAX(revision) FROM events WHERE created_at < :cutoff"), {"cutoff": now - self.compaction_window}
                )).scalar()
                target = min(int(by_time or 0), int(current) - self.compaction_min_retain)
                if target <= int(compacted):
                    return int(compacted)
                await conn.execute(text("DELETE FROM events WHERE revision <= :target"), {"target": target})
                await conn.execute(text("UPDATE revision_state SET compacted_revision = :target WHERE id = 1"), {"target": target})
        self.compacted_revision = target
        log.info("compacted the event log up to revision %d", target)
        return target

    async def _compaction_loop(self) -> None:
        while True:
            await asyncio.sleep(self.compaction_interval)
            try:
                await self.compact()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("compaction failed")



_INSERT = text(
    "INSERT INTO objects (resource, namespace, name, revision, data) "
    "VALUES (:resource, :namespace, :name, :revision, :data) ON CONFLICT DO NOTHING"
)
_UPDATE = text(
    "UPDATE objects SET revision = :revision, data = :data "
    "WHERE resource = :resource AND namespace = :namespace AND name = :name AND revision = :expected"
)
_DELETE = text(
    "DELETE FROM objects WHERE resource = :resource AND namespace = :namespace AND name = :name AND revision = :expected"
)
_INSERT_EVENT = text(
    "INSERT INTO events (revision, resource, namespace, name, type, data, created_at) "
    "VALUES (:revision, :resource, :namespace, :name, :type, :data, :created_at)"
)
_EVENTS_AFTER = text(
    "SELECT revision, resource, namespace, name, type, data FROM events WHERE revision > :after ORDER BY revision LIMIT :limit"
)
_RESOURCE_EVENTS = text(
    "SELECT revision, resource, namespace, name, type, data FROM events "
    "WHERE resource = :resource AND revision > :after AND revision <= :upto ORDER BY revision"
)
# Postgres group commit: one statement per write type over arrays (asyncpg, $n parameters).
# One group commit per call (migration 0002): [base, succeeded revisions...] or [current] to retry.
_PG_COMMIT = "SELECT dra_commit($1, $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8, $9)"
_GET_OBJECT = text("SELECT revision, data FROM objects WHERE resource = :resource AND namespace = :namespace AND name = :name")
