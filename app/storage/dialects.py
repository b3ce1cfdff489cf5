"""What differs between the two databases the store runs on, one class each.

Postgres serves any number of API server replicas: a group commit is one server-side call
(``dra_commit``, migration 0002), other replicas' commits announce themselves by NOTIFY, and
the newest revision is read from the database. SQLite serves one server process: a group
commit is a few statements in one BEGIN IMMEDIATE transaction, nobody else writes, so the
watch cache is as new as the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import orjson
from sqlalchemy import event, text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.storage.cache import ADDED, DELETED, MODIFIED, Event, StoredObject
from app.storage.errors import KeyExists, RequestTooLarge, RevisionMismatch, StorageError, StorageFailure, StorageUnavailable

log = logging.getLogger("app.storage")

NOTIFY_CHANNEL = "dra_revisions"
# The log after a revision, oldest first: with asyncpg's numbered parameters, and as SQLAlchemy text.
EVENTS_AFTER = "SELECT revision, resource, namespace, name, type, data FROM events WHERE revision > $1 ORDER BY revision LIMIT $2"
_EVENTS_AFTER = text(EVENTS_AFTER.replace("$1", ":after").replace("$2", ":limit"))


class CommitLog(Protocol):
    """What a dialect needs of the store it commits for."""

    @property
    def applied_revision(self) -> int:
        """The newest revision the watch cache holds."""
        ...

    def request_poll(self) -> None:
        """Read the event log now instead of at the next poll."""
        ...


# etcd's default --max-request-bytes (1.5 MiB) is the most one write may store. Upstream stores
# protobuf and allows JSON bodies twice that size (3 MiB) for the difference; the JSON stored here
# gets the same allowance.
ETCD_MAX_REQUEST_BYTES = 1536 * 1024
MAX_OBJECT_BYTES = 2 * ETCD_MAX_REQUEST_BYTES


@dataclass(slots=True)
class WriteOp:
    """One write waiting for the group committer; ``future`` gets the stored object or the error."""

    type: str  # ADDED (create), MODIFIED (update) or DELETED (delete)
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    expected_revision: int = 0
    future: asyncio.Future[StoredObject] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def serialised(op: WriteOp, revision: int) -> bytes:
    """``op``'s object as stored at ``revision``."""
    op.obj["metadata"]["resourceVersion"] = str(revision)
    return orjson.dumps(op.obj)


def too_large(op: WriteOp, raw: bytes) -> bool:
    """Whether storage refuses ``op`` (its object serialised, ``raw``) as larger than it takes;
    deletes never are. Checked on the bytes a commit sends, so that no write is serialised twice."""
    return len(raw) > MAX_OBJECT_BYTES and op.type != DELETED


@dataclass(slots=True)
class InDoubt:
    """A batch whose commit may or may not have taken place: each write with the revision and the
    bytes it has in the event log if it did, and the writes refused before anything was sent."""

    sent: list[tuple[WriteOp, int, bytes]]
    refused: list[tuple[WriteOp, StorageError]]
    # The database session the commit was sent on (Postgres: its backend's pid and start time),
    # which may still be running it.
    session: tuple[int, Any] | None = None


class CommitInDoubt(StorageUnavailable):
    """The connection was lost after a batch's commit may have reached the database: only the
    event log, read once the database answers again, tells whether it was stored."""

    def __init__(self, doubt: InDoubt, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}".rstrip(": "))
        self.doubt = doubt
        self.cause = cause


@dataclass(slots=True)
class GroupCommit:
    """One batch of writes, committed: the revision before and after, and each write's outcome."""

    base: int
    revision: int
    committed: list[tuple[WriteOp, Event]]
    failed: list[tuple[WriteOp, StorageError]]


