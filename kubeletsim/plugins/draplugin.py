"""The DRA plugins registered on one node and the calls the kubelet makes to them.

A driver may have more than one plugin instance (a rolling update starts the new one before
the old one stops); calls go to the newest connected instance, else the newest. The kubelet
speaks ``v1.DRAPlugin`` or, for older drivers, ``v1beta1.DRAPlugin``, whichever the driver
lists first among those it advertises; ``v1beta1`` messages are ``v1`` without ``share_id``,
so they convert by re-reading the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field

import grpc
import grpc.aio

from kube.tasks import cancel_and_wait
from kubeletapi.dra.v1 import api_pb2 as dra_v1
from kubeletapi.dra.v1 import api_pb2_grpc as dra_v1_grpc
from kubeletapi.dra.v1beta1 import api_pb2 as dra_v1beta1
from kubeletapi.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.dra_health.v1 import api_pb2_grpc as health_v1_grpc
from kubeletapi.dra_health.v1alpha1 import api_pb2 as health_v1alpha1
from kubeletapi.dra_health.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from kubeletapi.layout import check_socket_path
from kubeletapi.versions import DRA_V1, DRA_V1BETA1, HEALTH_V1, HEALTH_V1ALPHA1, convert

log = logging.getLogger("kubeletsim.plugins")

# The node services this kubelet speaks, newest first.
DRA_SERVICES = (DRA_V1, DRA_V1BETA1)
# How long a driver has to answer NodePrepareResources or NodeUnprepareResources (the kubelet's
# default: half its pod sync retry period).
DEFAULT_CALL_TIMEOUT = 45.0
# What gRPC-Go answers a call on a connection being closed (code Canceled).
CONNECTION_CLOSING = "grpc: the client connection is closing"


class PluginError(Exception):
    """A DRA plugin that cannot be used, with the kubelet's message."""


class DriverNotRegistered(PluginError):
    pass


class RegistrationRefused(PluginError):
    pass


def go_quote_list(items: Sequence[str]) -> str:
    """A list of strings as Go's ``%q`` prints a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "]"


def rpc_error_text(exc: grpc.aio.AioRpcError) -> str:
    """A failed call as Go's gRPC status error reads: ``rpc error: code = Unavailable desc = ...``."""
    code = exc.code()
    if code == grpc.StatusCode.CANCELLED:
        name = "Canceled"  # Go's spelling of the code
    else:
        name = "".join(part.capitalize() for part in code.name.split("_")) if code is not None else "Unknown"
    return f"rpc error: code = {name} desc = {exc.details() or ''}"


@contextlib.contextmanager
def closing_channel_fails_the_call() -> Iterator[None]:
    """grpc.aio ends the calls on a channel being closed (its plugin deregistered) with
    CancelledError although nobody cancelled the caller; fail such a call as gRPC-Go does
    instead, so that it does not end the caller's task."""
    try:
        yield
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise grpc.aio.AioRpcError(grpc.StatusCode.CANCELLED, grpc.aio.Metadata(), grpc.aio.Metadata(), details=CONNECTION_CLOSING) from None


def choose_service(supported: Sequence[str]) -> str:
    """The node service to call: the first one the plugin advertises that this kubelet speaks."""
    if not supported:
        raise RegistrationRefused("empty list of supported gRPC services (aka supported versions)")
    for service in supported:
        if service in DRA_SERVICES:
            return service
    raise RegistrationRefused(
        f"none of services supported by the plugin ({go_quote_list(supported)}) are supported by the kubelet ({go_quote_list(DRA_SERVICES)})"
    )


def choose_health_service(supported: Sequence[str]) -> str | None:
    """The health service to watch: v1 when advertised, else v1alpha1 when advertised, else none."""
    for service in (HEALTH_V1, HEALTH_V1ALPHA1):
        if service in supported:
            return service
    return None


