"""Scale: how many simulated GPU nodes the whole stack keeps healthy, as several processes on one Postgres.

For every point of ``--nodes`` x ``--shards`` x ``--replicas`` it starts a fresh stack: a throwaway
Postgres (fsync on, ``devtools.postgres``), ``--replicas`` API servers on it, a scheduler and a
controller per replica (leader-elected: one of each leads, the others stand by on other replicas),
and the node range as ``--shards`` kubelet simulators (``python -m kubeletsim --shard K/N``, shard K
talking to replica K mod R). Then:

1. **registration**: until every node is Ready with its Lease and ResourceSlice, as seen on watches;
2. one lease interval to settle, then **``--measure`` seconds of heartbeats only**: every Lease
   renewal is timestamped as it arrives on a watch (what a node lifecycle controller observes):
   renewal gaps, the share of them within the lease duration (40 s), the nodes that would have gone
   NotReady with the node lifecycle controller's grace (50 s in v1.37, ``--node-monitor-grace-period``;
   40 s is counted too), lag percentiles (gap - interval), CPU cores and RSS of every process, API
   requests per renewal (the replicas' ``/metrics``), and with several replicas the renewals seen on a
   second replica's watch against the first's (every replica must see every replica's writes);
3. **pods**: ``--pods`` pods with a GPU claim from a ResourceClaimTemplate each, created through all
   replicas; the controller makes the claims, the scheduler allocates and binds, the shards start
   them: pods/s to Running (first create to last Running) and latency, with the Leases watched the
   whole time;
4. with several replicas, **failover**: the leading scheduler and controller are killed (SIGKILL);
   the standbys on other replicas take over (seconds until their Lease names them) and
   ``--failover-pods`` more pods must run; at the end every replica lists the same nodes, Leases,
   slices and pods.

Figures are printed per point and as a summary with same-run ratios: per-node CPU against the
smallest node count of the same shards and replicas (``--baseline-nodes``, default 1,000, is added
to the run when missing), and the machine's load average. ``--profile DIR`` records py-spy profiles
(``--gil``) of a replica, a shard, the scheduler and the controller during the measured window and
prints where each spends its time. Run ``python -m bench.scale --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from bench import pyspy
from bench.cpu import _machine_busy, _proc_table, _tree_cpu
from bench.machine import load_average, reports_machine
from bench.scheduler import Worker, request_counts
from bench.simulator import LeaseTracker, Pool, list_rv, pct, watch_events
from devtools.postgres import ThrowawayPostgres
from devtools.server import ServerProcess, migrate, stop_all
from kube.objects import Obj

RESOURCE = "/apis/resource.k8s.io/v1"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
SYSTEM_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
LEASE_DURATION = 40.0  # what kubeletsim writes, upstream's node lease duration
NODE_MONITOR_GRACE = 50.0  # kube-controller-manager's --node-monitor-grace-period default in v1.37
DRIVER = "gpu.example.com"
DEVICES_PER_NODE = 8  # the gpu profile
NAMESPACE = "scale"
now = time.perf_counter


# ----------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class Point:
    nodes: int
    shards: int
    replicas: int

    def __str__(self) -> str:
        return f"{self.nodes} nodes, {self.shards} shard{'s' * (self.shards > 1)}, {self.replicas} replica{'s' * (self.replicas > 1)}"


def rss_mib(pid: int) -> float | None:
    """Resident memory of one process (VmRSS)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError):
        pass
    return None


def tree_pss_mib(root: int) -> float | None:
    """Proportional memory of a process tree (Postgres: shared buffers counted once, not per backend)."""
    table = _proc_table()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += [child for child, (parent, _) in table.items() if parent == pid]
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return round(total / 1024, 1) if total else None


