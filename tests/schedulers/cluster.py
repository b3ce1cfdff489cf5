"""An in-memory cluster for the scheduler's components: object builders, and a feed that hands
objects to the cache's informers as watch events would (no server involved)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from kube.client import KubeClient
from kube.informer import Informer
from kube.objects import Obj
from schedulers.allocator import AllocatorFeatures
from schedulers.cache import SchedulerCache
from schedulers.queue import SchedulingQueue

DRIVER = "gpu.example.com"
CLASS = "gpu"
NS = "default"


def node(name: str, *, cpu: str = "8", pods: str = "110", labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    allocatable = {"cpu": cpu, "memory": "32Gi", "pods": pods}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}, "spec": spec,
            "status": {"capacity": allocatable, "allocatable": allocatable}}


def device_class(name: str = CLASS, driver: str = DRIVER) -> Obj:
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}}


def node_slice(node_name: str, devices: int, driver: str = DRIVER) -> Obj:
    return {
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {"driver": driver, "nodeName": node_name, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"dev-{i}"} for i in range(devices)]},
    }  # fmt: skip


def claim(name: str, *, count: int = 1, device_class_name: str = CLASS, status: Obj | None = None, **meta: Any) -> Obj:
    body: Obj = {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", **meta},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name, "count": count}}]}},
    }
    if status is not None:
        body["status"] = status
    return body


def allocation(node_name: str, *devices: str, driver: str = DRIVER) -> Obj:
    """A ``status.allocation`` of devices in ``node_name``'s pool, pinned to that node."""
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    results = [{"request": "gpu", "driver": driver, "pool": node_name, "device": d} for d in devices]
    return {"devices": {"results": results}, "nodeSelector": selector}


def pod(name: str, *, claims: Sequence[str] = (), cpu: str = "100m", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                 "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims], **spec},
    }  # fmt: skip


def reserved_for(*pods: Obj) -> list[Obj]:
    return [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods]


class Cluster:
    """A :class:`SchedulerCache` whose informers are fed by the test; objects get increasing resourceVersions."""

    def __init__(self, client: KubeClient | None = None, features: AllocatorFeatures | None = None) -> None:
        self.client = client or KubeClient("http://127.0.0.1:9", user_agent="test")  # never contacted unless given
        self.queue: SchedulingQueue[tuple[str, str], tuple[str, str]] = SchedulingQueue()
        self.cache = SchedulerCache(self.client, self.queue, features=features)
        self._versions = itertools.count(1)

    def next_version(self) -> str:
        return str(next(self._versions))

    async def put(self, informer: Informer, obj: Obj) -> Obj:
        """Add or update ``obj`` (with a new resourceVersion) as a watch event would."""
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self.next_version()}}
        await informer.apply({"type": "MODIFIED", "object": obj})
        return obj

    async def delete(self, informer: Informer, obj: Obj) -> None:
        await informer.apply({"type": "DELETED", "object": obj})

    async def topology(self, devices: dict[str, int], **node_fields: Any) -> None:
        """A device class, and per node name a node with a slice of that many devices."""
        await self.put(self.cache.classes, device_class())
        for name, count in devices.items():
            await self.put(self.cache.nodes, node(name, **node_fields))
            if count:
                await self.put(self.cache.slices, node_slice(name, count))
