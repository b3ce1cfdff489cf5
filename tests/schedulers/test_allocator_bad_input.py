"""Claims built to make the allocator search (bench/allocator.py's worst cases).

Each is answered with the outcome upstream's allocator reaches given the time (its first
solution in its order, or none), within upstream's 10 s filter timeout and in a few hundred
steps, where the plain search ran into the timeout. The case that stays exponential ends at
the deadline, and the allocator goes on serving other pods.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import bench.allocator as worst
from kube.cel import MAX_COST, compile_selector
from schedulers.allocator import (
    BOUND_AFTER_STEPS,
    TIMED_OUT,
    Allocated,
    AllocatedState,
    AllocationError,
    Allocator,
    ResourceIndex,
    SearchCache,
    Unschedulable,
)
from schedulers.cycle import SchedulingCycle
from tests.schedulers.cluster import Cluster, node, pod
from tests.schedulers.test_cycle import failed, failure, placed

FILTER_TIMEOUT = 10.0  # upstream's DynamicResources filterTimeout
CASES = {case.name: case for case in worst.worst_cases()}


def gpus(*numbers: int) -> list[str]:
    return [f"gpu-{n}" for n in numbers]


def cannot(detail: str) -> str:
    return f"cannot allocate all claims: claim default/c, {detail}"


# Devices per request in result order, or the Unschedulable message.
EXPECTED: dict[str, list[tuple[str, list[str]]] | str] = {
    "prioritized-over-limit": [("a/sub-1", gpus(0)), ("b/sub-1", gpus(1))],
    "many-subrequests": [
        ("r0/sub-4", gpus(0, 1, 2, 3)), ("r1/sub-7", gpus(4)), ("r2/sub-7", gpus(5)), ("r3/sub-7", gpus(6)), ("last", gpus(*range(7, 16))),
    ],
    "many-subrequests-impossible": cannot("request last: no device matches the device class gpu and the request's selectors"),
    "many-constraints": cannot("request r3: no combination of devices satisfies all requests and constraints"),
    "32-of-128-distinct": cannot("request r: no combination of devices satisfies all requests and constraints"),
    "full-node": cannot("request r: needs 32 devices, 31 of 128 matching devices available"),
    "full-node-counters": cannot("request r: no combination of devices satisfies all requests and constraints"),
}


def allocator(case: worst.Case, timeout: float, cache: SearchCache | None = None) -> Allocator:
    index = ResourceIndex(case.slices, [worst.CLASS])
    return Allocator(index, AllocatedState.from_claims(case.allocated), timeout=timeout, cache=cache)


def devices_per_request(outcome: Allocated) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for r in outcome.allocations[0]["devices"]["results"]:
        if not out or out[-1][0] != r["request"]:
            out.append((r["request"], []))
        out[-1][1].append(r["device"])
    return out


@pytest.mark.parametrize("name", list(EXPECTED))
def test_worst_case_gets_upstreams_outcome_quickly(name: str) -> None:
    case = CASES[name]
    alloc = allocator(case, FILTER_TIMEOUT)
    started = time.monotonic()
    outcome: Any = alloc.allocate(worst.NODE, case.claims)
    elapsed = time.monotonic() - started
    expected = EXPECTED[name]
    if isinstance(expected, str):
        assert isinstance(outcome, Unschedulable) and outcome.message == expected
    else:
        assert isinstance(outcome, Allocated) and devices_per_request(outcome) == expected
    # The supply checks start after BOUND_AFTER_STEPS plain steps and then end it within a few.
    assert alloc.last_steps < 2 * BOUND_AFTER_STEPS
    assert elapsed < FILTER_TIMEOUT / 2


def test_prioritized_alternatives_need_no_supply_checks() -> None:
    """Upstream's own pruning answers the claim its allocator answers in 75 steps."""
    case = CASES["prioritized-over-limit"]
    alloc = allocator(case, FILTER_TIMEOUT)
    assert isinstance(alloc.allocate(worst.NODE, case.claims), Allocated)
    assert alloc.last_steps < BOUND_AFTER_STEPS


def test_search_past_its_deadline_ends_and_other_pods_are_served() -> None:
    case = CASES["distinct-pair-no-matching"]
    cache = SearchCache()
    alloc = allocator(case, timeout=0.05, cache=cache)
    for _attempt in range(2):
        started = time.monotonic()
        assert alloc.allocate(worst.NODE, case.claims) == Unschedulable(TIMED_OUT)
        assert time.monotonic() - started < 2
    assert cache.hits == 0  # a search that timed out is not reused as an answer
    # The next pod's claim, on the same node and state, is allocated right away.
    other = worst.claim("other", [worst.exactly("r", 1)])
    outcome = alloc.allocate(worst.NODE, [other])
    assert isinstance(outcome, Allocated)
    assert outcome.allocations[0]["devices"]["results"][0]["device"] == "gpu-0-0"


def test_slow_selectors_stop_at_the_filter_timeout() -> None:
    """A selector admission accepts (estimated cost under the limit) that takes a good part of a
    second per device: on a node of 128 devices the evaluation stops at the deadline with cel-go's
    "operation interrupted", which upstream's filter reports as the claim's CEL runtime error."""
    expr = "!lists.range(300).all(i, lists.range(300).all(j, i + j >= 0))"
    assert compile_selector(expr).max_cost <= MAX_COST
    case = worst.Case("slow-selector", [worst.claim("c", [worst.exactly("r", 1, expr)])], [worst.resource_slice([worst.device(f"gpu-{i}") for i in range(128)])])
    alloc = allocator(case, timeout=0.1)
    started = time.monotonic()
    with pytest.raises(AllocationError) as info:
        alloc.allocate(worst.NODE, case.claims)
    assert time.monotonic() - started < 5  # every device evaluated: a minute or more
    assert str(info.value) == "claim default/c: selector #0: CEL runtime error: operation interrupted"
    # The interrupted evaluation is not remembered as the device's result.
    devices = alloc.index.slice_devices("pool-slice")
    assert all(d.cached_result(expr) in (None, False) for d in devices)


def test_benchmark_prints_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert worst.main(["--repeat", "1", "--timeout", "0.05"]) == 0
    out = capsys.readouterr().out
    for name in (*CASES, "baseline"):
        assert name in out
    assert TIMED_OUT in out


async def test_scheduling_cycle_answers_slow_and_broken_claims_and_serves_the_next_pod() -> None:
    """In the scheduler's cycle: the claim whose search outlasts the filter timeout and the claim
    whose selector fails at runtime get upstream's statuses; the next pod is placed right after."""
    case = CASES["distinct-pair-no-matching"]
    cluster = Cluster()
    await cluster.put(cluster.cache.classes, worst.CLASS)
    await cluster.put(cluster.cache.nodes, node("node-1"))
    for s in case.slices:
        await cluster.put(cluster.cache.slices, s)
    broken = worst.claim("broken", [worst.exactly("r", 1, f'device.attributes["{worst.DRIVER}"].missing == 1')])
    for c in [*case.claims, broken, worst.claim("other", [worst.exactly("r", 1)])]:
        await cluster.put(cluster.cache.claims, c)
    cycle = SchedulingCycle(cluster.cache, filter_timeout=0.05)

    slow = failed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("slow", claims=["c"]))))
    assert slow.reason == "Unschedulable"
    assert slow.message == failure(1, f"1 {TIMED_OUT}")
    error = failed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("broken", claims=["broken"]))))
    assert error.reason == "SchedulerError"
    assert error.message == 'running "DynamicResources" filter plugin: claim default/broken: selector #0: CEL runtime error: no such key: missing'
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("next", claims=["other"])))).node == "node-1"
