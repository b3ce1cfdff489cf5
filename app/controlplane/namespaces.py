"""Namespace lifecycle inside the server: system namespaces exist from the start, and a
namespace marked for deletion is emptied, finalized and then removed (upstream's
namespace controller does this in kube-controller-manager)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.api.generic import GenericStore
from app.api.options import DeleteOptions, WriteOptions
from app.registry import KINDS
from app.registry.core import namespace as namespace_kind
from kube.errors import ApiError

log = logging.getLogger("app.namespaces")
NAMESPACES = namespace_kind.STRATEGY
SYSTEM_MANAGER = WriteOptions(field_manager="kube-apiserver")


async def ensure_system_namespaces(registry: GenericStore) -> None:
    for name in namespace_kind.SYSTEM_NAMESPACES:
        if registry.storage.cached(NAMESPACES.qualified_resource, "", name) is None:
            with contextlib.suppress(ApiError):
                await registry.create(NAMESPACES, "", {"metadata": {"name": name}}, SYSTEM_MANAGER)


class NamespaceLifecycle:
    """Empties Terminating namespaces, then removes the ``kubernetes`` finalizer."""

    def __init__(self, registry: GenericStore, interval: float = 0.5) -> None:
        self.registry = registry
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="namespace-lifecycle")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        last_revision = -1
        while True:
            await asyncio.sleep(self.interval)
            if self.registry.storage.revision == last_revision:
                continue
            last_revision = self.registry.storage.revision
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("namespace lifecycle sweep failed")

    async def sweep(self) -> None:
        storage = self.registry.storage
        for stored in (await storage.list(NAMESPACES.qualified_resource, "", revision=0)).items:
            name = stored.obj["metadata"]["name"]
            if not stored.obj["metadata"].get("deletionTimestamp"):
                continue
            remaining = 0
            for kind in KINDS:
                if not kind.namespaced:
                    continue
                for obj in (await storage.list(kind.qualified_resource, name, revision=0)).items:
                    remaining += 1
                    if obj.obj["metadata"].get("deletionTimestamp"):
                        continue
                    with contextlib.suppress(ApiError):
                        await self.registry.delete(kind, name, obj.obj["metadata"]["name"], DeleteOptions(propagation_policy="Background"))
            if remaining:
                continue
            finalizers = [f for f in (stored.obj.get("spec") or {}).get("finalizers") or [] if f != namespace_kind.NAMESPACE_FINALIZER]
            with contextlib.suppress(ApiError):
                await self.registry.write_subresource(NAMESPACES, namespace_kind.FINALIZE, "", name, {"spec": {"finalizers": finalizers}}, SYSTEM_MANAGER)
