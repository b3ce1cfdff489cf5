"""The kubelet simulator: many fake nodes in one asyncio process, driven by informers.

Informers cache nodes, ResourceSlices, pods bound to any node (one watch, filtered locally)
and ResourceClaims. Three controllers share them: nodes and their Leases
(``kubeletsim.nodecontroller``), the drivers' ResourceSlices (``kubeletsim.slicecontroller``)
and the pods (``kubeletsim.podcontroller``); the drivers' attachment of devices with binding
conditions (``kubeletsim.bindingcontroller``) reacts to claims directly. Their handlers only queue keys, and each
controller's workers reconcile one key at a time. Everything is derived from what the server
holds, so a restarted simulator picks up its nodes, slices and running pods without
duplicating anything.

Each node also meets real DRA drivers over gRPC (``kubeletsim.plugins``): drivers register in
``<root-dir>/<node>/plugins_registry``, prepare the devices of the pods' claims, report device
health, and monitoring agents read ``<root-dir>/<node>/pod-resources/kubelet.sock``. What the
nodes prepared through drivers is checkpointed under the root directory, so after a restart
nothing is prepared twice and the claims of pods deleted meanwhile are unprepared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Hashable

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.features import FeatureGates
from kube.informer import Informer, run_with_informers
from kube.tasks import cancel_and_wait
from kube.workqueue import ExponentialBackoff
from kubeletsim.bindingcontroller import BindingController
from kubeletsim.identities import Identities
from kubeletsim.nodecontroller import NodeController
from kubeletsim.plugins.node import NodePlugins, PluginSettings
from kubeletsim.plugins.registration import ScanTicker
from kubeletsim.podcontroller import HEALTH_FEATURE, PodController
from kubeletsim.profiles import Profile
from kubeletsim.settings import Settings
from kubeletsim.slicecontroller import SliceController

log = logging.getLogger("kubeletsim")

# A failed key is retried after 0.1 s, doubling up to 10 s.
RETRY_BACKOFF = ExponentialBackoff(base=0.1, cap=10.0)


def _log_failure(key: Hashable, exc: Exception, delay: float) -> None:
    # A conflict is the normal outcome of racing another writer; the retry reads the newer object.
    level = logging.DEBUG if isinstance(exc, ApiError) and exc.code == 409 else logging.WARNING
    log.log(level, "reconcile failed, retrying", extra={"key": str(key), "error": str(exc), "retryIn": delay})


class Simulator:
    """Simulates ``settings.nodes`` kubelets that run the drivers of ``profile``."""

    def __init__(
        self, client: KubeClient, profile: Profile, settings: Settings, gates: FeatureGates | None = None, identities: Identities | None = None
    ) -> None:
        self.settings = settings
        identities = identities or Identities(client)
        gates = gates or FeatureGates()
        self.profile = profile
        node_names = settings.node_names
        # Nodes and slices are kept as JSON (a fraction of their decoded size) and decoded when one
        # node is reconciled: each is read a few times a minute at most.
        self.nodes = Informer(client, resource_path("", "v1", "nodes"), name="nodes", compact=True)
        self.slices = Informer(client, resource_path("resource.k8s.io", "v1", "resourceslices"), name="resourceslices", compact=True)
        # One watch over every bound pod; upstream kubelets watch one node each, which at
        # simulator scale would mean thousands of watches.
        self.pods = Informer(client, resource_path("", "v1", "pods"), field_selector="spec.nodeName!=", name="pods")
        self.claims = Informer(client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims")
        self.node_controller = NodeController(
            client, self.nodes, settings, profile_name=profile.name, gates=gates, backoff=RETRY_BACKOFF, identities=identities
        )
        self.slice_controller = SliceController(client, self.nodes, self.slices, node_names, profile, gates=gates, backoff=RETRY_BACKOFF, identities=identities)
        plugin_settings = settings.plugins
        if not gates.enabled(HEALTH_FEATURE):
            plugin_settings = dataclasses.replace(plugin_settings, watch_health=False)
        # One timer scans every node's plugin registry (most have no plugins: a stat each).
        self.plugin_ticker = ScanTicker(plugin_settings.scan_interval)
        self.plugins = {name: self._node_plugins(name, plugin_settings) for name in node_names}
        self.pod_controller = PodController(
            client, self.nodes, self.pods, self.claims, settings.node_index, profile, max_pods=settings.max_pods, gates=gates, backoff=RETRY_BACKOFF,
            identities=identities, managers={name: p.manager for name, p in self.plugins.items()},
        )  # fmt: skip
        self.binding_controller = BindingController(
            self.claims, node_names, profile.driver_names, identities, delay=settings.binding_delay, fail=settings.binding_fail
        )
        self.ready = asyncio.Event()

    def _node_plugins(self, node: str, settings: PluginSettings) -> NodePlugins:
        return NodePlugins(
            node,
            settings,
            self.profile.driver_names,
            active_pods=lambda: self.pod_controller.active_pods(node),
            on_health=lambda uids: self.pod_controller.health_changed(uids),
            on_wipe=lambda driver: self.slice_controller.wipe(node, driver),
            ticker=self.plugin_ticker,
        )

    @property
    def informers(self) -> list[Informer]:
        return [self.nodes, self.slices, self.pods, self.claims]

    async def run(self) -> None:
        """Sync the caches, then reconcile until cancelled."""
        await run_with_informers(self.informers, self._reconcile())

    async def _reconcile(self) -> None:
        log.info("caches synced", extra={"nodes": self.settings.nodes, "profile": self.profile.name})
        self.node_controller.queue_all()
        self.slice_controller.queue_all()
        workers = self.settings.workers
        tasks = [
            asyncio.create_task(self.node_controller.queue.run(self.node_controller.sync, workers, _log_failure), name="nodes"),
            asyncio.create_task(self.slice_controller.queue.run(self.slice_controller.sync, workers, _log_failure), name="slices"),
            asyncio.create_task(self.pod_controller.queue.run(self.pod_controller.sync, workers, _log_failure), name="pods"),
            asyncio.create_task(self.node_controller.leases.run(), name="leases"),
            asyncio.create_task(self.node_controller.node_status.run(), name="node-status"),
            asyncio.create_task(self._resync_forever(), name="resync"),
            *(asyncio.create_task(p.run(), name=f"plugins-{p.node}") for p in self.plugins.values()),
            asyncio.create_task(self.plugin_ticker.run(), name="plugin-scans"),
            asyncio.create_task(self.pod_controller.release_orphans(), name="orphans"),
        ]
        self.ready.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(*tasks)
            await self.binding_controller.stop()

    async def _resync_forever(self) -> None:
        """Re-check everything now and then, in case an event was missed or a write raced (cheap: no writes when all is well)."""
        while True:
            await asyncio.sleep(self.settings.resync_interval)
            self.node_controller.resync()
            self.slice_controller.queue_all()
            self.pod_controller.resync()
            await self.pod_controller.release_orphans()
