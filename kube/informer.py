"""A shared-informer style cache of one resource: list, then watch, with a local store and handlers.

The informer lists, then watches from the list's resourceVersion. When a watch ends (the
server's timeout) it resumes from the last resourceVersion it saw; when that is too old (410)
it re-lists and reconciles the store, firing add/update/delete for the difference. On
connection errors (the server may restart) it backs off and keeps trying.

Memory: every object passes through a transform before it is stored or handed to handlers, as
upstream's ``SetTransform``; the default drops ``metadata.managedFields``, which no worker reads
and which is often half of a small object (upstream's ``TransformStripManagedFields``). With
``compact=True`` the store keeps each object as its JSON bytes and decodes it when read (a small
cache keeps the most recently read objects decoded): meant for large objects read now and then,
such as ResourceSlices, whose decoded dicts take about seven times their JSON. Handlers always get
decoded objects; objects from the store, decoded or not, must not be modified.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import httpx
import orjson

from kube.client import KubeClient, WatchExpired
from kube.errors import ApiError
from kube.objects import Obj
from kube.tasks import wait_for

Key = tuple[str, str]
AddHandler = Callable[[Obj], Awaitable[None] | None]
UpdateHandler = Callable[[Obj, Obj], Awaitable[None] | None]
DeleteHandler = Callable[[Obj], Awaitable[None] | None]
Transform = Callable[[Obj], Obj]

log = logging.getLogger("informer")

# Decoded objects a compact store keeps for repeated reads through ``get``.
DECODED_CACHE_SIZE = 16
# A compact informer lists in smaller pages: one page is decoded at a time.
COMPACT_PAGE_SIZE = 100


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields`` (in place: the object comes fresh from the wire)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def object_key(obj: Obj) -> Key:
    """The store key: (namespace, name); cluster-scoped objects have namespace ``""``."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Store:
    """Objects by key, kept decoded."""

    def __init__(self) -> None:
        self._objects: dict[Key, Obj] = {}

    def get(self, key: Key) -> Obj | None:
        return self._objects.get(key)

    def peek(self, key: Key) -> Obj | None:
        """``get`` for the informer's own use (old versions for handlers): never cached."""
        return self._objects.get(key)

    def put(self, key: Key, obj: Obj) -> None:
        self._objects[key] = obj

    def pop(self, key: Key) -> Obj | None:
        return self._objects.pop(key, None)

    def __contains__(self, key: Key) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def keys(self) -> builtins.list[Key]:
        return [*self._objects]

    def __iter__(self) -> Iterator[Key]:
        return iter(self.keys())

    def values(self) -> Iterator[Obj]:
        return iter([*self._objects.values()])

    def resource_version(self, key: Key) -> str | None:
        """The stored object's resourceVersion (None when absent), without decoding anything."""
        obj = self._objects.get(key)
        return None if obj is None else str((obj.get("metadata") or {}).get("resourceVersion") or "")


class CompactStore(Store):
    """Objects by key as JSON bytes (plus their resourceVersion), decoded when read; the last
    ``cache_size`` objects read stay decoded."""

    def __init__(self, cache_size: int = DECODED_CACHE_SIZE) -> None:
        super().__init__()
        self._raw: dict[Key, tuple[str, bytes]] = {}
        self._decoded: dict[Key, Obj] = {}  # insertion order = recency
        self._cache_size = cache_size

    def get(self, key: Key) -> Obj | None:
        obj = self._decoded.pop(key, None)
        if obj is None:
            entry = self._raw.get(key)
            if entry is None:
                return None
            obj = orjson.loads(entry[1])
            if len(self._decoded) >= self._cache_size:
                del self._decoded[next(iter(self._decoded))]
        self._decoded[key] = obj
        return obj

    def peek(self, key: Key) -> Obj | None:
        obj = self._decoded.get(key)
        if obj is None:
            entry = self._raw.get(key)
            obj = None if entry is None else orjson.loads(entry[1])
        return obj

    def put(self, key: Key, obj: Obj) -> None:
        self._raw[key] = (str((obj.get("metadata") or {}).get("resourceVersion") or ""), orjson.dumps(obj))
        self._decoded.pop(key, None)

    def pop(self, key: Key) -> Obj | None:
        obj = self.peek(key)
        self._raw.pop(key, None)
        self._decoded.pop(key, None)
        return obj

    def __contains__(self, key: Key) -> bool:
        return key in self._raw

    def __len__(self) -> int:
        return len(self._raw)

    def keys(self) -> builtins.list[Key]:
        return [*self._raw]

    def values(self) -> Iterator[Obj]:
        # Decoded one at a time and not cached: a full scan must not hold everything decoded.
        for key in [*self._raw]:
            entry = self._raw.get(key)
            if entry is not None:
                yield self._decoded.get(key) or orjson.loads(entry[1])

    def resource_version(self, key: Key) -> str | None:
        entry = self._raw.get(key)
        return None if entry is None else entry[0]

    def raw(self, key: Key) -> bytes | None:
        """The stored JSON of the object."""
        entry = self._raw.get(key)
        return None if entry is None else entry[1]