class Dialect(ABC):
    """One database's way of connecting, committing a batch and learning of other writers."""

    backend: ClassVar[str]  # SQLAlchemy's name for the database
    # URL schemes people type for this database, and the one naming the async driver this server uses.
    schemes: ClassVar[tuple[str, ...]]
    driver_scheme: ClassVar[str]
    # Appended to a SELECT of the revision row in a transaction that must hold it until commit.
    revision_row_lock: ClassVar[str] = ""
    # Whether the server creates and migrates the schema itself when it starts.
    migrates_on_start: ClassVar[bool] = False

    def __init__(self, engine: AsyncEngine, commit_log: CommitLog) -> None:
        self.engine = engine
        self.commit_log = commit_log

    @staticmethod
    @abstractmethod
    def create_engine(url: URL, pool_size: int) -> AsyncEngine:
        """An engine for ``url`` (already normalised to this server's async driver)."""

    @staticmethod
    @abstractmethod
    def prepare_location(url: URL) -> None:
        """Make sure the database at ``url`` can be created."""

    @staticmethod
    @abstractmethod
    def check_writable(url: URL) -> None:
        """Raise when the database at ``url`` refuses writes, where that can be checked before serving."""

    @classmethod
    def explain(cls, url: URL, exc: BaseException) -> str:
        """What is wrong with the database at ``url``, given the error preparing it raised."""
        return f"the database cannot be used: {cls.interpret(exc) or exc}"

    @abstractmethod
    async def begin_snapshot(self, conn: AsyncConnection) -> None:
        """Make the reads that follow on ``conn`` see one snapshot."""

    @abstractmethod
    async def start(self, revision: int) -> None:
        """Begin following other writers; ``revision`` is the snapshot the cache was loaded at."""

    @abstractmethod
    async def commit(self, batch: list[WriteOp]) -> GroupCommit:
        """Commit ``batch`` in one transaction; a write whose precondition fails is left out."""

    @abstractmethod
    async def current_revision(self) -> int:
        """The newest committed revision."""

    async def events_after(self, after: int, limit: int) -> Sequence[Sequence[Any]]:
        """Up to ``limit`` events of the log after revision ``after``, oldest first, each as
        (revision, resource, namespace, name, type, data)."""
        async with self.engine.connect() as conn:
            return (await conn.execute(_EVENTS_AFTER, {"after": after, "limit": limit})).all()

    async def settle(self, conn: AsyncConnection, doubt: InDoubt) -> bool:
        """Make sure the session that sent ``doubt``'s commit no longer runs (on ``conn``, another
        connection), so that the event log shows its outcome for good; False while it still runs."""
        return True

    @abstractmethod
    async def reset_writer(self) -> None:
        """Drop the writer's connection after a failed commit; the next commit opens a new one."""

    @abstractmethod
    async def close(self) -> None:
        """Release every connection this dialect holds."""

    @abstractmethod
    async def reconnected(self) -> None:
        """The database answers again after an outage: re-establish what only start() set up."""

    @classmethod
    def interpret(cls, exc: BaseException) -> StorageError | None:
        """The storage error a driver exception (or one it wraps) stands for; None when it is
        not the database's doing."""
        for cause in _causes(exc):
            if isinstance(cause, StorageError):
                return cause
            error = cls.interpret_cause(cause)
            if error is not None:
                return error
        return None

    @classmethod
    @abstractmethod
    def interpret_cause(cls, cause: BaseException) -> StorageError | None:
        """The storage error this one driver exception stands for, if any."""


