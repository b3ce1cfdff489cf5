"""The storage facade in process, on SQLite and Postgres: resourceVersion semantics of get,
list and watch, replay from the watch cache or the event log, and write preconditions."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event

from app.storage import storage as storage_module
from app.storage.cache import ADDED, DELETED, MODIFIED, StoredObject, WatchCache
from app.storage.db import create_engine, run_migrations
from app.storage.dialects import WriteOp
from app.storage.errors import ContinueExpired, KeyExists, ResourceVersionTooLarge, RevisionCompacted, RevisionMismatch
from app.storage.storage import INITIAL_EVENTS_END, Storage
from app.storage.store import Store
from kube.tasks import wait_for
from tests.conftest import Databases

CLAIMS = "resourceclaims.resource.k8s.io"
KIND: dict[str, Any] = {"kind": "ResourceClaim", "api_version": "resource.k8s.io/v1"}


@pytest.fixture
def url(databases: Databases) -> str:
    """An empty, migrated database of the backend under test."""
    database = databases.new()
    run_migrations(database)
    return database


@pytest.fixture(autouse=True)
def short_revision_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of a revision that never comes gives up after a tenth of a second, not three."""
    monkeypatch.setattr(storage_module, "WAIT_FOR_REVISION_SECONDS", 0.1)


@contextlib.asynccontextmanager
async def running(url: str, *, history: int = 10_000, bookmark_interval: float = 60.0) -> AsyncIterator[tuple[Storage, Store]]:
    """A started Storage (and its Store, for compaction) on ``url``."""
    engine = create_engine(url)
    store = Store(engine, WatchCache(history, fresh_seconds=0), compaction_interval=0, compaction_window=0, compaction_min_retain=0)
    storage = Storage(store, bookmark_interval=bookmark_interval)
    await storage.start()
    try:
        yield storage, store
    finally:
        await storage.stop()
        await engine.dispose()