class Informer:
    """Keeps a local copy of the objects under ``path`` up to date and calls handlers on changes."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout_seconds: int | None = None,
        page_size: int | None = None,
        name: str = "",
        transform: Transform | None = strip_managed_fields,
        compact: bool = False,
    ) -> None:
        self.client = client
        self.path = path
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds
        self.page_size = page_size or (COMPACT_PAGE_SIZE if compact else 500)
        self.name = name or path
        self.resource_version = ""
        self.transform = transform
        self.compact = compact
        self._store: Store = self._new_store()
        self._add: list[AddHandler] = []
        self._update: list[UpdateHandler] = []
        self._delete: list[DeleteHandler] = []
        self._synced = asyncio.Event()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        # Counters that tests and metrics read: how often the informer had to (re-)list.
        self.list_count = 0
        self.watch_count = 0
        # The last list/watch failure, until a list succeeds or an event arrives (for views that say what is wrong).
        self.error: Exception | None = None

    # ---- handlers -----------------------------------------------------------

    def on_add(self, handler: AddHandler) -> AddHandler:
        """Register ``handler(obj)`` for new objects (also usable as a decorator)."""
        self._add.append(handler)
        return handler

    def on_update(self, handler: UpdateHandler) -> UpdateHandler:
        """Register ``handler(old, new)`` for changed objects."""
        self._update.append(handler)
        return handler

    def on_delete(self, handler: DeleteHandler) -> DeleteHandler:
        """Register ``handler(obj)`` for removed objects (the last known state)."""
        self._delete.append(handler)
        return handler

    async def _call_all(self, handlers: builtins.list[Callable[..., Awaitable[None] | None]], *args: Obj) -> None:
        # A failing handler must not kill the informer (upstream handlers cannot fail either).
        # Most handlers are plain functions: no coroutine per handler and event, only for async ones.
        for handler in handlers:
            try:
                result = handler(*args)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("informer handler failed", extra={"informer": self.name})

    async def _fire_add(self, obj: Obj) -> None:
        await self._call_all(self._add, obj)

    async def _fire_update(self, old: Obj, new: Obj) -> None:
        await self._call_all(self._update, old, new)

    async def _fire_delete(self, obj: Obj) -> None:
        await self._call_all(self._delete, obj)

    # ---- store --------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """True once the first list has been applied to the store."""
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until the first list has been applied."""
        await wait_for(self._synced.wait(), timeout)

    def _new_store(self) -> Store:
        return CompactStore() if self.compact else Store()

    def get(self, namespace: str, name: str) -> Obj | None:
        """The cached object, or None."""
        return self._store.get((namespace or "", name))

    def peek(self, namespace: str, name: str) -> Obj | None:
        """``get`` for one-off reads of large objects: a compact informer decodes the object without
        keeping it in its decoded cache."""
        return self._store.peek((namespace or "", name))

    def list(self) -> builtins.list[Obj]:
        """Every cached object (a compact informer decodes each one: prefer ``iter_objects``)."""
        return [*self._store.values()]

    def iter_objects(self) -> Iterator[Obj]:
        """Every cached object, one at a time (a compact informer never holds them all decoded)."""
        return self._store.values()

    def keys(self) -> builtins.list[Key]:
        """Every cached key."""
        return self._store.keys()

    def raw(self, namespace: str, name: str) -> bytes | None:
        """A compact informer's stored JSON of the object (None when absent or not compact)."""
        store = self._store
        return store.raw((namespace or "", name)) if isinstance(store, CompactStore) else None

    def _prepared(self, obj: Obj) -> Obj:
        return self.transform(obj) if self.transform is not None and obj else obj

    # ---- loop ---------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the informer in a background task."""
        self._stopped = False
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer {self.name}")
        return self._task

    async def stop(self) -> None:
        """Stop the loop (and its background task, if ``start`` made one)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def run(self) -> None:
        """List and watch until stopped; after a restart of an already synced informer, resume the watch."""
        backoff = 0.2
        need_list = not self.has_synced or not self.resource_version
        while not self._stopped:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                await self._watch_once()
                backoff = 0.2
            except WatchExpired:
                log.info("watch expired, re-listing", extra={"informer": self.name, "resourceVersion": self.resource_version})
                need_list = True
            except (httpx.TransportError, OSError, ApiError) as exc:
                self.error = exc
                if isinstance(exc, ApiError) and exc.code == 410:
                    need_list = True
                log.warning("list/watch failed, retrying", extra={"informer": self.name, "error": str(exc), "backoff": backoff})
                await asyncio.sleep(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 5.0)

    async def _relist(self) -> None:
        fresh = self._new_store()
        resource_version = ""
        # Page by page: a compact store keeps bytes, so the decoded list never exists as a whole.
        async for page in self.client.pages(
            self.path, label_selector=self.label_selector, field_selector=self.field_selector, limit=self.page_size
        ):
            for item in page.get("items") or []:
                fresh.put(object_key(item), self._prepared(item))
            resource_version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        self.list_count += 1
        old_store = self._store
        self._store = fresh
        self.error = None
        self.resource_version = resource_version
        # Reconcile: on the first list everything is an add; on a re-list only the differences fire.
        for key in fresh:
            old_rv = old_store.resource_version(key)
            if old_rv is None:
                obj = fresh.peek(key)
                if obj is not None:
                    await self._fire_add(obj)
            elif old_rv != fresh.resource_version(key):
                old, obj = old_store.peek(key), fresh.peek(key)
                if old is not None and obj is not None:
                    await self._fire_update(old, obj)
        for key in old_store:
            if key not in fresh:
                old = old_store.peek(key)
                if old is not None:
                    await self._fire_delete(old)
        self._synced.set()

    async def _watch_once(self) -> None:
        timeout = self.watch_timeout_seconds or random.randint(300, 600)
        self.watch_count += 1
        async for event in self.client.watch(
            self.path,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
        ):
            await self.apply(event)
            if self._stopped:
                return

    async def apply(self, event: Obj) -> None:
        """One watch event (``{"type", "object"}``) into the store, the handlers run: what the
        watch does with each event, and what code that feeds an informer itself calls (tests, a
        what-if copy of the scheduler's caches)."""
        self.error = None
        kind = event.get("type")
        obj: Obj = self._prepared(event.get("object") or {})
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        if kind == "ADDED" or kind == "MODIFIED":
            old = self._store.peek(key)
            self._store.put(key, obj)
            if rv:
                self.resource_version = rv
            if old is None:
                await self._fire_add(obj)
            else:
                await self._fire_update(old, obj)
        elif kind == "DELETED":
            old = self._store.pop(key)
            if rv:
                self.resource_version = rv
            await self._fire_delete(obj if obj else (old or {}))


async def run_with_informers(informers: Sequence[Informer], *work: Awaitable[Any]) -> None:
    """Start ``informers`` (each once, however often listed), wait until they have synced, then run
    ``work`` until it ends or is cancelled; stop the informers after."""
    unique = list({id(i): i for i in informers}.values())
    for informer in unique:
        informer.start()
    running = False
    try:
        for informer in unique:
            await informer.wait_synced()
        running = True
        await asyncio.gather(*work)
    finally:
        if not running:
            # Cancelled before the informers synced (a leadership term lost in an outage): the work's
            # coroutines never ran, and are closed rather than left to warn "never awaited".
            for item in work:
                if inspect.iscoroutine(item):
                    item.close()
        for informer in unique:
            await informer.stop()


def resource_version_number(value: Any) -> int | None:
    """A resourceVersion as a number, or None. (Clients must not compare resourceVersions in
    general; this server's are one global revision counter, which its own workers rely on.)"""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
