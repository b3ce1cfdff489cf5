"""Namespace lifecycle inside the server: system namespaces exist from the start, and a
namespace marked for deletion is emptied, finalized and then removed (upstream's
namespace controller does this in kube-controller-manager)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.api.generic import GenericStore
from app.api.options import DeleteOptions, WriteOptions
from app.controlplane.loop import ControlLoop
from app.registry import KINDS
from app.registry.core import namespace as namespace_kind
from kube.errors import ApiError
from kube.tasks import together

log = logging.getLogger("app.namespaces")
NAMESPACES = namespace_kind.STRATEGY
SYSTEM_MANAGER = WriteOptions(field_manager="kube-apiserver")


async def ensure_system_namespaces(registry: GenericStore) -> None:
    """Create the system namespaces that are missing, together (one group commit)."""
    await together(*(_ensure_namespace(registry, name) for name in namespace_kind.SYSTEM_NAMESPACES))


async def _ensure_namespace(registry: GenericStore, name: str) -> None:
    if registry.storage.cached(NAMESPACES.qualified_resource, "", name) is None:
        with contextlib.suppress(ApiError):
            await registry.create(NAMESPACES, "", {"metadata": {"name": name}}, SYSTEM_MANAGER)


class NamespaceLifecycle(ControlLoop):
    """Empties Terminating namespaces, then removes the ``kubernetes`` finalizer."""

    name = "namespace-lifecycle"

    def __init__(self, registry: GenericStore, interval: float = 0.5) -> None:
        super().__init__()
        self.registry = registry
        self.interval = interval

    async def run(self) -> None:
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
                items = (await storage.list(kind.qualified_resource, name, revision=0)).items
                remaining += len(items)
                alive = [obj for obj in items if not obj.obj["metadata"].get("deletionTimestamp")]
                # Together, as upstream's namespace controller uses deletecollection: one by one, each is its own commit.
                await self.registry.delete_each(kind, alive, DeleteOptions(propagation_policy="Background"), stop_at_refusal=False)
            if remaining:
                continue
            finalizers = [f for f in (stored.obj.get("spec") or {}).get("finalizers") or [] if f != namespace_kind.NAMESPACE_FINALIZER]
            with contextlib.suppress(ApiError):
                await self.registry.write_subresource(NAMESPACES, namespace_kind.FINALIZE, "", name, {"spec": {"finalizers": finalizers}}, SYSTEM_MANAGER)