@dataclass(eq=False)
class DRAPlugin:
    """One registered plugin instance of a driver: a channel to its endpoint and the services it serves."""

    driver: str
    endpoint: str
    service: str
    health_service: str | None = None
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    connected: bool = False
    channel: grpc.aio.Channel = field(init=False)
    _watch: asyncio.Task[None] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.channel = grpc.aio.insecure_channel("unix:" + check_socket_path(self.endpoint))

    def start(self, on_change: Callable[[DRAPlugin], None]) -> None:
        """Follow the channel's connectivity (and keep it connecting) so ``connected`` stays current."""
        self._watch = asyncio.get_running_loop().create_task(self._follow(on_change), name=f"dra-plugin-{self.driver}")

    async def _follow(self, on_change: Callable[[DRAPlugin], None]) -> None:
        while True:
            # Asking for the state with try_to_connect reconnects an idle channel, so a driver
            # that restarts on the same socket is noticed without waiting for a call.
            state = self.channel.get_state(try_to_connect=True)
            connected = state == grpc.ChannelConnectivity.READY
            if connected != self.connected:
                self.connected = connected
                log.debug("plugin connection changed", extra={"driver": self.driver, "endpoint": self.endpoint, "connected": connected})
                on_change(self)
            await self.channel.wait_for_state_change(state)

    async def close(self) -> None:
        await cancel_and_wait(self._watch)
        await self.channel.close()

    async def node_prepare_resources(self, claims: Sequence[dra_v1.Claim]) -> dra_v1.NodePrepareResourcesResponse:
        request = dra_v1.NodePrepareResourcesRequest(claims=claims)
        with closing_channel_fails_the_call():
            return await self._prepare(request)

    async def _prepare(self, request: dra_v1.NodePrepareResourcesRequest) -> dra_v1.NodePrepareResourcesResponse:
        if self.service == DRA_V1:
            response = await dra_v1_grpc.DRAPluginStub(self.channel).NodePrepareResources(request, timeout=self.call_timeout)
            return response  # type: ignore[no-any-return]
        old = await dra_v1beta1_grpc.DRAPluginStub(self.channel).NodePrepareResources(
            convert(request, dra_v1beta1.NodePrepareResourcesRequest), timeout=self.call_timeout
        )
        return convert(old, dra_v1.NodePrepareResourcesResponse)

    async def node_unprepare_resources(self, claims: Sequence[dra_v1.Claim]) -> dra_v1.NodeUnprepareResourcesResponse:
        request = dra_v1.NodeUnprepareResourcesRequest(claims=claims)
        with closing_channel_fails_the_call():
            return await self._unprepare(request)

    async def _unprepare(self, request: dra_v1.NodeUnprepareResourcesRequest) -> dra_v1.NodeUnprepareResourcesResponse:
        if self.service == DRA_V1:
            response = await dra_v1_grpc.DRAPluginStub(self.channel).NodeUnprepareResources(request, timeout=self.call_timeout)
            return response  # type: ignore[no-any-return]
        old = await dra_v1beta1_grpc.DRAPluginStub(self.channel).NodeUnprepareResources(
            convert(request, dra_v1beta1.NodeUnprepareResourcesRequest), timeout=self.call_timeout
        )
        return convert(old, dra_v1.NodeUnprepareResourcesResponse)

    async def watch_health(self) -> AsyncIterator[health_v1.NodeWatchResourcesResponse]:
        """The plugin's NodeWatchResources stream, as v1 messages (nothing when it serves no health service)."""
        with closing_channel_fails_the_call():
            if self.health_service == HEALTH_V1:
                current = health_v1_grpc.DRAResourceHealthStub(self.channel)
                async for message in current.NodeWatchResources(health_v1.NodeWatchResourcesRequest()):
                    yield message
            elif self.health_service == HEALTH_V1ALPHA1:
                stub = health_v1alpha1_grpc.DRAResourceHealthStub(self.channel)
                async for old in stub.NodeWatchResources(health_v1alpha1.NodeWatchResourcesRequest()):
                    yield convert(old, health_v1.NodeWatchResourcesResponse)