class Stack:
    """Postgres, the replicas, a scheduler and a controller per replica, and the shards."""

    def __init__(self, point: Point, args: argparse.Namespace, logs: Path) -> None:
        self.point, self.args, self.logs = point, args, logs
        logs.mkdir(parents=True, exist_ok=True)
        self.prefix = "gpu-"
        self.pg: ThrowawayPostgres | None = None
        self.servers: list[ServerProcess] = []
        self.workers: dict[str, Worker] = {}
        self.root = Path(tempfile.mkdtemp(prefix="scale-kubelet-"))  # short: unix sockets live under it

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def start_servers(self) -> None:
        self.pg = ThrowawayPostgres(database="dra_scale").start()
        migrate(self.pg.url)
        for i in range(self.point.replicas):
            server = ServerProcess(self.pg.url, *self.args.server_arg, log_path=self.logs / f"server-{i}.log")
            self.servers.append(server.start(timeout=120))

    def start_control_plane(self) -> None:
        """A scheduler and a controller on every replica: one of each leads, the others stand by elsewhere."""
        for i, url in enumerate(self.urls):
            for module, name in (("schedulers", "scheduler"), ("controllers", "controller")):
                args = ["--server", url, "--identity", f"{name}-{i}", "--log-level", "info"]
                self.workers[f"{name}-{i}"] = Worker(module, args, self.logs / f"{name}-{i}.log")

    def start_shards(self) -> None:
        point, args = self.point, self.args
        for k in range(point.shards):
            url = self.urls[k % point.replicas]
            command = [
                "--server", url, "--nodes", str(point.nodes), "--shard", f"{k}/{point.shards}", "--profile", "gpu",
                "--node-prefix", self.prefix, "--root-dir", str(self.root), "--log-level", "info", *args.sim_arg,
            ]  # fmt: skip
            self.workers[f"sim-{k}"] = Worker("kubeletsim", command, self.logs / f"sim-{k}.log")

    def pids(self) -> dict[str, int]:
        """Every process of the stack by name (Postgres as the root of its tree)."""
        out = {f"server-{i}": s.process.pid for i, s in enumerate(self.servers) if s.process is not None}
        out.update({name: w.process.pid for name, w in self.workers.items() if w.process.poll() is None})
        if self.pg is not None and self.pg.pid is not None:
            out["postgres"] = self.pg.pid
        return out

    def check_alive(self) -> None:
        for name, worker in self.workers.items():
            if worker.process.poll() is not None and not name.endswith("-killed"):
                raise RuntimeError(f"{name} exited with {worker.process.returncode}; log {self.logs / (name + '.log')}")

    def stop(self) -> None:
        for worker in self.workers.values():
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in self.workers.values():
            worker.stop()
        stop_all(self.servers)
        if self.pg is not None:
            self.pg.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class Cpu:
    """CPU cores of every named process tree, and of the whole machine, between start and stop."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids, bench=os.getpid())
        table = _proc_table()
        self._t0 = now()
        self._c0 = {name: self._cpu(name, pid, table) for name, pid in self.pids.items()}
        self._m0 = _machine_busy()

    @staticmethod
    def _cpu(name: str, pid: int, table: dict[int, tuple[int, float]]) -> float | None:
        # The benchmark's own tree would hold the whole stack.
        return time.process_time() if name == "bench" else _tree_cpu(pid, table)

    def stop(self) -> dict[str, float]:
        table = _proc_table()
        wall = max(now() - self._t0, 1e-9)
        out: dict[str, float] = {}
        for name, pid in self.pids.items():
            before, after = self._c0.get(name), self._cpu(name, pid, table)
            if before is not None and after is not None:
                out[name] = round((after - before) / wall, 3)
        busy = _machine_busy()
        if busy is not None and self._m0 is not None:
            out["machine"] = round((busy - self._m0) / wall, 3)
        return out


def group_cores(cpu: dict[str, float]) -> dict[str, float]:
    """Cores per kind of process: servers, shards, schedulers, controllers, Postgres, the benchmark."""
    kinds = {"server": 0.0, "sim": 0.0, "scheduler": 0.0, "controller": 0.0, "postgres": 0.0, "bench": 0.0}
    for name, cores in cpu.items():
        kind = name.split("-", 1)[0]
        if kind in kinds:
            kinds[kind] += cores
    return {k: round(v, 3) for k, v in kinds.items()}


# ----------------------------------------------------------------------------- observing


@dataclass
class Observer:
    """The benchmark's watches: Leases (on the first replica, and on a second one to compare), Nodes, slices, pods."""

    urls: list[str]
    prefix: str
    leases: LeaseTracker = field(init=False)
    leases_elsewhere: LeaseTracker | None = None
    ready: dict[str, bool] = field(default_factory=dict)
    sliced: set[str] = field(default_factory=set)
    running: dict[str, float] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.leases = LeaseTracker(self.prefix)
        if len(self.urls) > 1:
            self.leases_elsewhere = LeaseTracker(self.prefix)

    async def start(self) -> None:
        clients = [httpx.AsyncClient(base_url=url, timeout=120) for url in self.urls]
        last = clients[-1]
        try:
            starts: list[tuple[httpx.AsyncClient, str, Callable[[Obj], None]]] = [
                (clients[0], LEASES, lambda e: self.leases.observe(e["object"]["metadata"]["name"], now())),
                (last, "/api/v1/nodes", self._node),
                (clients[0], f"{RESOURCE}/resourceslices", self._slice),
                (last, f"/api/v1/namespaces/{NAMESPACE}/pods", self._pod),
            ]
            if self.leases_elsewhere is not None:
                elsewhere = self.leases_elsewhere
                starts.append((clients[1], LEASES, lambda e: elsewhere.observe(e["object"]["metadata"]["name"], now())))
            for client, path, handle in starts:
                _, rv = await list_rv(client, path)
                self.tasks.append(asyncio.create_task(self._follow(client, path, rv, handle)))
        finally:
            for client in clients:
                await client.aclose()

    async def _follow(self, client: httpx.AsyncClient, path: str, rv: str, handle: Callable[[Obj], None]) -> None:
        async with httpx.AsyncClient(base_url=client.base_url, timeout=120) as http:
            async for event in watch_events(http, path, rv):
                handle(event)

    def _node(self, event: Obj) -> None:
        obj = event["object"]
        name = obj["metadata"]["name"]
        if name.startswith(self.prefix):
            conditions = (obj.get("status") or {}).get("conditions") or []
            self.ready[name] = event["type"] != "DELETED" and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _slice(self, event: Obj) -> None:
        node = (event["object"].get("spec") or {}).get("nodeName") or ""
        if node.startswith(self.prefix):
            self.sliced.add(node)

    def _pod(self, event: Obj) -> None:
        obj = event["object"]
        if (obj.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(obj["metadata"]["name"], now())

    def registered(self, names: list[str]) -> int:
        return sum(1 for n in names if self.ready.get(n) and n in self.sliced and n in self.leases.seen)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def lease_health(tracker: LeaseTracker, t0: float, t1: float, names: list[str], interval: float) -> Obj:
    """Renewal gaps inside [t0, t1] as a node lifecycle controller sees them (open gaps at t1 included)."""
    base = tracker.window(t0, t1, names, interval)
    gaps, stale = tracker.gaps(t0, t1, names)
    lags = [g - interval for g in gaps]
    base.update(
        {
            "within_duration": sum(1 for g in gaps if g <= LEASE_DURATION) / len(gaps) if gaps else None,
            "not_ready_40s": sum(1 for s in stale if s > LEASE_DURATION),
            "not_ready_grace": sum(1 for s in stale if s > NODE_MONITOR_GRACE),
            "lag_p90": pct(lags, 90),
            "lag_p999": pct(lags, 99.9),
        }
    )
    return base


async def metrics(urls: list[str]) -> list[dict[str, float]]:
    out = []
    async with contextlib.AsyncExitStack() as stack:
        for url in urls:
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            out.append(await request_counts(client, refused=True))
    return out


def request_delta(before: list[dict[str, float]], after: list[dict[str, float]]) -> dict[str, float]:
    """Requests made between two samples, summed over the replicas, by "VERB resource[/subresource]"."""
    total: dict[str, float] = {}
    for b, a in zip(before, after, strict=True):
        for key, value in a.items():
            total[key] = total.get(key, 0.0) + value - b.get(key, 0.0)
    return {k: v for k, v in sorted(total.items(), key=lambda kv: -kv[1]) if v > 0}


def late_seconds(log: Path, since: float) -> float | None:
    """The most a shard's Lease loop ran behind its slots in the lines it logged after ``since`` (epoch seconds)."""
    worst = None
    with contextlib.suppress(OSError):
        for line in log.read_bytes().splitlines():
            if b'"lease renewals"' not in line:
                continue
            entry = orjson.loads(line)
            stamp = calendar.timegm(time.strptime(entry["ts"][:19], "%Y-%m-%dT%H:%M:%S"))
            if stamp >= since:
                worst = max(worst or 0.0, float(entry.get("maxLateSeconds") or 0.0))
    return worst


def leader_lines(logs: Path, name: str) -> list[str]:
    """Which instances of ``name`` (scheduler, controller) said they became leader."""
    out = []
    for log in sorted(logs.glob(f"{name}-*.log")):
        count = sum(1 for line in log.read_bytes().splitlines() if b'"became leader"' in line)
        out += [log.stem] * count
    return out


async def holder(url: str, lease: str) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        response = await client.get(f"{SYSTEM_LEASES}/{lease}")
        return str(((response.json() if response.status_code == 200 else {}).get("spec") or {}).get("holderIdentity") or "")


# ----------------------------------------------------------------------------- pods


def template() -> Obj:
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"}, "spec": {"spec": {"devices": {"requests": [request]}}}}


def gpu_pod(name: str) -> Obj:
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "claims": [{"name": "gpu"}]}}
    spec = {"containers": [container], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}], "terminationGracePeriodSeconds": 0}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def create_pods(pools: list[Pool], names: list[str], concurrency: int = 32) -> dict[str, float]:
    """Create the pods through every replica in turn; the time each 201 arrived."""
    created: dict[str, float] = {}
    todo = iter(enumerate(names))

    async def worker() -> None:
        for i, name in todo:
            # As client-go: a 429 (the server's in-flight limit) is sent again after its Retry-After.
            while (answer := await pools[i % len(pools)].request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod(name)))[0] == 429:
                await asyncio.sleep(1.0)
            if answer[0] != 201:
                raise RuntimeError(f"creating pod {name}: {answer[0]} {str(answer[1])[:300]}")
            created[name] = now()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


