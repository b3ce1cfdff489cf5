"""The watch cache: every object of every resource plus recent events, in memory.

It is fed only by committed events, in revision order (``apply``), from the local
writer or from the poller that reads other replicas' writes out of the event log.
GET, LIST and WATCH are served from here, as kube-apiserver's cacher does.

Each object version is held once, as its serialised bytes (``StoredObject.raw``), shared by
the current state and the history. A decoded dictionary is built only when a request needs
one, and only the most recently used few are kept. What selectors read (name, namespace,
labels and the kind's selectable fields) is extracted once, when the version is applied.

The history is kept per resource, as upstream's watch cache: at least
``--default-watch-cache-size`` events (``--watch-cache-sizes`` per resource), more while
they are fresh (upstream's dynamic capacity: events younger than 75 s are not evicted, up to
100 Ki events), and never more than a byte budget of versions the history alone keeps alive.
A size of 0 keeps no history for that resource: reads older than the current state then go to
the event log in the database, as upstream's disabled cache sends them to etcd.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from kube.objects import Obj
from kube.tasks import wait_for

FieldGetter = Callable[[Obj], str]
T = TypeVar("T")

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

# Upstream's watch cache sizing (cacher's defaults): the capacity grows from the configured
# size up to this many events while the events it would evict are younger than FRESH_SECONDS.
UPPER_BOUND_CAPACITY = 100 * 1024
FRESH_SECONDS = 75.0
DEFAULT_WATCH_CACHE_SIZE = 100
DEFAULT_HISTORY_BYTES = 256 * 1024 * 1024


class RecentVersions(Generic[T]):
    """A derived form (decoded, encoded) of the most recently read versions, bounded by count
    and by the versions' stored bytes."""

    # The byte budget holds max_items versions of ordinary objects (claims, pods: 1-4 KiB of JSON).
    # Objects written in turn all miss once there are more of them than it holds (bench.api's
    # update writes 64 in turn, and each create or write also reads its namespace).
    def __init__(self, max_items: int = 128, max_bytes: int = 512 * 1024) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._items: OrderedDict[StoredObject, T] = OrderedDict()
        self._bytes = 0

    def get(self, stored: StoredObject) -> T | None:
        obj = self._items.get(stored)
        if obj is not None:
            self._items.move_to_end(stored)
        return obj

    def peek(self, stored: StoredObject) -> T | None:
        """What ``get`` finds, without making it the most recent (a LIST reads every item: one C
        call each; its items stay where they were in the order)."""
        return self._items.get(stored)

    def put(self, stored: StoredObject, obj: T) -> None:
        size = len(stored.raw)
        if size > self.max_bytes or stored in self._items:
            return
        self._items[stored] = obj
        self._bytes += size
        while len(self._items) > self.max_items or self._bytes > self.max_bytes:
            old, _ = self._items.popitem(last=False)
            self._bytes -= len(old.raw)

    def discard(self, stored: StoredObject) -> None:
        obj = self._items.pop(stored, None)
        if obj is not None:
            self._bytes -= len(stored.raw)

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


DECODED: RecentVersions[Obj] = RecentVersions()


class StoredObject:
    """One committed version of an object. Never mutated once built.

    ``raw`` is the object as stored and sent; ``obj`` decodes it (kept decoded only until the
    cache has indexed it, then among the few most recently read)."""

    __slots__ = ("_obj", "fields", "labels", "name", "namespace", "raw", "revision")

    def __init__(self, obj: Obj | None, revision: int, raw: bytes | None = None) -> None:
        if raw is None:
            assert obj is not None
            raw = orjson.dumps(obj)
        self.raw = raw
        self.revision = revision
        self._obj = obj
        self.name = ""
        self.namespace = ""
        self.labels: dict[str, str] | None = None
        self.fields: tuple[str, ...] | None = None

    @property
    def obj(self) -> Obj:
        """The object decoded; callers never change it (``copy`` gives one to change)."""
        obj = self._obj
        if obj is not None:
            return obj
        obj = DECODED.get(self)
        if obj is None:
            obj = orjson.loads(self.raw)
            DECODED.put(self, obj)
        return obj

    def copy(self) -> Obj:
        """A private deep copy for a request to change."""
        return orjson.loads(self.raw)  # type: ignore[no-any-return]

    def index(self, namespace: str, name: str, getters: tuple[FieldGetter, ...]) -> None:
        """Extract what selectors read, then drop the decoded form (the cache holds bytes only)."""
        obj = self._obj if self._obj is not None else orjson.loads(self.raw)
        if self._obj is not None:
            # orjson's output is allocated with room to spare (4 KiB for a 1 KiB object): what the
            # cache keeps is an exact copy.
            self.raw = memoryview(self.raw).tobytes()
        self.namespace = namespace
        self.name = name
        labels = (obj.get("metadata") or {}).get("labels")
        self.labels = {_intern(k): _intern(v) for k, v in labels.items()} if labels else None
        self.fields = tuple(_intern(get(obj)) for get in getters) if getters else None
        if self._obj is not None:
            DECODED.put(self, self._obj)
            self._obj = None