def claim(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {"metadata": metadata}


async def create(storage: Storage, name: str, namespace: str = "default", **labels: str) -> StoredObject:
    return await storage.write(WriteOp(ADDED, CLAIMS, namespace, name, claim(name, namespace, **labels)))


async def relabel(storage: Storage, current: StoredObject, **labels: str) -> StoredObject:
    obj = current.copy()
    obj["metadata"]["labels"] = labels
    meta = obj["metadata"]
    return await storage.write(WriteOp(MODIFIED, CLAIMS, meta["namespace"], meta["name"], obj, current.revision))


async def delete(storage: Storage, current: StoredObject) -> StoredObject:
    meta = current.obj["metadata"]
    return await storage.write(WriteOp(DELETED, CLAIMS, meta["namespace"], meta["name"], current.copy(), current.revision))


def names(items: list[StoredObject]) -> list[str]:
    return [f"{i.obj['metadata']['namespace']}/{i.obj['metadata']['name']}" for i in items]


async def watch_events(stream: AsyncIterator[list[tuple[str, Any]]], count: int) -> list[tuple[str, str, int]]:
    """(type, name, revision) of the first ``count`` events (fewer if the stream ends first)."""
    out: list[tuple[str, str, int]] = []
    async for batch in stream:
        for kind, item in batch:
            obj = item.obj if isinstance(item, StoredObject) else item
            out.append((kind, obj["metadata"].get("name", ""), int(obj["metadata"]["resourceVersion"])))
        if len(out) >= count:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return out


# ---- get ---------------------------------------------------------------------------


async def test_get_serves_the_newest_any_or_not_older_than_the_revision_asked_for(url: str) -> None:
    async with running(url) as (storage, _store):
        first = await create(storage, "a")
        second = await relabel(storage, first, v="2")
        for revision in (None, 0, first.revision, second.revision):
            got = await storage.get(CLAIMS, "default", "a", revision)
            assert got is not None and got.revision == second.revision
        assert await storage.get(CLAIMS, "default", "missing") is None
        cached = storage.cached(CLAIMS, "default", "a")
        assert cached is not None and (cached.revision, cached.obj) == (second.revision, second.obj)


async def test_a_revision_the_server_never_reaches_is_too_large(url: str) -> None:
    async with running(url) as (storage, _store):
        await create(storage, "a")
        ahead = storage.revision + 100
        with pytest.raises(ResourceVersionTooLarge) as raised:
            await storage.get(CLAIMS, "default", "a", ahead)
        assert (raised.value.requested, raised.value.current) == (ahead, storage.revision)
        with pytest.raises(ResourceVersionTooLarge):
            await storage.list(CLAIMS, None, revision=ahead)
        with pytest.raises(ResourceVersionTooLarge):
            await storage.watch(CLAIMS, None, **KIND, revision=ahead, send_initial_events=True, timeout=1)


async def test_a_consistent_read_sees_what_another_replica_committed(backend: str, url: str) -> None:
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    async with running(url) as (writer, _), running(url) as (reader, _):
        written = await create(writer, "a")
        got = await reader.get(CLAIMS, "default", "a")
        assert got is not None and got.revision == written.revision
        listed = await reader.list(CLAIMS, "default")
        assert listed.revision >= written.revision and names(listed.items) == ["default/a"]


async def test_a_replica_reads_another_replicas_writes_on_its_own_connection_and_guesses_the_next_revision(backend: str, url: str) -> None:
    """Several replicas on one Postgres: every commit of one is read from the log by the others, and
    each one's writer guesses the current revision for its next commit. Measured at 4,000 nodes'
    heartbeats on two replicas, a read through a SQLAlchemy connection (checkout, BEGIN, SELECT,
    ROLLBACK) cost a third of a write's CPU per event, and a guess from the writer's own last commit
    was stale nearly every time (a second call under the revision row's lock)."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    async with running(url) as (writer, _), running(url) as (reader, reader_store):
        checkouts: list[object] = []
        event.listen(reader_store.engine.sync_engine, "checkout", lambda *_: checkouts.append(None))
        written = []
        for i in range(5):
            written.append(await create(writer, f"w{i}"))
            deadline = time.monotonic() + 20
            while reader_store.cache.revision < written[-1].revision and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert reader_store.cache.revision >= written[-1].revision  # the notification brought it
        # Five reads of the log: on the dialect's own connection (taken from the pool once), not one each.
        assert len(checkouts) <= 1
        # The notification named the writer's revision: the reader's first commit guesses it.
        mine = await create(reader, "r")
        assert mine.revision > written[-1].revision
        assert reader_store.dialect.retried_commits == 0  # type: ignore[attr-defined]


# ---- list --------------------------------------------------------------------------


async def test_list_is_sorted_by_namespace_and_name_and_scoped_to_a_namespace(url: str) -> None:
    async with running(url) as (storage, _store):
        for namespace, name in [("b", "x"), ("a-b", "x"), ("a", "y"), ("a", "x")]:
            await create(storage, name, namespace)
        everything = await storage.list(CLAIMS, None)
        assert names(everything.items) == ["a/x", "a/y", "a-b/x", "b/x"]
        assert everything.revision == storage.revision and everything.continue_after == ""
        assert names((await storage.list(CLAIMS, "a")).items) == ["a/x", "a/y"]
        assert (await storage.list(CLAIMS, "none")).items == []


async def test_pages_continue_at_the_first_pages_revision(url: str) -> None:
    async with running(url) as (storage, _store):
        stored = {(namespace, name): await create(storage, name, namespace) for namespace, name in [("a", "x"), ("a", "y"), ("a-b", "x"), ("b", "x")]}
        page = await storage.list(CLAIMS, None, limit=2)
        assert names(page.items) == ["a/x", "a/y"]
        assert (page.continue_after, page.remaining) == ("a/y", 2)
        # Changes after the first page do not show in the next ones.
        await delete(storage, stored[("b", "x")])
        await create(storage, "z", "b")
        rest = await storage.list(CLAIMS, None, continue_from=(page.revision, page.continue_after), limit=2)
        assert names(rest.items) == ["a-b/x", "b/x"] and rest.revision == page.revision
        assert rest.continue_after == ""
        filtered = await storage.list(CLAIMS, None, limit=1, predicate=lambda stored: stored.name == "x")
        assert names(filtered.items) == ["a/x"] and filtered.continue_after == "a/x" and filtered.remaining is None


async def test_an_exact_list_shows_the_objects_as_they_were(url: str) -> None:
    async with running(url, history=3) as (storage, _store):
        a = await create(storage, "a")
        b = await create(storage, "b")
        before = storage.revision
        await relabel(storage, a, v="2")
        await delete(storage, b)
        await create(storage, "c")
        then = await storage.list(CLAIMS, "default", revision=before, exact=True)
        assert then.revision == before
        assert [(i.obj["metadata"]["name"], i.revision) for i in then.items] == [("a", a.revision), ("b", b.revision)]
        # The memory holds three events: the state before the first of them is beyond reach.
        with pytest.raises(RevisionCompacted) as raised:
            await storage.list(CLAIMS, "default", revision=a.revision, exact=True)
        assert str(raised.value) == f"too old resource version: {a.revision} ({before})"
        with pytest.raises(ContinueExpired):
            await storage.list(CLAIMS, "default", continue_from=(a.revision, "default/a"))


# ---- watch -------------------------------------------------------------------------


async def test_a_watch_without_revision_starts_with_the_current_objects(url: str) -> None:
    async with running(url) as (storage, _store):
        a = await create(storage, "a")
        await create(storage, "other", "elsewhere")
        stream = await storage.watch(CLAIMS, "default", **KIND, timeout=5)
        b = await create(storage, "b")
        await create(storage, "later", "elsewhere")
        assert await watch_events(stream, 2) == [(ADDED, "a", a.revision), (ADDED, "b", b.revision)]


async def test_initial_events_end_with_an_annotated_bookmark(url: str) -> None:
    async with running(url) as (storage, _store):
        a = await create(storage, "a")
        stream = await storage.watch(CLAIMS, None, **KIND, send_initial_events=True, allow_bookmarks=True, timeout=5)
        first = await anext(stream)
        await stream.aclose()  # type: ignore[attr-defined]
        assert [kind for kind, _ in first] == [ADDED, "BOOKMARK"]
        assert first[0][1].revision == a.revision  # type: ignore[union-attr]
        assert first[1][1] == {
            "kind": "ResourceClaim",
            "apiVersion": "resource.k8s.io/v1",
            "metadata": {"resourceVersion": str(a.revision), "annotations": {INITIAL_EVENTS_END: "true"}},
        }


async def test_bookmarks_carry_the_newest_revision(url: str) -> None:
    async with running(url, bookmark_interval=0.05) as (storage, _store):
        await create(storage, "a")
        stream = await storage.watch(CLAIMS, None, **KIND, revision=storage.revision, allow_bookmarks=True, timeout=5)
        await create(storage, "b", "elsewhere")
        events = await watch_events(stream, 2)
        assert ("BOOKMARK", "", storage.revision) in events


async def test_a_watch_ends_at_its_timeout_and_when_storage_stops(url: str) -> None:
    async with running(url) as (storage, _store):
        started = time.monotonic()
        assert await watch_events(await storage.watch(CLAIMS, None, **KIND, revision=storage.revision, timeout=0.2), 1) == []
        assert time.monotonic() - started < 2
        stream = await storage.watch(CLAIMS, None, **KIND, revision=storage.revision, timeout=30)
        pending = asyncio.ensure_future(watch_events(stream, 1))
        await asyncio.sleep(0.05)
        await storage.stop()
        assert await wait_for(pending, 2) == []


async def test_a_filtered_watch_sees_objects_enter_and_leave_the_selection(url: str) -> None:
    async with running(url) as (storage, _store):
        a = await create(storage, "a", app="demo")
        stream = await storage.watch(CLAIMS, None, **KIND, revision=a.revision, predicate=lambda stored: (stored.labels or {}).get("app") == "demo", timeout=5)
        out = await relabel(storage, a, app="other")
        back = await relabel(storage, out, app="demo")
        await create(storage, "b", app="other")
        gone = await delete(storage, back)
        assert await watch_events(stream, 3) == [(DELETED, "a", out.revision), (ADDED, "a", back.revision), (DELETED, "a", gone.revision)]


async def _changes(storage: Storage) -> tuple[int, list[tuple[str, str, int]]]:
    """Make five changes; the revision before them and the events they are."""
    since = storage.revision
    a = await create(storage, "a")
    b = await create(storage, "b")
    a2 = await relabel(storage, a, v="2")
    await create(storage, "c", "elsewhere")
    b_gone = await delete(storage, b)
    return since, [(ADDED, "a", a.revision), (ADDED, "b", b.revision), (MODIFIED, "a", a2.revision), (DELETED, "b", b_gone.revision)]


async def test_a_watch_from_a_revision_replays_from_the_cache_history(url: str) -> None:
    async with running(url) as (storage, _store):
        since, changes = await _changes(storage)
        stream = await storage.watch(CLAIMS, "default", **KIND, revision=since, timeout=5)
        later = await create(storage, "d")
        assert await watch_events(stream, 5) == [*changes, (ADDED, "d", later.revision)]


async def test_a_watch_older_than_the_cache_history_replays_from_the_log(url: str) -> None:
    async with running(url, history=2) as (storage, _store):
        since, changes = await _changes(storage)
        stream = await storage.watch(CLAIMS, "default", **KIND, revision=since, timeout=5)
        later = await create(storage, "d")
        assert await watch_events(stream, 5) == [*changes, (ADDED, "d", later.revision)]
    # A replica started after the changes has no history in memory at all.
    async with running(url) as (replica, _store):
        stream = await replica.watch(CLAIMS, "default", **KIND, revision=since, timeout=5)
        assert await watch_events(stream, 5) == [*changes, (ADDED, "d", later.revision)]


async def test_a_watch_from_a_revision_this_server_has_not_applied_starts_after_it(url: str) -> None:
    """The client saw the revision through another replica (or before a restart): this one sends
    what it applies after that revision only, at once, as upstream's cacheWatcher.process does."""
    async with running(url) as (storage, _store):
        await create(storage, "a")
        ahead = storage.revision + 2
        stream = await wait_for(storage.watch(CLAIMS, "default", **KIND, revision=ahead, timeout=5), 1)
        await create(storage, "b")
        await create(storage, "c")
        d = await create(storage, "d")
        assert d.revision == ahead + 1
        assert await watch_events(stream, 1) == [(ADDED, "d", d.revision)]


async def test_a_watch_older_than_compaction_is_refused_though_memory_still_holds_it(url: str) -> None:
    async with running(url) as (storage, store):
        since, _changes_made = await _changes(storage)
        await store.compact(now=time.time() + 3600)
        with pytest.raises(RevisionCompacted) as raised:
            await storage.watch(CLAIMS, None, **KIND, revision=since, timeout=5)
        assert raised.value.compacted == storage.revision
        # A watch from the compacted revision itself is served.
        assert await watch_events(await storage.watch(CLAIMS, None, **KIND, revision=storage.revision, timeout=0.2), 1) == []


async def test_a_watch_learns_of_compaction_another_replica_did(url: str) -> None:
    async with running(url, history=2) as (storage, _store):
        since, _changes_made = await _changes(storage)
        other = Store(create_engine(url), WatchCache(10), compaction_window=0, compaction_min_retain=0)
        try:
            compacted = await other.compact(now=time.time() + 3600)
        finally:
            await other.engine.dispose()
        assert storage.compacted_revision < compacted
        with pytest.raises(RevisionCompacted) as raised:
            await storage.watch(CLAIMS, None, **KIND, revision=since, timeout=5)
        assert (raised.value.requested, raised.value.compacted) == (since, compacted)
        assert storage.compacted_revision == compacted


# ---- writes ------------------------------------------------------------------------


async def test_writes_check_their_preconditions(url: str) -> None:
    async with running(url) as (storage, _store):
        a = await create(storage, "a")
        with pytest.raises(KeyExists):
            await create(storage, "a")
        updated = await relabel(storage, a, v="2")
        assert updated.revision > a.revision and updated.obj["metadata"]["resourceVersion"] == str(updated.revision)
        with pytest.raises(RevisionMismatch):
            await relabel(storage, a, v="stale")
        with pytest.raises(RevisionMismatch):
            await delete(storage, a)
        with pytest.raises(RevisionMismatch):
            await relabel(storage, StoredObject(claim("missing"), 1))
        cached = storage.cached(CLAIMS, "default", "a")
        assert cached is not None and cached.revision == updated.revision
        await delete(storage, updated)
        assert await storage.get(CLAIMS, "default", "a") is None


async def test_concurrent_writes_get_distinct_ordered_revisions(url: str) -> None:
    async with running(url) as (storage, _store):
        before = storage.revision
        written = await asyncio.gather(*(create(storage, f"c{i}") for i in range(20)))
        revisions = sorted(w.revision for w in written)
        assert len(set(revisions)) == 20 and revisions[0] > before and storage.revision == revisions[-1]
        assert len((await storage.list(CLAIMS, "default")).items) == 20


async def test_one_group_commit_stores_each_object_byte_for_byte(url: str) -> None:
    """Creates, updates and deletes of objects of different sizes, with multi-byte characters and
    control characters, committed together with a write whose precondition fails: the database's
    objects and event log hold exactly the bytes each write was answered with."""
    texts = ["ü" * 3, "日本語🚀" * 50, "\x1f\x00\n\"quoted\"", "", "x" * 5000]
    async with running(url) as (storage, store):
        old = [await create(storage, f"old-{i}") for i in range(3)]
        stale = await relabel(storage, old[2], v="newer")
        updated_objs = [o.copy() for o in old[:2]]
        for obj, text in zip(updated_objs, texts, strict=False):
            obj["metadata"]["annotations"] = {"text": text}
        commits = store.commits
        ops = [
            WriteOp(ADDED, CLAIMS, "default", f"new-{i}", {"metadata": {"name": f"new-{i}", "namespace": "default", "annotations": {"text": text}}})
            for i, text in enumerate(texts)
        ]
        ops.insert(2, WriteOp(MODIFIED, CLAIMS, "default", "old-0", updated_objs[0], old[0].revision))
        ops.insert(4, WriteOp(MODIFIED, CLAIMS, "default", "old-2", old[2].copy(), old[2].revision))  # stale: refused
        ops.append(WriteOp(DELETED, CLAIMS, "default", "old-1", updated_objs[1], old[1].revision))
        outcomes = await asyncio.gather(*(storage.write(op) for op in ops), return_exceptions=True)
        assert store.commits == commits + 1  # one batch
        assert isinstance(outcomes[4], RevisionMismatch)
        written = {(op.name, op.type): out for op, out in zip(ops, outcomes, strict=True) if isinstance(out, StoredObject)}
        assert len(written) == len(ops) - 1
        assert [out.obj["metadata"]["annotations"]["text"] for (name, _), out in written.items() if name.startswith("new-")] == texts
        events = await store.events_between(CLAIMS, stale.revision, storage.revision)
        assert {(e.name, e.type): e.obj.raw for e in events} == {key: out.raw for key, out in written.items()}
    async with running(url) as (reloaded, _):  # the objects table, as a restarted server loads it
        for (name, kind), out in written.items():
            stored = reloaded.cached(CLAIMS, "default", name)
            if kind == DELETED:
                assert stored is None
            else:
                assert stored is not None and (stored.revision, stored.raw) == (out.revision, out.raw)


async def test_a_read_for_update_after_a_conflict_reads_the_database(backend: str, url: str) -> None:
    async with running(url) as (storage, _store):
        a = await create(storage, "a")
        cached = await storage.read_for_update(CLAIMS, "default", "a", fresh=False)
        assert cached is not None and cached.revision == a.revision
        fresh = await storage.read_for_update(CLAIMS, "default", "a", fresh=True)
        assert fresh is not None and (fresh.revision, fresh.obj) == (a.revision, a.obj)
        assert await storage.read_for_update(CLAIMS, "default", "missing", fresh=True) is None
        if backend == "postgres":
            async with running(url) as (replica, _):
                theirs = await relabel(replica, a, v="replica")
            fresh = await storage.read_for_update(CLAIMS, "default", "a", fresh=True)
            assert fresh is not None and fresh.revision == theirs.revision


async def test_readiness_follows_start_and_stop(url: str) -> None:
    engine = create_engine(url)
    storage = Storage(Store(engine, WatchCache(10), compaction_interval=0))
    try:
        assert not storage.ready
        with pytest.raises(RuntimeError):
            await storage.write(WriteOp(ADDED, CLAIMS, "default", "a", claim("a")))
        await storage.start()
        assert storage.ready
        await storage.stop()
        assert not storage.ready
    finally:
        await engine.dispose()


async def test_storage_stops_when_asked_to_poll_the_log_as_it_stops(url: str) -> None:
    # A notification or a write asks for a poll just as the server shuts down: the poll loop
    # must end with the rest, or the server's stop waits for it forever.
    engine = create_engine(url)
    try:
        for yields in range(4):
            store = Store(engine, WatchCache(10), compaction_interval=0)
            storage = Storage(store)
            await storage.start()
            await asyncio.sleep(0.01)
            store.request_poll()
            for _ in range(yields):
                await asyncio.sleep(0)
            async with asyncio.timeout(10):
                await storage.stop()
            assert not storage.ready
    finally:
        await engine.dispose()
