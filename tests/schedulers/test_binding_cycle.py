"""The binding cycle's extension points: the binder runs whatever Reserve and PreBind plugins the
cycle has (DynamicResources' claim writes are one of them), undoes them in reverse order when a
step fails, reports a PreBind error on the pod; and PostFilter runs DynamicResources before
DefaultPreemption, as upstream's default profile orders them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube.objects import Obj
from schedulers.cycle import SchedulingCycle
from schedulers.framework import CycleState, Status
from schedulers.plugins.dynamicresources import DynamicResources
from schedulers.plugins.dynamicresources_binding import REASON_DEALLOCATED
from schedulers.preemption import Preemption
from schedulers.scheduler import Scheduler
from tests.schedulers.cluster import NS, allocation, claim, pod, reserved_for
from tests.schedulers.test_binder import CLAIMS, PODS, World


class Recorder:
    """A Reserve and PreBind plugin that notes each call (and answers ``pre_bind`` as told)."""

    def __init__(self, name: str, calls: list[str], answer: Status | None = None) -> None:
        self.name = name
        self.calls = calls
        self.answer = answer

    def reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        self.calls.append(f"{self.name}.reserve {node}")
        return None

    def unreserve(self, state: CycleState, pod: Obj, node: str) -> None:
        self.calls.append(f"{self.name}.unreserve")

    async def release(self, state: CycleState, pod: Obj, node: str) -> None:
        self.calls.append(f"{self.name}.release")

    async def pre_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        self.calls.append(f"{self.name}.pre_bind")
        return self.answer


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.binder.cancel()
    await w.client.close()


def with_plugins(world: World, p: Obj, *plugins: Any) -> Any:
    """The placement of ``p`` with ``plugins`` after DynamicResources in Reserve and PreBind."""
    placement = world.placement(p)
    assert placement.state is not None
    placement.state.reservers = [*placement.state.reservers, *plugins]
    placement.state.pre_binders = [*placement.state.pre_binders, *plugins]
    return placement


async def test_dynamic_resources_is_the_cycles_reserve_and_pre_bind_plugin(world: World) -> None:
    await world.cluster.topology({"n1": 1})
    p = await world.popped(pod("p"))
    placement = world.placement(p)
    assert placement.state is not None
    assert [type(x) for x in placement.state.reservers] == [DynamicResources] == [type(x) for x in placement.state.pre_binders]


async def test_the_binder_runs_the_plugins_in_order_then_binds(world: World) -> None:
    await world.cluster.topology({"n1": 1})
    await world.claim(claim("c"))
    calls: list[str] = []
    p = await world.popped(pod("p", claims=["c"]))
    world.binder.reserve(p, with_plugins(world, p, Recorder("a", calls), Recorder("b", calls)))
    assert calls == ["a.reserve n1", "b.reserve n1"]  # in the scheduling cycle, before any write
    await world.binder.wait()
    assert calls == ["a.reserve n1", "b.reserve n1", "a.pre_bind", "b.pre_bind"]
    # DynamicResources' PreBind wrote the claim before the others ran; then the binding.
    assert world.api.written() == [("PUT", f"{CLAIMS}/c"), ("PUT", f"{CLAIMS}/c/status"), ("POST", f"{PODS}/p/binding")]


async def test_a_pre_bind_error_is_reported_and_everything_is_undone_in_reverse(world: World) -> None:
    await world.cluster.topology({"n1": 1})
    await world.claim(claim("c"))
    calls: list[str] = []
    p = await world.popped(pod("p", claims=["c"]))
    failing = Recorder("b", calls, Status.as_error(RuntimeError("volume not attached"), plugin="Attacher"))
    world.binder.reserve(p, with_plugins(world, p, Recorder("a", calls), failing))
    await world.binder.wait()
    assert calls == ["a.reserve n1", "b.reserve n1", "a.pre_bind", "b.pre_bind", "b.unreserve", "a.unreserve", "b.release", "a.release"]
    assert ("POST", f"{PODS}/p/binding") not in world.api.written()
    # DynamicResources' release took its allocation back; the pod says why, as upstream's.
    assert "allocation" not in world.server_claim("c")["status"]
    assert world.api.events() == [("FailedScheduling", 'running PreBind plugin "Attacher": volume not attached')]
    assert world.cache.allocating_pod("uid-c") is None and not world.cache.is_binding((NS, "p"))
    assert world.queue.state((NS, "p")) == "backoff"


async def test_an_unschedulable_pre_bind_retries_without_a_report(world: World) -> None:
    await world.cluster.topology({"n1": 1})
    calls: list[str] = []
    p = await world.popped(pod("p"))
    world.binder.reserve(p, with_plugins(world, p, Recorder("a", calls, Status.unschedulable("changed", plugin="a"))))
    await world.binder.wait()
    assert calls == ["a.reserve n1", "a.pre_bind", "a.unreserve", "a.release"]
    assert world.api.events() == [] and world.queue.state((NS, "p")) == "backoff"


def scheduler_of(world: World) -> Scheduler:
    """A scheduler whose cache, queue and binder are the world's (fed in memory, writing to the fake)."""
    scheduler = Scheduler(world.client)
    scheduler.cache, scheduler.queue, scheduler.binder = world.cache, world.queue, world.binder
    scheduler.cycle = SchedulingCycle(world.cache)
    scheduler.preemption = Preemption(scheduler.cycle)
    return scheduler


async def test_dynamic_resources_frees_the_pinning_claim_before_preemption_runs(world: World) -> None:
    """A claim allocated on n1 pins the pod there, where a lower-priority pod holds the cpu: the
    claim is deallocated (DynamicResources' PostFilter) and the low pod is preempted too
    (DefaultPreemption, after it), as upstream's PostFilter chain does."""
    await world.cluster.topology({"n1": 1, "n2": 1}, cpu="1")
    await world.cluster.put(world.cache.pods, pod("low", cpu="1", nodeName="n1", priority=1))
    await world.claim(claim("c", status={"allocation": allocation("n1", "dev-0")}))
    await world.popped(pod("p", claims=["c"], cpu="1", priority=100))
    scheduler_of(world).schedule_one((NS, "p"))
    await world.binder.wait()
    assert world.server_claim("c")["status"] == {}  # deallocated
    assert ("DELETE", f"{PODS}/low") in world.api.written()  # and preempted
    assert world.cache.nominations["uid-p"].node == "n1"


async def test_the_message_names_the_deallocation_before_preemptions_verdict(world: World) -> None:
    await world.cluster.topology({"n1": 1, "n2": 1}, cpu="1")
    await world.cluster.put(world.cache.pods, pod("peer", cpu="1", nodeName="n1", priority=100))
    await world.claim(claim("c", status={"allocation": allocation("n1", "dev-0"), "reservedFor": reserved_for(pod("p"))}))
    await world.popped(pod("p", claims=["c"], cpu="1", priority=100))
    scheduler_of(world).schedule_one((NS, "p"))
    await world.binder.wait()
    assert world.api.events() == [(
        "FailedScheduling",
        "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node. "
        f"{REASON_DEALLOCATED}, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.",
    )]
    assert world.server_claim("c")["status"] == {}
