"""Allocator benchmark: claims built to make the device search explode, against a plain claim.

Each case is one pod's claims on one node, allocated by a fresh ``Allocator`` (no search
cache) as the scheduler's filter does per node. The baseline, measured in the same run, is a
one-device claim on a node with 10 devices. Printed per case: the outcome, milliseconds per
allocation (best of ``--repeat`` rounds), the ratio to the baseline, and the search steps.

The cases (``worst_cases()``; the bad-input tests check their outcomes):

* ``prioritized-over-limit``: two requests whose first subrequests each ask for 32 of 64
  devices; the second alternatives (1 device each) fit.
* ``many-subrequests``: four requests with eight alternatives each (8 down to 1 device) and a
  fifth request for 9 devices, on 16 devices; only the smallest alternatives leave room.
* ``many-subrequests-impossible``: the same, but the fifth request matches no device.
* ``many-constraints``: four requests for 8 devices each, all tied by matchAttribute (numa)
  and distinctAttribute (index within the numa node); every numa node has 31 free devices.
* ``32-of-128-distinct``: 32 devices with distinct numa values out of 128 devices with 31 values.
* ``full-node``: 32 devices on a node whose 128 devices are all allocated but 31.
* ``full-node-counters``: 32 partitions of 128 whose shared counters allow 31.
* ``distinct-pair-no-matching``: 16 devices whose numa and pcie values must both be distinct,
  where no such choice exists although each attribute alone has 16 values. Counting values
  cannot tell; the search is exponential (upstream's too) and the filter timeout
  (``--timeout``, default upstream's 10 s) is the last resort.

Run ``python -m bench.allocator --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.machine import reports_machine
from schedulers.allocator import Allocated, AllocatedState, AllocationError, Allocator, ResourceIndex, Unschedulable

DRIVER = "gpu.example.com"
NODE = {"metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}}
CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
NOTHING = f'device.attributes["{DRIVER}"].model == "none"'


def device(name: str, **attributes: Any) -> dict[str, Any]:
    """A device with string and int attributes."""
    return {"name": name, "attributes": {k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in attributes.items()}}


def resource_slice(devices: list[dict[str, Any]], pool: str = "pool", count: int = 1, name: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}, "nodeName": "node-1"}
    if devices:
        body["devices"] = devices
    body.update(spec)
    return {"metadata": {"name": name or f"{pool}-slice", "uid": f"uid-{name or pool}", "generation": 1}, "spec": body}


def exactly(name: str, count: int, *selectors: str) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def first_available(name: str, *counts: int) -> dict[str, Any]:
    return {"name": name, "firstAvailable": [{"name": f"sub-{i}", "deviceClassName": "gpu", "count": c} for i, c in enumerate(counts)]}


def claim(name: str, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def allocated(devices: list[str], pool: str = "pool") -> list[dict[str, Any]]:
    """One allocated claim holding ``devices`` exclusively."""
    results = [{"request": "req", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    return [{"metadata": {"name": "other", "namespace": "default", "uid": "uid-other"}, "status": {"allocation": {"devices": {"results": results}}}}]


@dataclass
class Case:
    name: str
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    allocated: list[dict[str, Any]] = field(default_factory=list)


def _prioritized_over_limit() -> Case:
    devices = [device(f"gpu-{i}") for i in range(64)]
    return Case("prioritized-over-limit", [claim("c", [first_available("a", 32, 1), first_available("b", 32, 1)])], [resource_slice(devices)])


def _many_subrequests(impossible: bool) -> Case:
    devices = [device(f"gpu-{i}", model="a") for i in range(16)]
    requests = [first_available(f"r{i}", 8, 7, 6, 5, 4, 3, 2, 1) for i in range(4)]
    requests.append(exactly("last", 1, NOTHING) if impossible else exactly("last", 9))
    name = "many-subrequests-impossible" if impossible else "many-subrequests"
    return Case(name, [claim("c", requests)], [resource_slice(devices)])


def _many_constraints() -> Case:
    # 4 numa nodes of 32 devices; the first device of each is taken.
    devices = [device(f"gpu-{n}-{i}", numa=n, index=i) for n in range(4) for i in range(32)]
    constraints = [{"matchAttribute": f"{DRIVER}/numa"}, {"distinctAttribute": f"{DRIVER}/index"}]
    requests = [exactly(f"r{i}", 8) for i in range(4)]
    return Case("many-constraints", [claim("c", requests, constraints)], [resource_slice(devices)], allocated([f"gpu-{n}-0" for n in range(4)]))


def _distinct_32_of_128() -> Case:
    devices = [device(f"gpu-{i}", numa=i % 31) for i in range(128)]
    return Case("32-of-128-distinct", [claim("c", [exactly("r", 32)], [{"distinctAttribute": f"{DRIVER}/numa"}])], [resource_slice(devices)])


def _full_node() -> Case:
    devices = [device(f"gpu-{i}") for i in range(128)]
    free = {f"gpu-{i}" for i in range(3, 124, 4)}  # 31 devices spread over the node
    taken = [d["name"] for d in devices if d["name"] not in free]
    return Case("full-node", [claim("c", [exactly("r", 32)])], [resource_slice(devices)], allocated(taken))


def _full_node_counters() -> Case:
    partitions = [{**device(f"part-{i}"), "consumesCounters": [{"counterSet": "gpus", "counters": {"slices": {"value": "1"}}}]} for i in range(128)]
    counters = [{"name": "gpus", "counters": {"slices": {"value": "31"}}}]
    slices = [resource_slice([], count=2, name="pool-counters", sharedCounters=counters), resource_slice(partitions, count=2, name="pool-devices")]
    return Case("full-node-counters", [claim("c", [exactly("r", 32)])], slices)


def _distinct_pair_no_matching() -> Case:
    # numa 0-7 pair only with pcie 0-6, numa 8-15 with pcie 7-15: at most 15 devices with both distinct.
    devices = [device(f"gpu-{n}-{p}", numa=n, pcie=p) for n in range(16) for p in (range(7) if n < 8 else range(7, 16))]
    constraints = [{"distinctAttribute": f"{DRIVER}/numa"}, {"distinctAttribute": f"{DRIVER}/pcie"}]
    return Case("distinct-pair-no-matching", [claim("c", [exactly("r", 16)], constraints)], [resource_slice(devices)])


def worst_cases() -> list[Case]:
    """The cases above, in the order printed."""
    return [
        _prioritized_over_limit(),
        _many_subrequests(impossible=False),
        _many_subrequests(impossible=True),
        _many_constraints(),
        _distinct_32_of_128(),
        _full_node(),
        _full_node_counters(),
        _distinct_pair_no_matching(),
    ]


def baseline() -> Case:
    """What most pods ask for: one device on a node with 10."""
    return Case("baseline (1 of 10 devices)", [claim("c", [exactly("r", 1)])], [resource_slice([device(f"gpu-{i}") for i in range(10)])])


def outcome_text(outcome: Any) -> str:
    if isinstance(outcome, Allocated):
        return "allocated " + ",".join(sorted({r["request"] for a in outcome.allocations for r in a["devices"]["results"]}))
    if isinstance(outcome, Unschedulable):
        return outcome.reason
    return f"error: {outcome}"


def measure(case: Case, repeat: int, timeout: float | None) -> dict[str, Any]:
    """Best time of ``repeat`` allocations, each by a fresh allocator over a shared index."""
    index = ResourceIndex(case.slices, [CLASS])
    state = AllocatedState.from_claims(case.allocated)
    best = float("inf")
    outcome: Any = None
    steps = 0
    for _ in range(repeat):
        allocator = Allocator(index, state, timeout=timeout)
        started = time.perf_counter()
        try:
            outcome = allocator.allocate(NODE, case.claims)
        except AllocationError as exc:
            outcome = exc
        best = min(best, time.perf_counter() - started)
        steps = allocator.last_steps
    return {"case": case.name, "ms": best * 1000, "outcome": outcome_text(outcome), "steps": steps}


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.allocator", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="rounds per case, best one counts (default 5)")
    parser.add_argument("--timeout", type=float, default=10.0, help="the allocator's filter timeout in seconds (default 10)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    base = measure(baseline(), max(args.repeat, 200), args.timeout)
    rows = [base] + [measure(case, args.repeat, args.timeout) for case in worst_cases()]
    print(f"{'case':30} {'ms':>10} {'x baseline':>11} {'steps':>8}  outcome")
    for row in rows:
        row["ratio"] = row["ms"] / base["ms"] if base["ms"] else 0.0
        print(f"{row['case']:30} {row['ms']:10.3f} {row['ratio']:11.0f} {row['steps']:8}  {row['outcome']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
