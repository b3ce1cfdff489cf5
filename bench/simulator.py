"""Kubelet simulator benchmark: how many nodes one ``python -m kubeletsim`` keeps healthy, and how fast it starts pods.

Starts a throwaway Postgres (fsync on; ``--database-url`` for an existing one, ``--sqlite`` for the
embedded backend), migrates it and starts ``python -m app serve``. Then, for every ``--nodes`` count:

* **baselines** (no simulator running): a plain client renews leases in kube-node-lease as fast as it
  can (``raw lease updates/s``), and a plain "kubelet" process (one watch, a pool of keep-alive
  connections, no caches, no admission, no nodes) writes exactly the status the simulator writes for
  pods bound to it, with and without a claim (``plain pod starts/s``);
* then one simulator (``--profile``, default gpu): waits until every
  node is registered and Ready with its Lease and ResourceSlices, then watches the leases while idle
  for ``--idle`` seconds and while it starts ``--pods`` pods without claims and ``--pods`` pods with a
  pre-allocated, reserved claim each. A node is healthy when its Lease is never older than the lease
  duration (40 s) as seen on a watch, and its Ready condition is True at the end.

Pod starts are counted from the pod reaching the node (created with ``spec.nodeName``, or for claims:
bound through pods/binding after its claim was allocated and reserved, like a scheduler does) to the
first watch event showing ``status.phase=Running``. Every figure is printed with its baseline ratio.

Run ``python -m bench.simulator --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import orjson

from bench.cpu import _proc_table, _tree_cpu
from bench.machine import reports_machine
from bench.transport import RawHTTP
from devtools.server import REPO_ROOT, ServerProcess, migrate
from kube.objects import Obj
from kube.tasks import wait_for
from kube.timeutil import now_micro, now_rfc3339
from kubeletsim import pods as pods_mod
from kubeletsim.settings import Settings

RESOURCE = "/apis/resource.k8s.io/v1"
LEASE_NS = "kube-node-lease"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases"
LEASE_DURATION = 40.0  # what kubeletsim writes (upstream's default node lease duration)
DRIVER = "gpu.example.com"
DEVICES_PER_NODE = 8  # the gpu profile
CREATE_CONCURRENCY = 32

now = time.perf_counter


# ----------------------------------------------------------------------------- small helpers


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of ``values`` (q in 0..100), None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q / 100.0 * len(s) + 0.5) - 1))]


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


class CpuMeter:
    """CPU cores used by named process trees between ``start`` and ``stop`` (from /proc)."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self.pids = pids
        self._t0 = 0.0
        self._c0: dict[str, float | None] = {}

    def _sample(self) -> dict[str, float | None]:
        table = _proc_table()
        # This process's own time: its process tree would include every child (server, simulator, ...).
        return {name: time.process_time() if pid == os.getpid() else _tree_cpu(pid, table) for name, pid in self.pids.items()}

    def start(self) -> None:
        self._t0, self._c0 = now(), self._sample()

    def stop(self) -> dict[str, float | None]:
        wall, c1 = max(now() - self._t0, 1e-9), self._sample()
        out: dict[str, float | None] = {}
        for name, value in c1.items():
            before = self._c0.get(name)
            out[name] = None if value is None or before is None else round((value - before) / wall, 2)
        return out


class Conn(RawHTTP):
    """bench.api's keep-alive client with a settable Content-Type (merge patches)."""

    content_type = "application/json"

    def _head(self, method: str, path: str, body: bytes | None) -> bytes:
        line = f"{method} {path} HTTP/1.1\r\n".encode()
        if body is None:
            return line + self._common + b"\r\n"
        return line + self._common + f"Content-Type: {self.content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode()