_INTERNED: dict[str, str] = {}


def _intern(value: Any) -> Any:
    """One copy of each short selector key or value (node names, drivers, label values repeat)."""
    if isinstance(value, str) and len(value) <= 64:
        if len(_INTERNED) > 200_000:
            _INTERNED.clear()
        return _INTERNED.setdefault(value, value)
    return value


def event_line_parts(kind: str, stored: StoredObject) -> tuple[bytes, bytes, bytes]:
    """One watch event on the wire, in three pieces (the object's bytes are not copied)."""
    return _EVENT_HEADS.get(kind) or b'{"type":"' + kind.encode() + b'","object":', stored.raw, b"}\n"


_EVENT_HEADS = {kind: b'{"type":"' + kind.encode() + b'","object":' for kind in (ADDED, MODIFIED, DELETED)}


@dataclass(slots=True)
class Event:
    revision: int
    type: str
    resource: str
    namespace: str
    name: str
    obj: StoredObject
    prev: StoredObject | None = None
    at: float = 0.0

    def held_bytes(self) -> int:
        """Bytes only the history keeps alive through this event: the version it replaced, and a
        deleted object's last state."""
        held = len(self.prev.raw) if self.prev is not None else 0
        if self.type == DELETED:
            held += len(self.obj.raw)
        return held


@dataclass(eq=False)
class Watcher:
    """One open watch: a filter and a buffer the HTTP stream drains in batches."""

    resource: str
    namespace: str | None
    predicate: Callable[[StoredObject], bool] | None
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
            # A consumer this far behind is dropped (what it had buffered with it: the versions it
            # pinned are let go); the client re-watches from its last revision.
            self.pending.clear()
            self.close()
            return
        self.pending.append((kind, event.obj))
        self.wakeup.set()

    def take(self, limit: int = 0) -> list[tuple[str, StoredObject]]:
        """What is buffered (at most ``limit`` events when given): one write instead of one per event."""
        if limit and len(self.pending) > limit:
            return [self.pending.popleft() for _ in range(limit)]
        batch = list(self.pending)
        self.pending.clear()
        self.wakeup.clear()
        return batch

    def translate(self, event: Event) -> str | None:
        """The event type this watcher sees, given its filter (None = not at all)."""
        if self.predicate is None:
            return event.type
        now = self.predicate(event.obj)
        if event.type == ADDED:
            return ADDED if now else None
        if event.type == DELETED:
            before = self.predicate(event.prev) if event.prev is not None else now
            return DELETED if (before or now) else None
        before = self.predicate(event.prev) if event.prev is not None else now
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


def parse_watch_cache_sizes(values: Iterable[str]) -> dict[str, int]:
    """``--watch-cache-sizes``: comma-separated ``resource[.group]#size``, as upstream reads it
    (ValueError with upstream's message for a malformed entry)."""
    sizes: dict[str, int] = {}
    for value in values:
        for entry in value.split(","):
            if not entry:
                continue
            tokens = entry.split("#")
            if len(tokens) != 2:
                raise ValueError(f"invalid value of watch cache size: {entry}")
            try:
                size = int(tokens[1])
            except ValueError as exc:
                raise ValueError(f"invalid size of watch cache size: {entry}") from exc
            if size < 0:
                raise ValueError(f"watch cache size cannot be negative: {entry}")
            sizes[tokens[0].lower()] = size
    return sizes


