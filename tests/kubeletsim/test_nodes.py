"""The simulator's NodeController in this event loop against a real server: registration,
status repair, Leases and heartbeats."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from functools import partial
from typing import Any

from kube.client import KubeClient
from kube.features import FeatureGates, Gate, gates_flag
from kube.informer import Informer
from kube.workqueue import ExponentialBackoff
from kubeletsim.nodecontroller import NodeController
from kubeletsim.settings import Settings
from tests.kubeletsim.harness import LEASES, NODES, node_path, register_node, running
from tests.processes import eventually_async, get_or_none


def controller(kube_client: KubeClient, prefix: str, *, status_interval: float = 60.0, gates: str = "") -> NodeController:
    settings = Settings(nodes=2, node_prefix=prefix, lease_interval=0.3, node_status_interval=status_interval, max_pods=50)
    informer = Informer(kube_client, NODES, name="nodes")
    return NodeController(kube_client, informer, settings, profile_name="gpu", gates=FeatureGates.parse(gates), backoff=ExponentialBackoff(0.05, 1.0))


def run(nodes: NodeController, *, heartbeats: bool = True) -> Any:
    loops = (nodes.leases.run, nodes.node_status.run) if heartbeats else ()
    return running([nodes.nodes], nodes.queue, nodes.sync, *loops, start=nodes.queue_all)


def ready(node: dict[str, Any] | None) -> bool:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_nodes_are_registered_with_their_leases(kube_client: KubeClient, prefix: str) -> None:
    nodes = controller(kube_client, prefix, status_interval=0.3, gates=gates_flag({Gate.DRANodeAllocatableResources: True}))
    async with run(nodes):
        for name in (f"{prefix}0", f"{prefix}1"):
            node = await eventually_async(partial(ready_node, kube_client, name), what=f"{name} Ready")
            assert node["metadata"]["labels"]["type"] == "kubeletsim" and node["metadata"]["labels"]["kubernetes.io/hostname"] == name
            assert node["status"]["allocatable"]["pods"] == "50" and node["status"]["declaredFeatures"] == [Gate.DRANodeAllocatableResources]
            lease = await eventually_async(partial(get_or_none, kube_client, f"{LEASES}/{name}"), what=f"{name}'s Lease")
            assert lease["spec"]["holderIdentity"] == name and lease["spec"]["leaseDurationSeconds"] == 40
            assert [(o["kind"], o["uid"]) for o in lease["metadata"]["ownerReferences"]] == [("Node", node["metadata"]["uid"])]
        # Both heartbeats keep coming.
        first = await kube_client.get(f"{LEASES}/{prefix}0")
        beat = _heartbeat(await kube_client.get(node_path(f"{prefix}0")))
        await eventually_async(lambda: _changed(kube_client, f"{LEASES}/{prefix}0", first["spec"]["renewTime"], lambda o: o["spec"]["renewTime"]), what="Lease renewed")
        await eventually_async(lambda: _changed(kube_client, node_path(f"{prefix}0"), beat, _heartbeat), what="node status heartbeat")


async def test_a_node_that_lost_its_status_is_repaired(kube_client: KubeClient, prefix: str) -> None:
    nodes = controller(kube_client, prefix)
    async with run(nodes, heartbeats=False):  # the status heartbeat would restore the conditions too
        name = f"{prefix}0"
        node = await eventually_async(partial(ready_node, kube_client, name), what="node Ready")
        conditions = [{**c, "status": "False"} if c["type"] == "Ready" else c for c in node["status"]["conditions"]]
        await kube_client.patch(node_path(name, "status"), {"status": {"conditions": conditions}})
        repaired = await eventually_async(partial(ready_node, kube_client, name), what="node Ready again")
        assert repaired["metadata"]["uid"] == node["metadata"]["uid"]  # repaired, not registered again


async def test_a_node_from_another_run_gets_this_runs_settings(kube_client: KubeClient, prefix: str) -> None:
    name = f"{prefix}0"
    before = await register_node(kube_client, name, 0, max_pods=110, declared_features=[Gate.DRANodeAllocatableResources])
    nodes = controller(kube_client, prefix)  # --max-pods 50, no declared features

    async def adjusted() -> dict[str, Any] | None:
        node = await kube_client.get(node_path(name))
        status = node["status"]
        ok = status["capacity"]["pods"] == "50" and status["allocatable"]["pods"] == "50" and not status.get("declaredFeatures")
        return node if ok else None

    async with run(nodes):
        after = await eventually_async(adjusted, what="pods capacity and declared features of this run")
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and after["status"]["allocatable"]["cpu"] == "32"


async def test_a_deleted_node_comes_back_and_owns_its_lease_again(kube_client: KubeClient, prefix: str) -> None:
    nodes = controller(kube_client, prefix)
    name = f"{prefix}1"
    async with run(nodes):
        old = await eventually_async(partial(ready_node, kube_client, name), what="node Ready")
        await kube_client.delete(node_path(name))

        async def replaced() -> dict[str, Any] | None:
            node = await get_or_none(kube_client, node_path(name))
            return node if ready(node) and node is not None and node["metadata"]["uid"] != old["metadata"]["uid"] else None

        new = await eventually_async(replaced, what="node registered again")

        async def owned() -> bool:
            lease = await kube_client.get(f"{LEASES}/{name}")
            return [o["uid"] for o in lease["metadata"].get("ownerReferences") or []] == [new["metadata"]["uid"]]

        await eventually_async(owned, what="the Lease owned by the new Node")


def _heartbeat(node: dict[str, Any]) -> str:
    return str(next(c["lastHeartbeatTime"] for c in node["status"]["conditions"] if c["type"] == "Ready"))


async def ready_node(kube_client: KubeClient, name: str) -> dict[str, Any] | None:
    node = await get_or_none(kube_client, node_path(name))
    return node if ready(node) else None


async def _changed(kube_client: KubeClient, path: str, before: str, value: Any) -> bool:
    return bool(value(await kube_client.get(path)) != before)


# Set in the task that makes the calls a test counts: the controller's own tasks (status
# updates, resyncs) call the same methods meanwhile, and those are not the ones under test.
_COUNTED_TASK: ContextVar[bool] = ContextVar("counted_task", default=False)


def _counting(obj: Any, names: tuple[str, ...], calls: list[str]) -> None:
    """Replace methods of ``obj`` (on the instance) with ones that record their name in ``calls``
    first, for the calls made by a task that set ``_COUNTED_TASK``."""
    for name in names:
        original = getattr(obj, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            if _COUNTED_TASK.get():
                calls.append(_name)
            return _original(*args, **kwargs)

        setattr(obj, name, counted)


async def test_a_lease_renewal_is_one_patch_and_reads_no_node(kube_client: KubeClient, prefix: str) -> None:
    # The heartbeat loop renews every node's Lease every 10 s: at thousands of nodes per process, reading
    # (decoding) the Node for each renewal was a tenth of the simulator's CPU.
    nodes = controller(kube_client, prefix)
    name = f"{prefix}0"
    async with run(nodes, heartbeats=False):
        node = await eventually_async(partial(ready_node, kube_client, name), what="node Ready")
        await eventually_async(partial(get_or_none, kube_client, f"{LEASES}/{name}"), what="its Lease")
        reads: list[str] = []
        requests: list[str] = []
        _counting(nodes.nodes, ("get", "peek", "raw", "list", "iter_objects"), reads)
        _counting(kube_client, ("get", "create", "update", "patch", "delete"), requests)
        before = (await kube_client.get(f"{LEASES}/{name}"))["spec"]["renewTime"]

        async def renew_five_times() -> None:
            _COUNTED_TASK.set(True)  # this task's context only
            for _ in range(5):
                await nodes._renew_lease(name)

        await asyncio.create_task(renew_five_times())
        after = await kube_client.get(f"{LEASES}/{name}")
    assert requests == ["patch"] * 5 and reads == []
    assert after["spec"]["renewTime"] > before and after["spec"]["holderIdentity"] == name
    assert [o["uid"] for o in after["metadata"]["ownerReferences"]] == [node["metadata"]["uid"]]
