"""Worker memory benchmark: what the scheduler's and the kubelet simulator's informer caches hold,
against the serialized size of what they watch (target: at most 3x).

For each cluster shape (``--clusters``, default ``5000x8,2000x128``: nodes x devices per node) it
starts a server (embedded SQLite unless ``--postgres``), registers N nodes with one ResourceSlice
each as ``python -m kubeletsim --nodes N`` would (its own builders; the gpu profile's devices, 8 or
repeated to 128: 2,000 x 128 is about 52 MB of slices), then measures, one process at a time:

* **kubeletsim**: a restarted simulator for the same N nodes (it adopts what is there);
* **scheduler**: ``python -m schedulers`` (no leader election).

Each worker runs under a small probe (``PROBE`` below, the worker's own ``__main__`` otherwise
untouched) that reads the process's RSS when its first informer starts (*before*: imports done and
every structure built), when all its informers have synced, and ``--settle`` seconds later
(*after*: the simulator starts its nodes' gRPC servers and heartbeats once synced), plus the
peak (VmHWM). *watched* = the JSON bytes of every object the worker's
informers list (same paths and selectors, compact JSON as on the wire). Ratio = (after - before)
/ watched, PASS when at most 3; "at sync" = (at sync - before) / watched, the informers' share.
The scheduler then gets a claim no device satisfies (``PREPARE_OBJECTS``): once its pod is
reported unschedulable it has prepared every node's devices and run a CEL selector on each, and
"prepared" = (RSS ``--settle`` seconds later - before) / watched, also at most 3 (``--no-prepare``
skips it).

``--baseline DIR`` runs the same workers from another checkout (e.g. ``/work/main``) against the
same server right after, so before/after figures come from one run. ``scenarios()`` returns the
measurements as callables, for ``bench/memory.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.machine import reports_machine
from devtools.server import REPO_ROOT, ServerProcess, migrate

TARGET = 3.0
GROUP = "/apis/resource.k8s.io/v1"

# What each worker's informers list (path, field selector): the serialized size they watch.
WATCHED: dict[str, list[tuple[str, str]]] = {
    "kubeletsim": [("/api/v1/nodes", ""), (f"{GROUP}/resourceslices", ""), ("/api/v1/pods", "spec.nodeName!="), (f"{GROUP}/resourceclaims", "")],
    "schedulers": [
        ("/api/v1/pods", ""), ("/api/v1/nodes", ""), (f"{GROUP}/resourceclaims", ""), (f"{GROUP}/resourceslices", ""),
        (f"{GROUP}/deviceclasses", ""), (f"{GROUP}/devicetaintrules", ""), ("/api/v1/namespaces", ""),
    ],
}  # fmt: skip

# Runs a worker module with RSS probes around its informers. argv: code root, output file, settle
# seconds, module, the module's arguments. Self-contained, so it measures any checkout's workers.
PROBE = r"""
import json, os, runpy, sys, threading, time
root, out, settle, module = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
sys.argv = [module, *sys.argv[5:]]
sys.path.insert(0, root)
import kube.informer as informer_module

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def peak():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0

started, state = [], {}
original_start = informer_module.Informer.start

def start(self):
    if not started:
        state["before"] = rss()
        state["t0"] = time.monotonic()
    started.append(self)
    return original_start(self)

informer_module.Informer.start = start

