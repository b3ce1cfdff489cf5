"""The watch cache: every object of every resource plus recent events, in memory.

It is fed only by committed events, in revision order (``apply``), from the local
writer or from the poller that reads other replicas' writes out of the event log.
GET, LIST and WATCH are served from here, as kube-apiserver's cacher does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

Obj = dict[str, Any]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class StoredObject:
    """One committed version of an object. Never mutated once built."""

    __slots__ = ("_line", "_line_kind", "_raw", "obj", "revision")

    def __init__(self, obj: Obj, revision: int, raw: bytes | None = None) -> None:
        self.obj = obj
        self.revision = revision
        self._raw = raw
        self._line: bytes | None = None
        self._line_kind = ""

    def watch_line(self, kind: str) -> bytes:
        """This object as one watch event line; built once and shared by every watcher."""
        if self._line is None or self._line_kind != kind:
            self._line = b'{"type":"' + kind.encode() + b'","object":' + self.raw + b"}\n"
            self._line_kind = kind
        return self._line

    @property
    def raw(self) -> bytes:
        """The object serialised once, shared by every response that sends it."""
        if self._raw is None:
            self._raw = orjson.dumps(self.obj)
        return self._raw

    def copy(self) -> Obj:
        """A private deep copy for a request to change."""
        return orjson.loads(self.raw)  # type: ignore[no-any-return]


@dataclass(slots=True)
class Event:
    revision: int
    type: str
    resource: str
    namespace: str
    name: str
    obj: StoredObject
    prev: StoredObject | None = None


@dataclass(eq=False)
class Watcher:
    """One open watch: a filter and a buffer the HTTP stream drains in batches."""

    resource: str
    namespace: str | None
    predicate: Callable[[Obj], bool] | None
    max_pending: int = 10_000
    pending: deque[tuple[str, StoredObject]] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    # Events at or below this revision were already sent (replayed); skip them live.
    sent_up_to: int = 0

    def offer(self, event: Event) -> None:
        if self.closed or event.revision <= self.sent_up_to:
            return
        if self.namespace is not None and event.namespace != self.namespace:
            return
        kind = self.translate(event)
        if kind is None:
            return
        if len(self.pending) >= self.max_pending:
            # A consumer this far behind is dropped; the client re-watches from its last revision.
            self.close()
            return
        self.pending.append((kind, event.obj))
        self.wakeup.set()

    def take(self) -> list[tuple[str, StoredObject]]:
        """Everything buffered so far (one write to the client instead of one per event)."""
        batch = list(self.pending)
        self.pending.clear()
        self.wakeup.clear()
        return batch

    def translate(self, event: Event) -> str | None:
        """The event type this watcher sees, given its filter (None = not at all)."""
        if self.predicate is None:
            return event.type
        now = self.predicate(event.obj.obj)
        if event.type == ADDED:
            return ADDED if now else None
        if event.type == DELETED:
            before = self.predicate(event.prev.obj) if event.prev is not None else now
            return DELETED if (before or now) else None
        before = self.predicate(event.prev.obj) if event.prev is not None else now
        if now and before:
            return MODIFIED
        if now:
            return ADDED
        if before:
            return DELETED
        return None

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()


class WatchCache:
    """Objects by resource, namespace and name; a bounded history of events; open watchers."""

    def __init__(self, history_size: int = 10_000) -> None:
        self.revision = 0
        self._objects: dict[str, dict[str, dict[str, StoredObject]]] = {}
        self._counts: dict[str, int] = {}
        self.history: deque[Event] = deque(maxlen=history_size)
        self._watchers: dict[str, set[Watcher]] = {}
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_ids = itertools.count()
        # resource -> callbacks told of each applied event, in order, before any watcher.
        self._followers: dict[str, list[Callable[[Event], None]]] = {}

    # ---- loading and applying ------------------------------------------------

    def load(self, revision: int, rows: list[tuple[str, str, str, int, str]]) -> None:
        """Replace the contents with a snapshot taken at ``revision``."""
        self._objects = {}
        self._counts = {}
        for resource, namespace, name, rev, data in rows:
            stored = StoredObject(orjson.loads(data), rev, data.encode())
            self._objects.setdefault(resource, {}).setdefault(namespace, {})[name] = stored
            self._counts[resource] = self._counts.get(resource, 0) + 1
        self.revision = revision
        self.history.clear()
        self._wake(revision)

    def apply(self, events: list[Event]) -> None:
        """Apply committed events in revision order and fan them out to watchers."""
        for event in events:
            if event.revision <= self.revision:
                continue
            by_ns = self._objects.setdefault(event.resource, {})
            names = by_ns.setdefault(event.namespace, {})
            event.prev = names.get(event.name)
            if event.type == DELETED:
                if names.pop(event.name, None) is not None:
                    self._counts[event.resource] -= 1
                if not names:
                    del by_ns[event.namespace]
            else:
                if event.prev is None:
                    self._counts[event.resource] = self._counts.get(event.resource, 0) + 1
                names[event.name] = event.obj
            self.revision = event.revision
            self.history.append(event)
            for follow in self._followers.get(event.resource, ()):
                follow(event)
            for watcher in tuple(self._watchers.get(event.resource, ())):
                watcher.offer(event)
        self._wake(self.revision)

    def _wake(self, revision: int) -> None:
        while self._waiters and self._waiters[0][0] <= revision:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)

    async def wait_for_revision(self, revision: int, timeout: float) -> bool:
        """Wait until the cache has applied ``revision``; False on timeout."""
        if self.revision >= revision:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (revision, next(self._waiter_ids), future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return False
        return True

    # ---- reads -----------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> StoredObject | None:
        return self._objects.get(resource, {}).get(namespace, {}).get(name)

    def count(self, resource: str) -> int:
        return self._counts.get(resource, 0)

    def items(self, resource: str, namespace: str | None) -> list[tuple[str, str, StoredObject]]:
        """Current objects as (namespace, name, object), sorted by key."""
        by_ns = self._objects.get(resource, {})
        if namespace is not None:
            names = by_ns.get(namespace, {})
            return [(namespace, n, names[n]) for n in sorted(names)]
        out: list[tuple[str, str, StoredObject]] = []
        for ns in sorted(by_ns):
            names = by_ns[ns]
            out.extend((ns, n, names[n]) for n in sorted(names))
        return out

    def namespaces_with(self, resource: str) -> Iterator[str]:
        return iter(tuple(self._objects.get(resource, {})))

    def oldest_history_revision(self) -> int:
        """Events with a revision above this minus one can be replayed from memory."""
        return self.history[0].revision if self.history else self.revision + 1

    def items_at(self, resource: str, namespace: str | None, revision: int) -> list[tuple[str, str, StoredObject]] | None:
        """The objects as they were at ``revision`` (None when history no longer reaches it)."""
        if revision >= self.revision:
            return self.items(resource, namespace)
        if revision < self.oldest_history_revision() - 1:
            return None
        state: dict[tuple[str, str], StoredObject | None] = {
            (ns, name): obj for ns, name, obj in self.items(resource, namespace)
        }
        for event in reversed(self.history):
            if event.revision <= revision:
                break
            if event.resource != resource or (namespace is not None and event.namespace != namespace):
                continue
            state[(event.namespace, event.name)] = event.prev
        return [(ns, name, obj) for (ns, name), obj in sorted(state.items()) if obj is not None]

    def history_after(self, resource: str, revision: int) -> list[Event]:
        """In-memory events of ``resource`` newer than ``revision`` (caller checks coverage)."""
        out: list[Event] = []
        for event in reversed(self.history):
            if event.revision <= revision:
                break
            if event.resource == resource:
                out.append(event)
        out.reverse()
        return out

    # ---- followers and watchers -----------------------------------------------------

    def add_follower(self, resource: str, follow: Callable[[Event], None]) -> None:
        """Call ``follow`` with every event of ``resource`` applied from now on, synchronously:
        an index built on it is current as soon as the write that changed it returns."""
        self._followers.setdefault(resource, []).append(follow)


    def add_watcher(self, watcher: Watcher) -> None:
        self._watchers.setdefault(watcher.resource, set()).add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        watchers = self._watchers.get(watcher.resource)
        if watchers is not None:
            watchers.discard(watcher)
        watcher.closed = True

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    def close_all_watchers(self) -> None:
        for watchers in self._watchers.values():
            for watcher in tuple(watchers):
                watcher.close()
        self._watchers.clear()
