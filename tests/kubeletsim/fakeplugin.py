"""A DRA driver for the simulator's gRPC tests whose answers a test chooses (delays, errors, missing claims)."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from exampledriver.kubeletplugin import PluginServer
from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletapi.dra.v1 import api_pb2_grpc as dra_v1_grpc
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.dra_health.v1 import api_pb2_grpc as health_v1_grpc
from kubeletapi.layout import NodeDirs


def short_root() -> Path:
    """A fresh root directory with a short path: unix socket paths are limited to 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))


@dataclass
class Behaviour:
    """How the fake driver answers; tests change it between calls."""

    delay: float = 0.0
    abort: grpc.StatusCode | None = None
    claim_errors: dict[str, str] = field(default_factory=dict)
    drop_claims: set[str] = field(default_factory=set)
    extra_claims: set[str] = field(default_factory=set)
    pool: str | None = None
    unprepare_errors: dict[str, str] = field(default_factory=dict)


class FakeNode(dra_v1_grpc.DRAPluginServicer):  # type: ignore[misc]
    """Prepares every claim with one device ``dev-<claim name>`` in pool ``pool`` (default: the node)."""

    def __init__(self, driver: str, node: str) -> None:
        self.driver = driver
        self.node = node
        self.behaviour = Behaviour()
        self.prepare_calls: list[list[tuple[str, str, str]]] = []
        self.unprepare_calls: list[list[tuple[str, str, str]]] = []
        self.prepared: set[str] = set()
        self.call_started = asyncio.Event()

    async def _misbehave(self, context: grpc.aio.ServicerContext) -> None:
        self.call_started.set()
        if self.behaviour.delay:
            await asyncio.sleep(self.behaviour.delay)
        if self.behaviour.abort is not None:
            await context.abort(self.behaviour.abort, "driver failure injected by the test")

    async def NodePrepareResources(self, request: dra_v1.NodePrepareResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        self.prepare_calls.append([(c.namespace, c.name, c.uid) for c in request.claims])
        await self._misbehave(context)
        b = self.behaviour
        response = dra_v1.NodePrepareResourcesResponse()
        for claim in request.claims:
            if claim.uid in b.drop_claims:
                continue
            if claim.uid in b.claim_errors:
                response.claims[claim.uid].error = b.claim_errors[claim.uid]
                continue
            self.prepared.add(claim.uid)
            response.claims[claim.uid].devices.append(
                dra_v1.Device(
                    request_names=["req"],
                    pool_name=b.pool or self.node,
                    device_name=f"dev-{claim.name}",
                    cdi_device_ids=[f"{self.driver}/device=dev-{claim.name}-{claim.uid[:8]}"],
                )
            )
        for uid in b.extra_claims:
            response.claims[uid].SetInParent()
        return response

    async def NodeUnprepareResources(self, request: dra_v1.NodeUnprepareResourcesRequest, context: grpc.aio.ServicerContext) -> Any:
        self.unprepare_calls.append([(c.namespace, c.name, c.uid) for c in request.claims])
        await self._misbehave(context)
        response = dra_v1.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            if claim.uid in self.behaviour.unprepare_errors:
                response.claims[claim.uid].error = self.behaviour.unprepare_errors[claim.uid]
                continue
            self.prepared.discard(claim.uid)
            response.claims[claim.uid].SetInParent()
        return response


class FakeHealth(health_v1_grpc.DRAResourceHealthServicer):  # type: ignore[misc]
    """Streams whatever the test puts into ``updates``: lists of (pool, device, health)."""

    def __init__(self) -> None:
        self.updates: asyncio.Queue[list[tuple[str, str, health_v1.HealthStatus]]] = asyncio.Queue()
        self.watchers = 0

    async def NodeWatchResources(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        self.watchers += 1
        while True:
            devices = await self.updates.get()
            yield health_v1.NodeWatchResourcesResponse(
                devices=[
                    health_v1.DeviceHealth(device=health_v1.DeviceIdentifier(pool_name=p, device_name=d), health=h, last_updated_time=0)
                    for p, d, h in devices
                ]
            )


class FakeDriver:
    """A fake driver's plugin on one simulated node."""

    def __init__(self, dirs: NodeDirs, driver: str = "fake.example.com", *, health: bool = False, **server_options: Any) -> None:
        self.dirs = dirs
        self.node = FakeNode(driver, dirs.node)
        self.health = FakeHealth() if health else None
        self.server = PluginServer(
            driver, registry_dir=dirs.registry, plugin_dir=dirs.plugins / driver, node=self.node, health=self.health, **server_options
        )

    async def __aenter__(self) -> FakeDriver:
        await self.server.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.server.stop(0)


async def _serve_forever(root: str, node: str) -> None:
    async with FakeDriver(NodeDirs(Path(root), node)):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    # `python -m tests.kubeletsim.fakeplugin ROOT NODE`: a driver process a test can kill -9.
    import sys

    asyncio.run(_serve_forever(sys.argv[1], sys.argv[2]))