async def until(check: Callable[[], bool], timeout: float, stack: Stack, every: float = 0.5) -> bool:
    deadline = now() + timeout
    while not check():
        stack.check_alive()
        if now() > deadline:
            return False
        await asyncio.sleep(every)
    return True


async def pods_phase(stack: Stack, observer: Observer, pools: list[Pool], names: list[str], timeout: float) -> Obj:
    t0 = now()
    created = await create_pods(pools, names)
    await until(lambda: all(n in observer.running for n in names), timeout, stack)
    done = [n for n in names if n in observer.running]
    end = max((observer.running[n] for n in done), default=now())
    latencies = [observer.running[n] - created[n] for n in done if n in created]
    return {
        "pods": len(names),
        "running": len(done),
        "seconds": round(end - t0, 2),
        "per_s": round(len(done) / max(end - t0, 1e-9), 1),
        "create_s": round(max(created.values(), default=t0) - t0, 2),
        "p50_s": pct(latencies, 50),
        "p99_s": pct(latencies, 99),
    }


# ----------------------------------------------------------------------------- one point


async def run_point(point: Point, args: argparse.Namespace, logs: Path) -> Obj:
    stack = Stack(point, args, logs)
    result: Obj = {"point": {"nodes": point.nodes, "shards": point.shards, "replicas": point.replicas}, "load_start": load_average()}
    names = [f"{stack.prefix}{i}" for i in range(point.nodes)]
    interval = args.lease_interval
    observer: Observer | None = None
    pools: list[Pool] = []
    try:
        stack.start_servers()
        pools = [Pool(url, 16) for url in stack.urls]
        klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}  # fmt: skip
        await pools[0].ok("POST", f"{RESOURCE}/deviceclasses", klass)
        await pools[0].ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        await pools[0].ok("POST", f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates", template())
        observer = Observer(stack.urls, stack.prefix)
        await observer.start()
        stack.start_control_plane()
        t0 = now()
        stack.start_shards()
        cpu = Cpu(stack.pids())
        timeout = args.register_timeout or max(300.0, point.nodes * 0.15)
        step = max(1, point.nodes // 10)
        shown = 0
        while True:
            count = observer.registered(names)
            if count >= shown + step or count == point.nodes:
                print(f"  registered {count}/{point.nodes} after {now() - t0:.0f}s", flush=True)
                shown = count
            if count == point.nodes:
                break
            stack.check_alive()
            if now() - t0 > timeout:
                raise RuntimeError(f"{point}: {count} of {point.nodes} nodes registered after {timeout:.0f}s; logs in {stack.logs}")
            await asyncio.sleep(1.0)
        result["register_s"] = round(now() - t0, 1)
        result["register_cpu"] = cpu.stop()
        result["settle_s"] = await settle(observer, names, interval, stack)

        # Heartbeats only.
        pids = stack.pids()
        requests0 = await metrics(stack.urls)
        wall0 = time.time()
        profiles = pyspy.record(Path(args.profile), f"{point.nodes}-{point.shards}-{point.replicas}", profiled(pids)) if args.profile else []
        cpu = Cpu(pids)
        w0 = now()
        for _ in range(max(1, round(args.measure / 30))):
            await asyncio.sleep(args.measure / max(1, round(args.measure / 30)))
            stack.check_alive()
            recent = lease_health(observer.leases, now() - 30, now(), names, interval)
            print(f"  heartbeats: {recent['renewals_per_s']:.0f}/s of {point.nodes / interval:.0f} in the last 30 s, lag p99 "
                  f"{fmt(recent['lag_p99'])} s", flush=True)  # fmt: skip
        w1 = now()
        idle_cpu = cpu.stop()
        pyspy.stop(profiles)
        result["idle"] = lease_health(observer.leases, w0, w1, names, interval)
        result["idle"]["cpu"] = idle_cpu
        result["idle"]["requests"] = request_delta(requests0, await metrics(stack.urls))
        result["idle"]["late_s"] = {n: late_seconds(stack.logs / f"{n}.log", wall0) for n in pids if n.startswith("sim-")}
        if observer.leases_elsewhere is not None:
            elsewhere = lease_health(observer.leases_elsewhere, w0, w1, names, interval)
            result["idle"]["renewals_elsewhere"] = elsewhere["renewals"]
        result["rss_mib"] = {n: (tree_pss_mib(p) if n == "postgres" else rss_mib(p)) for n, p in pids.items()}
        result["rss_mib"]["bench"] = rss_mib(os.getpid())
        if profiles:
            result["profiles"] = {r.name: pyspy.summary(r.path) for r in profiles}

        # Pods with a GPU claim each.
        try:
            await later_phases(stack, observer, pools, args, result, names)
        except (RuntimeError, OSError, httpx.HTTPError) as exc:
            result["error"] = str(exc)
            print(f"  failed after the heartbeats: {exc}", flush=True)
    finally:
        if observer is not None:
            await observer.stop()
        for pool in pools:
            await pool.close()
        stack.stop()
    result["load_end"] = load_average()
    return result


async def later_phases(stack: Stack, observer: Observer, pools: list[Pool], args: argparse.Namespace, result: Obj, names: list[str]) -> None:
    """Pods, failover, the replicas' agreement: ``result`` gets their figures as each ends."""
    point, interval = stack.point, args.lease_interval
    count = min(args.pods, point.nodes * DEVICES_PER_NODE // 2)
    # Fresh connections: the server closes ones idle for 90 s.
    for pool in pools:
        await pool.close()
    pools[:] = [Pool(url, 16) for url in stack.urls]
    if count:
        requests0 = await metrics(stack.urls)
        cpu = Cpu(stack.pids())
        p0 = now()
        result["pods"] = await pods_phase(stack, observer, pools, [f"p{i:05d}" for i in range(count)], args.pods_timeout)
        result["pods"]["cpu"] = cpu.stop()
        result["pods"]["requests"] = request_delta(requests0, await metrics(stack.urls))
        result["busy"] = lease_health(observer.leases, p0, now(), names, interval)
    result["leaders"] = {"scheduler": leader_lines(stack.logs, "scheduler"), "controller": leader_lines(stack.logs, "controller")}
    if point.replicas > 1 and args.failover_pods:
        result["failover"] = await failover(stack, observer, pools, args)
    result["consistent"] = await consistent(stack.urls, stack.prefix)


async def settle(observer: Observer, names: list[str], interval: float, stack: Stack, limit: float = 180.0) -> float:
    """Wait until the renewals made while registering are on their slots: for a whole interval every
    node renewed and none more than 2 s late (at most ``limit`` seconds); how long that took."""
    t0 = now()
    await asyncio.sleep(interval)
    while now() - t0 < limit:
        stack.check_alive()
        recent = lease_health(observer.leases, now() - 2 * interval, now(), names, interval)
        if recent["renewals"] >= 1.9 * len(names) and (recent["lag_max"] or 0.0) <= 2.0:
            break
        await asyncio.sleep(2.0)
    print(f"  settled after {now() - t0:.0f}s", flush=True)
    return round(now() - t0, 1)


def profiled(pids: dict[str, int]) -> dict[str, int]:
    """The processes worth a profile: the first replica and shard, every scheduler and controller (the standbys sample nothing)."""
    return {n: p for n, p in pids.items() if n in ("server-0", "sim-0") or n.startswith(("scheduler-", "controller-"))}


async def failover(stack: Stack, observer: Observer, pools: list[Pool], args: argparse.Namespace) -> Obj:
    """Kill the leading scheduler and controller; the standbys on other replicas must take over and run pods."""
    out: Obj = {}
    killed: dict[str, str] = {}
    for name, lease in (("scheduler", "dra-scheduler"), ("controller", "dra-controller")):
        leader = await holder(stack.urls[0], lease)
        out[f"{name}_leader_before"] = leader
        worker = stack.workers.get(leader)
        if worker is None:
            out["error"] = f"the {name} Lease names {leader!r}, no process of this stack"
            return out
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        stack.workers[f"{leader}-killed"] = stack.workers.pop(leader)
        killed[lease] = leader
    for pool in pools:
        await pool.close()
    pools[:] = [Pool(url, 16) for url in stack.urls]
    t0 = now()
    # Read the Leases from another replica than the first: the takeover is written through the standby's replica.
    url = stack.urls[-1]
    taken: dict[str, float] = {}
    while len(taken) < len(killed) and now() - t0 < 120:
        for lease, old in killed.items():
            if lease not in taken and (new := await holder(url, lease)) and new != old:
                taken[lease] = now() - t0
                out[f"{lease}_now"] = new
        await asyncio.sleep(0.5)
    out["takeover_s"] = {k: round(v, 1) for k, v in taken.items()}
    if len(taken) == len(killed):
        result = await pods_phase(stack, observer, pools, [f"f{i:05d}" for i in range(args.failover_pods)], args.pods_timeout)
        out["pods"] = result
    return out


async def consistent(urls: list[str], prefix: str) -> Obj:
    """Each replica's count of the stack's nodes, Leases, slices and pods (consistent LISTs): all equal."""
    counts = []
    for url in urls:
        async with httpx.AsyncClient(base_url=url, timeout=300) as client:
            row = {}
            for what, path, key in (
                ("nodes", "/api/v1/nodes", "name"), ("leases", LEASES, "name"), ("slices", f"{RESOURCE}/resourceslices", "node"),
                ("pods", f"/api/v1/namespaces/{NAMESPACE}/pods", "name"),
            ):  # fmt: skip
                items, _ = await list_rv(client, path)
                if key == "node":
                    row[what] = sum(1 for i in items if (i.get("spec") or {}).get("nodeName", "").startswith(prefix))
                elif what == "pods":
                    row[what] = len(items)
                else:
                    row[what] = sum(1 for i in items if i["metadata"]["name"].startswith(prefix))
            counts.append(row)
    return {"per_replica": counts, "equal": all(c == counts[0] for c in counts)}


# ----------------------------------------------------------------------------- report


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def per_node_cores(r: Obj) -> float | None:
    """Cores the stack (every process but the benchmark) used per 1,000 nodes while only heartbeats ran."""
    cores = group_cores(r["idle"]["cpu"])
    total = sum(v for k, v in cores.items() if k != "bench")
    return total * 1000 / r["point"]["nodes"]


def cpu_ms_per_renewal(r: Obj, kinds: tuple[str, ...]) -> float | None:
    idle = r["idle"]
    cores = group_cores(idle["cpu"])
    renewals = idle["renewals"]
    return sum(cores[k] for k in kinds) * idle["seconds"] * 1000 / renewals if renewals else None


def refused(requests: dict[str, float]) -> float:
    return sum(v for k, v in requests.items() if k.endswith(" 429"))


def show_point(r: Obj) -> None:
    p = r["point"]
    idle = r["idle"]
    cores = group_cores(idle["cpu"])
    print(f"\n== {p['nodes']} nodes, {p['shards']} shards, {p['replicas']} replicas: registered in {r['register_s']:.0f} s; "
          f"load average {r['load_start']} -> {r['load_end']}")  # fmt: skip
    print(f"heartbeats ({idle['seconds']:.0f} s): {idle['renewals_per_s']:.0f} renewals/s of {idle['expected_per_s']:.0f}; "
          f"within 40 s {fmt(100 * (idle['within_duration'] or 0), '.2f')}%; lag p50/p90/p99/max {fmt(idle['lag_p50'])} / "
          f"{fmt(idle['lag_p90'])} / {fmt(idle['lag_p99'])} / {fmt(idle['lag_max'])} s; nodes NotReady at 40 s {idle['not_ready_40s']}, "
          f"at the 50 s grace {idle['not_ready_grace']}")  # fmt: skip
    if "renewals_elsewhere" in idle:
        print(f"  a second replica's watch saw {idle['renewals_elsewhere']} of the first's {idle['renewals']} renewals")
    late = {k: v for k, v in idle["late_s"].items() if v is not None}
    if late:
        print(f"  shards' Lease loops ran behind their slots by at most {max(late.values()):.2f} s")
    print(f"  cores: {', '.join(f'{k} {v:.2f}' for k, v in cores.items())}; machine {fmt(idle['cpu'].get('machine'))} (others' work included)")
    print(f"  per process: {', '.join(f'{k} {v:.2f}' for k, v in sorted(idle['cpu'].items()) if k != 'machine')}")
    print(f"  CPU per renewal: servers {fmt(cpu_ms_per_renewal(r, ('server',)))} ms, Postgres {fmt(cpu_ms_per_renewal(r, ('postgres',)))} ms, "
          f"shards {fmt(cpu_ms_per_renewal(r, ('sim',)))} ms")  # fmt: skip
    renewals = idle["renewals"] or 1
    top = [(k, v) for k, v in idle["requests"].items() if not k.endswith(" 429")][:6]
    print(f"  requests per renewal: {', '.join(f'{k} {v / renewals:.3f}' for k, v in top)}; refused (429): {refused(idle['requests']):.0f}")
    print(f"  RSS MiB: {', '.join(f'{k} {v:.0f}' for k, v in sorted(r['rss_mib'].items()) if v is not None)}")
    if "pods" in r:
        pods, busy = r["pods"], r["busy"]
        pc = group_cores(pods["cpu"])
        print(f"pods with a GPU claim: {pods['running']}/{pods['pods']} Running, {pods['per_s']:.1f} pods/s, latency p50/p99 "
              f"{fmt(pods['p50_s'])} / {fmt(pods['p99_s'])} s; cores: {', '.join(f'{k} {v:.2f}' for k, v in pc.items())}")  # fmt: skip
        per_pod = [(k, v / max(1, pods["running"])) for k, v in pods["requests"].items() if not k.endswith(" 429") and "leases" not in k][:8]
        print(f"  requests per pod: {', '.join(f'{k} {v:.2f}' for k, v in per_pod)}; refused (429): {refused(pods['requests']):.0f}")
        print(f"  heartbeats meanwhile: {busy['renewals_per_s']:.0f}/s of {busy['expected_per_s']:.0f}, lag p99 {fmt(busy['lag_p99'])} s, "
              f"max {fmt(busy['lag_max'])} s, NotReady at 40 s {busy['not_ready_40s']}, at 50 s {busy['not_ready_grace']}")  # fmt: skip
    if "leaders" in r:
        print(f"leaders: scheduler {r['leaders']['scheduler']}, controller {r['leaders']['controller']}")
    if "failover" in r:
        f = r["failover"]
        fp = f.get("pods") or {}
        print(f"failover: killed {f.get('scheduler_leader_before')} and {f.get('controller_leader_before')}; taken over in {f.get('takeover_s')} "
              f"by {f.get('dra-scheduler_now')} / {f.get('dra-controller_now')}; then {fp.get('running', 0)}/{fp.get('pods', 0)} pods Running")  # fmt: skip
    if "consistent" in r:
        c = r["consistent"]
        print(f"replicas agree: {'yes' if c['equal'] else 'NO'} {c['per_replica']}")
    if "error" in r:
        print(f"failed after the heartbeats: {r['error']}")
    for name, prof in (r.get("profiles") or {}).items():
        print(f"  profile {name} ({prof['samples']} samples holding the GIL): " + "; ".join(f"{f} {s}%" for f, s in prof["functions"][:8]))
        print("    by file: " + "; ".join(f"{f} {s}%" for f, s in prof["files"][:8]))


def show_summary(results: list[Obj]) -> None:
    print("\nsummary (ratios: per-node cost against the smallest node count of the same shards and replicas, same run):")
    print(f"{'nodes':>7}{'shards':>7}{'repl':>5}{'healthy':>8}{'renew %':>9}{'lag p99':>8}{'NotReady':>9}{'cores/1k':>9}{'ratio':>7}"
          f"{'srv ms/r':>9}{'sim ms/r':>9}{'pg ms/r':>8}{'pods/s':>8}{'load':>6}")  # fmt: skip
    base: dict[tuple[int, int], Obj] = {}
    for r in sorted(results, key=lambda r: (r["point"]["shards"], r["point"]["replicas"], r["point"]["nodes"])):
        p = r["point"]
        key = (p["shards"], p["replicas"])
        base.setdefault(key, r)
        idle = r["idle"]
        healthy = idle["not_ready_grace"] == 0 and (("busy" not in r) or r["busy"]["not_ready_grace"] == 0)
        ratio = (per_node_cores(r) or 0) / (per_node_cores(base[key]) or 1)
        print(f"{p['nodes']:>7}{p['shards']:>7}{p['replicas']:>5}{'yes' if healthy else 'NO':>8}"
              f"{fmt(100 * idle['renewals_per_s'] / idle['expected_per_s'], '.1f'):>9}{fmt(idle['lag_p99']):>8}"
              f"{idle['not_ready_grace']:>9}{fmt(per_node_cores(r)):>9}{ratio:>7.2f}{fmt(cpu_ms_per_renewal(r, ('server',))):>9}"
              f"{fmt(cpu_ms_per_renewal(r, ('sim',))):>9}{fmt(cpu_ms_per_renewal(r, ('postgres',))):>8}"
              f"{fmt((r.get('pods') or {}).get('per_s'), '.1f'):>8}{fmt(r['load_end'][0] if r['load_end'] else None, '.1f'):>6}")  # fmt: skip


def points(args: argparse.Namespace) -> list[Point]:
    nodes = sorted({int(x) for x in args.nodes.split(",") if x})
    shards = [int(x) for x in args.shards.split(",") if x]
    replicas = [int(x) for x in args.replicas.split(",") if x]
    if args.baseline_nodes and args.baseline_nodes < min(nodes):
        nodes.insert(0, args.baseline_nodes)
    return [Point(n, s, r) for s, r, n in itertools.product(shards, replicas, nodes)]


async def run(args: argparse.Namespace, logs: Path) -> list[Obj]:
    results = []
    for point in points(args):
        print(f"\n-- {point}", flush=True)
        try:
            result = await run_point(point, args, logs / f"{point.nodes}-{point.shards}-{point.replicas}")
        except RuntimeError as exc:
            print(f"  failed: {exc}", flush=True)
            continue
        results.append(result)
        show_point(result)
    return results


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="10000", help="comma-separated node counts, a fresh stack each (default 10000)")
    parser.add_argument("--shards", default="8", help="comma-separated simulator process counts (default 8)")
    parser.add_argument("--replicas", default="2", help="comma-separated API server replica counts, all on one Postgres (default 2)")
    parser.add_argument("--baseline-nodes", type=int, default=1000, help="also run this node count first, the base of the per-node ratios (default 1000; 0: no)")
    parser.add_argument("--measure", type=float, default=180.0, help="seconds of heartbeats only (default 180)")
    parser.add_argument("--pods", type=int, default=2000, help="pods with a GPU claim each (default 2000; at most 4 per node)")
    parser.add_argument("--failover-pods", type=int, default=100, help="pods to run after the leaders are killed, with several replicas (default 100; 0: no failover)")
    parser.add_argument("--lease-interval", type=float, default=10.0, help="the shards' --lease-interval (default 10, as the kubelet)")
    parser.add_argument("--register-timeout", type=float, default=0.0, help="seconds to wait for the nodes (default: 0.15 per node, at least 300)")
    parser.add_argument("--pods-timeout", type=float, default=600.0, help="seconds to wait for the pods to run (default 600)")
    parser.add_argument("--server-arg", action="append", default=[], help="extra `app serve` argument for every replica (repeatable)")
    parser.add_argument("--sim-arg", action="append", default=[], help="extra kubeletsim argument for every shard (repeatable)")
    parser.add_argument("--profile", help="py-spy profiles of replica 0, shard 0, the schedulers and controllers while heartbeats run, into this directory")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--keep-logs", action="store_true", help="keep every process's log and print where")
    args = parser.parse_args(argv)
    if args.lease_interval != 10.0:
        args.sim_arg += ["--lease-interval", str(args.lease_interval)]
    logs = Path(tempfile.mkdtemp(prefix="dra-scale-"))
    try:
        results = asyncio.run(run(args, logs))
        if results:
            show_summary(results)
        if args.json:
            Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    finally:
        if args.keep_logs:
            print(f"logs: {logs}")
        else:
            shutil.rmtree(logs, ignore_errors=True)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