def watch():
    while not (started and all(i.has_synced for i in list(started))):
        time.sleep(0.1)
    state["sync_s"] = time.monotonic() - state.pop("t0")
    state["at_sync"] = rss()
    time.sleep(settle)
    state["after"] = rss()
    state["peak"] = peak()
    state["informers"] = len(started)
    with open(out + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(out + ".tmp", out)
    # Second phase, on request: the bench touches out + ".go" once the worker has done its work.
    while not os.path.exists(out + ".go"):
        time.sleep(0.1)
    with open(out + ".tmp", "w") as f:
        json.dump({"prepared": rss(), "prepared_peak": peak()}, f)
    os.replace(out + ".tmp", out + ".done")

threading.Thread(target=watch, daemon=True).start()
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

LARGE_PROFILE = """description: {devices} GPUs per node (the gpu profile's devices, repeated)
drivers:
- name: gpu.example.com
  devices:
  - repeat: {{i: {devices}}}
    name: "gpu-{{i}}"
    attributes:
      index: {{int: "{{i}}"}}
      uuid: {{string: "gpu-{{uuid(i)}}"}}
      model: {{string: LATEST-GPU-MODEL}}
      driverVersion: {{version: 1.0.0}}
    capacity:
      memory: {{value: 80Gi}}
"""


@dataclass
class Cluster:
    nodes: int
    devices: int

    @property
    def label(self) -> str:
        return f"{self.nodes}x{self.devices}"


def rss_mb(value: float) -> str:
    return f"{value / 2**20:8.1f}"


def watched_bytes(url: str, worker: str) -> tuple[int, int]:
    """(JSON bytes, objects) of everything ``worker``'s informers list."""
    total = count = 0
    with httpx.Client(base_url=url, timeout=120) as http:
        for path, field_selector in WATCHED[worker]:
            params = {"limit": "500", **({"fieldSelector": field_selector} if field_selector else {})}
            while True:
                page = http.get(path, params=params).json()
                for item in page.get("items") or []:
                    total += len(orjson.dumps(item))
                    count += 1
                following = (page.get("metadata") or {}).get("continue")
                if not following:
                    break
                params = {"limit": "500", "continue": following, **({"fieldSelector": field_selector} if field_selector else {})}
    return total, count


def simulator_args(url: str, cluster: Cluster, tmp: Path) -> list[str]:
    profile = "gpu"
    if cluster.devices != 8:
        path = tmp / f"gpu-{cluster.devices}.yaml"
        path.write_text(LARGE_PROFILE.format(devices=cluster.devices))
        profile = str(path)
    return [
        "--server", url, "--nodes", str(cluster.nodes), "--profile", profile, "--root-dir", str(tmp / f"root-{cluster.label}"),
        "--lease-interval", "30", "--node-status-interval", "300", "--resync-interval", "300", "--log-level", "warning",
    ]  # fmt: skip


def populate(url: str, cluster: Cluster, tmp: Path, timeout: float) -> float:
    """Register N nodes with their ResourceSlices as the simulator would (its own builders, so a
    simulator started afterwards adopts them as they are); returns the seconds it took. A
    simulator registering 5,000 nodes itself takes many minutes next to its heartbeats."""
    from kube.client import KubeClient
    from kube.tasks import wait_for
    from kubeletsim.nodes import build_node, node_status
    from kubeletsim.profiles import build_pool_slices, load_profiles

    args = simulator_args(url, cluster, tmp)
    profile = load_profiles(args[args.index("--profile") + 1])
    t0 = time.monotonic()

    async def one(client: KubeClient, index: int) -> None:
        name = f"sim-{index}"
        node = await client.create("/api/v1/nodes", build_node(name, index, profile.name))
        await client.patch(f"/api/v1/nodes/{name}/status", {"status": node_status(name, index)})
        for driver in profile.drivers:
            for obj in build_pool_slices(driver, name, node_uid=node["metadata"]["uid"]):
                await client.create(f"{GROUP}/resourceslices", obj)

    async def run() -> None:
        async with KubeClient(url, user_agent="bench-memory-workers", timeout=120) as client:
            queue = list(range(cluster.nodes))

            async def worker() -> None:
                while queue:
                    await one(client, queue.pop())

            await wait_for(asyncio.gather(*(worker() for _ in range(16))), timeout)

    asyncio.run(run())
    return time.monotonic() - t0


# The prepare phase: a claim no device satisfies (its class's CEL selector matches no model), so
# the scheduler filters every node, preparing all of its devices and evaluating the selector on each.
PREPARE_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "bench-memory-none"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "NO-SUCH-MODEL"'}}]},
}
PREPARE_CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "bench-memory-none"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "bench-memory-none"}}]}},
}
PREPARE_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench-memory-none"},
    "spec": {"containers": [{"name": "c", "image": "pause"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "bench-memory-none"}]},
}  # fmt: skip
PREPARE_OBJECTS: list[tuple[str, dict[str, Any]]] = [
    (f"{GROUP}/deviceclasses", PREPARE_CLASS), (f"{GROUP}/namespaces/default/resourceclaims", PREPARE_CLAIM), ("/api/v1/namespaces/default/pods", PREPARE_POD),
]  # fmt: skip


