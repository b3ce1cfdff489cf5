"""The node side of the simulated kubelets: registration, node status, Lease renewals and status heartbeats.

A node is (re-)registered when it is missing, and its status restored when it lost what the
kubelet maintains (Ready condition, nodeInfo, allocatable) or does not match this process's
``--max-pods`` and gates. Its Lease is renewed once right away (a kubelet renews when it
starts) and from then on by the heartbeat loops, which also post the node's conditions.
"""

from __future__ import annotations

import logging

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.features import FeatureGates
from kube.informer import Informer
from kube.objects import Obj
from kube.objects import meta as _meta
from kube.objects import status as _status
from kube.timeutil import now_rfc3339
from kube.workqueue import ExponentialBackoff, WorkQueue
from kubeletsim import nodes as nodes_mod
from kubeletsim.heartbeats import Heartbeats
from kubeletsim.identities import Identities
from kubeletsim.settings import Settings

log = logging.getLogger("kubeletsim")

NODES = resource_path("", "v1", "nodes")


def node_healthy(node: Obj) -> bool:
    """Ready, with nodeInfo and allocatable: what a registered kubelet keeps in its node's status."""
    status = _status(node)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ready and bool(status.get("nodeInfo")) and bool(status.get("allocatable"))


class NodeController:
    """Keeps the Nodes named ``settings.node_names`` registered, healthy and their Leases fresh.

    ``queue`` holds node names; ``sync(name)`` reconciles one node, ``run_heartbeats()`` runs the
    Lease and node status loops.
    """

    def __init__(
        self, client: KubeClient, nodes: Informer, settings: Settings, *, profile_name: str, gates: FeatureGates, backoff: ExponentialBackoff,
        identities: Identities | None = None,
    ) -> None:  # fmt: skip
        self.client = client
        self.identities = identities or Identities(client)
        self.nodes = nodes
        self.settings = settings
        self.profile_name = profile_name
        # The gated features this kubelet supports, which the scheduler checks (status.declaredFeatures).
        self.declared_features = [nodes_mod.NODE_ALLOCATABLE_FEATURE] if gates.enabled(nodes_mod.NODE_ALLOCATABLE_FEATURE) else []
        # This process's nodes (its shard of the range) -> their numbers in the whole range.
        self.node_index = settings.node_index
        self.queue: WorkQueue[str] = WorkQueue(backoff)
        # node -> uid of the Node object whose Lease this process last renewed or created on registration.
        self._lease_synced: dict[str, str] = {}
        self.leases = Heartbeats("leases", settings.lease_interval, self._renew_lease, settings.heartbeats_in_flight(settings.lease_interval))
        self.node_status = Heartbeats(
            "node-status", settings.node_status_interval, self._beat_node_status, settings.heartbeats_in_flight(settings.node_status_interval)
        )
        nodes.on_add(self._node_event)
        nodes.on_update(lambda old, new: self._node_event(new, old))
        nodes.on_delete(self._node_event)

    def _node_event(self, node: Obj, old: Obj | None = None) -> None:
        name = _meta(node).get("name", "")
        if name not in self.node_index:
            return
        # Heartbeats update every node all the time; only a new node or one that lost what we maintain needs work.
        if old is None or not node_healthy(node) or _meta(old).get("uid") != _meta(node).get("uid") or self._settings_patch(node) is not None:
            self.queue.add(name)

    def queue_all(self) -> None:
        """Queue every simulated node (at the start, and on every resync)."""
        for name in self.node_index:
            self.queue.add(name)

    def resync(self) -> None:
        """Report how the Lease loop keeps up, then re-check every node."""
        late, self.leases.max_late = self.leases.max_late, 0.0
        # How far behind its slots the lease loop ran: the first sign of a simulator (or server) that is overloaded.
        level = logging.WARNING if late > self.settings.lease_interval / 2 else logging.INFO
        log.log(level, "lease renewals", extra={"renewals": self.leases.beats, "maxLateSeconds": round(late, 3)})
        self.queue_all()

    def _settings_patch(self, node: Obj) -> Obj | None:
        """A status patch when the node's pod capacity or declared features are not this process's
        (it was registered by a run with another --max-pods or other gates), else None."""
        status = _status(node)
        pods = str(self.settings.max_pods)
        if (
            (status.get("capacity") or {}).get("pods") == pods
            and (status.get("allocatable") or {}).get("pods") == pods
            and sorted(status.get("declaredFeatures") or []) == self.declared_features
        ):
            return None
        return {
            "status": {
                "capacity": {"pods": pods},
                "allocatable": {"pods": pods},
                "declaredFeatures": self.declared_features or None,
            }
        }

    async def sync(self, name: str) -> None:
        """Register the node if it is missing, restore its status, renew its Lease once, start its heartbeats."""
        node = self.nodes.get("", name)
        index = self.node_index[name]
        max_pods, features = self.settings.max_pods, self.declared_features
        registered = False
        if node is None:
            try:
                node = await self.identities.node(name).create(NODES, nodes_mod.build_node(name, index, self.profile_name, max_pods=max_pods, declared_features=features))
                registered = True
                log.info("registered node", extra={"node": name, "shard": str(self.settings.shard)})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                node = await self.identities.node(name).get(resource_path("", "v1", "nodes", name=name))
        if not node_healthy(node):
            status = nodes_mod.node_status(name, index, max_pods=max_pods, declared_features=features)
            node = await self.identities.node(name).patch(resource_path("", "v1", "nodes", name=name, subresource="status"), {"status": status})
        elif (settings := self._settings_patch(node)) is not None:
            node = await self.identities.node(name).patch(resource_path("", "v1", "nodes", name=name, subresource="status"), settings)
        uid = _meta(node).get("uid", "")
        if self._lease_synced.get(name) != uid:
            # Right away (a kubelet renews when it starts); afterwards the heartbeat loop renews it at its
            # slot. A Node object new to us (registered now, or re-created) becomes the Lease's owner.
            await self._renew_lease(name, node, owner=registered or name in self._lease_synced)
            self._lease_synced[name] = uid
        self.leases.add(name)
        self.node_status.add(name)

    async def _renew_lease(self, name: str, node: Obj | None = None, owner: bool = False) -> None:
        """Renew the node's Lease: one merge patch of its spec, with nothing read (the heartbeat loop renews
        thousands a minute); create it when missing. ``owner``: (re)point it at ``node``, the Node object
        just synced (otherwise a Lease made anew is owned by the Node object this process last synced)."""
        client = self.identities.node(name)
        leases = resource_path("coordination.k8s.io", "v1", "leases", nodes_mod.NODE_LEASE_NAMESPACE)
        uid = _meta(node).get("uid") if node is not None else self._lease_synced.get(name)
        lease = nodes_mod.build_lease({"metadata": {"name": name, "uid": uid}})
        if owner:
            # A node we just registered most likely has no Lease yet: create first, patch only if one exists.
            try:
                await client.create(leases, lease)
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
        patch: Obj = {"spec": lease["spec"]}
        if owner and lease["metadata"].get("ownerReferences"):
            patch["metadata"] = {"ownerReferences": lease["metadata"]["ownerReferences"]}
        try:
            await client.patch(resource_path("coordination.k8s.io", "v1", "leases", nodes_mod.NODE_LEASE_NAMESPACE, name), patch)
        except ApiError as exc:
            if exc.code != 404:
                raise
            try:
                await client.create(leases, lease)
            except ApiError as create_exc:
                if create_exc.code != 409:
                    raise

    async def _beat_node_status(self, name: str) -> None:
        """Post the node's conditions with a fresh lastHeartbeatTime (keeping transition times)."""
        node = self.nodes.get("", name)
        if node is None:
            self.queue.add(name)
            return
        transitions = {c.get("type", ""): c.get("lastTransitionTime", "") for c in _status(node).get("conditions") or []}
        conditions = nodes_mod.node_conditions(now_rfc3339(), transitions)
        await self.identities.node(name).patch(resource_path("", "v1", "nodes", name=name, subresource="status"), {"status": {"conditions": conditions}})
