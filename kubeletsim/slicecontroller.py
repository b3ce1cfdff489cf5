"""The DRA drivers' ResourceSlices of the simulated nodes: one pool per node and driver, as the profile says.

Each node's pools are published once its Node exists (the slices are owned by it) and made to
match the profile again whenever a slice of the node changes or disappears. A pool whose
slices change gets a new generation, higher than any it had, so that consumers never mistake
a new pool for an old one.

Slices of the node's other drivers belong to those drivers' plugins. As the kubelet does, they
are wiped when the simulator starts (no plugin has registered yet; a running driver publishes
them again) and when a driver's plugins have been gone too long (``wipe``).
"""

from __future__ import annotations

import copy
import logging

import orjson

from kube.client import KubeClient, resource_path
from kube.features import FeatureGates
from kube.informer import Informer, resource_version_number
from kube.objects import Obj
from kube.objects import meta as _meta
from kube.objects import spec as _spec
from kube.workqueue import ExponentialBackoff, WorkQueue
from kubeletsim.identities import Identities
from kubeletsim.nodes import NODE_ALLOCATABLE_FEATURE
from kubeletsim.profiles import DriverProfile, Profile, build_pool_slices, without_device_field

log = logging.getLogger("kubeletsim")

SLICES = resource_path("resource.k8s.io", "v1", "resourceslices")


def _written_rv(obj: Obj | None) -> int:
    return resource_version_number(_meta(obj or {}).get("resourceVersion")) or 0


def same_slice(existing: Obj, desired: Obj) -> bool:
    """The same owners and spec, but for the pool's generation."""

    def strip(obj: Obj) -> Obj:
        # Shallow copies: only the pool's generation is left out of the comparison.
        spec = dict(_spec(obj))
        spec["pool"] = {k: v for k, v in (spec.get("pool") or {}).items() if k != "generation"}
        return spec

    owners = [o.get("uid") for o in _meta(existing).get("ownerReferences") or []]
    wanted = [o.get("uid") for o in _meta(desired).get("ownerReferences") or []]
    return owners == wanted and strip(existing) == strip(desired)


