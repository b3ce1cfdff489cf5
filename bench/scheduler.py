"""Scheduler benchmark: the whole stack as real processes, pods from creation to bound.

Starts a throwaway Postgres (fsync on; ``--sqlite`` for the embedded backend), migrates it,
starts ``python -m app serve``, ``python -m controllers`` and ``python -m schedulers``, then:

* creates N nodes (4 CPU, 32Gi, 110 pods, like scheduler_perf's DRA nodes) with one
  ResourceSlice each holding 10 devices (scheduler_perf's attributes: model, family,
  driverVersion, numa; capacity memory=1Gi) and a DeviceClass for the driver;
* **baseline** phase: M pods without claims (node filters + binding only);
* **dra** phase: M pods, each with a claim from a ResourceClaimTemplate asking for one device
  (``--cel``: plus upstream's ``selector_empty`` CEL selector on every claim);
* ``--preemption`` instead: **fill** the cluster with low-priority pods holding every device
  (PriorityClass value 100, ``terminationGracePeriodSeconds: 0`` so a preempted pod goes at once:
  no kubelet runs here), then **preempt**: M high-priority pods (value 1000) each wanting one
  device, each of which must preempt a victim. Reported: victims preempted per second, and each
  high-priority pod's time from creation to bound (the benchmark runs no kubelet, so bound
  stands for Running).

Per phase: pods/s from the first creation to the last bind, per-pod latency (201 of the
create -> first watch event showing ``spec.nodeName``; pods are created as fast as the server
takes them, so it includes the time queued) p50/p99, and CPU milliseconds per pod of each
process (server, controller, scheduler, postgres, and this load generator, which uses the
workers' lean client so it takes little of the machine), which a busy machine distorts far
less than pods/s. The dra/baseline ratio says what device allocation (plus the controller
creating claims) costs on this machine.

``--against-upstream`` runs the same phases, for each node count, on three stacks in one run, all
over HTTPS with client certificates and Node,RBAC: this project's whole stack (server, scheduler,
controller), upstream's kube-scheduler on this server (with this project's controller making the
claims from templates), and upstream's whole stack (kube-apiserver + etcd, kube-scheduler,
kube-controller-manager with the resourceclaim controller), and prints each one's figures over the
last one's. The command exits non-zero when a phase ends before every pod is bound.

Run ``python -m bench.scheduler --help``; e.g. ``--nodes 100,500 --pods 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.cpu import _proc_table
from bench.machine import load_average, reports_machine
from devtools.credentials import ClusterCredentials
from devtools.server import REPO_ROOT, ServerProcess, migrate
from kube.client import KubeClient, WatchExpired
from kube.errors import ApiError
from kube.tasks import wait_for

GROUP = "/apis/resource.k8s.io/v1"
DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
CEL = 'device.attributes["test-driver.cdi.k8s.io"].driverVersion.major() >= 1 && device.capacity["test-driver.cdi.k8s.io"].memory.isGreaterThan(quantity("1Mi"))'
DEVICES_PER_NODE = 10


@contextlib.contextmanager
def database(sqlite: bool, tmp: Path) -> Iterator[str]:
    """A fresh database URL (throwaway Postgres unless ``sqlite``)."""
    with database_and_pid(sqlite, tmp) as (url, _pid):
        yield url


@contextlib.contextmanager
def database_and_pid(sqlite: bool, tmp: Path) -> Iterator[tuple[str, int | None]]:
    """A fresh database URL and its server's pid (None for SQLite, which runs in the API server)."""
    if sqlite:
        yield f"sqlite+aiosqlite:///{tmp / 'bench.sqlite'}", None
        return
    from devtools.postgres import ThrowawayPostgres

    with ThrowawayPostgres(database="dra_sched_bench") as pg:
        yield pg.url, pg.pid


