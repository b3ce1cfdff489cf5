"""A shared-informer style cache of one resource: list, then watch, with a local store and handlers.

The informer lists, then watches from the list's resourceVersion. When a watch ends (the
server's timeout) it resumes from the last resourceVersion it saw; when that is too old (410)
it re-lists and reconciles the store, firing add/update/delete for the difference. On
connection errors (the server may restart) it backs off and keeps trying.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from kube.client import KubeClient, WatchExpired
from kube.errors import ApiError

Obj = dict[str, Any]
Key = tuple[str, str]
AddHandler = Callable[[Obj], Awaitable[None] | None]
UpdateHandler = Callable[[Obj, Obj], Awaitable[None] | None]
DeleteHandler = Callable[[Obj], Awaitable[None] | None]

log = logging.getLogger("informer")


def object_key(obj: Obj) -> Key:
    """The store key: (namespace, name); cluster-scoped objects have namespace ``""``."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


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
        page_size: int = 500,
        name: str = "",
    ) -> None:
        self.client = client
        self.path = path
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_seconds = watch_timeout_seconds
        self.page_size = page_size
        self.name = name or path
        self.resource_version = ""
        self._store: dict[Key, Obj] = {}
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
        await asyncio.wait_for(self._synced.wait(), timeout)

    def get(self, namespace: str, name: str) -> Obj | None:
        """The cached object, or None."""
        return self._store.get((namespace or "", name))

    def list(self) -> builtins.list[Obj]:
        """Every cached object."""
        return [*self._store.values()]

    def keys(self) -> builtins.list[Key]:
        """Every cached key."""
        return [*self._store]

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
        result = await self.client.list(
            self.path, label_selector=self.label_selector, field_selector=self.field_selector, limit=self.page_size
        )
        self.list_count += 1
        items: list[Obj] = result.get("items") or []
        fresh: dict[Key, Obj] = {}
        for item in items:
            fresh[object_key(item)] = item
        old_store = self._store
        self._store = dict(fresh)
        self.error = None
        self.resource_version = str((result.get("metadata") or {}).get("resourceVersion") or "")
        # Reconcile: on the first list everything is an add; on a re-list only the differences fire.
        for key, obj in fresh.items():
            old = old_store.get(key)
            if old is None:
                await self._fire_add(obj)
            elif (old.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get("resourceVersion"):
                await self._fire_update(old, obj)
        for key, obj in old_store.items():
            if key not in fresh:
                await self._fire_delete(obj)
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
            await self._apply(event)
            if self._stopped:
                return

    async def _apply(self, event: Obj) -> None:
        self.error = None
        kind = event.get("type")
        obj: Obj = event.get("object") or {}
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        if kind == "ADDED" or kind == "MODIFIED":
            old = self._store.get(key)
            self._store[key] = obj
            if rv:
                self.resource_version = rv
            if old is None:
                await self._fire_add(obj)
            else:
                await self._fire_update(old, obj)
        elif kind == "DELETED":
            old = self._store.pop(key, None)
            if rv:
                self.resource_version = rv
            await self._fire_delete(obj if obj else (old or {}))


async def run_with_informers(informers: Sequence[Informer], *work: Awaitable[Any]) -> None:
    """Start ``informers`` (each once, however often listed), wait until they have synced, then run
    ``work`` until it ends or is cancelled; stop the informers after."""
    unique = list({id(i): i for i in informers}.values())
    for informer in unique:
        informer.start()
    try:
        for informer in unique:
            await informer.wait_synced()
        await asyncio.gather(*work)
    finally:
        for informer in unique:
            await informer.stop()


def resource_version_number(value: Any) -> int | None:
    """A resourceVersion as a number, or None. (Clients must not compare resourceVersions in
    general; this server's are one global revision counter, which its own workers rely on.)"""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
