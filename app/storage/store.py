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
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.cache import ADDED, Event, StoredObject, WatchCache
from app.storage.dialects import CommitInDoubt, GroupCommit, InDoubt, WriteOp, dialect_for, for_writing
from app.storage.errors import CommitOutcomeUnknown, KeyExists, RevisionCompacted, RevisionMismatch, StorageError, StorageUnavailable
from kube.tasks import cancel_and_wait, wait_for

log = logging.getLogger("app.storage")

MAX_BATCH = 256
POLL_BATCH = 1000


class Store:
    """The database side: the group-committing writer, the poller that applies committed
    events to the watch cache, compaction, and reads of the log. What differs between
    databases is the dialect's."""

    def __init__(
        self,
        engine: AsyncEngine,
        cache: WatchCache,
        *,
        poll_interval: float = 1.0,
        compaction_interval: float = 60.0,
        compaction_window: float = 300.0,
        compaction_min_retain: int = 1000,
        outcome_timeout: float = 30.0,
    ) -> None:
        self.engine = engine
        self.cache = cache
        self.dialect = dialect_for(engine.dialect.name)(engine, self)
        self.poll_interval = poll_interval
        self.compaction_interval = compaction_interval
        self.compaction_window = compaction_window
        self.compaction_min_retain = compaction_min_retain
        # How long a write whose commit lost its connection waits to learn whether it was stored.
        self.outcome_timeout = outcome_timeout
        self._resolving: set[asyncio.Task[None]] = set()
        self.compacted_revision = 0
        self.commits = 0
        self.written_events = 0
        self._queue: asyncio.Queue[WriteOp] = asyncio.Queue()
        self._apply_lock = asyncio.Lock()
        self._poll_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._rev_waiters: list[asyncio.Future[int]] = []
        self._rev_task: asyncio.Task[None] | None = None
        self.ready = False
        # When the database stopped answering (monotonic seconds), None while it answers.
        self.unavailable_since: float | None = None

    # ---- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        revision = await self._load_snapshot()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._writer_loop(), name="storage-writer"),
            loop.create_task(self._poll_loop(), name="storage-poller"),
        ]
        if self.compaction_interval > 0:
            self._tasks.append(loop.create_task(self._compaction_loop(), name="storage-compactor"))
        await self.dialect.start(revision)
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        await cancel_and_wait(*self._tasks, *self._resolving)
        self._tasks = []
        await self.dialect.close()

    async def _load_snapshot(self) -> int:
        """Load every object into the cache; the revision they were read at."""
        async with self.engine.connect() as conn:
            await self.dialect.begin_snapshot(conn)
            state = (await conn.execute(text("SELECT current_revision, compacted_revision FROM revision_state WHERE id = 1"))).one()
            rows = (await conn.execute(text("SELECT resource, namespace, name, revision, data FROM objects"))).all()
            await conn.rollback()
        self.compacted_revision = int(state[1])
        self.cache.load(int(state[0]), [tuple(r) for r in rows])  # type: ignore[misc]
        log.info("loaded %d objects at revision %d", len(rows), state[0])
        return int(state[0])

    def stopped_loop(self) -> str | None:
        """The name of a background loop (writer, poller, compactor) that ended although the store
        runs: nothing restarts it, so the server is wedged. None while every loop runs."""
        if not self.ready:
            return None
        for task in self._tasks:
            if task.done():
                return task.get_name()
        return None

    @property
    def applied_revision(self) -> int:
        """The newest revision the watch cache holds."""
        return self.cache.revision

    def request_poll(self) -> None:
        """Read the event log now instead of at the next poll."""
        self._poll_wakeup.set()

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
                await self._finish_commit(await self.dialect.commit(batch))
            except asyncio.CancelledError:
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(RuntimeError("storage stopped"))
                raise
            except CommitInDoubt as exc:
                self.failed(exc.cause, f"group commit of {len(batch)} writes")
                await self.dialect.reset_writer()
                # Answered once the event log tells; the writer goes on meanwhile.
                task = asyncio.get_running_loop().create_task(self._resolve(exc.doubt, exc.cause), name="storage-commit-outcome")
                self._resolving.add(task)
                task.add_done_callback(self._resolving.discard)
            except Exception as exc:
                error = self.failed(exc, f"group commit of {len(batch)} writes")
                await self.dialect.reset_writer()
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(error)
            else:
                await self.answered()

    async def _finish_commit(self, outcome: GroupCommit) -> None:
        """Apply a committed batch to the cache (after anything older) and answer its writers."""
        self.commits += 1
        self.written_events += len(outcome.committed)
        if outcome.committed:
            try:
                async with self._apply_lock:
                    if self.cache.revision < outcome.revision:
                        if self.cache.revision < outcome.base:
                            await self._catch_up(outcome.base)
                        self.cache.apply([e for _, e in outcome.committed])
            except Exception as exc:
                # Stored all the same, and answered so: the poller brings the batch into the cache
                # after what came before it once the log can be read again.
                self.failed(exc, "reading the event log before a commit")
        for op, event in outcome.committed:
            if not op.future.done():
                op.future.set_result(event.obj)
        for op, error in outcome.failed:
            if not op.future.done():
                op.future.set_exception(error)

    async def _resolve(self, doubt: InDoubt, cause: BaseException) -> None:
        try:
            await self._learn_outcome(doubt, cause)
        except BaseException:
            # Stopped (or failed) before it knew: the writes may or may not be stored.
            self._answer_all({revision: (op, raw) for op, revision, raw in doubt.sent}, CommitOutcomeUnknown(str(cause)))
            raise

    async def _learn_outcome(self, doubt: InDoubt, cause: BaseException) -> None:
        """Answer the writes of a batch whose commit lost its connection: as committed or not, as
        the event log says once the database answers (if the batch committed, each write that was
        stored has its row there with exactly the bytes sent; if not, none has), or
        CommitOutcomeUnknown when the database cannot tell within ``outcome_timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.outcome_timeout
        writes = {revision: (op, raw) for op, revision, raw in doubt.sent}
        for op, error in doubt.refused:
            if not op.future.done():
                op.future.set_exception(error)
        rows: list[Any] | None = None
        while rows is None:
            try:
                async with self.engine.connect() as conn:
                    if await self.dialect.settle(conn, doubt):
                        rows = list((await conn.execute(_EVENTS_BETWEEN, {"low": min(writes), "high": max(writes)})).all())
            except Exception as exc:
                self.failed(exc, "learning whether a commit took place")
            if rows is None:
                if loop.time() >= deadline:
                    self._answer_all(writes, CommitOutcomeUnknown(str(self.dialect.interpret(cause) or cause)))
                    return
                await asyncio.sleep(min(0.25, max(deadline - loop.time(), 0)))
        await self.answered()
        stored = {int(r[0]) for r in rows if int(r[0]) in writes and _same_write(r, *writes[int(r[0])])}
        if not stored:
            self._answer_all(writes, self.dialect.interpret(cause) or StorageUnavailable(str(cause)))
            return
        log.info("a commit whose connection was lost took place (revisions %d-%d)", min(stored), max(stored))
        # What this replica answers it also serves: the cache catches up with the log first.
        with contextlib.suppress(Exception):
            async with self._apply_lock:
                await self._catch_up(max(stored))
        for revision, (op, raw) in sorted(writes.items()):
            if op.future.done():
                continue
            if revision in stored:
                op.future.set_result(StoredObject(op.obj, revision, raw))
            else:
                # Committed with the others: its precondition failed.
                op.future.set_exception(KeyExists() if op.type == ADDED else RevisionMismatch())

    @staticmethod
    def _answer_all(writes: dict[int, tuple[WriteOp, bytes]], error: BaseException) -> None:
        for op, _ in writes.values():
            if not op.future.done():
                op.future.set_exception(error)

    # ---- outages --------------------------------------------------------------------

    def failed(self, exc: BaseException, doing: str) -> BaseException:
        """The error to report for ``exc`` (a StorageError when the database is at fault), logged
        once per outage rather than once per request."""
        error = self.dialect.interpret(exc)
        if isinstance(error, StorageUnavailable):
            if self.unavailable_since is None:
                self.unavailable_since = time.monotonic()
                log.warning("the database is unavailable (%s): %s", doing, error)
            else:
                log.debug("the database is still unavailable (%s): %s", doing, error)
            return error
        if isinstance(error, StorageError):
            log.error("the database refused %s: %s", doing, error)
            return error
        log.error("%s failed", doing, exc_info=exc)
        return exc

    async def answered(self) -> None:
        """The database just answered: the end of an outage, if there was one."""
        if self.unavailable_since is None:
            return
        log.info("the database is available again after %.1f s", time.monotonic() - self.unavailable_since)
        self.unavailable_since = None
        self.request_poll()  # other replicas may have written meanwhile
        try:
            await self.dialect.reconnected()
        except Exception as exc:
            self.failed(exc, "reconnecting")

    async def ping(self) -> None:
        """Read the revision row: StorageUnavailable (or the driver's error) when the database does not answer."""
        try:
            async with self.engine.connect() as conn:
                (await conn.execute(text("SELECT current_revision FROM revision_state WHERE id = 1"))).scalar_one()
        except Exception as exc:
            raise self.failed(exc, "a health probe") from exc
        await self.answered()

    # ---- reading the log ---------------------------------------------------------

    async def _catch_up(self, up_to: int | None = None) -> int:
        """Apply committed events newer than the cache (caller holds the apply lock)."""
        applied = 0
        while up_to is None or self.cache.revision < up_to:
            rows = await self.dialect.events_after(self.cache.revision, POLL_BATCH)
            if not rows:
                break
            first = int(rows[0][0])
            if first != self.cache.revision + 1 and self.cache.revision < self.compacted_revision:
                log.warning("cache fell behind compaction (%d < %d); reloading", self.cache.revision, first)
            events = [Event(int(r[0]), r[4], r[1], r[2], r[3], StoredObject(None, int(r[0]), r[5].encode())) for r in rows]
            self.cache.apply(events)
            applied += len(events)
            if len(rows) < POLL_BATCH:
                break
        return applied

    async def _poll_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await wait_for(self._poll_wakeup.wait(), self.poll_interval)
            self._poll_wakeup.clear()
            try:
                async with self._apply_lock:
                    await self._catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failed(exc, "polling the event log")
                await asyncio.sleep(self.poll_interval)
            else:
                await self.answered()

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
                rev = await self.dialect.current_revision()
            except Exception as exc:
                error = self.failed(exc, "reading the current revision")
                for w in waiters:
                    if not w.done():
                        w.set_exception(error)
                continue
            await self.answered()
            for w in waiters:
                if not w.done():
                    w.set_result(rev)

    async def events_between(self, resource: str, after: int, up_to: int) -> list[Event]:
        """Events of ``resource`` in (after, up_to] from the log, for watches older than memory."""
        if after < self.compacted_revision:
            raise RevisionCompacted(after, self.compacted_revision)
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(_RESOURCE_EVENTS, {"resource": resource, "after": after, "upto": up_to})).all()
                compacted = int((await conn.execute(text("SELECT compacted_revision FROM revision_state WHERE id = 1"))).scalar_one())
        except Exception as exc:
            raise self.failed(exc, "reading the event log") from exc
        if after < compacted:
            self.compacted_revision = compacted
            raise RevisionCompacted(after, compacted)
        return [Event(int(r[0]), r[4], r[1], r[2], r[3], StoredObject(None, int(r[0]), r[5].encode())) for r in rows]

    async def read_object(self, resource: str, namespace: str, name: str) -> StoredObject | None:
        """Read one object straight from the database (used to retry after a conflict)."""
        try:
            async with self.engine.connect() as conn:
                row = (await conn.execute(_GET_OBJECT, {"resource": resource, "namespace": namespace, "name": name})).first()
        except Exception as exc:
            raise self.failed(exc, "reading an object") from exc
        if row is None:
            return None
        return StoredObject(None, int(row[0]), row[1].encode())

    # ---- compaction --------------------------------------------------------------

    async def compact(self, now: float | None = None) -> int:
        """Drop log entries older than the window and beyond the retained count."""
        now = time.time() if now is None else now
        async with self.engine.connect() as conn:
            await for_writing(conn)
            async with conn.begin():
                lock = self.dialect.revision_row_lock
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
            except Exception as exc:
                self.failed(exc, "compaction")


_RESOURCE_EVENTS = text(
    "SELECT revision, resource, namespace, name, type, data FROM events "
    "WHERE resource = :resource AND revision > :after AND revision <= :upto ORDER BY revision"
)
def _same_write(row: Any, op: WriteOp, raw: bytes) -> bool:
    """Whether an event log row (revision, resource, namespace, name, data) is ``op`` as sent."""
    return (row[1], row[2], row[3]) == (op.resource, op.namespace, op.name) and row[4].encode() == raw


_EVENTS_BETWEEN = text("SELECT revision, resource, namespace, name, data FROM events WHERE revision >= :low AND revision <= :high")
_GET_OBJECT = text("SELECT revision, data FROM objects WHERE resource = :resource AND namespace = :namespace AND name = :name")