class Worker:
    """A worker process (``python -m <module>``) logging to a file."""

    def __init__(self, module: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        out = open(log, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO_ROOT, stdout=out, stderr=out, env={**os.environ, **(env or {})})
        out.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


def resource_slice(node_name: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"instance-{i}",
            "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"}, "driverVersion": {"version": "1.2.3"}, "dra.example.com/numa": {"int": i}},
            "capacity": {"memory": {"value": "1Gi"}},
        }
        for i in range(DEVICES_PER_NODE)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node_name},
        "spec": {"driver": DRIVER, "nodeName": node_name, "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    }


def template(name: str, cel: bool) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": CEL}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}}}}


def pod(name: str, with_claim: bool, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}]}
    if with_claim:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": "tpl"}]
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["terminationGracePeriodSeconds"] = 0
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def create_all(client: KubeClient, items: list[tuple[str, dict[str, Any]]], concurrency: int = 32) -> list[float]:
    """POST every (path, body); returns the time each 201 arrived."""
    done: list[float] = [0.0] * len(items)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(items)):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            path, body = items[i]
            await client.create(path, body)
            done[i] = time.perf_counter()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def setup_nodes(client: KubeClient, count: int) -> None:
    names = [f"node-{i:04d}" for i in range(count)]
    klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    await create_all(client, [(f"{GROUP}/deviceclasses", klass)])
    await create_all(client, [("/api/v1/nodes", node(n)) for n in names])

    async def set_status(name: str) -> None:
        obj = await client.get(f"/api/v1/nodes/{name}")
        obj["status"] = {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}, "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}
        await client.update(f"/api/v1/nodes/{name}/status", obj)

    for start in range(0, len(names), 32):
        await asyncio.gather(*(set_status(n) for n in names[start : start + 32]))
    await create_all(client, [(f"{GROUP}/resourceslices", resource_slice(n)) for n in names])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (and its waited-for children) used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # Fields after the command: state is [0], so utime/stime/cutime/cstime are [11]..[14].
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and its living descendants (Postgres: the postmaster and its backends; the
    postmaster's CPU includes that of the backends it has reaped)."""
    table = _proc_table()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += [child for child, (parent, _cpu) in table.items() if parent == pid]
    return pids


def is_python(pid: int) -> bool:
    """Whether a process runs a Python interpreter (py-spy cannot sample upstream's Go binaries)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/exe")).name.startswith("python")
    except OSError:
        return False


def start_profilers(directory: Path, namespace: str, processes: dict[str, list[int]]) -> list[subprocess.Popen[bytes]]:
    """py-spy (raw stacks, 200 Hz) on the Python processes for one phase: ``<dir>/<phase>-<process>.raw``."""
    directory.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    return [
        subprocess.Popen(
            [str(py_spy), "record", "--gil", "-p", str(pids[0]), "-r", "200", "--format", "raw", "-o", str(directory / f"{namespace}-{name}.raw")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for name, pids in processes.items()
        if name not in ("postgres", "bench") and pids and is_python(pids[0])
    ]


async def request_counts(client: httpx.AsyncClient, refused: bool = False) -> dict[str, float]:
    """The server's ``apiserver_request_total`` by "VERB resource[/subresource]" (all codes, watches
    excluded); with ``refused`` also the answers refused for load (429) as "VERB resource[/subresource] 429"."""
    counts: dict[str, float] = {}
    for line in (await client.get("/metrics")).text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.split(","))
        verb = labels.get("verb", "").strip('"')
        if verb == "WATCH":
            continue
        name = labels.get("resource", "").strip('"') + ("/" + sub if (sub := labels.get("subresource", "").strip('"')) else "")
        key = f"{verb} {name}"
        counts[key] = counts.get(key, 0.0) + float(value)
        if refused and labels.get("code", "").strip('"') == "429":
            counts[f"{key} 429"] = counts.get(f"{key} 429", 0.0) + float(value)
    return counts


async def phase(
    client: KubeClient,
    metrics: httpx.AsyncClient,
    namespace: str,
    count: int,
    with_claim: bool,
    cel: bool,
    timeout: float,
    processes: dict[str, list[int]],
    profile: Path | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """Create ``count`` pods in a fresh namespace and time them until bound."""
    ns_body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    await create_all(client, [("/api/v1/namespaces", ns_body)])
    # kube-apiserver's ServiceAccount admission refuses pods whose account does not exist yet; made
    # on every server alike, unless a service account controller (this project's) was quicker.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    try:
        await client.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
    except ApiError as exc:
        if exc.code != 409:
            raise
    if with_claim:
        await create_all(client, [(f"{GROUP}/namespaces/{namespace}/resourceclaimtemplates", template("tpl", cel))])
    listing = await client.get(f"/api/v1/namespaces/{namespace}/pods")
    rv = listing["metadata"]["resourceVersion"]
    bound: dict[str, float] = {}
    finished = asyncio.Event()

    restarts = 0

    def seen(obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("spec") or {}).get("nodeName") and name not in bound:
            bound[name] = time.perf_counter()
            if len(bound) == count:
                finished.set()

    async def watch() -> None:
        # As an informer does: a stream the server ends (kube-apiserver closes a watcher that
        # reads too slowly while this process is busy creating pods) resumes from the last
        # version seen, and an expired version is relisted.
        nonlocal restarts
        version = rv
        while not finished.is_set():
            try:
                path = f"/api/v1/namespaces/{namespace}/pods"
                async for event in client.watch(path, resource_version=version, timeout_seconds=int(timeout) + 60, allow_bookmarks=False):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    seen(obj)
                    if finished.is_set():
                        return
            except WatchExpired:
                pods = await client.get(f"/api/v1/namespaces/{namespace}/pods")
                for obj in pods["items"]:
                    seen(obj)
                version = pods["metadata"]["resourceVersion"]
            restarts += 1

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.2)  # the watch is open before the first pod exists
    names = [f"pod-{i:05d}" for i in range(count)]
    requests0 = await request_counts(metrics)
    cpu0 = {name: sum(cpu_seconds(p) for p in pids) for name, pids in processes.items()}
    profilers = start_profilers(profile, namespace, processes) if profile else []
    t0 = time.perf_counter()
    created = await create_all(client, [(f"/api/v1/namespaces/{namespace}/pods", pod(n, with_claim, priority_class)) for n in names])
    try:
        await wait_for(finished.wait(), timeout)
    except TimeoutError:
        pass
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    for profiler in profilers:
        profiler.wait(30)
    # CPU per pod is what a noisy shared machine cannot distort much (unlike pods/s).
    cpu_ms = {f"cpu_ms_per_pod_{name}": (sum(cpu_seconds(p) for p in pids) - cpu0[name]) * 1000 / max(1, len(bound)) for name, pids in processes.items()}
    requests = await request_counts(metrics)
    per_pod = {k: (v - requests0.get(k, 0)) / max(1, len(bound)) for k, v in requests.items()}
    latencies = sorted((bound[n] - c) * 1000 for n, c in zip(names, created, strict=True) if n in bound)
    end = max(bound.values()) if bound else time.perf_counter()
    return {
        "pods": count,
        "bound": len(bound),
        "seconds": end - t0,
        "pods_per_s": len(bound) / (end - t0) if bound else 0.0,
        "p50_ms": statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else float("nan"),
        **cpu_ms,
        "requests_per_pod": {k: round(v, 2) for k, v in sorted(per_pod.items()) if v >= 0.01},
        "watch_restarts": restarts,
    }


def tree_env(tree: str) -> dict[str, str]:
    """Environment that runs ``python -m`` modules from another checkout (``--against``): its
    directory first on the path, and the working directory (this checkout) not on it at all."""
    return {"PYTHONPATH": tree, "PYTHONSAFEPATH": "1"} if tree else {}


@dataclass
class Stack:
    """A running stack: its API server, how to reach it, and the processes whose CPU is counted."""

    url: str
    ssl_context: ssl.SSLContext | None
    processes: dict[str, list[int]]
    leases: tuple[str, ...]  # kube-system Leases whose holder must be set before the pods come


# --against-upstream's stacks, in the order they run; the last is the one the others are divided by.
STACKS = {
    "this": "this server + this project's scheduler and controller",
    "upstream-scheduler": "this server + upstream's kube-scheduler (client limit raised) + this project's controller",
    "upstream": "kube-apiserver (TaintNodesByCondition admission off) + etcd + kube-scheduler + kube-controller-manager"
    " (resourceclaim controller; client limits raised)",
}
# Upstream's components rate-limit their own requests (kube-scheduler 50/s, kube-controller-manager
# 20/s by default), this project's workers do not: raised out of the way, as scheduler_perf does, so
# the servers and the scheduling are measured, not a client-side limit.
UPSTREAM_CLIENT_FLAGS = ["--kube-api-qps", "5000", "--kube-api-burst", "5000"]
# kube-apiserver's TaintNodesByCondition admission gives every new Node the not-ready taint, which
# only a kubelet's Ready condition and the node lifecycle controller lift; this server has no such
# admission. Off for the benchmark, so both servers hold the same untainted nodes and the same pods.
UPSTREAM_APISERVER_FLAGS = ["--disable-admission-plugins", "TaintNodesByCondition"]


@contextlib.contextmanager
def project_stack(
    args: argparse.Namespace, nodes: int, tmp: Path, tree: str = "", *, secure: bool = False, upstream_scheduler: bool = False
) -> Iterator[Stack]:
    """This project's server and controller, and its scheduler or upstream's kube-scheduler (which
    needs ``secure``: HTTPS, client certificates, Node,RBAC; plain HTTP without)."""
    env = tree_env(tree)
    with database_and_pid(args.sqlite, tmp) as (url, db_pid):
        migrate(url)
        credentials = ClusterCredentials.ensure(tmp / "pki") if secure or upstream_scheduler else None
        server = ServerProcess(url, port=None, log_path=tmp / f"server-{nodes}.log", env=env, credentials=credentials).start()
        assert server.process is not None
        workers: list[Worker] = []
        kube_scheduler = None
        try:
            level = ["--log-level", args.worker_log_level]
            workers.append(Worker("controllers", [*server.worker_flags("controller"), *level, "--lease-duration", "5"], tmp / f"controller-{nodes}.log", env))
            if upstream_scheduler:
                from devtools.upstream import start_kube_scheduler

                assert credentials is not None
                kube_scheduler = start_kube_scheduler(
                    credentials.kubeconfig("scheduler"), extra_args=UPSTREAM_CLIENT_FLAGS, log_path=tmp / f"kube-scheduler-{nodes}.log"
                )
                scheduler_pid = kube_scheduler.process.pid
            else:
                workers.append(Worker("schedulers", [*server.worker_flags("scheduler"), *level, "--lease-duration", "5"], tmp / f"scheduler-{nodes}.log", env))
                scheduler_pid = workers[-1].process.pid
            context = credentials.httpx_options("admin")["verify"] if credentials else None
            assert context is None or isinstance(context, ssl.SSLContext)
            processes = {
                "server": [server.process.pid],
                "controller": [workers[0].process.pid],
                "scheduler": [scheduler_pid],
                "postgres": process_tree(db_pid) if db_pid else [],
                "bench": [os.getpid()],  # this load generator (creates pods, watches them bind)
            }
            leases = ("dra-controller", "kube-scheduler" if upstream_scheduler else "dra-scheduler")
            yield Stack(server.url, context, processes, leases)
        finally:
            if kube_scheduler is not None:
                kube_scheduler.stop()
            for w in workers:
                w.stop()
            server.stop()


@contextlib.contextmanager
def upstream_stack(nodes: int, tmp: Path) -> Iterator[Stack]:
    """kube-apiserver on etcd (fsync on, as the Postgres above), kube-scheduler and
    kube-controller-manager running the resourceclaim controller as its service account."""
    from devtools.upstream import UpstreamControlPlane, start_kube_controller_manager, start_kube_scheduler

    directory = tmp / f"upstream-{nodes}"
    with (
        UpstreamControlPlane(directory, workers=False, etcd_fsync=True, extra_args=UPSTREAM_APISERVER_FLAGS) as plane,
        start_kube_scheduler(plane.kubeconfig("scheduler"), extra_args=UPSTREAM_CLIENT_FLAGS, log_path=directory / "kube-scheduler.log") as scheduler,
        start_kube_controller_manager(
            plane.kubeconfig("controller-manager"), controllers=["resourceclaim-controller"],
            extra_args=[*UPSTREAM_CLIENT_FLAGS, "--use-service-account-credentials"], log_path=directory / "kube-controller-manager.log",
        ) as manager,
    ):  # fmt: skip
        assert plane.apiserver is not None and plane.etcd is not None
        context = plane.credentials.httpx_options("admin")["verify"]
        assert isinstance(context, ssl.SSLContext)
        processes = {
            "server": [plane.apiserver.process.pid],
            "controller": [manager.process.pid],
            "scheduler": [scheduler.process.pid],
            "etcd": [plane.etcd.process.pid],
            "bench": [os.getpid()],
        }
        yield Stack(plane.url, context, processes, ("kube-scheduler", "kube-controller-manager"))


async def wait_for_leases(client: KubeClient, names: tuple[str, ...], timeout: float = 120) -> None:
    """Until the scheduler and the controller lead (each holds its kube-system Lease), so that the
    clock starts on a working stack; a stack that never gets there is an error, not a slow run."""
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            with contextlib.suppress(Exception):
                lease = await client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
                if (lease.get("spec") or {}).get("holderIdentity"):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"no holder of the Lease kube-system/{name} after {timeout:.0f}s")
            await asyncio.sleep(0.5)


async def run_one(args: argparse.Namespace, nodes: int, tmp: Path, tree: str = "", stack: str = "") -> dict[str, Any]:
    """One cluster of ``nodes`` nodes: baseline and dra phases; server, controller and scheduler
    from the checkout ``tree`` when given; ``stack`` one of STACKS (--against-upstream), else this
    project's over plain HTTP."""
    if stack == "upstream":
        running = upstream_stack(nodes, tmp)
    else:
        running = project_stack(args, nodes, tmp, tree, secure=bool(stack), upstream_scheduler=stack == "upstream-scheduler")
    with running as cluster:
        # The load generator shares the two cores with the stack: the workers' lean client keeps its share small.
        async with (
            KubeClient(cluster.url, user_agent="bench-scheduler", timeout=60, ssl_context=cluster.ssl_context) as client,
            # The load generator's timeout: a TLS handshake with a server busy binding 1,000 pods took over httpx's default 5 s.
            httpx.AsyncClient(base_url=cluster.url, verify=cluster.ssl_context or True, timeout=60) as metrics,
        ):
            t = time.perf_counter()
            await setup_nodes(client, nodes)
            setup_s = time.perf_counter() - t
            await wait_for_leases(client, cluster.leases)
            pods = min(args.pods, nodes * DEVICES_PER_NODE)
            result: dict[str, Any] = {"nodes": nodes, "setup_s": setup_s}
            if stack:
                result["stack"] = STACKS[stack]
            processes = cluster.processes
            # --against-upstream: each stack's profiles in a folder of its own.
            profile = Path(args.profile) / stack if args.profile and stack else Path(args.profile) if args.profile else None
            if args.preemption:
                result.update(await preemption_phases(client, metrics, nodes, args, processes, profile))
                return result
            if not args.no_baseline:
                result["baseline"] = await phase(client, metrics, "bench-base", pods, False, False, args.timeout, processes, profile)
            result["dra"] = await phase(client, metrics, "bench-dra", pods, True, args.cel, args.timeout, processes, profile)
            return result


