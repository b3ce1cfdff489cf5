"""Running one of the simulator's controllers in the test's event loop against a real server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable, Sequence
from typing import Any, TypeVar

from kube.client import KubeClient, resource_path
from kube.informer import Informer, run_with_informers
from kube.workqueue import WorkQueue
from kubeletsim import nodes as nodes_mod
from tests.processes import in_background

K = TypeVar("K", bound=Hashable)

NODES = resource_path("", "v1", "nodes")
SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")
LEASES = resource_path("coordination.k8s.io", "v1", "leases", "kube-node-lease")


def node_path(name: str, subresource: str | None = None) -> str:
    return resource_path("", "v1", "nodes", name=name, subresource=subresource)


async def register_node(client: KubeClient, name: str, index: int, **kw: Any) -> dict[str, Any]:
    """A Node as the simulator would register it, Ready (without the simulator)."""
    node = nodes_mod.build_node(name, index, "gpu", **kw)
    await client.create(NODES, node)
    return await client.patch(node_path(name, "status"), {"status": node["status"]})


async def slices_of(client: KubeClient, node: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await client.list(SLICES, field_selector=f"spec.nodeName={node}"))["items"]
    return items


@contextlib.asynccontextmanager
async def running(
    informers: Sequence[Informer], queue: WorkQueue[K], sync: Callable[[K], Awaitable[bool | None]], *also: Callable[[], Coroutine[Any, Any, Any]], start: Callable[[], None] = lambda: None
) -> AsyncIterator[None]:
    """Sync ``informers``, call ``start()``, and run workers of ``queue`` (plus ``also``) until the block ends."""
    async with in_background(run_with_informers(informers, queue.run(sync, 4), *(loop() for loop in also)), synced=informers):
        start()
        yield
