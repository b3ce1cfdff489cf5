"""What-if benchmark: ``fit``'s cost beside one scheduling cycle, and the live scheduler while it answers.

**fit** (always): a scheduler cache in memory with N nodes (default 500) of D devices (default 8)
and a DeviceClass, fed through its informers as watch events would be. Measured in the same run:

* one scheduling cycle (``SchedulingCycle.schedule``) for a pod with a one-device claim from a
  template, warm (the median of 20 cycles after the first; the cycle decides and writes nothing);
* ``fit`` for a pod like it, up to C copies (default 4,000 = every device), as the endpoint
  answers it: in a forked copy of the process (:func:`schedulers.whatifserver.answer_in_copy`),
  fork and answer included (best and median of ``--repeat``).

Printed: copies placed, seconds, milliseconds per copy, and the ratio of ``fit`` to one cycle.

**live** (``--live``): the whole stack as real processes (:mod:`bench.scheduler`'s, with the
scheduler's explanation port on), its ``dra`` phase (M pods with a one-device claim each,
creation to bound) once alone and once while ``--clients`` loops (default 10) ask ``fit`` for a
one-device pod (up to C copies) over and over; printed: pods/s and scheduler CPU per pod of both
runs, their ratio, and how many answers came back during the second.

Timing targets are read from the ratios; nothing here asserts a time. The machine is shared:
the load average (``uptime``) is printed beside every figure.

Run ``python -m bench.whatif --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from devtools.ports import free_port
from kube.client import KubeClient
from schedulers.cache import SchedulerCache
from schedulers.cycle import Placement, SchedulingCycle
from schedulers.queue import SchedulingQueue
from schedulers.whatif import WhatIf, apply_event, template_claim
from schedulers.whatifserver import answer_in_copy

DRIVER = "gpu.example.com"
CLASS = "gpu"
NS = "default"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def template(count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one", "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}]}}},
    }  # fmt: skip


def worker_pod(name: str = "worker") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]},
    }  # fmt: skip


def cluster(nodes: int, devices: int) -> SchedulerCache:
    """A scheduler cache fed in memory: ``nodes`` nodes of ``devices`` devices each."""
    cache = SchedulerCache(KubeClient("http://127.0.0.1:9", user_agent="bench-whatif"), SchedulingQueue())
    version = iter(range(1, 10**9))

    def put(informer: Any, obj: dict[str, Any]) -> None:
        apply_event(informer, "ADDED", {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(next(version))}})

    put(cache.classes, {"metadata": {"name": CLASS}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    put(cache.namespaces, {"metadata": {"name": NS}})
    allocatable = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    for i in range(nodes):
        name = f"node-{i:04d}"
        put(
            cache.nodes,
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": allocatable, "capacity": allocatable},
            },
        )
        put(cache.slices, {
            "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}}} for d in range(devices)]},
        })  # fmt: skip
    return cache


def one_cycle(cache: SchedulerCache, cycle: SchedulingCycle, rounds: int = 21) -> tuple[float, float]:
    """Seconds of one warm scheduling cycle for a one-device template pod: wall (median after the
    first) and CPU (the mean of those)."""
    pod = worker_pod("probe")
    pod["metadata"]["uid"] = "uid-probe"
    claim = template_claim(template(), pod, "gpu", "probe-gpu", "uid-probe-gpu")
    apply_event(cache.claims, "ADDED", {**claim, "metadata": {**claim["metadata"], "resourceVersion": "1"}})
    pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "probe-gpu"}]}
    times = []
    cpu = 0.0
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = cycle.schedule(pod)
        times.append(time.perf_counter() - started)
        if len(times) > 1:
            cpu += time.process_time() - started_cpu
        assert isinstance(result, Placement), result
    apply_event(cache.claims, "DELETED", claim)
    return statistics.median(times[1:]), cpu / (rounds - 1)


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (the forked copies)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def fit_phase(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    cache = cluster(args.nodes, args.devices)
    cycle = SchedulingCycle(cache)
    setup = time.perf_counter() - started
    cycle_s, cycle_cpu = one_cycle(cache, cycle)
    runs: list[tuple[float, float]] = []
    total = 0
    for _ in range(args.repeat):
        t, cpu = time.perf_counter(), children_cpu()
        answer = await answer_in_copy(
            lambda: WhatIf(cache, cycle, seconds=args.seconds).fit(worker_pod(), {"one": template()}, args.copies), args.seconds
        )
        runs.append((time.perf_counter() - t, children_cpu() - cpu))
        total = answer["total"]
    best, best_cpu = min(runs)
    median = statistics.median(r[0] for r in runs)
    result = {
        "nodes": args.nodes, "devices_per_node": args.devices, "copies_asked": args.copies, "copies_placed": total,
        "setup_s": round(setup, 3), "cycle_ms": round(cycle_s * 1000, 3), "cycle_cpu_ms": round(cycle_cpu * 1000, 3),
        "fit_best_s": round(best, 3), "fit_best_cpu_s": round(best_cpu, 3), "fit_median_s": round(median, 3),
        "fit_cpu_over_cycle_cpu": round(best_cpu / cycle_cpu, 1), "per_copy_cpu_over_cycle_cpu": round(best_cpu / max(1, total) / cycle_cpu, 3),
        "load_average": os.getloadavg(),
    }  # fmt: skip
    print(f"fit at {args.nodes} nodes x {args.devices} devices ({load()}):")
    print(f"  one scheduling cycle (warm): {cycle_s * 1000:.2f} ms wall (median of 20), {cycle_cpu * 1000:.2f} ms CPU")
    print(
        f"  fit, up to {args.copies} copies: {total} placed in {best:.2f} s wall best ({median:.2f} s median of {args.repeat}), {best_cpu:.2f} s CPU (fork included)"
    )
    print(f"  fit / one cycle (CPU) = {best_cpu / cycle_cpu:.0f}x; per copy / one cycle (CPU) = {best_cpu / max(1, total) / cycle_cpu:.2f}")
    return result


# --- the live scheduler while fit is asked ---


def own_cpu(pid: int) -> float:
    """User + system CPU seconds of the process itself, without its reaped children (the forked
    copies that answer what-if questions are counted apart)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")