class WatchCache:
    """Objects by resource, namespace and name; a bounded history of events per resource; open watchers."""

    def __init__(
        self,
        default_size: int = DEFAULT_WATCH_CACHE_SIZE,
        sizes: dict[str, int] | None = None,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        fresh_seconds: float = FRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.revision = 0
        self.default_size = default_size
        self.sizes = dict(sizes or {})
        self.history_budget = history_bytes
        self.fresh_seconds = fresh_seconds
        self._clock = clock
        self._objects: dict[str, dict[str, dict[str, StoredObject]]] = {}
        self._counts: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._history: dict[str, deque[Event]] = {}
        # resource -> the newest revision its history no longer holds (reads at or after it are served).
        self._floor: dict[str, int] = {}
        self._loaded_at = 0
        self._history_held: dict[str, int] = {}
        self.history_bytes = 0
        self._getters: dict[str, tuple[tuple[str, ...], tuple[FieldGetter, ...]]] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._ending_watches = False
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._waiter_ids = itertools.count()
        # resource -> callbacks told of each applied event, in order, before any watcher.
        self._followers: dict[str, list[Callable[[Event], None]]] = {}

    # ---- configuration ---------------------------------------------------------------

    def register_fields(self, resource: str, getters: dict[str, FieldGetter]) -> None:
        """The selectable fields of ``resource`` (beyond name and namespace), extracted from each
        version when it is applied. Call before the cache is loaded."""
        names, funcs = self._getters.get(resource, ((), ()))
        merged = dict(zip(names, funcs, strict=True))
        for name, get in getters.items():
            merged.setdefault(name, get)
        self._getters[resource] = (tuple(merged), tuple(merged.values()))

    def field_names(self, resource: str) -> tuple[str, ...]:
        return self._getters.get(resource, ((), ()))[0]

    def capacity(self, resource: str) -> int:
        """The configured history size of ``resource`` (``resource`` is plural[.group])."""
        return self.sizes.get(resource, self.default_size)

    # ---- loading and applying ------------------------------------------------

    def index(self, resource: str, namespace: str, name: str, stored: StoredObject) -> None:
        """Extract what selectors read from a version (the cache does it for what it applies;
        versions read from the database's event log need it too)."""
        getters = self._getters.get(resource)
        stored.index(namespace, name, getters[1] if getters else ())

    def load(self, revision: int, rows: list[tuple[str, str, str, int, str]]) -> None:
        """Replace the contents with a snapshot taken at ``revision``."""
        self._objects = {}
        self._counts = {}
        self._bytes = {}
        for resource, namespace, name, rev, data in rows:
            stored = StoredObject(None, rev, data.encode())
            self.index(resource, namespace, name, stored)
            self._objects.setdefault(resource, {}).setdefault(namespace, {})[name] = stored
            self._counts[resource] = self._counts.get(resource, 0) + 1
            self._bytes[resource] = self._bytes.get(resource, 0) + len(stored.raw)
        self.revision = revision
        self._loaded_at = revision
        self._history.clear()
        self._history_held.clear()
        self._floor.clear()
        self.history_bytes = 0
        self._wake(revision)

    def apply(self, events: list[Event]) -> None:
        """Apply committed events in revision order and fan them out to watchers."""
        now = self._clock()
        for event in events:
            if event.revision <= self.revision:
                continue
            resource = event.resource
            self.index(resource, event.namespace, event.name, event.obj)
            by_ns = self._objects.setdefault(resource, {})
            names = by_ns.setdefault(event.namespace, {})
            event.prev = names.get(event.name)
            if event.prev is not None:
                # A replaced version is seldom read again: its decoded form gives way to the new
                # one's, so objects written in turn keep one decoded version each, not two.
                DECODED.discard(event.prev)
            size = self._bytes.get(resource, 0) - (len(event.prev.raw) if event.prev is not None else 0)
            if event.type == DELETED:
                if names.pop(event.name, None) is not None:
                    self._counts[resource] -= 1
                if not names:
                    del by_ns[event.namespace]
            else:
                if event.prev is None:
                    self._counts[resource] = self._counts.get(resource, 0) + 1
                names[event.name] = event.obj
                size += len(event.obj.raw)
            self._bytes[resource] = size
            self.revision = event.revision
            event.at = now
            self._remember(event, now)
            for follow in self._followers.get(resource, ()):
                follow(event)
            for watcher in tuple(self._watchers.get(resource, ())):
                watcher.offer(event)
        self._wake(self.revision)

    def _remember(self, event: Event, now: float) -> None:
        """Add ``event`` to its resource's history and evict what the bounds no longer allow."""
        resource = event.resource
        size = self.capacity(resource)
        history = self._history.get(resource)
        if history is None:
            history = self._history[resource] = deque()
        if size <= 0:
            self._floor[resource] = event.revision
            return
        history.append(event)
        held = event.held_bytes()
        self._history_held[resource] = self._history_held.get(resource, 0) + held
        self.history_bytes += held
        upper = max(size, UPPER_BOUND_CAPACITY)
        while history:
            oldest = history[0]
            over_bounds = len(history) > upper or self.history_bytes > self.history_budget
            # Within the bounds, the configured size is kept, and more while the oldest is fresh.
            if not over_bounds and (len(history) <= size or now - oldest.at < self.fresh_seconds):
                break
            history.popleft()
            held = oldest.held_bytes()
            self._history_held[resource] -= held
            self.history_bytes -= held
            self._floor[resource] = oldest.revision

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
            await wait_for(future, timeout)
        except TimeoutError:
            return False
        return True

    # ---- reads -----------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> StoredObject | None:
        return self._objects.get(resource, {}).get(namespace, {}).get(name)

    def count(self, resource: str) -> int:
        return self._counts.get(resource, 0)

    def size_bytes(self, resource: str) -> int:
        """Serialised bytes of the current objects of ``resource``."""
        return self._bytes.get(resource, 0)

    def history_length(self, resource: str) -> int:
        history = self._history.get(resource)
        return len(history) if history is not None else 0

    def history_held_bytes(self, resource: str) -> int:
        """Bytes of versions only the history of ``resource`` keeps alive."""
        return self._history_held.get(resource, 0)

    def resources(self) -> list[str]:
        return sorted(set(self._objects) | set(self._history))

    def items(self, resource: str, namespace: str | None) -> list[StoredObject]:
        """Current objects, sorted by namespace and name."""
        by_ns = self._objects.get(resource, {})
        if namespace is not None:
            names = by_ns.get(namespace, {})
            return [names[n] for n in sorted(names)]
        out: list[StoredObject] = []
        for ns in sorted(by_ns):
            names = by_ns[ns]
            out.extend([names[n] for n in sorted(names)])
        return out

    def namespaces_with(self, resource: str) -> Iterator[str]:
        return iter(tuple(self._objects.get(resource, {})))

    def history_floor(self, resource: str) -> int:
        """Reads at revisions from this one on can be served from memory for ``resource``."""
        return max(self._floor.get(resource, 0), self._loaded_at)

    def items_at(self, resource: str, namespace: str | None, revision: int) -> list[StoredObject] | None:
        """The objects as they were at ``revision`` (None when history no longer reaches it)."""
        if revision >= self.revision:
            return self.items(resource, namespace)
        if revision < self.history_floor(resource):
            return None
        changed: dict[tuple[str, str], StoredObject | None] = {}
        for event in reversed(self._history.get(resource, ())):
            if event.revision <= revision:
                break
            if namespace is not None and event.namespace != namespace:
                continue
            changed[(event.namespace, event.name)] = event.prev
        if not changed:
            return self.items(resource, namespace)
        state = {(s.namespace, s.name): s for s in self.items(resource, namespace)}
        for key, prev in changed.items():
            if prev is None:
                state.pop(key, None)
            else:
                state[key] = prev
        return [state[key] for key in sorted(state)]

    def history_after(self, resource: str, revision: int) -> list[Event]:
        """In-memory events of ``resource`` newer than ``revision`` (caller checks the floor)."""
        out: list[Event] = []
        for event in reversed(self._history.get(resource, ())):
            if event.revision <= revision:
                break
            out.append(event)
        out.reverse()
        return out

    # ---- followers and watchers -----------------------------------------------------

    def add_follower(self, resource: str, follow: Callable[[Event], None]) -> None:
        """Call ``follow`` with every event of ``resource`` applied from now on, synchronously:
        an index built on it is current as soon as the write that changed it returns."""
        self._followers.setdefault(resource, []).append(follow)

    def add_watcher(self, watcher: Watcher) -> None:
        if self._ending_watches:
            watcher.close()  # the server is stopping: the watch ends at once, as the others did
            return
        self._watchers.setdefault(watcher.resource, set()).add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        watchers = self._watchers.get(watcher.resource)
        if watchers is not None:
            watchers.discard(watcher)
        watcher.closed = True

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    def close_all_watchers(self) -> None:
        """End every watch, and every one opened from now on (the server is stopping)."""
        self._ending_watches = True
        for watchers in self._watchers.values():
            for watcher in tuple(watchers):
                watcher.close()
        self._watchers.clear()
