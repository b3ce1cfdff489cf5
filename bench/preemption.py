"""Preemption benchmark: one preemption decision against one scheduling cycle, at many nodes.

The scheduler's cache is fed in memory (no server): N nodes with D devices each, every device
held by a low-priority pod (priority 1) through its own claim, and one high-priority pod (1000)
wanting one device. The scheduling cycle fails on every node; preemption's PostFilter then
dry-runs candidate nodes (10% of them, at least 100, as upstream) and on each one removes every
lower-priority pod and reprieves them one by one while the preemptor still fits.

Printed per node count: CPU milliseconds of the failing cycle (the baseline), of the preemption
decision, and their ratio, best of ``--repeat`` rounds, with the machine's load average (CPU
time, not wall time: a shared machine's other work does not count, though it still slows caches).

Run ``python -m bench.preemption --help``; e.g. ``--nodes 100,500``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from typing import Any

from bench.machine import load_average, reports_machine
from kube.client import KubeClient
from kube.informer import Informer
from kube.objects import Obj
from schedulers.cache import SchedulerCache
from schedulers.cycle import ScheduleFailure, SchedulingCycle
from schedulers.preemption import Preempt, Preemption
from schedulers.queue import SchedulingQueue

DRIVER = "gpu.example.com"
NAMESPACE = "bench"


class MemoryCluster:
    """A scheduler cache whose informers are fed here, as watch events would feed them."""

    def __init__(self) -> None:
        queue: SchedulingQueue[tuple[str, str], tuple[str, str]] = SchedulingQueue()
        # Never contacted: nothing here writes.
        self.cache = SchedulerCache(KubeClient("http://127.0.0.1:9", user_agent="bench"), queue)
        self._versions = itertools.count(1)

    async def put(self, informer: Informer, obj: Obj) -> None:
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(next(self._versions))}}
        await informer.apply({"type": "MODIFIED", "object": obj})

    async def fill(self, nodes: int, devices: int) -> None:
        """Nodes with a slice each, every device held by a low-priority pod."""
        selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
        await self.put(self.cache.classes, {"metadata": {"name": "gpu"}, "spec": {"selectors": [selector]}})
        allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        for n in range(nodes):
            name = f"node-{n}"
            labels = {"kubernetes.io/hostname": name}
            await self.put(self.cache.nodes, {"metadata": {"name": name, "labels": labels}, "spec": {}, "status": {"capacity": allocatable, "allocatable": allocatable}})
            pool = {"name": name, "generation": 1, "resourceSliceCount": 1}
            spec = {"driver": DRIVER, "nodeName": name, "pool": pool, "devices": [{"name": f"gpu-{d}"} for d in range(devices)]}
            await self.put(self.cache.slices, {"metadata": {"name": f"{name}-{DRIVER}"}, "spec": spec})
            for d in range(devices):
                holder = pod(f"low-{n}-{d}", priority=1, nodeName=name)
                selector_terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]
                result = {"request": "gpu", "driver": DRIVER, "pool": name, "device": f"gpu-{d}"}
                reserved = [{"resource": "pods", "name": holder["metadata"]["name"], "uid": holder["metadata"]["uid"]}]
                status = {"allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": selector_terms}}, "reservedFor": reserved}
                await self.put(self.cache.claims, {**claim(holder["metadata"]["name"]), "status": status})
                await self.put(self.cache.pods, holder)


def claim(name: str) -> Obj:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}
    return {"metadata": {"name": f"{name}-claim", "namespace": NAMESPACE, "uid": f"uid-{name}-claim"}, "spec": {"devices": {"requests": [request]}}}


def pod(name: str, *, priority: int, **spec: Any) -> Obj:
    container = {"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
        "spec": {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-claim"}], "priority": priority, **spec},
        "status": {"startTime": "2026-01-01T00:00:00Z"},
    }


async def measure(nodes: int, devices: int, repeat: int) -> dict[str, Any]:
    cluster = MemoryCluster()
    await cluster.fill(nodes, devices)
    preemptor = pod("high", priority=1000)
    await cluster.put(cluster.cache.claims, claim("high"))
    await cluster.put(cluster.cache.pods, preemptor)
    cycle_ms, decision_ms = float("inf"), float("inf")
    victims: list[str] = []
    for _ in range(repeat):
        cycle = SchedulingCycle(cluster.cache)
        start = time.process_time()
        failure = cycle.schedule(preemptor)
        middle = time.process_time()
        if not isinstance(failure, ScheduleFailure):
            raise SystemExit(f"the preemptor fit without preemption at {nodes} nodes: the benchmark measures nothing")
        decision = Preemption(cycle).post_filter(preemptor, failure)
        end = time.process_time()
        if not isinstance(decision, Preempt):
            raise SystemExit(f"no preemption at {nodes} nodes: {decision}")
        victims = [v["metadata"]["name"] for v in decision.victims]
        cycle_ms = min(cycle_ms, (middle - start) * 1000)
        decision_ms = min(decision_ms, (end - middle) * 1000)
    return {"nodes": nodes, "devices": devices, "cycle_ms": cycle_ms, "preemption_ms": decision_ms, "ratio": decision_ms / cycle_ms, "victims": victims}


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preemption", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", default="100,500", help="comma-separated node counts (default 100,500)")
    parser.add_argument("--devices", type=int, default=8, help="devices per node, every one held by a low-priority pod (default 8)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per node count; the best is reported (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = [asyncio.run(measure(int(n), args.devices, args.repeat)) for n in args.nodes.split(",")]
    load = load_average()
    if args.json:
        print(json.dumps({"load_average": load, "results": results}, indent=2))
        return 0
    print(f"preemption decision vs one failing scheduling cycle ({args.devices} devices per node, all held)")
    for r in results:
        print(f"  nodes={r['nodes']:5d}  cycle {r['cycle_ms']:8.1f} ms  preemption {r['preemption_ms']:8.1f} ms  ratio {r['ratio']:5.1f}  victims {','.join(r['victims'])}")
    print(f"  load average {' '.join(f'{x:.2f}' for x in load)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
