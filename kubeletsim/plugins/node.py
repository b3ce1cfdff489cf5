"""Everything of the kubelet's plugin side for one simulated node, wired together.

A node has a plugin watcher on ``<root>/<node>/plugins_registry``, the store of the plugins it
registered, their health streams (with ResourceHealthStatus), the DRA manager with its
checkpoint ``<root>/<node>/dra_manager_state``, and the PodResources service on
``<root>/<node>/pod-resources/kubelet.sock``. A driver whose plugins all went away (or stopped
answering) has its ResourceSlices of the node wiped after ``wiping_delay`` unless one comes
back, as the kubelet does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from kubeletapi.layout import DEFAULT_ROOT_DIR, NodeDirs
from kubeletsim.plugins.checkpoint import Checkpoint
from kubeletsim.plugins.draplugin import DEFAULT_CALL_TIMEOUT, DRAPlugin, PluginStore
from kubeletsim.plugins.health import STREAM_RETRY_INTERVAL, HealthCache, HealthStreams
from kubeletsim.plugins.manager import DRAManager
from kubeletsim.plugins.podresources import ActivePods, PodResourcesServer
from kubeletsim.plugins.registration import PluginWatcher, ScanTicker, Timeouts

log = logging.getLogger("kubeletsim.plugins")

# How long the kubelet keeps the ResourceSlices of a driver none of whose plugins is usable.
DEFAULT_WIPING_DELAY = 30.0


@dataclass(frozen=True)
class PluginSettings:
    """How the simulated kubelets meet real drivers: where (``root``), and how patient they are."""

    root: Path = DEFAULT_ROOT_DIR
    scan_interval: float = 1.0
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    timeouts: Timeouts = field(default_factory=Timeouts)
    wiping_delay: float = DEFAULT_WIPING_DELAY
    health_retry_interval: float = STREAM_RETRY_INTERVAL
    # ResourceHealthStatus: watch the drivers' health streams.
    watch_health: bool = True

    def dirs(self, node: str) -> NodeDirs:
        return NodeDirs(self.root, node)


# Told which pods' device health changed (their uids).
OnHealth = Callable[[set[str]], None]
# Told to wipe the ResourceSlices of a driver on the node.
OnWipe = Callable[[str], None]


class NodePlugins:
    """The watcher, plugin store, health streams, DRA manager and PodResources server of one node.

    ``builtin_drivers``: drivers the node simulates itself (a plugin may not register under
    their names). ``active_pods()``: the node's pods that PodResources lists.
    """

    def __init__(
        self,
        node: str,
        settings: PluginSettings,
        builtin_drivers: Collection[str],
        *,
        active_pods: ActivePods,
        on_health: OnHealth = lambda _uids: None,
        on_wipe: OnWipe = lambda _driver: None,
        ticker: ScanTicker | None = None,
    ) -> None:
        """``ticker``: scans the watcher together with those of the process's other nodes (default: its own timer)."""
        self.node = node
        self.ticker = ticker
        self.settings = settings
        self.dirs = settings.dirs(node)
        self.on_health = on_health
        self.on_wipe = on_wipe
        self.health = HealthCache()
        self.checkpoint = Checkpoint(self.dirs.checkpoint)
        self.checkpoint.load()
        self.streams = HealthStreams(node, self.health, self._health_changed, retry_interval=settings.health_retry_interval)
        self.store = PluginStore(
            node, reserved=builtin_drivers, call_timeout=settings.call_timeout, on_change=self._plugin_changed, on_connection=self._connection_changed
        )
        self.manager = DRAManager(node, self.store, self.checkpoint, self.health, builtin_drivers=builtin_drivers)
        self.watcher = PluginWatcher(self.dirs, self.store, interval=settings.scan_interval, timeouts=settings.timeouts)
        self.pod_resources = PodResourcesServer(self.dirs.pod_resources_socket, active_pods, self.manager.container_devices)
        self._wipes: dict[str, asyncio.TimerHandle] = {}

    async def run(self) -> None:
        """Serve PodResources and watch for plugins until cancelled; then stop everything."""
        self.dirs.create()
        await self.pod_resources.start()
        try:
            await self.watcher.run(self.ticker)
        finally:
            for handle in self._wipes.values():
                handle.cancel()
            self._wipes.clear()
            await self.pod_resources.stop()
            await self.streams.close()
            await self.store.close()

    # ---- callbacks of the store and the health streams -----------------------------------------

    def _plugin_changed(self, plugin: DRAPlugin, registered: bool) -> None:
        if self.settings.watch_health:
            self.streams.plugin_changed(plugin, registered)
        self._connection_changed(plugin)

    def _connection_changed(self, plugin: DRAPlugin) -> None:
        """Wipe the driver's slices once no plugin of it has been usable for the wiping delay."""
        driver = plugin.driver
        if self.store.usable(driver):
            pending = self._wipes.pop(driver, None)
            if pending is not None:
                pending.cancel()
            return
        if driver in self._wipes:
            return  # the first deadline stands

        def wipe() -> None:
            del self._wipes[driver]
            if not self.store.usable(driver):
                log.info("wiping the ResourceSlices of an unusable DRA driver", extra={"node": self.node, "driver": driver})
                self.on_wipe(driver)

        self._wipes[driver] = asyncio.get_running_loop().call_later(self.settings.wiping_delay, wipe)

    def _health_changed(self, driver: str, devices: list[tuple[str, str]]) -> None:
        pods = self.manager.pods_using(driver, devices)
        if pods:
            self.on_health(pods)

