"""The one storage interface the REST layer talks to: get, list, watch and write.

Reads are served from the watch cache. Only here is it decided how a read's
resourceVersion is honoured (wait for the cache to reach it, or to reach the newest
revision in the database), whether a watch replays from the cache's history or from the
event log, and when neither reaches back far enough. Writes go to the store's group commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from app.storage.cache import ADDED, DELETED, Event, StoredObject, Watcher
from app.storage.dialects import WriteOp
from app.storage.errors import ContinueExpired, ResourceVersionTooLarge, RevisionCompacted
from app.storage.store import Store
from kube.objects import Obj
from kube.tasks import wait_for

# Selectors read what the cache extracted from each version (name, namespace, labels, fields).
Predicate = Callable[[StoredObject], bool]
# (event type, object) pairs; a BOOKMARK's object is a plain dict.
WatchBatch = list[tuple[str, StoredObject | Obj]]

WAIT_FOR_REVISION_SECONDS = 3.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(slots=True)
class ListResult:
    items: list[StoredObject]
    revision: int  # the revision the items are consistent with
    continue_after: str = ""  # "namespace/name" of the last item, when more items follow
    remaining: int | None = None  # how many follow, when known without evaluating the predicate


class Storage:
    """Objects by resource, namespace and name, at revisions of one global order."""

    def __init__(self, store: Store, *, bookmark_interval: float = 60.0) -> None:
        self._store = store
        self._cache = store.cache
        self.bookmark_interval = bookmark_interval

    # ---- lifecycle and state -------------------------------------------------------

    async def start(self) -> None:
        await self._store.start()

    async def stop(self) -> None:
        await self._store.stop()
        self._cache.close_all_watchers()

    def end_watches(self) -> None:
        """End every open watch now, and each one opened after (the server is shutting down: its
        watch streams finish cleanly and clients re-watch elsewhere, as from any apiserver that stops)."""
        self._cache.close_all_watchers()

    @property
    def ready(self) -> bool:
        return self._store.ready

    async def ping(self) -> None:
        """Ask the database for the current revision: StorageUnavailable when it does not answer."""
        await self._store.ping()

    def stopped_loop(self) -> str | None:
        """A background storage loop that ended (nothing restarts it), None while all run."""
        return self._store.stopped_loop()

    @property
    def unavailable_since(self) -> float | None:
        """Since when (monotonic seconds) the database has not answered, None while it answers."""
        return self._store.unavailable_since

    @property
    def revision(self) -> int:
        """The newest revision this server has applied (what a resourceVersion="0" read sees)."""
        return self._cache.revision

    @property
    def compacted_revision(self) -> int:
        return self._store.compacted_revision

    @property
    def commits(self) -> int:
        return self._store.commits

    def count(self, resource: str) -> int:
        return self._cache.count(resource)

    def field_names(self, resource: str) -> tuple[str, ...]:
        """The selectable fields the cache extracts from each version of ``resource``, in the
        order of ``StoredObject.fields``."""
        return self._cache.field_names(resource)

    def history_capacity(self, resource: str) -> int:
        """The configured history size of ``resource`` (--default-watch-cache-size, --watch-cache-sizes)."""
        return self._cache.capacity(resource)

    def memory(self, resource: str) -> tuple[int, int, int, int]:
        """What the cache holds for ``resource``: objects, their serialised bytes, history
        events, and the bytes of versions only the history keeps."""
        cache = self._cache
        return cache.count(resource), cache.size_bytes(resource), cache.history_length(resource), cache.history_held_bytes(resource)

    # ---- reads ---------------------------------------------------------------------

    async def _wait_for(self, revision: int | None) -> None:
        """Honour a read's resourceVersion: None = the newest in the database, 0 = any, N = not older than N."""
        target = await self._store.database_revision() if revision is None else revision
        if target > self._cache.revision:
            self._store.request_poll()
            if not await self._cache.wait_for_revision(target, WAIT_FOR_REVISION_SECONDS):
                raise ResourceVersionTooLarge(revision, self._cache.revision)

    def cached(self, resource: str, namespace: str, name: str) -> StoredObject | None:
        """The object as this server holds it now, without waiting (a resourceVersion="0" get)."""
        return self._cache.get(resource, namespace, name)

    def cached_all(self, resource: str, namespace: str | None = None) -> list[StoredObject]:
        """Every object of ``resource`` (in ``namespace``, unless None) as this server holds it now, without waiting."""
        return self._cache.items(resource, namespace)

    async def get(self, resource: str, namespace: str, name: str, revision: int | None = None) -> StoredObject | None:
        """One object, not older than ``revision`` (None: the newest; 0: any)."""
        await self._wait_for(revision)
        return self._cache.get(resource, namespace, name)

    async def list(
        self,
        resource: str,
        namespace: str | None,
        *,
        revision: int | None = None,
        exact: bool = False,
        continue_from: tuple[int, str] | None = None,
        predicate: Predicate | None = None,
        limit: int = 0,
    ) -> ListResult:
        """Objects sorted by namespace and name, in all namespaces when ``namespace`` is None.

        ``revision`` is not-older-than unless ``exact``; ``continue_from`` (the first page's
        revision and the last key sent) serves the next page at that page's revision.
        """
        start_key = ""
        if continue_from is not None:
            at, start_key = continue_from
            rows: list[StoredObject] | None
            if at < 0:
                # The token an expired one's 410 carries: the rest at the newest revision.
                await self._wait_for(None)
                at = self._cache.revision
                rows = self._cache.items(resource, namespace)
            else:
                # As etcd: a revision the log no longer holds is gone even where memory still has it.
                rows = self._cache.items_at(resource, namespace, at) if at >= self._store.compacted_revision else None
            if rows is None:
                raise ContinueExpired(at)
        elif exact:
            at = revision or 0
            await self._wait_for(revision)
            if at < self._store.compacted_revision:
                raise RevisionCompacted(at, self._store.compacted_revision)
            rows = self._cache.items_at(resource, namespace, at)
            if rows is None:
                raise RevisionCompacted(at, self._cache.history_floor(resource))
        else:
            await self._wait_for(revision)
            at = self._cache.revision
            rows = self._cache.items(resource, namespace)
        result = ListResult([], at)
        index = 0
        if start_key:
            # Keys are "namespace/name"; resume after the last one sent. Compare (namespace, name) as the
            # rows are sorted: as strings, "a/x" sorts after "a-b/x" and the list would start over forever.
            start = tuple(start_key.split("/", 1))
            while index < len(rows) and (rows[index].namespace, rows[index].name) <= start:
                index += 1
        if not start_key and predicate is None and not limit:
            result.items = rows
            return result
        items = result.items
        for position in range(index, len(rows)):
            stored = rows[position]
            if predicate is not None and not predicate(stored):
                continue
            if limit and len(items) >= limit:
                last = items[-1]
                result.continue_after = f"{last.namespace}/{last.name}"
                if predicate is None:
                    result.remaining = len(rows) - position
                break
            items.append(stored)
        return result

    # ---- watch ---------------------------------------------------------------------

    async def watch(
        self,
        resource: str,
        namespace: str | None,
        *,
        kind: str,
        api_version: str,
        revision: int | None = None,
        send_initial_events: bool | None = None,
        predicate: Predicate | None = None,
        allow_bookmarks: bool = False,
        timeout: float,
    ) -> AsyncIterator[WatchBatch]:
        """Changes after ``revision``, as batches of everything ready at each wake-up.

        With initial events (asked for, or by default when ``revision`` is None or 0) the
        current objects come first as ADDED. Otherwise the changes since ``revision`` are
        replayed: from the cache's history when it reaches back that far, else from the
        event log; RevisionCompacted when the log no longer does either. ``kind`` and
        ``api_version`` name the BOOKMARK objects; the stream ends after ``timeout`` seconds.
        """
        send_initial = send_initial_events
        if send_initial is None:
            # Legacy semantics: no resourceVersion or "0" means "current state first".
            send_initial = revision is None or revision == 0
        if send_initial and revision != 0:
            await self._wait_for(revision)
        watcher = Watcher(resource, namespace, predicate)
        replay: WatchBatch = []
        if send_initial:
            # Register before snapshotting so nothing falls between the two (no await in between).
            self._cache.add_watcher(watcher)
            start = self._cache.revision
            watcher.sent_up_to = start
            for stored in self._cache.items(resource, namespace):
                if predicate is None or predicate(stored):
                    replay.append((ADDED, stored))
        else:
            assert revision is not None
            if revision < self._store.compacted_revision:
                raise RevisionCompacted(revision, self._store.compacted_revision)
            self._cache.add_watcher(watcher)
            # The client has seen everything up to ``revision``. A replica that has not applied it
            # yet (written through another replica, or before this one restarted) starts the stream
            # there all the same and leaves out what it applies up to it, as upstream's cache
            # watcher does: no waiting, and nothing sent twice.
            start = max(self._cache.revision, revision)
            watcher.sent_up_to = start
            events: list[Event]
            if revision >= self._cache.history_floor(resource):
                events = self._cache.history_after(resource, revision)
            else:
                try:
                    # Events from the log carry no previous state; the filter sees the new one only.
                    events = await self._store.events_between(resource, revision, start)
                except BaseException:
                    self._cache.remove_watcher(watcher)
                    raise
                for event in events:
                    self._cache.index(event.resource, event.namespace, event.name, event.obj)
            for event in events:
                if event.revision > start:
                    break
                if namespace is not None and event.namespace != namespace:
                    continue
                translated = watcher.translate(event)
                if translated is not None:
                    replay.append((translated, event.obj))
        bookmark = _Bookmarks(kind, api_version)
        return self._stream(watcher, replay, start, bookmark, allow_bookmarks, timeout, initial_end=send_initial_events is True)

    async def _stream(
        self,
        watcher: Watcher,
        replay: WatchBatch,
        start: int,
        bookmark: _Bookmarks,
        allow_bookmarks: bool,
        timeout: float,
        initial_end: bool,
    ) -> AsyncIterator[WatchBatch]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last_revision = start
        try:
            first: WatchBatch = replay
            if initial_end:
                first.append(("BOOKMARK", bookmark.at(start, initial_end=True)))
            if first:
                yield first
            # An open watch keeps nothing of its initial state once it is sent.
            first = replay = []
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                if not watcher.pending and not watcher.closed:
                    now = loop.time()
                    if now >= deadline:
                        return
                    wait = deadline - now
                    if allow_bookmarks:
                        wait = min(wait, max(next_bookmark - now, 0))
                    with contextlib.suppress(TimeoutError):
                        await wait_for(watcher.wakeup.wait(), wait)
                batch: WatchBatch = list(watcher.take())
                if batch:
                    last_revision = max(last_revision, batch[-1][1].revision)  # type: ignore[union-attr]
                elif watcher.closed:
                    return
                if allow_bookmarks and loop.time() >= next_bookmark:
                    next_bookmark = loop.time() + self.bookmark_interval
                    batch.append(("BOOKMARK", bookmark.at(max(last_revision, self._cache.revision))))
                if batch:
                    yield batch
                    batch = []
                if watcher.closed and not watcher.pending:
                    return
                if loop.time() >= deadline:
                    return
        finally:
            self._cache.remove_watcher(watcher)

    def follow(self, resource: str, on_change: Callable[[bool, Obj], None]) -> None:
        """Call ``on_change(deleted, object)`` for every current object of ``resource`` and then
        for every change: in-memory indexes (authorization's) stay exactly as current as reads."""
        for stored in self._cache.items(resource, None):
            on_change(False, stored.obj)
        self._cache.add_follower(resource, lambda event: on_change(event.type == DELETED, event.obj.obj))

    # ---- writes --------------------------------------------------------------------

    async def write(self, op: WriteOp) -> StoredObject:
        """Create, update or delete as ``op`` says; KeyExists or RevisionMismatch when its precondition fails."""
        return await self._store.write(op)

    async def read_for_update(self, resource: str, namespace: str, name: str, fresh: bool) -> StoredObject | None:
        """The object a read-modify-write starts from: the cached one, or after a conflict
        (``fresh``) the one in the database, which the cache may not have caught up with."""
        if fresh:
            return await self._store.read_object(resource, namespace, name)
        return self._cache.get(resource, namespace, name)


@dataclass(frozen=True, slots=True)
class _Bookmarks:
    """BOOKMARK events of one watch: an object of the watched kind carrying only a resourceVersion."""

    kind: str
    api_version: str

    def at(self, revision: int, initial_end: bool = False) -> Obj:
        metadata: Obj = {"resourceVersion": str(revision)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": self.kind, "apiVersion": self.api_version, "metadata": metadata}
