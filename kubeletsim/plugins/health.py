"""Device health reported by drivers' NodeWatchResources streams, as the kubelet keeps it.

Every stream message lists a driver's devices; a report is trusted for the device's
``health_check_timeout_seconds`` (default 30 s) and reads "Unknown" after that. When a stream
ends, what it reported is forgotten; the stream is opened again every few seconds while the
plugin stays registered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import grpc.aio

from kube.tasks import cancel_and_wait
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletsim.plugins.draplugin import DRAPlugin, rpc_error_text

log = logging.getLogger("kubeletsim.plugins")

HEALTHY, UNHEALTHY, UNKNOWN = "Healthy", "Unhealthy", "Unknown"
DEFAULT_HEALTH_TIMEOUT = 30.0
STREAM_RETRY_INTERVAL = 5.0
MAX_MESSAGE = 1024
_STATUS = {health_v1.HEALTHY: HEALTHY, health_v1.UNHEALTHY: UNHEALTHY}


@dataclass(frozen=True)
class DeviceHealth:
    health: str
    updated: float
    timeout: float
    message: str = ""


def _message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


class HealthCache:
    """driver -> (pool, device) -> the last report, for one node."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._devices: dict[str, dict[tuple[str, str], DeviceHealth]] = {}
        self._clock = clock

    def update(self, driver: str, response: health_v1.NodeWatchResourcesResponse) -> list[tuple[str, str]]:
        """Take in one stream message; return the (pool, device) pairs whose health changed."""
        now = self._clock()
        known = self._devices.setdefault(driver, {})
        changed: list[tuple[str, str]] = []
        reported: set[tuple[str, str]] = set()
        for device in response.devices:
            key = (device.device.pool_name, device.device.device_name)
            reported.add(key)
            if device.health_check_timeout_seconds < 0:
                log.debug("ignoring a negative health check timeout", extra={"driver": driver, "device": "/".join(key)})
            timeout = float(device.health_check_timeout_seconds) if device.health_check_timeout_seconds > 0 else DEFAULT_HEALTH_TIMEOUT
            new = DeviceHealth(_STATUS.get(device.health, UNKNOWN), now, timeout, _message(device.message))
            old = known.get(key)
            if old is None or old.health != new.health or old.message != new.message:
                changed.append(key)
            known[key] = new
        # Devices left out of a report turn Unknown once their last report timed out.
        for key, old in known.items():
            if key not in reported and old.health != UNKNOWN and now - old.updated > old.timeout:
                known[key] = DeviceHealth(UNKNOWN, now, old.timeout)
                changed.append(key)
        return changed

    def get(self, driver: str, pool: str, device: str) -> DeviceHealth | None:
        """The device's current health (Unknown once its report timed out), or None when never reported."""
        entry = self._devices.get(driver, {}).get((pool, device))
        if entry is None:
            return None
        if self._clock() - entry.updated > entry.timeout:
            return DeviceHealth(UNKNOWN, entry.updated, entry.timeout)
        return entry

    def clear(self, driver: str) -> list[tuple[str, str]]:
        """Forget a driver's reports (its stream ended); return the devices that were known."""
        return list(self._devices.pop(driver, {}))

    def expired(self) -> dict[str, list[tuple[str, str]]]:
        """Devices whose last report timed out since it was made (for a periodic re-check)."""
        now = self._clock()
        return {
            driver: [k for k, h in devices.items() if h.health != UNKNOWN and now - h.updated > h.timeout]
            for driver, devices in self._devices.items()
        }


OnHealthChange = Callable[[str, list[tuple[str, str]]], None]


class HealthStreams:
    """One NodeWatchResources stream per registered plugin that serves a health service."""

    def __init__(self, node: str, cache: HealthCache, on_change: OnHealthChange, *, retry_interval: float = STREAM_RETRY_INTERVAL) -> None:
        self.node = node
        self.cache = cache
        self.on_change = on_change
        self.retry_interval = retry_interval
        self._tasks: dict[DRAPlugin, asyncio.Task[None]] = {}

    def plugin_changed(self, plugin: DRAPlugin, registered: bool) -> None:
        """Start watching a newly registered plugin, stop watching a deregistered one."""
        if registered and plugin.health_service is not None and plugin not in self._tasks:
            self._tasks[plugin] = asyncio.get_running_loop().create_task(self._watch(plugin), name=f"health-{self.node}-{plugin.driver}")
        elif not registered and plugin in self._tasks:
            self._tasks.pop(plugin).cancel()

    async def _watch(self, plugin: DRAPlugin) -> None:
        while True:
            try:
                async for response in plugin.watch_health():
                    changed = self.cache.update(plugin.driver, response)
                    if changed:
                        self.on_change(plugin.driver, changed)
                log.info("health stream ended", extra={"node": self.node, "driver": plugin.driver})
            except grpc.aio.AioRpcError as exc:
                log.debug("health stream failed, will retry", extra={"node": self.node, "driver": plugin.driver, "error": rpc_error_text(exc)})
            finally:
                forgotten = self.cache.clear(plugin.driver)
                if forgotten:
                    self.on_change(plugin.driver, forgotten)
            await asyncio.sleep(self.retry_interval)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await cancel_and_wait(*tasks)
