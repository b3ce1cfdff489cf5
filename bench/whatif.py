"""What-if benchmark: ``fit``'s cost beside one scheduling cycle, and the live scheduler while it answers.

**fit** (unless ``--repeat 0``): a scheduler cache in memory with N nodes (default 500) of D devices (default 8)
and a DeviceClass, fed through its informers as watch events would be. Measured in the same run:

* one scheduling cycle (``SchedulingCycle.schedule``) for a pod with a one-device claim from a
  template, warm (the median of 20 cycles after the first; the cycle decides and writes nothing);
* ``fit`` for a pod like it, up to C copies (default 4,000 = every device), as the endpoint
  answers it: in a forked copy of the process (:func:`schedulers.whatifserver.answer_in_copy`),
  fork and answer included (best and median of ``--repeat``).

Printed: copies placed, seconds, milliseconds per copy, and the ratio of ``fit`` to one cycle.

**live** (``--live``): the whole stack as real processes (:mod:`bench.scheduler`'s, 500 nodes of
10 devices, with the scheduler's explanation port on) and its ``dra`` phase (``--pods`` pods, default
2,400, with a one-device claim each, creation to bound), alternately alone and while ``--clients``
loops (default 10) ask ``fit`` for a one-device pod (up to C copies) over and over, ``--rounds``
times (default 2: alone, busy, alone, busy; drift between rounds shows as a difference between the
two phases of a kind). Each phase's pods are deleted after it (their claims too) so every phase
and every question starts from free devices. Per phase: pods bound and pods/s, the scheduler's
own CPU per pod, its forked copies' CPU (reaped ones from the scheduler's children's CPU, living
ones from /proc), load average and steal; for a busy phase also the fit answers that started and
finished inside it (count, median latency and copies placed, how many the copy's deadline cut
short) and every call by HTTP status. Then pods/s busy / alone. The callers under way when a busy
phase ends are waited for, so no copy computes during the next phase. Exit status 1 when a phase
did not bind every pod or a busy phase got no answer.

Timing targets are read from the ratios; nothing here asserts a time. The machine is shared:
the load average (``uptime``) is printed beside every figure.

Run ``python -m bench.whatif --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.machine import MachineLoad, reports_machine
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
GROUP = "/apis/resource.k8s.io/v1"


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


def _stat(pid: int) -> tuple[float, float] | None:
    """(own, reaped children's) user + system CPU seconds of a process, from /proc; None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    # Fields after the command: state is [0], so utime/stime/cutime/cstime are [11]..[14].
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def own_cpu(pid: int) -> float:
    """User + system CPU seconds of the process itself, without its reaped children (the forked
    copies that answer what-if questions are counted apart)."""
    stat = _stat(pid)
    return stat[0] if stat else 0.0


def copies_cpu(pid: int) -> tuple[float, int]:
    """CPU seconds the forked copies of process ``pid`` used so far, and how many live now: the
    reaped ones (its children's CPU in /proc, which includes the copies' own reaped copies) plus
    every living descendant's own and reaped children's CPU. Read again if a copy was reaped
    meanwhile (it would be counted twice or not at all)."""
    from bench.scheduler import process_tree

    for _ in range(10):
        before = _stat(pid)
        living = [stat for child in process_tree(pid)[1:] if (stat := _stat(child)) is not None]
        after = _stat(pid)
        if before is not None and before == after:
            return before[1] + sum(own + reaped for own, reaped in living), len(living)
    return (after[1] if after else 0.0), 0


@dataclass
class Asked:
    """One fit call of the busy phase: when it went and came back, its status, copies placed,
    whether the copy ran out of its deadline before placing them all."""

    started: float
    ended: float
    code: int
    total: int = 0
    cut: bool = False


class Askers:
    """``clients`` loops asking the scheduler the same fit question until :meth:`stop`."""

    def __init__(self, scheduler: httpx.AsyncClient, body: dict[str, Any], clients: int) -> None:
        self.calls: list[Asked] = []
        self._scheduler, self._body, self._stop = scheduler, orjson.dumps(body), asyncio.Event()
        self._tasks = [asyncio.create_task(self._ask_forever()) for _ in range(clients)]

    async def _ask_forever(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                response = await self._scheduler.post(f"/whatif/namespaces/{NS}/fit", content=self._body)
            except httpx.HTTPError:
                self.calls.append(Asked(started, time.perf_counter(), 0))
                await asyncio.sleep(1.0)
                continue
            call = Asked(started, time.perf_counter(), response.status_code)
            if response.status_code == 200:
                call.total = orjson.loads(response.content)["total"]
                call.cut = b"the answer ran out of time" in response.content  # STOPPED_AT_DEADLINE's words
            self.calls.append(call)
            if response.status_code == 429:
                await asyncio.sleep(1.0)  # its retryAfterSeconds
            elif response.status_code != 200:
                await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """No new calls; the ones under way are waited for, so that no copy outlives the phase."""
        self._stop.set()
        await asyncio.gather(*self._tasks)

    def within(self, start: float, end: float) -> list[Asked]:
        return [c for c in self.calls if c.started >= start and c.ended <= end]


async def clear(client: KubeClient, namespace: str, count: int, timeout: float = 600, concurrency: int = 32) -> None:
    """Delete a phase's pods (bench.scheduler's names, at once: grace period 0) and wait until
    the claim controller has deleted their claims, so their devices are free again for the next
    phase and the fit question. One request per pod: a delete-collection of thousands of pods
    outlasts the server's request timeout."""
    names = iter(range(count))

    async def worker() -> None:
        for i in names:
            await client.delete(f"/api/v1/namespaces/{namespace}/pods/pod-{i:05d}", grace_period_seconds=0, missing_ok=True)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        claims = await client.get(f"{GROUP}/namespaces/{namespace}/resourceclaims?limit=1")
        pods = await client.get(f"/api/v1/namespaces/{namespace}/pods?limit=1")
        if not claims["items"] and not pods["items"]:
            return
        await asyncio.sleep(1.0)
    raise RuntimeError(f"the pods and claims of {namespace} were not gone after {timeout:.0f} s")


async def measured_phase(
    stack_bench: Any, client: KubeClient, metrics: httpx.AsyncClient, namespace: str, pods: int, processes: dict[str, list[int]]
) -> dict[str, Any]:
    """bench.scheduler's dra phase, plus the scheduler's own CPU per pod and its copies' CPU, the
    phase's wall window (``window``: perf_counter at start and end) and the machine's load."""
    scheduler = processes["scheduler"][0]
    machine = MachineLoad()
    before, (copies_before, living) = own_cpu(scheduler), copies_cpu(scheduler)
    start = time.perf_counter()
    result: dict[str, Any] = await stack_bench.phase(client, metrics, namespace, pods, True, False, 600, processes)
    end = time.perf_counter()
    copies_after, living_after = copies_cpu(scheduler)
    bound = max(1, result["bound"])
    result.update(
        window=(start, end),
        scheduler_own_cpu_ms_per_pod=(own_cpu(scheduler) - before) * 1000 / bound,
        copies_cpu_s=copies_after - copies_before,
        copies_alive_at_start=living,
        copies_alive_at_end=living_after,
        machine=machine.summary(),
    )
    return result


def _machine(summary: dict[str, Any]) -> str:
    start, end = (" ".join(f"{x:.2f}" for x in summary[k]) for k in ("load_average_start", "load_average_end"))
    steal = "?" if summary["steal_percent"] is None else f"{summary['steal_percent']:.1f}%"
    return f"load {start} -> {end}, steal {steal}"


async def live_phase(args: argparse.Namespace) -> dict[str, Any]:
    from bench import scheduler as stack_bench

    port = free_port()
    os.environ["DRA_EXPLAIN_PORT"] = str(port)  # the scheduler's --explain-port (its flag's default reads it)
    options = argparse.Namespace(sqlite=args.sqlite, worker_log_level="warning")
    pods = min(args.pods, args.live_nodes * stack_bench.DEVICES_PER_NODE // 2)
    out: dict[str, Any] = {
        "nodes": args.live_nodes,
        "devices_per_node": stack_bench.DEVICES_PER_NODE,
        "pods": pods,
        "clients": args.clients,
    }
    phases: list[dict[str, Any]] = []
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
            print(
                f"live: {args.live_nodes} nodes x {stack_bench.DEVICES_PER_NODE} devices, {pods} pods per phase,"
                f" fit (max {args.copies}) answers {probe.json()['total']} copies; {load()}",
                flush=True,
            )
            for round_ in range(1, args.rounds + 1):
                for kind in ("alone", "busy"):
                    namespace = f"bench-{kind}-{round_}"
                    askers = Askers(scheduler, body, args.clients) if kind == "busy" else None
                    if askers is not None:
                        await asyncio.sleep(1.0)  # the questions are under way before the pods come
                    try:
                        result = await measured_phase(stack_bench, client, metrics, namespace, pods, running.processes)
                    finally:
                        if askers is not None:
                            await askers.stop()
                    result.update(kind=kind, round=round_)
                    line = (
                        f"  {kind} {round_}: {result['bound']}/{pods} bound, {result['pods_per_s']:.1f} pods/s over {result['seconds']:.0f} s,"
                        f" scheduler {result['scheduler_own_cpu_ms_per_pod']:.2f} ms CPU per pod,"
                        f" its copies {result['copies_cpu_s']:.1f} s CPU ({_machine(result['machine'])})"
                    )
                    if askers is not None:
                        inside = askers.within(*result["window"])
                        answered = [c for c in inside if c.code == 200]
                        codes: dict[str, int] = {}
                        for c in askers.calls:
                            codes[str(c.code)] = codes.get(str(c.code), 0) + 1
                        result.update(
                            answers=len(answered),
                            answers_cut_by_deadline=sum(c.cut for c in answered),
                            answer_median_s=statistics.median(c.ended - c.started for c in answered) if answered else None,
                            answer_median_copies=statistics.median(c.total for c in answered) if answered else None,
                            calls_by_status=codes,
                        )
                        line += (
                            f"\n    {len(answered)} fit answers started and finished inside it"
                            + (
                                f" (median {result['answer_median_s']:.1f} s, {result['answer_median_copies']:.0f} copies;"
                                f" {result['answers_cut_by_deadline']} cut by the 10-s deadline)"
                                if answered
                                else ""
                            )
                            + f"; every call by status: {codes}"
                        )
                    print(line, flush=True)
                    phases.append(result)
                    cleared = time.perf_counter()
                    await clear(client, namespace, pods)
                    print(f"    (its pods and claims deleted in {time.perf_counter() - cleared:.0f} s)", flush=True)
    alone = [p for p in phases if p["kind"] == "alone"]
    busy = [p for p in phases if p["kind"] == "busy"]
    rate = {kind: statistics.mean(p["pods_per_s"] for p in group) for kind, group in (("alone", alone), ("busy", busy))}
    ratio = rate["busy"] / rate["alone"] if rate["alone"] else float("nan")
    own = {kind: statistics.mean(p["scheduler_own_cpu_ms_per_pod"] for p in group) for kind, group in (("alone", alone), ("busy", busy))}
    print(
        f"  pods/s busy / alone = {ratio:.3f} (means {rate['busy']:.1f} / {rate['alone']:.1f});"
        f" scheduler's own CPU per pod busy / alone = {own['busy'] / own['alone']:.3f} ({own['busy']:.2f} / {own['alone']:.2f} ms);"
        f" {sum(p['answers'] for p in busy)} fit answers in the busy phases; {load()}",
        flush=True,
    )
    out.update(phases=phases, ratio=ratio, own_cpu_ratio=own["busy"] / own["alone"] if own["alone"] else float("nan"))
    problems = [f"{p['kind']} {p['round']}: {p['bound']}/{pods} pods bound" for p in phases if p["bound"] < pods]
    problems += [f"busy {p['round']}: no fit answer started and finished inside it" for p in busy if not p["answers"]]
    out["problems"] = problems
    return out


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.whatif", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500, help="nodes of the in-memory cluster (default 500)")
    parser.add_argument("--devices", type=int, default=8, help="devices per node (default 8)")
    parser.add_argument("--copies", type=int, default=4000, help="copies fit may place (default 4000)")
    parser.add_argument("--repeat", type=int, default=3, help="fit runs (best and median are printed; 0: none)")
    parser.add_argument("--seconds", type=float, default=120.0, help="fit's own deadline here")
    parser.add_argument("--live", action="store_true", help="also the live scheduler's pods/s with and without concurrent fit calls")
    parser.add_argument("--live-nodes", type=int, default=500, help="--live: nodes of the real stack (10 devices each, bench.scheduler's)")
    parser.add_argument(
        "--pods", type=int, default=2400, help="--live: pods per phase (default 2400: 30 s or more at 75 pods/s; at most half the devices)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="--live: alone/busy pairs, alternated (default 2)")
    parser.add_argument("--clients", type=int, default=10, help="--live: concurrent fit callers")
    parser.add_argument("--sqlite", action="store_true", help="--live: SQLite instead of a throwaway Postgres")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"fit": asyncio.run(fit_phase(args))} if args.repeat > 0 else {}
    if args.live:
        results["live"] = asyncio.run(live_phase(args))
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    for problem in results.get("live", {}).get("problems", []):
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if results.get("live", {}).get("problems") else 0


if __name__ == "__main__":
    raise SystemExit(main())