async def preemption_phases(
    client: KubeClient, metrics: httpx.AsyncClient, nodes: int, args: argparse.Namespace, processes: dict[str, list[int]], profile: Path | None
) -> dict[str, Any]:
    """Fill every device with low-priority pods, then time high-priority pods that must preempt them."""
    for name, value in (("bench-low", 100), ("bench-high", 1000)):
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        await create_all(client, [("/apis/scheduling.k8s.io/v1/priorityclasses", body)])
    capacity = nodes * DEVICES_PER_NODE
    fill = await phase(client, metrics, "bench-fill", capacity, True, args.cel, args.timeout, processes, profile, "bench-low")
    high = min(args.pods, capacity)
    preempt = await phase(client, metrics, "bench-preempt", high, True, args.cel, args.timeout, processes, profile, "bench-high")
    left = len((await client.get("/api/v1/namespaces/bench-fill/pods"))["items"])
    victims = fill["bound"] - left
    preempt["victims"] = victims
    preempt["preemptions_per_s"] = victims / preempt["seconds"] if preempt["seconds"] else 0.0
    return {"fill": fill, "preempt": preempt}


def show(result: dict[str, Any]) -> None:
    print(f"nodes={result['nodes']} (setup {result['setup_s']:.1f}s)")
    if "preempt" in result:
        print(f"  preempt  victims={result['preempt']['victims']:5d} {result['preempt']['preemptions_per_s']:7.1f} preemptions/s")
    for name in ("baseline", "dra", "fill", "preempt"):
        r = result.get(name)
        if r is None:
            continue
        print(
            f"  {name:8s} pods={r['pods']:5d} bound={r['bound']:5d} {r['pods_per_s']:7.1f} pods/s  "
            f"p50={r['p50_ms']:8.1f} ms  p99={r['p99_ms']:8.1f} ms  total={r['seconds']:.1f}s"
        )
        cpu = "  ".join(f"{k.removeprefix('cpu_ms_per_pod_')}={v:.1f}" for k, v in r.items() if k.startswith("cpu_ms_per_pod_"))
        print(f"  {'':8s} CPU ms per pod: {cpu}")
        print(f"  {'':8s} requests per pod: {'  '.join(f'{k}={v:g}' for k, v in r['requests_per_pod'].items())}")
        if r.get("watch_restarts"):
            print(f"  {'':8s} the benchmark's pod watch was resumed {r['watch_restarts']} time(s) (the server ended it)")
    if "baseline" in result and result["baseline"]["pods_per_s"]:
        print(f"  dra/baseline throughput ratio: {result['dra']['pods_per_s'] / result['baseline']['pods_per_s']:.2f}")