class PostgresDialect(Dialect):
    backend = "postgresql"
    schemes = ("postgres", "postgresql")
    driver_scheme = "postgresql+asyncpg"
    revision_row_lock = " FOR UPDATE"

    def __init__(self, engine: AsyncEngine, commit_log: CommitLog) -> None:
        super().__init__(engine, commit_log)
        self._writer: Any = None  # the pooled connection dra_commit runs on
        self._listener: Any = None
        self._revision_reader: Any = None
        self._log_reader: Any = None  # the event log is read on this one (other replicas' writes)
        self._base = 0  # the current revision as this writer last saw it (dra_commit's guess)
        # The newest revision another replica's notification named: with several replicas writing,
        # the writer's own last revision is a stale guess more often than not.
        self._notified = 0
        # Commits whose first guess of the current revision was stale (another replica had moved it):
        # each costs dra_commit a second call under the revision row's lock.
        self.retried_commits = 0
        self._own_committed = 0  # newest revision this process's writer committed (or is committing)
        self._writer_session: tuple[int, Any] | None = None  # the writer's backend: pid, start time

    @staticmethod
    def create_engine(url: URL, pool_size: int) -> AsyncEngine:
        return create_async_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=False,
            connect_args={"server_settings": {"application_name": "dra-apiserver"}},
        )

    @staticmethod
    def prepare_location(url: URL) -> None:
        pass  # the database lives on its server

    @staticmethod
    def check_writable(url: URL) -> None:
        pass  # a read-only replica refuses each write with its own error

    async def begin_snapshot(self, conn: AsyncConnection) -> None:
        await conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))

    async def start(self, revision: int) -> None:
        self._base = revision  # dra_commit's first guess (a stale one costs one retry)
        await self._listen()

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        # Our own commits notify us too; only a revision the cache lacks needs a poll.
        # The notification of our own commit can arrive before the writer has applied it to the
        # cache; the writer catches up on anything older itself (see Store._finish_commit).
        if payload.isdigit():
            self._notified = max(self._notified, int(payload))
        if not payload.isdigit() or int(payload) > max(self.commit_log.applied_revision, self._own_committed):
            self.commit_log.request_poll()

    async def _listen(self) -> None:
        """LISTEN for revisions other replicas commit, so their writes reach watchers at once."""
        raw = await self.engine.raw_connection()
        try:
            driver: Any = raw.driver_connection  # asyncpg connection
            await driver.add_listener(NOTIFY_CHANNEL, self._on_notify)
            self._listener = raw
        except Exception:  # pragma: no cover - fall back to polling only
            log.exception("LISTEN failed; other replicas' writes arrive by polling only")
            raw.close()

    async def _writer_connection(self) -> Any:
        if self._writer is None:
            self._writer = await self.engine.raw_connection()
            self._writer_session = None
        driver = self._writer.driver_connection
        if self._writer_session is None:
            # Which backend runs our commits: after a lost connection it may still be running one.
            row = await driver.fetchrow(_BACKEND)
            self._writer_session = (int(row[0]), row[1])
        return driver

    async def commit(self, batch: list[WriteOp]) -> GroupCommit:
        """One group commit in one round trip (the ``dra_commit`` function, migration 0002).

        Every write gets a tentative revision up front; a write whose precondition fails
        just leaves its number unused (revisions stay ordered, not necessarily dense).
        """
        now = time.time()
        own_before = self._own_committed
        for attempt in range(2):
            kept = self._writer is not None
            conn = await self._writer_connection()
            try:
                return await self._transaction(conn, batch, now)
            except BaseException as exc:
                # Nothing of ours committed: a notification up to that revision is another replica's.
                self._own_committed = own_before
                self.commit_log.request_poll()
                if attempt == 0 and kept and _refused_before_sending(exc):
                    await self.reset_writer()  # kept from before an outage: once more on a new one
                    continue
                raise
        raise AssertionError("unreachable")

    async def _transaction(self, conn: Any, batch: list[WriteOp], now: float) -> GroupCommit:
        """The outcome of one batch, in one ``dra_commit`` call.

        Objects are serialised with the revisions they get if the current revision is still the
        one this writer last saw. When another replica moved it, nothing was written; the batch
        is then committed inside a transaction that first locks the revision row, so the guess
        is exact and a writer always gets through however busy the other replicas are.
        """
        # The newest revision known committed, ours or another replica's (a guess: a stale one costs a second call).
        base = max(self._base, self._notified)
        # Serialised for the revisions guessed; a write larger than storage takes is refused here
        # and leaves no revision behind.
        first: list[bytes] = []
        kept: list[WriteOp] = []
        refused: list[tuple[WriteOp, StorageError]] = []
        for op in batch:
            raw = serialised(op, base + len(kept) + 1)
            if too_large(op, raw):
                refused.append((op, RequestTooLarge()))
            else:
                kept.append(op)
                first.append(raw)
        if not kept:
            return GroupCommit(base, base, [], refused)
        batch = kept
        keys = [(op.type, op.resource, op.namespace, op.name, op.expected_revision) for op in batch]
        own_before = self._own_committed
        # The revisions and bytes of the attempt under way, for when its outcome is lost.
        sent: tuple[int, list[bytes]] | None = None

        async def attempt(base: int, raws: list[bytes] | None = None) -> tuple[list[int], list[bytes]]:
            """dra_commit's answer, and the objects as serialised for revisions from ``base``."""
            nonlocal sent
            if raws is None:
                raws = [serialised(op, base + index + 1) for index, op in enumerate(batch)]
            # Our own notification may arrive before the result: don't poll the log for it.
            self._own_committed = max(own_before, base + len(batch))
            sent = (base, raws)
            result: list[int] = await conn.fetchval(_COMMIT, base, *packed(keys, raws), now, NOTIFY_CHANNEL)
            return result, raws

        try:
            result, raws = await attempt(base, first)
            attempted_twice = result[0] != base
            if attempted_twice:
                self.retried_commits += 1
                async with conn.transaction():
                    base = int(await conn.fetchval("SELECT current_revision FROM revision_state WHERE id = 1 FOR UPDATE"))
                    result, raws = await attempt(base)
        except Exception as exc:
            if sent is not None and self.outcome_lost(exc):
                at, raws = sent
                sent_writes = [(op, at + i + 1, raw) for i, (op, raw) in enumerate(zip(batch, raws, strict=True))]
                raise CommitInDoubt(InDoubt(sent_writes, refused, self._writer_session), exc) from exc
            raise
        if result[0] != base:
            raise RuntimeError(f"revision moved under the lock ({base} -> {result[0]})")
        succeeded = {revision - base - 1 for revision in result[1:]}
        revision = result[-1] if len(result) > 1 else base
        self._base = revision
        self._own_committed = max(own_before, revision) if succeeded else own_before
        if revision < base + len(batch) or attempted_twice:
            # Another replica's revisions may lie in the range taken for ours while we waited, and
            # its notification been ignored as ours: read the log rather than wait for the timer.
            self.commit_log.request_poll()
        committed = [
            (batch[i], Event(base + i + 1, batch[i].type, batch[i].resource, batch[i].namespace, batch[i].name, StoredObject(batch[i].obj, base + i + 1, raws[i])))
            for i in sorted(succeeded)
        ]
        failed = refused + [(op, KeyExists() if op.type == ADDED else RevisionMismatch()) for i, op in enumerate(batch) if i not in succeeded]
        return GroupCommit(base, revision, committed, failed)

    @classmethod
    def outcome_lost(cls, exc: BaseException) -> bool:
        """Whether ``exc``, raised by a call that commits, leaves its outcome unknown: the
        connection went away after the call may have been sent (not when asyncpg refused to send)."""
        return isinstance(cls.interpret(exc), StorageUnavailable) and not any(_refused_before_sending(cause) for cause in _causes(exc))

    async def current_revision(self) -> int:
        # A dedicated driver connection: this query runs for every consistent read round.
        return int(await self._read("_revision_reader", "fetchval", "SELECT current_revision FROM revision_state WHERE id = 1"))

    async def events_after(self, after: int, limit: int) -> Sequence[Sequence[Any]]:
        # A dedicated driver connection and one prepared statement, no transaction: with several
        # replicas every commit of another one is read here, and SQLAlchemy's connection, BEGIN
        # and ROLLBACK around the SELECT cost the reading replica a third of a write's CPU per event.
        rows: Sequence[Sequence[Any]] = await self._read("_log_reader", "fetch", EVENTS_AFTER, after, limit)
        return rows

    async def _read(self, slot: str, method: str, query: str, *args: Any) -> Any:
        """``query`` on the driver connection kept in attribute ``slot`` (taken from the pool when missing)."""
        for attempt in range(2):
            kept = getattr(self, slot) is not None
            if not kept:
                setattr(self, slot, await self.engine.raw_connection())
            try:
                driver: Any = getattr(self, slot).driver_connection
                return await getattr(driver, method)(query, *args)
            except Exception as exc:
                # Invalidated, not closed: closing would give a dead connection back to the pool,
                # and the next read would take it again.
                with contextlib.suppress(Exception):
                    getattr(self, slot).invalidate()
                setattr(self, slot, None)
                if attempt == 0 and kept and _refused_before_sending(exc):
                    continue  # kept from before an outage: once more on a new one
                raise
        raise AssertionError("unreachable")

    async def settle(self, conn: AsyncConnection, doubt: InDoubt) -> bool:
        # A backend that lost its client still finishes the statement it is running (and commits
        # it): it is stopped, and the log read only once it is gone. A server restart ended it already.
        if doubt.session is None:
            return True
        pid, started = doubt.session
        params = {"pid": pid, "started": started}
        await conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = :pid AND backend_start = :started"), params)
        await conn.rollback()  # a transaction sees one snapshot of pg_stat_activity: a new one is read
        running = (await conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid AND backend_start = :started"), params)).scalar_one()
        await conn.rollback()
        return int(running) == 0

    async def reset_writer(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.invalidate()
            self._writer = None
        self._writer_session = None

    async def reconnected(self) -> None:
        # The LISTEN connection died with the server; without it other replicas' writes would
        # arrive only at the next poll.
        listener = self._listener
        if listener is not None and not listener.driver_connection.is_closed():
            return
        if listener is not None:
            with contextlib.suppress(Exception):
                listener.invalidate()
            self._listener = None
        await self._listen()

    @classmethod
    def interpret_cause(cls, cause: BaseException) -> StorageError | None:
        import asyncpg

        unreachable = isinstance(
            cause,
            OSError  # refused, reset, timed out connecting
            | asyncpg.PostgresConnectionError  # class 08: the connection is gone
            | asyncpg.CannotConnectNowError  # starting up or shutting down
            | asyncpg.AdminShutdownError
            | asyncpg.CrashShutdownError
            | asyncpg.TooManyConnectionsError,
        ) or (isinstance(cause, asyncpg.InterfaceError) and "closed" in str(cause))
        # A connection the server hung up on mid-operation (its goodbye as it shut down) refuses the
        # next statement; a request that met one in the first moments of an outage was a 500
        # InternalError instead of an unreachable database's ServerTimeout.
        if unreachable or _refused_before_sending(cause):
            return StorageUnavailable(f"{type(cause).__name__}: {cause}".rstrip(": "))
        if isinstance(cause, asyncpg.DiskFullError | asyncpg.ReadOnlySQLTransactionError):
            return StorageFailure(str(cause))
        return None

    async def close(self) -> None:
        for raw in (self._listener, self._revision_reader, self._log_reader, self._writer):
            if raw is not None:
                with contextlib.suppress(Exception):
                    raw.close()
        self._listener = self._revision_reader = self._log_reader = self._writer = None


class SQLiteDialect(Dialect):
    backend = "sqlite"
    schemes = ("sqlite",)
    driver_scheme = "sqlite+aiosqlite"
    migrates_on_start = True

    def __init__(self, engine: AsyncEngine, commit_log: CommitLog) -> None:
        super().__init__(engine, commit_log)
        self._writer: AsyncConnection | None = None

    @staticmethod
    def create_engine(url: URL, pool_size: int) -> AsyncEngine:
        engine = create_async_engine(url, connect_args={"timeout": 30})
        _configure_sqlite(engine)
        return engine

    @staticmethod
    def prepare_location(url: URL) -> None:
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def check_writable(url: URL) -> None:
        if not url.database or url.database == ":memory:":
            return
        # A read-only file still opens and reads; only a write (rolled back here) tells.
        conn = sqlite3.connect(url.database, isolation_level=None, timeout=30)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("UPDATE revision_state SET current_revision = current_revision WHERE id = 1")
            finally:
                conn.execute("ROLLBACK")
        finally:
            conn.close()

    @classmethod
    def explain(cls, url: URL, exc: BaseException) -> str:
        path = url.database
        reason = str(cls.interpret(exc) or exc)
        name = next((code for cause in _causes(exc) if (code := getattr(cause, "sqlite_errorname", ""))), "")
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return f"the database file {path} is damaged or is not a SQLite database ({reason}); move it away to start with an empty database, or restore it from a backup"
        if name.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_CANTOPEN")):
            return f"the database file {path} cannot be written ({reason}); the API server must be able to write the file and its directory"
        if name.startswith("SQLITE_FULL"):
            return f"the disk holding the database file {path} is full ({reason}); free some space"
        return f"the database file {path} cannot be used: {reason}"

    async def begin_snapshot(self, conn: AsyncConnection) -> None:
        pass  # a read transaction sees one snapshot already

    async def start(self, revision: int) -> None:
        pass  # no other process writes: nothing to follow

    async def _writer_connection(self) -> AsyncConnection:
        if self._writer is None or self._writer.closed:
            self._writer = await for_writing(await self.engine.connect())
        return self._writer

    async def commit(self, batch: list[WriteOp]) -> GroupCommit:
        conn = await self._writer_connection()
        now = time.time()
        committed: list[tuple[WriteOp, Event]] = []
        failed: list[tuple[WriteOp, StorageError]] = []
        transaction = await conn.begin()
        try:
            base = int((await conn.execute(text("SELECT current_revision FROM revision_state WHERE id = 1"))).scalar_one())
            revision = base
            for op in batch:
                candidate = revision + 1
                raw = serialised(op, candidate)
                if too_large(op, raw):
                    failed.append((op, RequestTooLarge()))
                    continue
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
        except BaseException:
            with contextlib.suppress(Exception):
                await transaction.rollback()
            raise
        try:
            await transaction.commit()
        except Exception as exc:
            if committed:
                # SQLite rolls back a COMMIT that failed, or leaves it to the next attempt (busy):
                # the event log tells which, once the file answers again.
                raise CommitInDoubt(InDoubt([(op, e.revision, e.obj.raw) for op, e in committed], failed), exc) from exc
            raise
        return GroupCommit(base, revision, committed, failed)

    async def current_revision(self) -> int:
        # SQLite serves one server process (its writes go through this process's writer,
        # which applies them to the cache before answering), so the cache is current.
        return self.commit_log.applied_revision

    async def reset_writer(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.close()
        self._writer = None

    async def reconnected(self) -> None:
        pass  # every connection is opened on demand

    async def close(self) -> None:
        await self.reset_writer()

    @classmethod
    def interpret_cause(cls, cause: BaseException) -> StorageError | None:
        # Result codes, not messages: SQLITE_IOERR_WRITE and the like share their primary's name prefix.
        name = getattr(cause, "sqlite_errorname", "")
        if name.startswith(_SQLITE_UNREACHABLE):
            return StorageUnavailable(f"{cause} ({name})")
        if name.startswith(_SQLITE_REFUSED):
            return StorageFailure(f"{cause} ({name})")
        return None


# The database file cannot be opened or stays locked by another process past the busy timeout.
_SQLITE_UNREACHABLE = ("SQLITE_CANTOPEN", "SQLITE_BUSY", "SQLITE_LOCKED")
# A full disk, a read-only file or a damaged one: retrying does not help until someone acts.
_SQLITE_REFUSED = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_PERM")


def _refused_before_sending(exc: BaseException) -> bool:
    """asyncpg refused to use a connection before sending anything: it knew the connection
    closed, or the server's goodbye left it mid-operation. The statement may go again on
    another connection."""
    import asyncpg

    if isinstance(exc, asyncpg.InterfaceError):
        return "connection is closed" in str(exc)
    return isinstance(exc, asyncpg.InternalClientError) and "cannot switch to state" in str(exc)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: SQLAlchemy's ``orig`` and the chain of causes (drivers wrap each other)."""
    found: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending and len(found) < 16:
        current = pending.pop(0)
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        pending.extend([getattr(current, "orig", None), current.__cause__, current.__context__])
    return found


# The execution option that marks a connection whose transactions write. An option of the
# connection, not ``Connection.info``: that belongs to the pooled DBAPI connection and outlived
# the compaction that set it, so the reads that later took the connection began write
# transactions and waited behind every write (up to the busy timeout).
_WRITES = "dra_writes"


async def for_writing(conn: AsyncConnection) -> AsyncConnection:
    """``conn``, its transactions taking the write lock from the start (SQLite's BEGIN IMMEDIATE,
    so that writers queue at BEGIN instead of failing at their first write)."""
    return await conn.execution_options(**{_WRITES: True})


def _configure_sqlite(engine: AsyncEngine) -> None:
    """WAL for concurrent readers; BEGIN IMMEDIATE so writers serialise at the start."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITES) else "BEGIN")


DIALECTS: tuple[type[Dialect], ...] = (PostgresDialect, SQLiteDialect)


def with_driver(url: str) -> str:
    """``url`` with its plain scheme (``postgres://``, ``sqlite://``...) naming the driver this server uses."""
    scheme, separator, rest = url.partition("://")
    if separator:
        for dialect in DIALECTS:
            if scheme in dialect.schemes:
                return f"{dialect.driver_scheme}://{rest}"
    return url


def dialect_for(backend: str) -> type[Dialect]:
    """The dialect of a database SQLAlchemy names ``backend``."""
    for dialect in DIALECTS:
        if dialect.backend == backend:
            return dialect
    raise ValueError(f"unsupported database {backend!r}: use a postgresql:// or sqlite:// URL")


def packed(keys: list[tuple[str, str, str, str, int]], raws: list[bytes]) -> tuple[str, bytes]:
    """A batch as ``_COMMIT`` takes it: each write's (type, resource, namespace, name, expected
    revision, offset and length of its object) in one JSON text, and the objects in one buffer.

    Two parameters instead of seven arrays: asyncpg checks each element of an array parameter
    against three abstract base classes, a Python call each, which cost more than the rest of
    the call (3% of a write's instructions). Lengths rather than a separator, so that no byte
    of an object needs to be ruled out.
    """
    offset = 1  # Postgres counts bytes from 1
    rows: list[tuple[str, str, str, str, int, int, int]] = []
    for (kind, resource, namespace, name, expected), raw in zip(keys, raws, strict=True):
        rows.append((kind, resource, namespace, name, expected, offset, len(raw)))
        offset += len(raw)
    return orjson.dumps(rows).decode(), b"".join(raws)


_BACKEND = "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
# One group commit per call (migration 0002): [base, succeeded revisions...] or [current] to retry.
# The batch comes packed (see ``packed``) and is unpacked into dra_commit's arrays here, in the
# order it was sent.
_COMMIT = """SELECT dra_commit($1, w.kinds, w.resources, w.namespaces, w.names, w.datas, w.expected, $4, $5) FROM (
    SELECT array_agg(e->>0 ORDER BY i) AS kinds, array_agg(e->>1 ORDER BY i) AS resources,
        array_agg(e->>2 ORDER BY i) AS namespaces, array_agg(e->>3 ORDER BY i) AS names,
        array_agg((e->>4)::bigint ORDER BY i) AS expected,
        array_agg(convert_from(substring($3::bytea FROM (e->>5)::int FOR (e->>6)::int), 'UTF8') ORDER BY i) AS datas
    FROM json_array_elements($2::json) WITH ORDINALITY AS b(e, i)
) AS w"""
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