class PluginStore:
    """The DRA plugins registered on one node, by driver name, oldest first.

    ``reserved``: driver names this node simulates itself (built-in profiles); a plugin
    claiming one of them is refused. ``on_change(plugin, registered)`` is called after a
    plugin is added or removed, and ``on_connection(plugin)`` when its connection comes or goes.
    """

    def __init__(
        self,
        node: str,
        *,
        reserved: Collection[str] = (),
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        on_change: Callable[[DRAPlugin, bool], None] | None = None,
        on_connection: Callable[[DRAPlugin], None] | None = None,
    ) -> None:
        self.node = node
        self.reserved = frozenset(reserved)
        self.call_timeout = call_timeout
        self._plugins: dict[str, list[DRAPlugin]] = {}
        self._on_change = on_change
        self._on_connection = on_connection

    def validate(self, driver: str, endpoint: str, supported: Sequence[str]) -> str:
        """The node service to use for this plugin, or RegistrationRefused with the kubelet's message."""
        try:
            return choose_service(supported)
        except RegistrationRefused as exc:
            raise RegistrationRefused(f"invalid supported gRPC versions of DRA driver plugin {driver} at endpoint {endpoint}: {exc}") from None

    def register(self, driver: str, endpoint: str, supported: Sequence[str]) -> DRAPlugin:
        """Add a plugin instance; RegistrationRefused when it cannot be used."""
        service = self.validate(driver, endpoint, supported)
        if driver in self.reserved:
            raise RegistrationRefused(
                f"DRA driver {driver} is simulated by a built-in profile on node {self.node}; "
                f"the plugin at endpoint {endpoint} cannot register under the same name"
            )
        instances = self._plugins.setdefault(driver, [])
        if any(p.endpoint == endpoint for p in instances):
            # One instance cannot take over the endpoint of another.
            raise RegistrationRefused(f"endpoint {endpoint} already registered for DRA driver plugin {driver}")
        plugin = DRAPlugin(driver, endpoint, service, choose_health_service(supported), self.call_timeout)
        instances.append(plugin)
        plugin.start(self._connection_changed)
        log.info(
            "registered DRA plugin",
            extra={"node": self.node, "driver": driver, "endpoint": endpoint, "service": service, "instances": len(instances)},
        )
        if self._on_change is not None:
            self._on_change(plugin, True)
        return plugin

    def _connection_changed(self, plugin: DRAPlugin) -> None:
        if self._on_connection is not None:
            self._on_connection(plugin)

    async def deregister(self, driver: str, endpoint: str) -> None:
        """Remove a plugin instance (nothing when it is not registered) and close its channel."""
        instances = self._plugins.get(driver, [])
        plugin = next((p for p in instances if p.endpoint == endpoint), None)
        if plugin is None:
            return
        instances.remove(plugin)
        if not instances:
            del self._plugins[driver]
        log.info("deregistered DRA plugin", extra={"node": self.node, "driver": driver, "endpoint": endpoint, "instances": len(instances)})
        if self._on_change is not None:
            self._on_change(plugin, False)
        await plugin.close()

    def get(self, driver: str) -> DRAPlugin:
        """The plugin to call for ``driver``: the newest connected instance, else the newest one."""
        if not driver:
            raise DriverNotRegistered("DRA driver name is empty")
        instances = self._plugins.get(driver)
        if not instances:
            raise DriverNotRegistered(f"DRA driver {driver} is not registered")
        return next((p for p in reversed(instances) if p.connected), instances[-1])

    def registered(self, driver: str) -> bool:
        return bool(self._plugins.get(driver))

    def usable(self, driver: str) -> bool:
        """Whether some instance of ``driver`` is connected."""
        return any(p.connected for p in self._plugins.get(driver, ()))

    def drivers(self) -> list[str]:
        return sorted(self._plugins)

    def plugins(self) -> list[DRAPlugin]:
        return [p for instances in self._plugins.values() for p in instances]

    async def close(self) -> None:
        for plugin in self.plugins():
            await plugin.close()
        self._plugins.clear()
