"""The plugin watcher of one node: registration sockets in ``plugins_registry`` come and go.

Like the kubelet's plugin manager, it compares the sockets it finds (desired state) with the
plugins it registered (actual state) once per ``interval``: a socket that disappeared or was
re-created is deregistered first, then every socket not yet registered goes through the
registration protocol (dial, GetInfo, validate, register, NotifyRegistrationStatus), retried
with exponential back-off while it fails. A monitor calls GetInfo on registered plugins now and
then; a plugin that stopped answering without removing its socket (killed) is deregistered,
and registered again once it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from dataclasses import dataclass

import grpc
import grpc.aio

from kube.tasks import cancel_and_wait, wait_for
from kubeletapi.layout import NodeDirs, check_socket_path
from kubeletapi.pluginregistration.v1 import api_pb2 as registration
from kubeletapi.pluginregistration.v1 import api_pb2_grpc as registration_grpc
from kubeletapi.versions import DRA_PLUGIN_TYPE
from kubeletsim.plugins.draplugin import PluginError, PluginStore, rpc_error_text

log = logging.getLogger("kubeletsim.plugins")


@dataclass(frozen=True)
class Timeouts:
    """The plugin manager's timeouts, in seconds."""

    dial: float = 10.0
    get_info: float = 1.0
    notify: float = 5.0
    # Connection monitor: GetInfo of a registered plugin every ``monitor_interval`` (each call
    # may take ``monitor_call``); ``monitor_failures`` failures in a row deregister it.
    monitor_interval: float = 10.0
    monitor_call: float = 10.0
    monitor_failures: int = 2
    # Back-off between attempts to register a failing socket.
    backoff_initial: float = 0.5
    backoff_max: float = 122.0


Stamp = tuple[int, int]
# (directory, inode, mtime) of the registry directory and each directory under it.
TreeStamp = tuple[tuple[str, int, int], ...]


@dataclass
class _Registered:
    stamp: Stamp
    driver: str
    endpoint: str


class RegistrationFailed(Exception):
    """One registration attempt failed; the message is the kubelet's."""


def _socket_stamp(path: str) -> Stamp | None:
    """(inode, ctime) of a unix socket, identifying one incarnation of it; None for anything else."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_ctime_ns) if stat.S_ISSOCK(st.st_mode) else None


class ScanTicker:
    """One timer for the plugin watchers of every node of a process: each ``interval`` it scans the
    watchers that are due (see :meth:`PluginWatcher.due`), one after another, instead of a timer and
    a directory walk per node and second."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._watchers: dict[PluginWatcher, None] = {}

    def add(self, watcher: PluginWatcher) -> None:
        self._watchers[watcher] = None

    def discard(self, watcher: PluginWatcher) -> None:
        self._watchers.pop(watcher, None)

    async def run(self) -> None:
        while True:
            for watcher in list(self._watchers):
                if watcher.due():
                    try:
                        await watcher.scan()
                    except Exception:
                        log.exception("plugin scan failed", extra={"node": watcher.dirs.node})
            await asyncio.sleep(self.interval)