def show_ratios(before: dict[str, Any], after: dict[str, Any]) -> None:
    """This checkout's figures over ``--against``'s, per phase."""
    for name in ("baseline", "dra", "fill", "preempt"):
        old, new = before.get(name), after.get(name)
        if not old or not new:
            continue
        keys = ["pods_per_s", *(k for k in new if k.startswith("cpu_ms_per_pod_"))]
        ratios = "  ".join(f"{k.removeprefix('cpu_ms_per_pod_')}={new[k] / old[k]:.2f}" for k in keys if old.get(k))
        print(f"  {name:8s} this ÷ --against: {ratios}")


def storage_ms(r: dict[str, Any]) -> float:
    """CPU ms per pod of the server process and its storage (Postgres or etcd; SQLite runs inside the server)."""
    return float(r["cpu_ms_per_pod_server"] + r.get("cpu_ms_per_pod_postgres", 0.0) + r.get("cpu_ms_per_pod_etcd", 0.0))


def show_stacks(runs: dict[str, dict[str, Any]]) -> None:
    """--against-upstream: each stack's pods/s and CPU per pod, and their ratio to upstream's whole stack."""
    base = runs["upstream"]
    print(f"  load average {' '.join(f'{x:.2f}' for x in load_average())}")
    for name in ("baseline", "dra"):
        if name not in base:
            continue
        print(f"  {name}: pods/s, server and server+storage CPU ms per pod; ratios to upstream's whole stack")
        for stack, result in runs.items():
            r, u = result[name], base[name]
            rate = r["pods_per_s"] / u["pods_per_s"] if u["pods_per_s"] else float("nan")
            server = r["cpu_ms_per_pod_server"] / u["cpu_ms_per_pod_server"] if u["cpu_ms_per_pod_server"] else float("nan")
            stored = storage_ms(r) / storage_ms(u) if storage_ms(u) else float("nan")
            print(
                f"    {stack:<19s} {r['pods_per_s']:7.1f} pods/s (x{rate:.2f})  server {r['cpu_ms_per_pod_server']:5.1f} ms (x{server:.2f})"
                f"  server+storage {storage_ms(r):5.1f} ms (x{stored:.2f})  scheduler {r['cpu_ms_per_pod_scheduler']:5.1f} ms"
                f"  controller {r['cpu_ms_per_pod_controller']:5.1f} ms  p50/p99 {r['p50_ms']:.0f}/{r['p99_ms']:.0f} ms"
            )