def prepare_every_node(url: str, timeout: float) -> Callable[[], None]:
    """Drives the scheduler over every node: creates PREPARE_OBJECTS and waits until the pod is
    reported unschedulable (every node filtered)."""

    def run() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for path, body in PREPARE_OBJECTS:
                http.post(path, json=body).raise_for_status()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                pod = http.get(f"/api/v1/namespaces/default/pods/{PREPARE_POD['metadata']['name']}").json()
                conditions = (pod.get("status") or {}).get("conditions") or []
                for c in conditions:
                    if c.get("type") == "PodScheduled" and c.get("status") == "False":
                        print(f"  the bench pod: {c.get('message')}", flush=True)
                        return
                time.sleep(0.5)
            raise RuntimeError("the scheduler did not report the bench pod unschedulable in time")

    return run


def clean_prepared(url: str) -> None:
    """Remove PREPARE_OBJECTS (before the next worker starts)."""
    with httpx.Client(base_url=url, timeout=120) as http:
        for path, body in reversed(PREPARE_OBJECTS):
            http.delete(f"{path}/{body['metadata']['name']}", params={"gracePeriodSeconds": "0"})


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def probe(
    code_root: str, module: str, args: list[str], settle: float, tmp: Path, tag: str, timeout: float, then: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Run ``python -m module args`` from ``code_root`` under the RSS probe; its figures. With
    ``then``: once synced and settled, run it (it drives the worker), wait ``settle`` seconds and
    add the RSS then (``prepared``) and the peak."""
    out = tmp / f"probe-{tag}.json"
    go, done = Path(f"{out}.go"), Path(f"{out}.done")
    for stale in (out, go, done):
        stale.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": code_root}
    with open(tmp / f"{tag}.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-c", PROBE, code_root, str(out), str(settle), module, *args], cwd=code_root, stdout=log, stderr=log, env=env)
    try:
        deadline = time.monotonic() + timeout
        while not out.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{module} under the probe ended or timed out (see {tmp}/{tag}.log)")
            time.sleep(0.5)
        result: dict[str, Any] = json.loads(out.read_text())
        if then is not None:
            then()
            time.sleep(settle)
            go.touch()
            while not done.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{module} under the probe ended or timed out (see {tmp}/{tag}.log)")
                time.sleep(0.2)
            result.update(json.loads(done.read_text()))
        return result
    finally:
        stop(proc)


def measure(
    url: str, worker: str, cluster: Cluster, code_root: str, settle: float, tmp: Path, timeout: float, prepare: bool = True
) -> dict[str, Any]:
    """One worker on one cluster from one checkout: RSS figures, watched bytes, ratio; for the
    scheduler (unless ``prepare`` is off) also after it has prepared every node's devices."""
    scheduler_args = ["--server", url, "--no-leader-elect", "--log-level", "warning"]
    args = simulator_args(url, cluster, tmp) if worker == "kubeletsim" else scheduler_args
    tag = f"{worker}-{cluster.label}-{'this' if code_root == str(REPO_ROOT) else 'baseline'}"
    then = prepare_every_node(url, timeout) if prepare and worker == "schedulers" else None
    try:
        figures = probe(code_root, worker, args, settle, tmp, tag, timeout, then)
    finally:
        if then is not None:
            clean_prepared(url)
    watched, objects = watched_bytes(url, worker)
    growth = figures["after"] - figures["before"]
    ratio = growth / watched if watched else 0.0
    at_sync = (figures["at_sync"] - figures["before"]) / watched if watched else 0.0
    result = {
        "worker": worker, "cluster": cluster.label, "code": code_root, "watched_bytes": watched, "objects": objects,
        **figures, "growth": growth, "ratio": ratio, "ratio_at_sync": at_sync, "target": TARGET, "pass": ratio <= TARGET,
    }  # fmt: skip
    if "prepared" in figures:
        result["ratio_prepared"] = (figures["prepared"] - figures["before"]) / watched if watched else 0.0
        result["pass"] = result["pass"] and result["ratio_prepared"] <= TARGET
    return result


def show(r: dict[str, Any]) -> None:
    verdict = "PASS" if r["pass"] else "MISS"
    print(
        f"{r['worker']:10s} {r['cluster']:9s} {Path(r['code']).name or r['code']:12s} watched {rss_mb(r['watched_bytes'])} MB ({r['objects']} objects)  "
        f"RSS before {rss_mb(r['before'])}  at sync {rss_mb(r['at_sync'])}  after {rss_mb(r['after'])}  peak {rss_mb(r['peak'])} MB  "
        f"growth {rss_mb(r['growth'])} MB  ratio {r['ratio']:5.2f} (at sync {r['ratio_at_sync']:4.2f})  (target <= {TARGET:g}) {verdict}  sync {r['sync_s']:.1f}s",
        flush=True,
    )
    if "ratio_prepared" in r:
        print(
            f"{'':10s} {r['cluster']:9s} {Path(r['code']).name or r['code']:12s} every node's devices prepared: RSS {rss_mb(r['prepared'])}  "
            f"peak {rss_mb(r['prepared_peak'])} MB  growth {rss_mb(r['prepared'] - r['before'])} MB  ratio {r['ratio_prepared']:5.2f}",
            flush=True,
        )


@contextlib.contextmanager
def cluster_server(cluster: Cluster, tmp: Path, postgres: bool) -> Iterator[ServerProcess]:
    """A fresh server (SQLite file or throwaway Postgres) for one cluster shape."""
    with contextlib.ExitStack() as stack:
        if postgres:
            from devtools.postgres import ThrowawayPostgres

            url = stack.enter_context(ThrowawayPostgres(database="dra_mem_workers")).url
        else:
            url = f"sqlite+aiosqlite:///{tmp / f'workers-{cluster.label}.sqlite'}"
        migrate(url)
        server = ServerProcess(url, log_path=tmp / f"server-{cluster.label}.log").start()
        stack.callback(server.stop)
        yield server


def run_cluster(
    cluster: Cluster, workers: list[str], baseline: str | None, settle: float, tmp: Path, postgres: bool = False, timeout: float = 900,
    prepare: bool = True,
) -> list[dict[str, Any]]:
    """Populate one cluster, then measure each worker (this checkout, then the baseline's)."""
    results = []
    with cluster_server(cluster, tmp, postgres) as server:
        seconds = populate(server.url, cluster, tmp, timeout)
        print(f"cluster {cluster.label}: {cluster.nodes} nodes and slices registered in {seconds:.0f}s", flush=True)
        for worker in workers:
            for root in [str(REPO_ROOT), *([baseline] if baseline else [])]:
                result = measure(server.url, worker, cluster, root, settle, tmp, timeout, prepare)
                show(result)
                results.append(result)
    return results


def scenarios(baseline: str | None = None, settle: float = 5.0) -> list[Callable[[], list[dict[str, Any]]]]:
    """One callable per cluster shape; each returns the figures of both workers (printed as measured)."""

    def scenario(cluster: Cluster) -> Callable[[], list[dict[str, Any]]]:
        def run() -> list[dict[str, Any]]:
            with tempfile.TemporaryDirectory(prefix="dra-mem-workers-") as tmp:
                return run_cluster(cluster, ["kubeletsim", "schedulers"], baseline, settle, Path(tmp))

        run.__name__ = f"workers_{cluster.label}"
        return run

    return [scenario(Cluster(5000, 8)), scenario(Cluster(2000, 128))]


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory_workers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", default="5000x8,2000x128", help="NODESxDEVICES, comma-separated (default 5000x8,2000x128)")
    parser.add_argument("--workers", default="kubeletsim,schedulers", help="which workers to measure (default both)")
    parser.add_argument("--baseline", help="another checkout whose workers are measured too, e.g. /work/main")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after sync before the 'after' RSS (default 5)")
    parser.add_argument("--postgres", action="store_true", help="a throwaway Postgres instead of SQLite")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for a registration or a worker to sync")
    parser.add_argument("--no-prepare", action="store_true", help="skip the scheduler's second phase (every node's devices prepared)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    keep = bool(os.environ.get("DRA_BENCH_KEEP_LOGS"))
    with tempfile.TemporaryDirectory(prefix="dra-mem-workers-") as scratch:
        tmp = Path(tempfile.mkdtemp(prefix="dra-mem-workers-logs-") if keep else scratch)
        for spec in (s for s in args.clusters.split(",") if s):
            nodes, devices = (int(x) for x in spec.split("x"))
            results += run_cluster(Cluster(nodes, devices), [w for w in args.workers.split(",") if w], args.baseline, args.settle, tmp, args.postgres, args.timeout, not args.no_prepare)
        if keep:
            print(f"logs: {tmp}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
