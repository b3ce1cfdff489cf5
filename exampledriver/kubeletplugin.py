"""What a DRA driver needs to be a kubelet plugin: the driver-side counterpart of the kubelet's
plugin watcher, like upstream's kubeletplugin helper.

:class:`PluginServer` serves the driver's node service on ``<plugin dir>/dra.sock`` (as
``v1.DRAPlugin`` and, converted, ``v1beta1.DRAPlugin``) and its health stream (as
``v1.DRAResourceHealth`` and ``v1alpha1.DRAResourceHealth``), then announces them on the
registration socket ``<registry dir>/<driver>-reg.sock``. The driver implements only the v1
servicers.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletapi.dra.v1 import api_pb2_grpc as dra_v1_grpc
from kubeletapi.dra.v1beta1 import api_pb2 as dra_v1beta1
from kubeletapi.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.dra_health.v1 import api_pb2_grpc as health_v1_grpc
from kubeletapi.dra_health.v1alpha1 import api_pb2 as health_v1alpha1
from kubeletapi.dra_health.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubeletapi.pluginregistration.v1 import api_pb2 as registration
from kubeletapi.pluginregistration.v1 import api_pb2_grpc as registration_grpc
from kubeletapi.versions import DRA_PLUGIN_TYPE, DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1, convert

log = logging.getLogger("exampledriver")

DRA_SOCKET = "dra.sock"


def registration_socket_name(driver: str) -> str:
    return f"{driver}-reg.sock"


class _V1Beta1Node(dra_v1beta1_grpc.DRAPluginServicer):  # type: ignore[misc]
    """Serves ``v1beta1.DRAPlugin`` through the driver's v1 servicer."""

    def __init__(self, v1: dra_v1_grpc.DRAPluginServicer) -> None:
        self.v1 = v1

    async def NodePrepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        response = await self.v1.NodePrepareResources(convert(request, dra_v1.NodePrepareResourcesRequest), context)
        return convert(response, dra_v1beta1.NodePrepareResourcesResponse)

    async def NodeUnprepareResources(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        response = await self.v1.NodeUnprepareResources(convert(request, dra_v1.NodeUnprepareResourcesRequest), context)
        return convert(response, dra_v1beta1.NodeUnprepareResourcesResponse)


class _V1Alpha1Health(health_v1alpha1_grpc.DRAResourceHealthServicer):  # type: ignore[misc]
    """Serves ``v1alpha1.DRAResourceHealth`` through the driver's v1 servicer."""

    def __init__(self, v1: health_v1_grpc.DRAResourceHealthServicer) -> None:
        self.v1 = v1

    async def NodeWatchResources(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for message in self.v1.NodeWatchResources(convert(request, health_v1.NodeWatchResourcesRequest), context):
            yield convert(message, health_v1alpha1.NodeWatchResourcesResponse)


class _Registrar(registration_grpc.RegistrationServicer):  # type: ignore[misc]
    def __init__(self, info: registration.PluginInfo) -> None:
        self.info = info
        self.status: registration.RegistrationStatus | None = None
        self.notified = asyncio.Event()

    async def GetInfo(self, request: registration.InfoRequest, context: grpc.aio.ServicerContext) -> registration.PluginInfo:
        return self.info

    async def NotifyRegistrationStatus(
        self, request: registration.RegistrationStatus, context: grpc.aio.ServicerContext
    ) -> registration.RegistrationStatusResponse:
        self.status = request
        if request.plugin_registered:
            log.info("registered with the kubelet", extra={"driver": self.info.name})
        else:
            log.error("the kubelet refused the registration", extra={"driver": self.info.name, "error": request.error})
        self.notified.set()
        return registration.RegistrationStatusResponse()


async def _serve_unix(socket_path: Path, register: Any) -> grpc.aio.Server:
    """A started gRPC server on a unix socket, replacing a stale socket file left by an earlier run."""
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if socket_path.exists() or socket_path.is_socket():
        socket_path.unlink()
    server = grpc.aio.server()
    register(server)
    server.add_insecure_port(f"unix:{socket_path}")
    await server.start()
    return server


class PluginServer:
    """A DRA driver's kubelet plugin on one node: node service, health service and registration.

    ``supported_versions`` overrides what GetInfo announces (default: every service served).
    """

    def __init__(
        self,
        driver: str,
        *,
        registry_dir: Path,
        plugin_dir: Path,
        node: dra_v1_grpc.DRAPluginServicer,
        health: health_v1_grpc.DRAResourceHealthServicer | None = None,
        serve_v1: bool = True,
        serve_v1beta1: bool = True,
        supported_versions: Sequence[str] | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.driver = driver
        self.registration_socket = registry_dir / registration_socket_name(driver)
        self.plugin_socket = plugin_dir / DRA_SOCKET
        self.node = node
        self.health = health
        self.serve_v1 = serve_v1
        self.serve_v1beta1 = serve_v1beta1
        self.services: list[str] = []
        if serve_v1:
            self.services.append(DRA_V1)
        if serve_v1beta1:
            self.services.append(DRA_V1BETA1)
        if health is not None:
            self.services += [HEALTH_V1, HEALTH_V1ALPHA1]
        info = registration.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=driver,
            endpoint=endpoint if endpoint is not None else str(self.plugin_socket),
            supported_versions=list(supported_versions) if supported_versions is not None else self.services,
        )
        self.registrar = _Registrar(info)
        self._plugin_server: grpc.aio.Server | None = None
        self._registration_server: grpc.aio.Server | None = None

    def _register_services(self, server: grpc.aio.Server) -> None:
        if self.serve_v1:
            dra_v1_grpc.add_DRAPluginServicer_to_server(self.node, server)
        if self.serve_v1beta1:
            dra_v1beta1_grpc.add_DRAPluginServicer_to_server(_V1Beta1Node(self.node), server)
        if self.health is not None:
            health_v1_grpc.add_DRAResourceHealthServicer_to_server(self.health, server)
            health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(_V1Alpha1Health(self.health), server)

    async def start(self) -> None:
        """Serve the node service first, so the kubelet finds it as soon as it sees the registration socket."""
        self._plugin_server = await _serve_unix(self.plugin_socket, self._register_services)
        self._registration_server = await _serve_unix(
            self.registration_socket, lambda server: registration_grpc.add_RegistrationServicer_to_server(self.registrar, server)
        )
        log.info("serving", extra={"driver": self.driver, "registration": str(self.registration_socket), "endpoint": str(self.plugin_socket)})

    async def stop(self, grace: float | None = 1.0, *, remove_sockets: bool = True) -> None:
        """Stop serving; removing the registration socket deregisters the plugin (a crash leaves the sockets behind)."""
        for server, path in ((self._registration_server, self.registration_socket), (self._plugin_server, self.plugin_socket)):
            if server is not None:
                await server.stop(grace)
            if remove_sockets and path.is_socket():
                os.unlink(path)
        self._registration_server = self._plugin_server = None

    @property
    def registration_status(self) -> registration.RegistrationStatus | None:
        """What the kubelet last said about the registration (None before it said anything)."""
        return self.registrar.status