class SliceController:
    """Publishes the pools of the nodes named ``node_names``; ``queue`` holds node names, ``sync(name)`` reconciles one node's pools."""

    def __init__(
        self,
        client: KubeClient,
        nodes: Informer,
        slices: Informer,
        node_names: list[str],
        profile: Profile,
        *,
        gates: FeatureGates,
        backoff: ExponentialBackoff,
        identities: Identities | None = None,
    ) -> None:
        self.client = client
        self.identities = identities or Identities(client)
        self.nodes = nodes
        self.slices = slices
        self.node_names = set(node_names)
        # KEP-5517: without the gate the server drops the devices' nodeAllocatableResources, and
        # slices published with them would never match the profile.
        self.profile = profile if gates.enabled(NODE_ALLOCATABLE_FEATURE) else without_device_field(profile, "nodeAllocatableResources")
        self.drivers = set(profile.driver_names)
        self.queue: WorkQueue[str] = WorkQueue(backoff)
        # (node, driver) -> (node uid, the pool's slices as JSON): rendering a profile is slow, and
        # decoded slices would take several times the memory of the informer's compact copies.
        self._desired: dict[tuple[str, str], tuple[str, bytes]] = {}
        self._generations: dict[tuple[str, str], int] = {}
        # node -> resourceVersion of our last slice write: until the slice cache has caught up with
        # it, the cache shows a half-published pool, and acting on that would publish again and again.
        self._slices_written: dict[str, int] = {}
        # node -> names of its slices, so a node's pools are found without scanning every slice
        # (the slices themselves are read from the informer).
        self._node_slices: dict[str, set[str]] = {}
        # node -> what its Node and slices looked like (hashes of the informer's JSON) when they last
        # matched the profile: a resync of an unchanged node then decodes and compares nothing.
        self._verified: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = {}
        # Nodes whose other drivers' slices were wiped at the start, and drivers to wipe per node.
        self._started: set[str] = set()
        self._wipes: dict[str, set[str]] = {}
        slices.on_add(self._slice_event)
        slices.on_update(lambda _old, new: self._slice_event(new))
        slices.on_delete(lambda slice_: self._slice_event(slice_, deleted=True))
        # The slices are owned by the Node object: a new one (registered, or re-created) needs them (again).
        nodes.on_add(self._node_event)
        nodes.on_update(lambda old, new: self._node_event(new, old))

    def _slice_event(self, slice_: Obj, deleted: bool = False) -> None:
        node = _spec(slice_).get("nodeName")
        if node not in self.node_names:
            return
        name = _meta(slice_).get("name", "")
        ours = self._node_slices.setdefault(node, set())
        if deleted:
            ours.discard(name)
        else:
            ours.add(name)
        self.queue.add(node)

    def _node_event(self, node: Obj, old: Obj | None = None) -> None:
        name = _meta(node).get("name", "")
        if name in self.node_names and (old is None or _meta(old).get("uid") != _meta(node).get("uid")):
            self.queue.add(name)

    def wipe(self, node: str, driver: str) -> None:
        """Delete the node's slices of ``driver`` (whose plugins went away) on the next sync."""
        self._wipes.setdefault(node, set()).add(driver)
        self.queue.add(node)

    def queue_all(self) -> None:
        """Queue every simulated node (at the start, and on every resync)."""
        for name in self.node_names:
            self.queue.add(name)

    def _desired_slices(self, node: str, driver: DriverProfile, uid: str) -> list[Obj]:
        key = (node, driver.name)
        cached = self._desired.get(key)
        if cached is None or cached[0] != uid:
            slices = build_pool_slices(driver, node, node_uid=uid)
            self._desired[key] = (uid, orjson.dumps(slices))
            return slices
        desired: list[Obj] = orjson.loads(cached[1])
        return desired

    def _signature(self, name: str) -> tuple[int, tuple[tuple[str, int], ...]] | None:
        """The node's and its slices' JSON as the compact informers hold it, hashed (None without compact informers)."""
        node = self.nodes.raw("", name)
        if node is None:
            return None
        return hash(node), tuple((n, hash(self.slices.raw("", n) or b"")) for n in sorted(self._node_slices.get(name, ())))

    async def sync(self, name: str) -> None:
        """Make the node's pools match the profile; bump the pool generation whenever a pool changes."""
        written = self._slices_written.get(name)
        if written is not None:
            if (resource_version_number(self.slices.resource_version) or 0) < written:
                return  # the watch event of our own write is on its way and queues the node again
            del self._slices_written[name]
        signature = self._signature(name)
        if signature is not None and self._verified.get(name) == signature and not self._wipes.get(name):
            return  # nothing changed since its pools last matched (a resync)
        self._verified.pop(name, None)
        node = self.nodes.get("", name)
        if node is None:
            return  # its registration shows up in the node informer, which queues the node again
        uid = _meta(node).get("uid", "")
        ours = [s for s in (self.slices.peek("", n) for n in sorted(self._node_slices.get(name, ()))) if s is not None]
        last_rv = 0
        kubelet = self.identities.node(name)
        for driver in self.profile.drivers:
            existing = {_meta(s)["name"]: s for s in ours if _spec(s).get("driver") == driver.name}
            desired = self._desired_slices(name, driver, uid)
            generations = {int((_spec(s).get("pool") or {}).get("generation") or 0) for s in existing.values()}
            if (
                len(existing) == len(desired)
                and len(generations) == 1
                and all(d["metadata"]["name"] in existing and same_slice(existing[d["metadata"]["name"]], d) for d in desired)
            ):
                continue
            # Remembered too, so a pool whose slices were all deleted does not restart at generation 1
            # while consumers may still hold the old one.
            generation = max(generations | {self._generations.get((name, driver.name), 0)}) + 1
            self._generations[(name, driver.name)] = generation
            for want in desired:
                obj = copy.deepcopy(want)
                obj["spec"]["pool"]["generation"] = generation
                have = existing.pop(want["metadata"]["name"], None)
                if have is None:
                    result = await kubelet.create(SLICES, obj)
                else:
                    obj["metadata"]["resourceVersion"] = _meta(have).get("resourceVersion")
                    result = await kubelet.update(resource_path("resource.k8s.io", "v1", "resourceslices", name=obj["metadata"]["name"]), obj)
                last_rv = max(last_rv, _written_rv(result))
            for stale in existing:
                deleted = await kubelet.delete(resource_path("resource.k8s.io", "v1", "resourceslices", name=stale), missing_ok=True)
                last_rv = max(last_rv, _written_rv(deleted))
            log.info("published resource slices", extra={"node": name, "driver": driver.name, "generation": generation, "slices": len(desired)})
        # The first time: every other driver's slices go (from drivers the profile no longer has, or
        # plugins that have not registered with this process yet); later only those of plugins gone too long.
        wiped = None if name not in self._started else self._wipes.pop(name, set())
        self._started.add(name)
        for stale_slice in ours:
            driver_name = _spec(stale_slice).get("driver")
            if driver_name not in self.drivers and (wiped is None or driver_name in wiped):
                deleted = await kubelet.delete(
                    resource_path("resource.k8s.io", "v1", "resourceslices", name=_meta(stale_slice)["name"]), missing_ok=True
                )
                last_rv = max(last_rv, _written_rv(deleted))
        if last_rv:
            self._slices_written[name] = last_rv
        elif signature is not None:
            self._verified[name] = signature  # nothing written, nothing awaited: what was checked is what the caches hold