class PluginWatcher:
    """Registers the DRA plugins whose registration sockets appear in one node's ``plugins_registry``."""

    def __init__(self, dirs: NodeDirs, store: PluginStore, *, interval: float = 1.0, timeouts: Timeouts | None = None) -> None:
        self.dirs = dirs
        self.store = store
        self.interval = interval
        self.timeouts = timeouts or Timeouts()
        self._registered: dict[str, _Registered] = {}
        self._attempts: dict[str, asyncio.Task[None]] = {}
        # socket path -> (stamp, failures so far, monotonic time of the next attempt)
        self._backoff: dict[str, tuple[Stamp, int, float]] = {}
        # Incarnations whose registration was refused after GetInfo: not retried until re-created.
        self._refused: dict[str, Stamp] = {}
        # Incarnations the monitor found dead: not registered again until they answer.
        self._dead: dict[str, Stamp] = {}
        self._monitors: dict[str, asyncio.Task[None]] = {}
        # The directories the last scan walked, as they were then (None: scan on the next pass).
        self._tree: TreeStamp | None = None
        self._walked: list[str] = []

    # ---- the loop -------------------------------------------------------------------------------

    async def run(self, ticker: ScanTicker | None = None) -> None:
        """Scan every ``interval`` seconds until cancelled (with ``ticker``: when it says), then stop what is in flight."""
        self.dirs.registry.mkdir(parents=True, exist_ok=True)
        try:
            if ticker is not None:
                ticker.add(self)
                try:
                    await asyncio.Event().wait()
                finally:
                    ticker.discard(self)
            while True:
                if self.due():
                    await self.scan()
                await asyncio.sleep(self.interval)
        finally:
            await self.stop()

    def due(self) -> bool:
        """Whether a scan may find anything to do. Without plugins (no socket ever seen, nothing in
        flight) only a change of the registry's directories can bring one, which one stat per
        directory tells: a node whose drivers are all built in costs no directory walk per second."""
        if self._tree is None or self._registered or self._attempts or self._backoff or self._refused or self._dead or self._monitors:
            return True
        return self._tree_stamp([d for d, _, _ in self._tree]) != self._tree

    def _tree_stamp(self, directories: list[str]) -> TreeStamp | None:
        out = []
        for directory in directories:
            try:
                st = os.stat(directory)
            except OSError:
                return None
            out.append((directory, st.st_ino, st.st_mtime_ns))
        return tuple(out)

    async def stop(self) -> None:
        await cancel_and_wait(*self._attempts.values(), *self._monitors.values())
        self._attempts.clear()
        self._monitors.clear()

    def sockets(self) -> dict[str, Stamp]:
        """The registration sockets present now: path -> stamp (names starting with '.' are ignored, as upstream)."""
        found: dict[str, Stamp] = {}
        walked: list[str] = []
        for directory, subdirs, files in os.walk(self.dirs.registry):
            walked.append(directory)
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                path = os.path.join(directory, name)
                stamp = _socket_stamp(path)
                if stamp is not None:
                    found[path] = stamp
        self._walked = walked
        return found

    async def scan(self) -> None:
        """One reconcile pass: deregister what went away, start registering what is new."""
        # Stamped before the walk, so that a change made while walking shows on the next pass.
        before = self._tree_stamp(self._walked) if self._walked else None
        present = self.sockets()
        self._tree = before if before is not None and [d for d, _, _ in before] == self._walked else None
        desired = {p: s for p, s in present.items() if self._dead.get(p) != s}
        for path, entry in list(self._registered.items()):
            if desired.get(path) != entry.stamp:
                await self._deregister(path, entry)
        # Forget what was remembered about sockets that are gone or were re-created.
        for path in [p for p, s in self._refused.items() if present.get(p) != s]:
            del self._refused[path]
        for path in [p for p, s in self._dead.items() if present.get(p) != s]:
            del self._dead[path]
        for path in [p for p, b in self._backoff.items() if present.get(p) != b[0]]:
            del self._backoff[path]
        now = time.monotonic()
        for path, stamp in desired.items():
            if path in self._registered or path in self._attempts or self._refused.get(path) == stamp:
                continue
            backoff = self._backoff.get(path)
            if backoff is not None and backoff[0] == stamp and backoff[2] > now:
                continue
            self._attempts[path] = asyncio.get_running_loop().create_task(self._attempt(path, stamp), name=f"register-{path}")
        for path in [p for p in self._monitors if p not in self._registered and p not in self._dead]:
            self._monitors.pop(path).cancel()
        for path in [*self._registered, *self._dead]:
            if path not in self._monitors:
                self._monitors[path] = asyncio.get_running_loop().create_task(self._monitor(path), name=f"monitor-{path}")

    async def wait_idle(self) -> None:
        """Wait for the registrations in flight (tests)."""
        while self._attempts:
            await asyncio.gather(*self._attempts.values(), return_exceptions=True)

    async def _deregister(self, path: str, entry: _Registered) -> None:
        del self._registered[path]
        log.info("plugin socket removed, deregistering", extra={"node": self.dirs.node, "socket": path, "driver": entry.driver})
        await self.store.deregister(entry.driver, entry.endpoint)

    # ---- registration ---------------------------------------------------------------------------

    async def _attempt(self, path: str, stamp: Stamp) -> None:
        try:
            await self._register(path, stamp)
            self._backoff.pop(path, None)
        except RegistrationFailed as exc:
            previous = self._backoff.get(path)
            failures = previous[1] + 1 if previous is not None and previous[0] == stamp else 1
            delay = min(self.timeouts.backoff_initial * 2 ** (failures - 1), self.timeouts.backoff_max)
            self._backoff[path] = (stamp, failures, time.monotonic() + delay)
            log.error(
                "plugin registration failed",
                extra={"node": self.dirs.node, "socket": path, "error": str(exc), "failures": failures, "retryIn": delay},
            )
        finally:
            self._attempts.pop(path, None)

    async def _register(self, path: str, stamp: Stamp) -> None:
        t = self.timeouts
        try:
            channel = grpc.aio.insecure_channel("unix:" + check_socket_path(path))
        except ValueError as exc:
            raise RegistrationFailed(f"RegisterPlugin error -- dial failed at socket {path}, err: {exc}") from None
        try:
            try:
                await wait_for(channel.channel_ready(), t.dial)
            except TimeoutError:
                raise RegistrationFailed(
                    f"RegisterPlugin error -- dial failed at socket {path}, err: failed to dial socket {path}, err: context deadline exceeded"
                ) from None
            client = registration_grpc.RegistrationStub(channel)
            try:
                info = await client.GetInfo(registration.InfoRequest(), timeout=t.get_info)
            except grpc.aio.AioRpcError as exc:
                raise RegistrationFailed(
                    f"RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {path}, err: {rpc_error_text(exc)}"
                ) from None
            if info.type != DRA_PLUGIN_TYPE:
                message = f"RegisterPlugin error -- no handler registered for plugin type: {info.type} at socket {path}"
                await self._notify(client, path, False, message)
                raise RegistrationFailed(message)
            endpoint = info.endpoint or path
            try:
                self.store.validate(info.name, endpoint, list(info.supported_versions))
            except PluginError as exc:
                await self._notify(client, path, False, f"RegisterPlugin error -- plugin validation failed with err: {exc}")
                raise RegistrationFailed("RegisterPlugin error -- pluginHandler.ValidatePluginFunc failed") from None
            try:
                self.store.register(info.name, endpoint, list(info.supported_versions))
            except (PluginError, ValueError) as exc:
                # As upstream: the socket counts as handled and is not retried until it is re-created.
                self._refused[path] = stamp
                message = f"RegisterPlugin error -- plugin registration failed with err: {exc}"
                log.error("plugin registration refused", extra={"node": self.dirs.node, "socket": path, "driver": info.name, "error": message})
                with contextlib.suppress(RegistrationFailed):
                    await self._notify(client, path, False, message)
                return
            self._registered[path] = _Registered(stamp, info.name, endpoint)
            await self._notify(client, path, True, "")
        finally:
            await channel.close()

    async def _notify(self, client: registration_grpc.RegistrationStub, path: str, registered: bool, error: str) -> None:
        try:
            await client.NotifyRegistrationStatus(registration.RegistrationStatus(plugin_registered=registered, error=error), timeout=self.timeouts.notify)
        except grpc.aio.AioRpcError as exc:
            if error:
                raise RegistrationFailed(f"{error}: {rpc_error_text(exc)}") from None
            raise RegistrationFailed(f"RegisterPlugin error -- failed to send registration status at socket {path}, err: {rpc_error_text(exc)}") from None

    # ---- connection monitor ---------------------------------------------------------------------

    async def _monitor(self, path: str) -> None:
        """GetInfo on the socket now and then: deregister after repeated failures, re-admit when it answers again."""
        t = self.timeouts
        failures = 0
        channel: grpc.aio.Channel | None = None
        try:
            while True:
                await asyncio.sleep(t.monitor_interval)
                ok = False
                try:
                    if channel is None:
                        channel = grpc.aio.insecure_channel("unix:" + check_socket_path(path))
                    await registration_grpc.RegistrationStub(channel).GetInfo(registration.InfoRequest(), timeout=t.monitor_call)
                    ok = True
                except (grpc.aio.AioRpcError, ValueError) as exc:
                    log.debug("plugin connection check failed", extra={"node": self.dirs.node, "socket": path, "error": str(exc)})
                if ok:
                    failures = 0
                    if path in self._dead:
                        log.info("plugin answers again, registering it", extra={"node": self.dirs.node, "socket": path})
                        del self._dead[path]
                        return
                    continue
                failures += 1
                entry = self._registered.get(path)
                if failures >= t.monitor_failures and entry is not None:
                    log.error(
                        "plugin stopped answering, deregistering it",
                        extra={"node": self.dirs.node, "socket": path, "driver": entry.driver, "failures": failures},
                    )
                    self._dead[path] = entry.stamp
                    await self._deregister(path, entry)
                    failures = 0
        finally:
            if self._monitors.get(path) is asyncio.current_task():
                del self._monitors[path]
            if channel is not None:
                await channel.close()