async def measured_phase(
    stack_bench: Any, client: KubeClient, metrics: httpx.AsyncClient, namespace: str, pods: int, processes: dict[str, list[int]]
) -> dict[str, Any]:
    """bench.scheduler's dra phase, plus the scheduler's own CPU per pod (its copies apart)."""
    scheduler = processes["scheduler"][0]
    before = own_cpu(scheduler)
    result: dict[str, Any] = await stack_bench.phase(client, metrics, namespace, pods, True, False, 600, processes)
    result["scheduler_own_cpu_ms_per_pod"] = (own_cpu(scheduler) - before) * 1000 / max(1, result["bound"])
    return result


async def live_phase(args: argparse.Namespace) -> dict[str, Any]:
    from bench import scheduler as stack_bench

    port = free_port()
    os.environ["DRA_EXPLAIN_PORT"] = str(port)  # the scheduler's --explain-port (its flag's default reads it)
    options = argparse.Namespace(sqlite=args.sqlite, worker_log_level="warning")
    out: dict[str, Any] = {"nodes": args.live_nodes, "pods": args.pods, "clients": args.clients}
    with (
        tempfile.TemporaryDirectory(prefix="dra-whatif-bench-") as tmp,
        stack_bench.project_stack(options, args.live_nodes, Path(tmp)) as running,
    ):
        async with (
            KubeClient(running.url, user_agent="bench-whatif", timeout=60) as client,
            httpx.AsyncClient(base_url=running.url, timeout=60) as metrics,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as scheduler,
        ):
            await stack_bench.setup_nodes(client, args.live_nodes)
            await stack_bench.wait_for_leases(client, running.leases)
            body = {"pod": stack_bench.pod("asked", True), "templates": [stack_bench.template("tpl", False)], "max": args.copies}
            probe = await scheduler.post(f"/whatif/namespaces/{NS}/fit", content=orjson.dumps(body))
            if probe.status_code != 200:
                raise RuntimeError(f"the scheduler's what-if answered {probe.status_code}: {probe.text}")
            print(f"live: {args.live_nodes} nodes, fit answers {probe.json()['total']} copies; {load()}")
            pods = min(args.pods, args.live_nodes * stack_bench.DEVICES_PER_NODE // 2)
            alone = await measured_phase(stack_bench, client, metrics, "bench-alone", pods, running.processes)
            print(
                f"  alone: {alone['pods_per_s']:.1f} pods/s, scheduler {alone['scheduler_own_cpu_ms_per_pod']:.2f} ms CPU per pod ({load()})"
            )
            answers: list[float] = []
            stop = asyncio.Event()

            async def ask_forever() -> None:
                while not stop.is_set():
                    started = time.perf_counter()
                    response = await scheduler.post(f"/whatif/namespaces/{NS}/fit", content=orjson.dumps(body))
                    if response.status_code == 200:
                        answers.append(time.perf_counter() - started)
                    else:
                        await asyncio.sleep(0.2)  # 429: its turn comes later

            askers = [asyncio.create_task(ask_forever()) for _ in range(args.clients)]
            await asyncio.sleep(1.0)  # the questions are under way before the pods come
            try:
                busy = await measured_phase(stack_bench, client, metrics, "bench-busy", pods, running.processes)
            finally:
                stop.set()
                for task in askers:
                    task.cancel()
                for task in askers:
                    with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                        await task
            ratio = busy["pods_per_s"] / alone["pods_per_s"] if alone["pods_per_s"] else float("nan")
            print(
                f"  with {args.clients} clients asking fit: {busy['pods_per_s']:.1f} pods/s, scheduler {busy['scheduler_own_cpu_ms_per_pod']:.2f} ms CPU per pod"
                f" (+ {busy['cpu_ms_per_pod_scheduler'] - busy['scheduler_own_cpu_ms_per_pod']:.2f} ms per pod in its forked copies) ({load()})"
            )
            print(
                f"  pods/s busy / alone = {ratio:.3f}; {len(answers)} fit answers meanwhile"
                + (f", median {statistics.median(answers):.2f} s" if answers else "")
            )
            out.update(alone=alone, busy=busy, ratio=ratio, answers=len(answers), load_average=os.getloadavg())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.whatif", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500, help="nodes of the in-memory cluster (default 500)")
    parser.add_argument("--devices", type=int, default=8, help="devices per node (default 8)")
    parser.add_argument("--copies", type=int, default=4000, help="copies fit may place (default 4000)")
    parser.add_argument("--repeat", type=int, default=3, help="fit runs (best and median are printed)")
    parser.add_argument("--seconds", type=float, default=120.0, help="fit's own deadline here")
    parser.add_argument("--live", action="store_true", help="also the live scheduler's pods/s with and without concurrent fit calls")
    parser.add_argument("--live-nodes", type=int, default=500, help="--live: nodes of the real stack (10 devices each, bench.scheduler's)")
    parser.add_argument("--pods", type=int, default=1000, help="--live: pods per phase")
    parser.add_argument("--clients", type=int, default=10, help="--live: concurrent fit callers")
    parser.add_argument("--sqlite", action="store_true", help="--live: SQLite instead of a throwaway Postgres")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"fit": asyncio.run(fit_phase(args))}
    if args.live:
        results["live"] = asyncio.run(live_phase(args))
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