def unbound(results: list[dict[str, Any]]) -> list[str]:
    """Every phase that ended before all its pods were bound (a timeout, a stack that broke)."""
    missing = []
    for result in results:
        for run in [result, *result.get("stacks", {}).values(), *([result["against"]] if "against" in result else [])]:
            for name in ("baseline", "dra", "fill", "preempt"):
                r = run.get(name)
                if r is not None and r["bound"] < r["pods"]:
                    missing.append(f"{run.get('stack', 'this')} at {result['nodes']} nodes, {name}: {r['bound']} of {r['pods']} bound")
    return missing


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100", help="comma-separated node counts, e.g. 100,500,1000")
    parser.add_argument("--pods", type=int, default=1000, help="pods per phase (capped at nodes x 10 devices)")
    parser.add_argument("--cel", action="store_true", help="a CEL selector on every claim (upstream's selector_empty)")
    parser.add_argument("--sqlite", action="store_true", help="embedded SQLite instead of a throwaway Postgres")
    parser.add_argument("--no-baseline", action="store_true", help="skip the pods-without-claims phase")
    parser.add_argument(
        "--preemption", action="store_true",
        help="instead of baseline and dra: fill every device with low-priority pods, then time high-priority pods that preempt them",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for all pods of a phase")
    parser.add_argument("--worker-log-level", default="warning", help="log level of controller and scheduler")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--profile", help="py-spy the server and the Python workers during each phase into this directory (skews CPU figures; one folder per stack)"
    )
    parser.add_argument(
        "--against", default="", help="another checkout (e.g. main's): each node count runs its stack first, then this one's, and prints the ratios"
    )
    parser.add_argument(
        "--against-upstream", action="store_true",
        help="each node count on three stacks over HTTPS: this project's, upstream's kube-scheduler on this server, upstream's whole (needs make upstream)",
    )  # fmt: skip
    parser.add_argument("--stacks", default=",".join(STACKS), help=f"--against-upstream: which of {', '.join(STACKS)} (default all)")
    args = parser.parse_args(argv)
    stacks = [name for name in args.stacks.split(",") if name]
    if not stacks or set(stacks) - set(STACKS):
        parser.error(f"--stacks takes a comma-separated subset of {', '.join(STACKS)}")
    if args.against_upstream and (args.against or args.preemption):
        parser.error("--against-upstream runs the baseline and dra phases on its three stacks: no --against or --preemption")
    results = []
    keep = bool(os.environ.get("DRA_BENCH_KEEP_LOGS"))
    with tempfile.TemporaryDirectory(prefix="dra-sched-bench-") as scratch:
        tmpdir = tempfile.mkdtemp(prefix="dra-sched-bench-logs-") if keep else scratch
        for n in (int(x) for x in args.nodes.split(",") if x):
            if args.against_upstream:
                runs: dict[str, dict[str, Any]] = {}
                for stack in stacks:
                    print(f"--- {STACKS[stack]}", flush=True)
                    directory = Path(tmpdir) / f"{stack}-{n}"  # its own database, credentials and logs
                    directory.mkdir(exist_ok=True)
                    runs[stack] = asyncio.run(run_one(args, n, directory, stack=stack))
                    show(runs[stack])
                if "upstream" in runs:
                    show_stacks(runs)
                results.append({"nodes": n, "load_average": load_average(), "stacks": runs})
                continue
            before = None
            if args.against:
                print(f"--- {args.against}")
                other = Path(tmpdir) / f"against-{n}"  # its own database and logs
                other.mkdir(exist_ok=True)
                before = asyncio.run(run_one(args, n, other, args.against))
                show(before)
                print("--- this checkout")
            result = asyncio.run(run_one(args, n, Path(tmpdir)))
            show(result)
            if before is not None:
                show_ratios(before, result)
                result["against"] = before
            results.append(result)
        if keep:
            print(f"logs: {tmpdir}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    if missing := unbound(results):
        print("error: not every pod was bound:\n  " + "\n  ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
