"""The simulator's SliceController in this event loop against a real server: one pool per node and
driver, published once the Node exists and restored (with a new generation) when it changes."""

from __future__ import annotations

import asyncio
from typing import Any

from kube.client import KubeClient
from kube.features import FeatureGates
from kube.informer import Informer
from kube.workqueue import ExponentialBackoff
from kubeletsim.profiles import build_pool_slices, load_profiles
from kubeletsim.slicecontroller import SliceController
from tests.kubeletsim.harness import NODES, SLICES, node_path, register_node, running, slices_of
from tests.processes import eventually_async

GPU = "gpu.example.com"


def controller(kube_client: KubeClient, prefix: str) -> SliceController:
    nodes = Informer(kube_client, NODES, name="nodes")
    slices = Informer(kube_client, SLICES, name="resourceslices")
    return SliceController(kube_client, nodes, slices, [f"{prefix}0", f"{prefix}1"], load_profiles("gpu"), gates=FeatureGates(), backoff=ExponentialBackoff(0.05, 1.0))


def run(controller: SliceController) -> Any:
    return running([controller.nodes, controller.slices], controller.queue, controller.sync, start=controller.queue_all)


def pool(slices: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """(driver, generation, owner uid) of each slice."""
    return [(s["spec"]["driver"], s["spec"]["pool"]["generation"], s["metadata"]["ownerReferences"][0]["uid"]) for s in slices]


async def published(kube_client: KubeClient, node: str, generation: int, uid: str) -> list[dict[str, Any]] | None:
    slices = await slices_of(kube_client, node)
    return slices if slices and pool(slices) == [(GPU, generation, uid)] else None


async def test_pools_are_published_once_their_node_exists(kube_client: KubeClient, prefix: str) -> None:
    first = await register_node(kube_client, f"{prefix}0", 0)
    slices = controller(kube_client, prefix)
    async with run(slices):
        [published_slice] = await eventually_async(lambda: published(kube_client, f"{prefix}0", 1, first["metadata"]["uid"]), what="the first node's pool")
        spec = published_slice["spec"]
        assert spec["nodeName"] == f"{prefix}0" and spec["pool"] == {"name": f"{prefix}0", "generation": 1, "resourceSliceCount": 1}
        assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
        await asyncio.sleep(0.3)
        assert await slices_of(kube_client, f"{prefix}1") == []  # no Node, nothing to own the pool
        second = await register_node(kube_client, f"{prefix}1", 1)
        await eventually_async(lambda: published(kube_client, f"{prefix}1", 1, second["metadata"]["uid"]), what="the second node's pool")


async def test_a_changed_or_deleted_slice_is_restored_as_a_new_generation(kube_client: KubeClient, prefix: str) -> None:
    node = await register_node(kube_client, f"{prefix}0", 0)
    uid = node["metadata"]["uid"]
    slices = controller(kube_client, prefix)
    async with run(slices):
        [original] = await eventually_async(lambda: published(kube_client, f"{prefix}0", 1, uid), what="the pool")
        name = original["metadata"]["name"]
        await kube_client.delete(f"{SLICES}/{name}")
        [restored] = await eventually_async(lambda: published(kube_client, f"{prefix}0", 2, uid), what="the pool again, generation 2")
        assert restored["spec"]["devices"] == original["spec"]["devices"]
        changed = {**restored, "spec": {**restored["spec"], "devices": restored["spec"]["devices"][:1]}}
        await kube_client.update(f"{SLICES}/{name}", changed)
        [again] = await eventually_async(lambda: published(kube_client, f"{prefix}0", 3, uid), what="the devices back, generation 3")
        assert again["spec"]["devices"] == original["spec"]["devices"]


async def test_slices_of_other_drivers_go_and_a_new_node_owns_its_pool(kube_client: KubeClient, prefix: str) -> None:
    node = await register_node(kube_client, f"{prefix}0", 0)
    # A pool an earlier run published for a driver the profile no longer has.
    [stale] = build_pool_slices(load_profiles("nic").drivers[0], f"{prefix}0", node_uid=node["metadata"]["uid"])
    await kube_client.create(SLICES, stale)
    slices = controller(kube_client, prefix)
    async with run(slices):
        await eventually_async(lambda: published(kube_client, f"{prefix}0", 1, node["metadata"]["uid"]), what="only the profile's pool")
        await kube_client.delete(node_path(f"{prefix}0"))
        replaced = await register_node(kube_client, f"{prefix}0", 0)
        # Same devices, new owner: the pool is written again.
        await eventually_async(lambda: published(kube_client, f"{prefix}0", 2, replaced["metadata"]["uid"]), what="the pool owned by the new Node")



async def test_a_resync_of_an_unchanged_node_decodes_nothing_and_a_change_is_still_repaired(kube_client: KubeClient, prefix: str) -> None:
    # The simulator re-checks every node's pools every 30 s; with its compact informers a node whose
    # Node and slices did not change since they last matched is skipped without decoding them.
    node = await register_node(kube_client, f"{prefix}0", 0)
    uid = node["metadata"]["uid"]
    nodes = Informer(kube_client, NODES, name="nodes", compact=True)
    informer = Informer(kube_client, SLICES, name="resourceslices", compact=True)
    slices = SliceController(kube_client, nodes, informer, [f"{prefix}0"], load_profiles("gpu"), gates=FeatureGates(), backoff=ExponentialBackoff(0.05, 1.0))
    async with run(slices):
        [original] = await eventually_async(lambda: published(kube_client, f"{prefix}0", 1, uid), what="the pool")

        async def cached() -> bool:
            return informer.raw("", original["metadata"]["name"]) is not None

        await eventually_async(cached, what="the slice cached")
        await slices.sync(f"{prefix}0")  # verifies what it published
        decoded: list[str] = []
        for store, name in ((nodes._store, "nodes"), (informer._store, "slices")):
            for method in ("get", "peek"):

                def counted(*args: Any, _original: Any = getattr(store, method), _name: str = name) -> Any:
                    decoded.append(_name)
                    return _original(*args)

                setattr(store, method, counted)
        for _ in range(3):
            await slices.sync(f"{prefix}0")
        assert decoded == []
        # A change to the slice is still noticed (its JSON changed) and repaired with a new generation.
        changed = {**original, "spec": {**original["spec"], "devices": original["spec"]["devices"][:1]}}
        await kube_client.update(f"{SLICES}/{original['metadata']['name']}", changed)
        await eventually_async(lambda: published(kube_client, f"{prefix}0", 2, uid), what="the pool restored")
        assert decoded