class Pool:
    """A few keep-alive connections shared by many coroutines (one request per connection at a time)."""

    def __init__(self, base_url: str, size: int) -> None:
        parts = urlsplit(base_url)
        self._idle: asyncio.Queue[Conn] = asyncio.Queue()
        self._all = [Conn(parts.hostname or "127.0.0.1", parts.port or 80, {}) for _ in range(size)]
        for conn in self._all:
            self._idle.put_nowait(conn)

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, Obj]:
        conn = await self._idle.get()
        content = None if body is None else orjson.dumps(body)
        try:
            conn.content_type = content_type
            try:
                status, data = await conn.request(method, path, content)
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise
                # The server closed a connection that sat idle (keep-alive timeout) before reading
                # the request; the failed request closed it on our side too, so this reconnects.
                status, data = await conn.request(method, path, content)
        finally:
            self._idle.put_nowait(conn)
        try:
            return status, (orjson.loads(data) if data else {})
        except orjson.JSONDecodeError:
            if status == 429:  # the server's in-flight limits answer in plain text
                return status, {"message": data.decode(errors="replace")}
            raise RuntimeError(f"{method} {path}: {status} with a body that is no JSON: {data[:300]!r}") from None

    async def ok(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Obj:
        status, obj = await self.request(method, path, body, content_type)
        if status >= 300:
            raise RuntimeError(f"{method} {path}: {status} {str(obj)[:300]}")
        return obj

    async def merge_patch(self, path: str, body: Obj) -> Obj:
        return await self.ok("PATCH", path, body, "application/merge-patch+json")

    async def close(self) -> None:
        for conn in self._all:
            with contextlib.suppress(Exception):
                await conn.aclose()


async def run_all(items: list[Any], action: Callable[[Any], Awaitable[None]], concurrency: int = CREATE_CONCURRENCY) -> None:
    """``action(item)`` for every item, ``concurrency`` at a time."""
    it = iter(items)

    async def worker() -> None:
        for item in it:
            await action(item)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def watch_events(http: httpx.AsyncClient, path: str, resource_version: str, params: dict[str, str] | None = None) -> AsyncIterator[Obj]:
    """Watch events of ``path`` from ``resource_version`` until cancelled (re-opens the stream when it ends).

    Read from a plain asyncio stream rather than httpx: the benchmark shares two cores with the
    server and the simulator, and httpx's line iteration cost it more CPU than everything else.
    """
    base = urlsplit(str(http.base_url))
    rv = resource_version
    while True:
        query = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3600", **(params or {})}
        target = f"{path}?{urlencode(query)}"
        reader, writer = await asyncio.open_connection(base.hostname, base.port, limit=1 << 24)
        try:
            writer.write(f"GET {target} HTTP/1.1\r\nHost: {base.netloc}\r\nAccept: application/json\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            if int(head.split(b" ", 2)[1]) != 200:
                raise RuntimeError(f"watch {path}: {head[:200]!r}")
            chunked = b"transfer-encoding: chunked" in head.lower()
            pending = b""
            while True:
                if chunked:
                    size = int((await reader.readline()).split(b";", 1)[0], 16)
                    if size == 0:
                        break
                    data = (await reader.readexactly(size + 2))[:-2]
                else:
                    data = await reader.read(1 << 16)
                    if not data:
                        break
                *lines, pending = (pending + data).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    rv = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        yield event
        finally:
            writer.close()


async def list_rv(http: httpx.AsyncClient, path: str) -> tuple[list[Obj], str]:
    body = (await http.get(path)).json()
    return body.get("items") or [], body["metadata"]["resourceVersion"]


# ----------------------------------------------------------------------------- documents


def pod_doc(name: str, node: str | None, claim: str | None) -> Obj:
    """A small pod (one container with cpu/memory requests), optionally bound and with one claim."""
    container: Obj = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    spec: Obj = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def claim_doc(name: str, driver: str = DRIVER) -> Obj:
    request = {"name": "gpu", "exactly": {"deviceClassName": driver}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}


def allocation_status(node: str, device: str, pod: Obj, driver: str = DRIVER) -> Obj:
    """What a scheduler writes: ``driver``'s device on ``node`` and the reservation for ``pod``."""
    meta = pod["metadata"]
    return {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}],
    }


# ----------------------------------------------------------------------------- the plain kubelet (baseline)


class PlainKubelet:
    """The least a kubelet must do to start pods: one watch, the simulator's status writes, nothing else."""

    def __init__(self, pool: Pool, http: httpx.AsyncClient, namespace: str, claims: dict[str, Obj], workers: int = 16) -> None:
        self.pool, self.http, self.namespace, self.claims, self.workers = pool, http, namespace, claims, workers
        self.queue: asyncio.Queue[Obj] = asyncio.Queue()
        self.seen: set[str] = set()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        _items, rv = await list_rv(self.http, f"/api/v1/namespaces/{self.namespace}/pods")
        self.task = asyncio.create_task(self._run(rv))

    async def _run(self, rv: str) -> None:
        workers = [asyncio.create_task(self._work()) for _ in range(self.workers)]
        try:
            async for event in watch_events(self.http, f"/api/v1/namespaces/{self.namespace}/pods", rv):
                pod = event.get("object") or {}
                uid = pod["metadata"].get("uid", "")
                if pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") != "Running" and uid not in self.seen:
                    self.seen.add(uid)
                    self.queue.put_nowait(pod)
        finally:
            for w in workers:
                w.cancel()

    async def _work(self) -> None:
        host = 0
        while True:
            pod = await self.queue.get()
            meta, ns, stamp = pod["metadata"], self.namespace, now_rfc3339()
            for _, claim_name, _ in pods_mod.pod_claim_names(pod):
                claim = self.claims.get(claim_name or "")
                if claim is not None:
                    devices = pods_mod.prepared_devices(claim, stamp) or []
                    body = {"metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]}, "status": {"devices": devices}}
                    await self.pool.merge_patch(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{claim_name}/status", body)
            host = host % 250 + 2
            status = pods_mod.running_status(pod, "172.31.0.1", f"10.127.0.{host}", stamp)
            await self.pool.merge_patch(f"/api/v1/namespaces/{ns}/pods/{meta['name']}/status", {"metadata": {"uid": meta["uid"]}, "status": status})

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


async def plain_kubelet_main(url: str, namespace: str, workers: int) -> None:
    """The plain kubelet as its own process (``--plain-kubelet``): prints "ready" once watching, runs until killed."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        pool = Pool(url, workers)
        # The claims were allocated before the clock starts; one LIST stands in for the simulator's claim cache.
        items, _ = await list_rv(http, f"{RESOURCE}/namespaces/{namespace}/resourceclaims")
        kubelet = PlainKubelet(pool, http, namespace, {c["metadata"]["name"]: c for c in items}, workers)
        await kubelet.start()
        print("ready", flush=True)
        await asyncio.Event().wait()


class PlainKubeletProcess:
    """``python -m bench.simulator --plain-kubelet``: the baseline kubelet in a process of its own, as the simulator is."""

    def __init__(self, url: str, namespace: str, workers: int) -> None:
        command = [sys.executable, "-m", "bench.simulator", "--plain-kubelet", url, namespace, "--workers", str(workers)]
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE)

    async def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, self.process.stdout.readline)
        if line.strip() != b"ready":
            raise RuntimeError(f"plain kubelet did not start: {line!r}")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


# ----------------------------------------------------------------------------- lease health


@dataclass
class LeaseTracker:
    """Every lease renewal as seen on a watch (arrival time), per lease name."""

    prefix: str
    seen: dict[str, list[float]] = field(default_factory=dict)

    def observe(self, name: str, t: float) -> None:
        if name.startswith(self.prefix):
            self.seen.setdefault(name, []).append(t)

    def gaps(self, t0: float, t1: float, names: list[str]) -> tuple[list[float], list[float]]:
        """Every renewal gap inside [t0, t1] (one per renewal), and per lease its staleness: its
        longest gap, the open one at t1 included."""
        gaps: list[float] = []
        stale: list[float] = []
        for name in names:
            times = self.seen.get(name, [])
            last = max((t for t in times if t < t0), default=t0)
            worst = 0.0
            for t in (t for t in times if t0 <= t <= t1):
                gaps.append(t - last)
                worst = max(worst, t - last)
                last = t
            stale.append(max(worst, t1 - last))
        return gaps, stale

    def window(self, t0: float, t1: float, names: list[str], interval: float) -> Obj:
        """Renewal gaps of every lease inside [t0, t1]; staleness also counts the open gap at t1."""
        gaps, stale = self.gaps(t0, t1, names)
        renewals = len(gaps)
        lags = [g - interval for g in gaps]
        return {
            "seconds": t1 - t0,
            "renewals": renewals,
            "renewals_per_s": renewals / max(t1 - t0, 1e-9),
            "expected_per_s": len(names) / interval,
            "lag_p50": pct(lags, 50),
            "lag_p99": pct(lags, 99),
            "lag_max": max(lags) if lags else None,
            "late": sum(1 for g in gaps if g > 1.5 * interval),
            "worst_staleness": max(stale, default=0.0),
            "expired": sum(1 for s in stale if s > LEASE_DURATION),
        }


# ----------------------------------------------------------------------------- the simulator process


class Simulator:
    """``python -m kubeletsim`` as a subprocess."""

    def __init__(self, server: str, nodes: int, prefix: str, args: argparse.Namespace, log: Path) -> None:
        self.prefix, self.nodes = prefix, nodes
        # --sim-pythonpath runs another copy of the package (e.g. an older checkout) for a before/after comparison.
        launcher = ["-m", "kubeletsim"]
        if args.sim_pythonpath:
            bootstrap = "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); runpy.run_module('kubeletsim', run_name='__main__', alter_sys=True)"
            launcher = ["-c", bootstrap, args.sim_pythonpath]
        command = [
            sys.executable, *launcher, "--server", server, "--nodes", str(nodes), "--node-prefix", prefix,
            "--profile", args.profile, "--lease-interval", str(args.lease_interval),
            "--node-status-interval", str(args.node_status_interval), "--workers", str(args.workers),
            "--log-level", args.sim_log_level, *args.sim_arg,
        ]  # fmt: skip
        with open(log, "ab") as out:
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=out)

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.nodes)]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# ----------------------------------------------------------------------------- phases


class Bench:
    """One server; baselines, then one simulator per node count."""

    def __init__(self, args: argparse.Namespace, server_url: str, pids: dict[str, int | None], logs: Path) -> None:
        self.args, self.url, self.pids, self.logs = args, server_url, pids, logs
        self.tag = uuid.uuid4().hex[:5]
        self.http = httpx.AsyncClient(base_url=server_url, timeout=60, limits=httpx.Limits(max_connections=16))
        self.pool = Pool(server_url, CREATE_CONCURRENCY)

    async def close(self) -> None:
        await self.pool.close()
        await self.http.aclose()

    async def namespace(self, name: str) -> str:
        await self.pool.ok("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    # ---- baseline: raw lease updates

    async def raw_leases(self, label: str, count: int, duration: float, rounds: int = 2) -> Obj:
        """PATCH renewTime of ``count`` leases round-robin, ``CREATE_CONCURRENCY`` at a time, for ``duration``
        seconds; the best of ``rounds`` (a short window on a shared machine is easily hit by a stall)."""
        names = [f"raw-{self.tag}-{label}-{i}" for i in range(count)]

        async def create(name: str) -> None:
            lease = {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}}
            await self.pool.ok("POST", LEASES, lease)

        await run_all(names, create)
        counter = iter(range(10**9))
        best: Obj = {}
        for _ in range(rounds):
            latencies: list[float] = []
            meter = CpuMeter(self.pids)
            meter.start()
            t0 = now()
            deadline = t0 + duration

            async def worker(latencies: list[float] = latencies, deadline: float = deadline) -> None:
                while now() < deadline:
                    name = names[next(counter) % count]
                    body = {"spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}}
                    start = now()
                    await self.pool.merge_patch(f"{LEASES}/{name}", body)
                    latencies.append(now() - start)

            await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))
            elapsed = now() - t0
            result = {"updates": len(latencies), "per_s": len(latencies) / elapsed, "p50_ms": (pct(latencies, 50) or 0) * 1000,
                      "p99_ms": (pct(latencies, 99) or 0) * 1000, "cpu": meter.stop()}  # fmt: skip
            if result["per_s"] > best.get("per_s", 0.0):
                best = result
        await run_all(names, lambda n: self.pool.request("DELETE", f"{LEASES}/{n}"))  # type: ignore[arg-type, return-value]
        return best

    # ---- pod starts

    async def pod_starts(self, label: str, nodes: list[str], count: int, with_claims: bool, plain: bool, driver: str = DRIVER) -> Obj:
        """Start ``count`` pods on ``nodes`` (round-robin) and time them until Running on a watch
        (with claims: each for one of ``driver``'s devices)."""
        ns = await self.namespace(f"sim-{self.tag}-{label}")
        names = [f"p{i:05d}" for i in range(count)]
        node_of = {name: nodes[i % len(nodes)] for i, name in enumerate(names)}
        # Round-robin over nodes, so the k-th pod of a node gets its k-th device.
        device_of = {name: f"gpu-{(i // len(nodes)) % DEVICES_PER_NODE}" for i, name in enumerate(names)}
        claims: dict[str, Obj] = {}
        setup_t = now()
        if with_claims:
            # Before the clock starts: claims, unbound pods, and the allocation + reservation a scheduler writes.
            await run_all(names, lambda n: self.pool.ok("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", claim_doc(n, driver)))  # type: ignore[arg-type, return-value]

            async def prepare(name: str) -> None:
                pod = await self.pool.ok("POST", f"/api/v1/namespaces/{ns}/pods", pod_doc(name, None, name))
                body = {"status": allocation_status(node_of[name], device_of[name], pod, driver)}
                claims[name] = await self.pool.merge_patch(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}/status", body)

            await run_all(names, prepare)
        setup_s = now() - setup_t
        running: dict[str, float] = {}
        done = asyncio.Event()
        _, rv = await list_rv(self.http, f"/api/v1/namespaces/{ns}/pods")

        async def watch() -> None:
            async for event in watch_events(self.http, f"/api/v1/namespaces/{ns}/pods", rv):
                obj = event.get("object") or {}
                name = obj["metadata"]["name"]
                if (obj.get("status") or {}).get("phase") == "Running" and name not in running:
                    running[name] = now()
                    if len(running) == count:
                        done.set()

        watcher = asyncio.create_task(watch())
        kubelet = PlainKubeletProcess(self.url, ns, self.args.workers) if plain else None
        if kubelet is not None:
            await kubelet.wait_ready()
            self.pids["plain"] = kubelet.process.pid
        arrived: dict[str, float] = {}
        meter = CpuMeter(self.pids)
        meter.start()
        t0 = now()

        async def start(name: str) -> None:
            if with_claims:
                binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node_of[name]}}
                await self.pool.ok("POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
            else:
                await self.pool.ok("POST", f"/api/v1/namespaces/{ns}/pods", pod_doc(name, node_of[name], None))
            arrived[name] = now()

        await run_all(names, start)
        created_s = now() - t0
        with contextlib.suppress(TimeoutError):
            await wait_for(done.wait(), self.args.timeout)
        end = max(running.values()) if running else now()
        cpu = meter.stop()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        if kubelet is not None:
            kubelet.stop()
            self.pids.pop("plain", None)
        latencies = [running[n] - arrived[n] for n in names if n in running and n in arrived]
        return {
            "pods": count,
            "running": len(running),
            "setup_s": setup_s,
            "created_s": created_s,
            "seconds": end - t0,
            "per_s": len(running) / max(end - t0, 1e-9),
            "p50_ms": (pct(latencies, 50) or 0) * 1000,
            "p99_ms": (pct(latencies, 99) or 0) * 1000,
            "cpu": cpu,
        }

    # ---- one simulator

    async def simulator(self, count: int) -> Obj:
        args = self.args
        prefix = f"n{count}-{self.tag}-"
        tracker = LeaseTracker(prefix)
        nodes: dict[str, Obj] = {}
        slices: set[str] = set()
        _, lease_rv = await list_rv(self.http, LEASES)
        _, node_rv = await list_rv(self.http, "/api/v1/nodes")
        _, slice_rv = await list_rv(self.http, f"{RESOURCE}/resourceslices")

        async def watch_leases() -> None:
            async for event in watch_events(self.http, LEASES, lease_rv):
                tracker.observe(event["object"]["metadata"]["name"], now())

        async def watch_nodes() -> None:
            async for event in watch_events(self.http, "/api/v1/nodes", node_rv):
                obj = event["object"]
                if obj["metadata"]["name"].startswith(prefix):
                    nodes[obj["metadata"]["name"]] = obj

        async def watch_slices() -> None:
            async for event in watch_events(self.http, f"{RESOURCE}/resourceslices", slice_rv):
                node = (event["object"].get("spec") or {}).get("nodeName") or ""
                if node.startswith(prefix):
                    slices.add(node)

        tasks = [asyncio.create_task(w()) for w in (watch_leases, watch_nodes, watch_slices)]
        sim_log = self.logs / f"kubeletsim-{count}.log"
        t0 = now()
        sim = Simulator(self.url, count, prefix, args, sim_log)
        self.pids["sim"] = sim.process.pid
        result: Obj = {"nodes": count}
        try:
            names = sim.names

            def registered() -> bool:
                ready = sum(1 for n in names if _ready(nodes.get(n)))
                return ready == count and len(slices) == count and sum(1 for n in names if n in tracker.seen) == count

            meter = CpuMeter(self.pids)
            meter.start()
            while not registered():
                if sim.process.poll() is not None:
                    raise RuntimeError(f"kubeletsim exited with {sim.process.returncode}; log {sim_log}")
                if now() - t0 > args.timeout:
                    raise RuntimeError(f"{count} nodes not registered after {args.timeout}s; log {sim_log}")
                await asyncio.sleep(0.2)
            result["register_s"] = now() - t0
            result["register_cpu"] = meter.stop()
            # One lease interval to settle: renewals made while registering are not on their slots yet.
            await asyncio.sleep(args.lease_interval)
            # Idle: nothing but heartbeats.
            meter.start()
            w0 = now()
            await asyncio.sleep(args.idle)
            result["idle"] = tracker.window(w0, now(), names, args.lease_interval)
            result["idle"]["cpu"] = meter.stop()
            # Under pod load (the lease window covers both pod phases).
            busy_meter = CpuMeter(self.pids)
            busy_meter.start()
            w1 = now()
            pods = min(args.pods, count * DEVICES_PER_NODE)
            result["pods_plain"] = await self.pod_starts(f"{count}-plain", names, pods, False, plain=False)
            result["pods_claims"] = await self.pod_starts(f"{count}-claims", names, pods, True, plain=False)
            # Give every lease at least one full interval under the load it just had.
            await asyncio.sleep(max(0.0, args.lease_interval - (now() - w1)))
            result["busy"] = tracker.window(w1, now(), names, args.lease_interval)
            result["busy"]["cpu"] = busy_meter.stop()
            result["ready_at_end"] = sum(1 for n in names if _ready(nodes.get(n)))
            result["healthy"] = (
                result["ready_at_end"] == count and result["idle"]["expired"] == 0 and result["busy"]["expired"] == 0
            )
        finally:
            sim.stop()
            self.pids.pop("sim", None)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return result


def _ready(node: Obj | None) -> bool:
    if not node:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


# ----------------------------------------------------------------------------- run and report


@contextlib.contextmanager
def database(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[str, int | None]]:
    """(database URL, database server pid or None)."""
    if args.database_url:
        yield args.database_url, None
    elif args.sqlite:
        yield f"sqlite+aiosqlite:///{tmp / 'bench.sqlite'}", None
    else:
        from devtools.postgres import ThrowawayPostgres

        with ThrowawayPostgres(database="dra_sim_bench") as pg:
            yield pg.url, pg.pid


async def run(args: argparse.Namespace, logs: Path) -> Obj:
    with database(args, logs) as (url, db_pid):
        migrate(url)
        server = ServerProcess(url, port=None, log_path=logs / "server.log").start()
        bench = Bench(args, server.url, {"bench": os.getpid(), "server": server.process.pid if server.process else None, "db": db_pid}, logs)
        out: Obj = {"backend": "sqlite" if args.sqlite else "postgres", "cpus": os.cpu_count(), "args": vars(args)}
        try:
            out["sims"] = []
            fake = [f"plain-{i}" for i in range(max(1, -(-args.pods // DEVICES_PER_NODE)))]
            for count in (int(x) for x in args.nodes.split(",") if x):
                # Baselines right before each simulator: on a shared machine, minutes apart is already noisy.
                baselines = {
                    "raw_leases": await bench.raw_leases(str(count), 1000, args.baseline_duration),
                    "plain_pods": await bench.pod_starts(f"{count}-base", fake, args.pods, False, plain=True),
                    "plain_claims": await bench.pod_starts(f"{count}-base-claims", fake, args.pods, True, plain=True),
                }
                result = {**await bench.simulator(count), **baselines}
                out["sims"].append(result)
                show_sim(out, result)
        finally:
            await bench.close()
            server.stop()
    return out


def show_sim(out: Obj, r: Obj) -> None:
    """One node count's figures and its baselines (printed as soon as they are measured)."""
    raw, plain, plain_c = r["raw_leases"], r["plain_pods"], r["plain_claims"]
    n = r["nodes"]
    print(f"\n== {n} nodes: {'HEALTHY' if r['healthy'] else 'NOT HEALTHY'} (registered + Ready in {r['register_s']:.1f}s, "
          f"simulator {fmt(r['register_cpu'].get('sim'), '.2f')} cores while registering)")  # fmt: skip
    print(f"baselines just before ({out['backend']}, {out['cpus']} CPUs; plain clients against the same server, no simulator running):")
    print(f"  raw lease updates:    {raw['per_s']:7.0f}/s  (p50 {raw['p50_ms']:.1f} ms, p99 {raw['p99_ms']:.1f} ms, {CREATE_CONCURRENCY} connections)")
    for label, p in (("plain pod starts:", plain), ("plain, one claim:", plain_c)):
        print(f"  {label:<20}{p['per_s']:7.1f}/s  (p50 {p['p50_ms']:.0f} ms, p99 {p['p99_ms']:.0f} ms, {p['running']}/{p['pods']} Running; "
              f"cores: plain kubelet {fmt(p['cpu'].get('plain'), '.2f')}, server {fmt(p['cpu'].get('server'), '.2f')}, "
              f"db {fmt(p['cpu'].get('db'), '.2f')})")  # fmt: skip
    print(f"{'lease renewals':<28}{'renew/s':>9}{'expected':>9}{'raw/s':>8}{'of raw':>8}{'lag p50':>9}{'p99':>7}{'max':>7}"
          f"{'late':>6}{'expired':>8}{'sim cpu':>8}{'srv cpu':>8}")  # fmt: skip
    for label, w in (("idle", r["idle"]), ("during pod starts", r["busy"])):
        cpu = w.get("cpu") or {}
        print(f"  {label:<26}{w['renewals_per_s']:9.1f}{w['expected_per_s']:9.1f}{raw['per_s']:8.0f}"
              f"{fmt(ratio(w['renewals_per_s'], raw['per_s']), '.2f'):>8}{fmt(w['lag_p50'], '.2f'):>9}{fmt(w['lag_p99'], '.2f'):>7}"
              f"{fmt(w['lag_max'], '.2f'):>7}{w['late']:>6}{w['expired']:>8}{fmt(cpu.get('sim'), '.2f'):>8}{fmt(cpu.get('server'), '.2f'):>8}")  # fmt: skip
    print(f"{'pod starts':<28}{'pods':>6}{'running':>8}{'pods/s':>8}{'plain/s':>8}{'ratio':>7}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'sim cpu':>8}{'srv cpu':>8}{'db cpu':>8}{'bench':>7}")  # fmt: skip
    for label, p, base in (("no claims", r["pods_plain"], plain), ("one claim each", r["pods_claims"], plain_c)):
        cpu = p["cpu"]
        print(f"  {label:<26}{p['pods']:6d}{p['running']:8d}{p['per_s']:8.1f}{base['per_s']:8.1f}{fmt(ratio(p['per_s'], base['per_s']), '.2f'):>7}"
              f"{p['p50_ms']:8.0f}{p['p99_ms']:8.0f}{fmt(cpu.get('sim'), '.2f'):>8}{fmt(cpu.get('server'), '.2f'):>8}{fmt(cpu.get('db'), '.2f'):>8}"
              f"{fmt(cpu.get('bench'), '.2f'):>7}")  # fmt: skip


def show(out: Obj) -> None:
    print("\nsummary:")
    print(f"{'nodes':>7}{'healthy':>9}{'renew/raw':>10}{'lag p99 s':>10}{'max s':>7}{'pods/s':>8}{'/plain':>8}{'claims/s':>9}{'/plain':>8}")
    for r in out.get("sims", []):
        worst99 = max(r["idle"]["lag_p99"] or 0, r["busy"]["lag_p99"] or 0)
        worst = max(r["idle"]["lag_max"] or 0, r["busy"]["lag_max"] or 0)
        print(f"{r['nodes']:7d}{'yes' if r['healthy'] else 'NO':>9}{fmt(ratio(r['idle']['renewals_per_s'], r['raw_leases']['per_s']), '.2f'):>10}"
              f"{worst99:10.2f}{worst:7.2f}{r['pods_plain']['per_s']:8.1f}"
              f"{fmt(ratio(r['pods_plain']['per_s'], r['plain_pods']['per_s']), '.2f'):>8}{r['pods_claims']['per_s']:9.1f}"
              f"{fmt(ratio(r['pods_claims']['per_s'], r['plain_claims']['per_s']), '.2f'):>8}")  # fmt: skip
    # The target: one process keeps >= 1,000 nodes healthy AND starts >= 100 pods/s (with and without claims) on them.
    sims = [r for r in out.get("sims", []) if r["nodes"] >= 1000]
    passing = [r["nodes"] for r in sims if r["healthy"] and min(r["pods_plain"]["per_s"], r["pods_claims"]["per_s"]) >= 100]
    verdict = f"PASS at {', '.join(str(n) for n in passing)} nodes" if passing else "MISS"
    print(f"\ntarget (>= 1,000 nodes healthy and >= 100 pod starts/s with and without claims, one simulator): {verdict}")


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulator", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1000", help="comma-separated node counts, one simulator each (default 1000)")
    parser.add_argument("--pods", type=int, default=1000, help="pods per pod phase (default 1000; capped at 8 per node)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of heartbeats only (default 30)")
    parser.add_argument("--lease-interval", type=float, default=10.0, help="simulator's --lease-interval (default 10, as upstream)")
    parser.add_argument("--node-status-interval", type=float, default=Settings.node_status_interval, help="simulator's --node-status-interval (default 300)")
    parser.add_argument("--profile", default="gpu", help="device profile (default gpu: 8 devices per node)")
    parser.add_argument("--baseline-duration", type=float, default=5.0, help="seconds of raw lease updates (default 5)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for registration or a pod phase (default 300)")
    parser.add_argument("--database-url", default=None, help="an existing Postgres (or sqlite) URL instead of a throwaway Postgres")
    parser.add_argument("--sqlite", action="store_true", help="the embedded SQLite backend instead of Postgres")
    parser.add_argument("--sim-arg", action="append", default=[], help="extra kubeletsim argument (repeatable)")
    parser.add_argument("--sim-log-level", default="warning", help="kubeletsim --log-level (default warning)")
    parser.add_argument("--sim-pythonpath", default="", help="run the kubeletsim package found in this directory (compare versions)")
    parser.add_argument("--workers", type=int, default=64, help="simulator's --workers, and the plain kubelet's concurrent writers (default 64)")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--plain-kubelet", nargs=2, metavar=("URL", "NAMESPACE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_kubelet:
        with contextlib.suppress(KeyboardInterrupt):
            url, namespace = args.plain_kubelet
            asyncio.run(plain_kubelet_main(url, namespace, args.workers))
        return 0
    keep = bool(os.environ.get("DRA_BENCH_KEEP_LOGS"))
    with tempfile.TemporaryDirectory(prefix="dra-sim-bench-") as scratch:
        logs = Path(tempfile.mkdtemp(prefix="dra-sim-bench-logs-") if keep else scratch)
        out = asyncio.run(run(args, logs))
        show(out)
        if keep:
            print(f"logs: {logs}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
