"""Fault benchmark: the API server as a real process under hostile conditions, on SQLite and Postgres.

Scenarios (``--scenarios``, all by default; each prints its figures):

- ``kill``: SIGKILL of the server under ``--writers`` clients creating claims, a restart on the
  same database; every create acknowledged with a 201 must be there (lost: must be 0).
- ``outage`` (Postgres only): the database stopped for ``--outage`` seconds under the same load,
  with ``--outage-watchers`` watches open; the errors clients saw, how soon readiness failed and
  recovered, how soon writes succeeded again, and the events the watchers missed (must be 0).
  The writers see each answer as the server gave it; one more create, sent as the database goes,
  retries as client-go does (Retry-After, up to 10 times): how it ended, and after how long.
- ``watches``: ``--watches`` watches open at once; the server's RSS, the p99 of ordinary
  requests (a GET, a LIST of 100 claims, a create, in another namespace) with and without
  them, and how long one write takes to reach all of them.
- ``slow``: ``--idle`` connections that send nothing and ``--slowloris`` that send a header
  line every 2 s, for ``--slow-seconds``; every ordinary request must still be answered within
  1 s, and the server cuts those connections (32 s after they opened).
- ``list``: a LIST of ``--list-claims`` claims whole and in pages of ``--page``; the time and
  the server's peak RSS during each.

The embedded database has no server to lose: ``outage`` runs on Postgres only. ``make
bench-faults`` runs it all (about 4 minutes); see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import resource
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.common import claim, claims_path, percentile
from bench.machine import reports_machine
from devtools.postgres import ThrowawayPostgres
from devtools.server import ServerProcess, migrate
from kube.client import MAX_RETRIES, KubeClient, WatchExpired
from kube.errors import ApiError

SCENARIOS = ("kill", "outage", "watches", "slow", "list")
FAILURES = (ApiError, httpx.HTTPError, OSError)

Figures = dict[str, Any]


# ----------------------------------------------------------------------------- processes


class Backend:
    """A database for the server: an SQLite file, or a throwaway Postgres (fsync on) that can go down."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.workdir = workdir
        self.postgres: ThrowawayPostgres | None = None
        self._databases = itertools.count()

    def __enter__(self) -> Backend:
        if self.name == "postgres":
            self.postgres = ThrowawayPostgres(database="dra").start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.postgres is not None:
            self.postgres.stop()

    def new_database(self) -> str:
        """An empty database (migrated for Postgres; SQLite migrates itself on start)."""
        number = next(self._databases)
        if self.postgres is None:
            return f"sqlite:///{self.workdir / f'faults-{number}.sqlite'}"
        name = f"faults_{number}"
        admin = self.postgres.dsn
        asyncio.run(_execute(admin, f'CREATE DATABASE "{name}"'))
        url = self.postgres.url.rsplit("/", 1)[0] + "/" + name
        migrate(url)
        return url


async def _execute(dsn: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The highest RSS of a process while the block runs (sampled every 5 ms in a thread)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.005)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def server_pid(server: ServerProcess) -> int:
    assert server.process is not None
    return server.process.pid


@contextlib.contextmanager
def running_server(url: str, log: Path, *flags: str) -> Iterator[ServerProcess]:
    server = ServerProcess(url, *flags, log_path=log)
    server.start(timeout=120)
    try:
        yield server
    finally:
        server.stop()


# ----------------------------------------------------------------------------- clients


def new_client(server: ServerProcess, *, retrying: bool = False) -> KubeClient:
    """A client that sees each answer as the server gave it; ``retrying``: one that sends a request
    again when asked to (Retry-After on a 429 or 5xx), up to 10 times, as client-go does."""
    return KubeClient(server.url, user_agent="bench-faults", timeout=30, max_retries=MAX_RETRIES if retrying else 0)


async def ensure_namespace(client: KubeClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def failure_kind(exc: BaseException) -> str:
    """How a failed request looked to the client: ``500 ServerTimeout``, or the transport error."""
    if isinstance(exc, ApiError):
        return f"{exc.code} {exc.reason}".strip()
    return type(exc).__name__


async def create_many(client: KubeClient, namespace: str, count: int, concurrency: int = 32) -> float:
    """Create ``count`` claims; seconds taken."""
    names = iter(range(count))
    started = time.perf_counter()

    async def worker() -> None:
        for seq in names:
            await client.create(claims_path(namespace), claim(f"c-{seq}", namespace, seq))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def ordinary_latencies(client: KubeClient, namespace: str, seconds: float, prefix: str, clients: int = 4) -> list[float]:
    """Latencies of a GET, a LIST of the namespace and a create in turn, from ``clients`` loops."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    sequence = itertools.count()

    async def timed(request: Awaitable[Any]) -> None:
        started = time.perf_counter()
        await request
        latencies.append(time.perf_counter() - started)

    async def loop() -> None:
        while time.perf_counter() < deadline:
            seq = next(sequence)
            await timed(client.get(claims_path(namespace, "c-0")))
            await timed(client.list(claims_path(namespace)))
            await timed(client.create(claims_path(namespace), claim(f"{prefix}-{seq}", namespace, seq)))

    await asyncio.gather(*(loop() for _ in range(clients)))
    return latencies


class Writers:
    """Clients creating claims back to back; which creates were acknowledged, and how others failed."""

    def __init__(self, client: KubeClient, namespace: str, count: int, pause_after_error: float = 0.1) -> None:
        self.client = client
        self.namespace = namespace
        self.count = count
        self.pause_after_error = pause_after_error
        self.acknowledged: list[tuple[float, str]] = []  # (time of the 201, name)
        self.failures: list[tuple[float, str, float]] = []  # (time, kind, latency)
        self.stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._write(i)) for i in range(self.count)]

    async def _write(self, writer: int) -> None:
        for seq in itertools.count():
            if self.stopping:
                return
            name = f"w{writer}-{seq}"
            started = time.perf_counter()
            try:
                await self.client.create(claims_path(self.namespace), claim(name, self.namespace, seq))
            except FAILURES as exc:
                self.failures.append((time.perf_counter(), failure_kind(exc), time.perf_counter() - started))
                await asyncio.sleep(self.pause_after_error)
            else:
                self.acknowledged.append((time.perf_counter(), name))

    async def stop(self) -> None:
        self.stopping = True
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def names(self) -> set[str]:
        return {name for _, name in self.acknowledged}


async def stored_names(client: KubeClient, namespace: str) -> set[str]:
    listed = await client.list(claims_path(namespace), limit=1000)
    return {item["metadata"]["name"] for item in listed["items"]}


# ----------------------------------------------------------------------------- scenarios


async def scenario_kill(server: ServerProcess, args: argparse.Namespace) -> Figures:
    namespace = "faults-kill"
    async with new_client(server) as client:
        await ensure_namespace(client, namespace)
        writers = Writers(client, namespace, args.writers, pause_after_error=0.05)
        writers.start()
        await asyncio.sleep(args.kill_after)
        server.stop(kill=True)  # SIGKILL
        killed = time.perf_counter()
        await asyncio.sleep(0.5)
        await writers.stop()
        server.start(timeout=120)
        restarted = time.perf_counter() - killed
    async with new_client(server) as client:
        stored = await stored_names(client, namespace)
    acknowledged = writers.names()
    return {
        "writers": args.writers,
        "acknowledged creates": len(acknowledged),
        "acknowledged creates lost": len(acknowledged - stored),
        "stored without an acknowledgement": len(stored - acknowledged),
        "restart to ready (s)": round(restarted, 2),
    }


class WatchRecorder:
    """A watch kept open through everything: the names it saw ADDED, and how often its stream broke."""

    def __init__(self, client: KubeClient, namespace: str, resource_version: str) -> None:
        self.client = client
        self.namespace = namespace
        self.resource_version = resource_version
        self.added: set[str] = set()
        self.broken: Counter[str] = Counter()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                async for event in self.client.watch(claims_path(self.namespace), resource_version=self.resource_version, timeout_seconds=3600):
                    metadata = event["object"]["metadata"]
                    self.resource_version = metadata.get("resourceVersion") or self.resource_version
                    if event["type"] == "ADDED":
                        self.added.add(metadata["name"])
                self.broken["ended"] += 1
            except WatchExpired:
                self.broken["expired"] += 1
                return
            except FAILURES as exc:
                self.broken[failure_kind(exc)] += 1
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def poll_readiness(url: str, every: float, until: Callable[[], bool]) -> list[tuple[float, int]]:
    """(time, /readyz status) whenever the status changes, until ``until()``."""
    changes: list[tuple[float, int]] = []
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        while not until():
            try:
                status = (await http.get("/readyz")).status_code
            except httpx.HTTPError:
                status = 0
            if not changes or changes[-1][1] != status:
                changes.append((time.perf_counter(), status))
            await asyncio.sleep(every)
    return changes


async def create_with_retries(server: ServerProcess, namespace: str) -> str:
    """One create sent as client-go sends it, honouring Retry-After: how it ended, and when."""
    started = time.perf_counter()
    async with new_client(server, retrying=True) as client:
        try:
            await client.create(claims_path(namespace), claim("retried", namespace, 0))
        except FAILURES as exc:
            return f"{failure_kind(exc)} after {time.perf_counter() - started:.1f} s"
    return f"201 after {time.perf_counter() - started:.1f} s"


async def scenario_outage(server: ServerProcess, backend: Backend, args: argparse.Namespace) -> Figures:
    assert backend.postgres is not None
    namespace = "faults-outage"
    async with new_client(server) as client:
        await ensure_namespace(client, namespace)
        start_rv = (await client.list(claims_path(namespace)))["metadata"]["resourceVersion"]
        watchers = [WatchRecorder(client, namespace, start_rv) for _ in range(args.outage_watchers)]
        writers = Writers(client, namespace, args.writers)
        writers.start()
        done = False
        readiness = asyncio.create_task(poll_readiness(server.url, 0.1, lambda: done))
        await asyncio.sleep(3)
        backend.postgres.pause()
        down = time.perf_counter()
        retried = asyncio.create_task(create_with_retries(server, namespace))
        await asyncio.sleep(args.outage)
        await asyncio.to_thread(backend.postgres.resume)
        up = time.perf_counter()
        while not any(at > up for at, _ in writers.acknowledged):
            await asyncio.sleep(0.05)
        first_write = min(at for at, _ in writers.acknowledged if at > up)
        await asyncio.sleep(3)
        await writers.stop()
        done = True
        changes = await readiness
        acknowledged = writers.names()
        deadline = time.perf_counter() + 15
        while time.perf_counter() < deadline and any(acknowledged - w.added for w in watchers):
            await asyncio.sleep(0.1)
        stored = await stored_names(client, namespace)
        for watcher in watchers:
            await watcher.stop()
        retried_outcome = await retried
    failed_at = next((at for at, status in changes if at > down and status != 200), None)
    ready_at = next((at for at, status in changes if at > up and status == 200), None)
    during = [(kind, latency) for at, kind, latency in writers.failures if down <= at <= first_write]
    missed = [len(acknowledged - w.added) for w in watchers]
    return {
        "outage (s)": args.outage,
        "writers / watchers": f"{args.writers} / {args.outage_watchers}",
        "readiness failed after (s)": None if failed_at is None else round(failed_at - down, 2),
        "failed requests during the outage": dict(Counter(kind for kind, _ in during)),
        "p50 / max latency of a failed request (ms)": _ms_pair([latency for _, latency in during]),
        "ready again after the database (s)": None if ready_at is None else round(ready_at - up, 2),
        "first acknowledged write after the database (s)": round(first_write - up, 2),
        "a create sent with client-go's retries when it went": retried_outcome,
        "acknowledged creates": len(acknowledged),
        "acknowledged creates lost": len(acknowledged - stored),
        "events missed by watchers (total)": sum(missed),
        "watch streams broken": dict(sum((w.broken for w in watchers), Counter())),
    }


class _Drain(asyncio.Protocol):
    """A watch connection whose events are timed, not parsed."""

    def __init__(self, opened: asyncio.Future[int]) -> None:
        self.opened = opened
        self.arrived: float | None = None  # when data came after the last reset

    def data_received(self, data: bytes) -> None:
        if not self.opened.done() and data.startswith(b"HTTP/1.1 "):
            self.opened.set_result(int(data[9:12]))
        elif self.arrived is None:
            self.arrived = time.perf_counter()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_result(0)


async def open_watches(server: ServerProcess, namespace: str, resource_version: str, count: int) -> list[tuple[asyncio.Transport, _Drain]]:
    """``count`` watch connections on ``namespace`` from ``resource_version`` (no initial events),
    each answered 200 before this returns."""
    loop = asyncio.get_running_loop()
    host, port = "127.0.0.1", server.port
    query = f"watch=true&resourceVersion={resource_version}&timeoutSeconds=3600"
    request = f"GET {claims_path(namespace)}?{query} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    watches: list[tuple[asyncio.Transport, _Drain]] = []
    gate = asyncio.Semaphore(64)

    async def one() -> None:
        async with gate:
            opened: asyncio.Future[int] = loop.create_future()
            transport, drain = await loop.create_connection(lambda: _Drain(opened), host, port)
            transport.write(request)
            status = await opened
            if status != 200:
                raise RuntimeError(f"a watch was answered {status}")
            watches.append((transport, drain))

    await asyncio.gather(*(one() for _ in range(count)))
    return watches


async def scenario_watches(server: ServerProcess, args: argparse.Namespace) -> Figures:
    """The watches are on a namespace of their own: the ordinary requests' writes elsewhere reach
    none of them (each event is only checked against each watch); one write into their namespace
    then measures the fan-out to all of them."""
    watched, ordinary = "faults-watches", "faults-ordinary"
    pid = server_pid(server)
    async with new_client(server) as client:
        await ensure_namespace(client, watched)
        await ensure_namespace(client, ordinary)
        await create_many(client, ordinary, 100)
        baseline = await ordinary_latencies(client, ordinary, args.probe_seconds, "before")
        rss_before = rss_mib(pid)
        resource_version = (await client.list(claims_path(watched)))["metadata"]["resourceVersion"]
        started = time.perf_counter()
        watches = await open_watches(server, watched, resource_version, args.watches)
        opening = time.perf_counter() - started
        rss_open = rss_mib(pid)
        loaded = await ordinary_latencies(client, ordinary, args.probe_seconds, "during")
        written = time.perf_counter()
        await client.create(claims_path(watched), claim("fan-out", watched, 0))
        deadline = written + 60
        while time.perf_counter() < deadline and any(drain.arrived is None for _, drain in watches):
            await asyncio.sleep(0.001)
        arrivals = [drain.arrived - written for _, drain in watches if drain.arrived is not None]
        for transport, _ in watches:
            transport.close()
    return {
        "watches": args.watches,
        "time to open them all (s)": round(opening, 2),
        "server RSS before / with them open (MiB)": f"{rss_before:.0f} / {rss_open:.0f}",
        "RSS per watch (KiB)": round((rss_open - rss_before) * 1024 / max(args.watches, 1), 1),
        "ordinary requests p99 without / with them (ms)": f"{_ms(percentile(baseline, 99))} / {_ms(percentile(loaded, 99))}",
        "one event to every watch: received, last after (ms)": f"{len(arrivals)}/{args.watches}, {_ms(max(arrivals, default=None))}",
    }


async def scenario_slow_clients(server: ServerProcess, args: argparse.Namespace) -> Figures:
    namespace = "faults-slow"
    host, port = "127.0.0.1", server.port
    async with new_client(server) as client:
        await ensure_namespace(client, namespace)
        await create_many(client, namespace, 10)
        idle = [await asyncio.open_connection(host, port) for _ in range(args.idle)]
        slow = [await asyncio.open_connection(host, port) for _ in range(args.slowloris)]
        opened = time.perf_counter()
        closed_at: dict[int, float] = {}

        async def dribble(index: int, writer: asyncio.StreamWriter) -> None:
            writer.write(b"GET /version HTTP/1.1\r\nHost: bench\r\n")
            for line in itertools.count():
                try:
                    writer.write(b"X-Slow-%d: 1\r\n" % line)
                    await writer.drain()
                except ConnectionError:
                    return
                await asyncio.sleep(2)

        async def watch_closed(index: int, reader: asyncio.StreamReader) -> None:
            with contextlib.suppress(ConnectionError):
                await reader.read()
            closed_at[index] = time.perf_counter() - opened

        dribblers = [asyncio.create_task(dribble(i, w)) for i, (_, w) in enumerate(slow)]
        closers = [asyncio.create_task(watch_closed(i, r)) for i, (r, _) in enumerate(idle + slow)]
        latencies: list[float] = []
        deadline = opened + args.slow_seconds
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await client.get(claims_path(namespace, "c-0"))
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.1)
        for task in (*dribblers, *closers):
            task.cancel()
        for _, writer in idle + slow:
            writer.close()
    cut = sorted(closed_at.values())
    return {
        "idle / slowloris connections": f"{args.idle} / {args.slowloris}",
        "ordinary requests (one every 0.1 s)": len(latencies),
        "their p99 / max latency (ms)": f"{_ms(percentile(latencies, 99))} / {_ms(max(latencies, default=None))}",
        "answered within 1 s": f"{sum(1 for latency in latencies if latency <= 1.0)}/{len(latencies)}",
        "connections cut by the server": f"{len(cut)}/{args.idle + args.slowloris}" + (f" (after {cut[0]:.1f}-{cut[-1]:.1f} s)" if cut else ""),
    }


async def scenario_big_list(server: ServerProcess, args: argparse.Namespace) -> Figures:
    namespace = "faults-list"
    pid = server_pid(server)
    async with new_client(server) as client:
        await ensure_namespace(client, namespace)
        creating = await create_many(client, namespace, args.list_claims)
        rss_idle = rss_mib(pid)
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as http:
            with PeakRss(pid) as whole_peak:
                started = time.perf_counter()
                whole = await http.get(claims_path(namespace))
                whole_seconds = time.perf_counter() - started
            items = len(orjson.loads(whole.content)["items"])
            with PeakRss(pid) as paged_peak:
                started = time.perf_counter()
                paged_items, pages, token = 0, 0, ""
                while True:
                    params = {"limit": str(args.page), **({"continue": token} if token else {})}
                    page = (await http.get(claims_path(namespace), params=params)).json()
                    paged_items += len(page["items"])
                    pages += 1
                    token = page["metadata"].get("continue", "")
                    if not token:
                        break
                paged_seconds = time.perf_counter() - started
    return {
        "claims": args.list_claims,
        "created in (s)": round(creating, 1),
        "whole LIST: items, MB, s": f"{items}, {len(whole.content) / 1e6:.1f}, {whole_seconds:.2f}",
        "paged LIST: items, pages, s": f"{paged_items}, {pages}, {paged_seconds:.2f}",
        "server RSS idle / peak whole / peak paged (MiB)": f"{rss_idle:.0f} / {whole_peak.peak:.0f} / {paged_peak.peak:.0f}",
    }


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _ms_pair(values: list[float]) -> str:
    return f"{_ms(percentile(values, 50))} / {_ms(max(values, default=None))}"


# ----------------------------------------------------------------------------- run


VERDICTS: dict[tuple[str, str], Callable[[Any], bool]] = {
    ("kill", "acknowledged creates lost"): lambda value: value == 0,
    ("outage", "acknowledged creates lost"): lambda value: value == 0,
    ("outage", "events missed by watchers (total)"): lambda value: value == 0,
    ("slow", "answered within 1 s"): lambda value: value.split("/")[0] == value.split("/")[1],
}


def print_figures(backend: str, scenario: str, figures: Figures) -> None:
    print(f"\n{backend} · {scenario}", flush=True)
    for key, value in figures.items():
        verdict = VERDICTS.get((scenario, key))
        mark = "" if verdict is None else ("  PASS" if verdict(value) else "  MISS")
        print(f"  {key:<52} {value}{mark}", flush=True)


async def run_scenarios(names: list[str], backend: Backend, url: str, logs: Path, args: argparse.Namespace) -> dict[str, Figures]:
    """``names`` in turn on one server (each scenario has a namespace of its own)."""
    results: dict[str, Figures] = {}
    with running_server(url, logs / f"{backend.name}-{names[0]}.log") as server:
        scenarios: dict[str, Callable[[], Awaitable[Figures]]] = {
            "kill": lambda: scenario_kill(server, args),
            "outage": lambda: scenario_outage(server, backend, args),
            "watches": lambda: scenario_watches(server, args),
            "slow": lambda: scenario_slow_clients(server, args),
            "list": lambda: scenario_big_list(server, args),
        }
        for name in names:
            results[name] = await scenarios[name]()
            print_figures(backend.name, name, results[name])
    return results


def server_runs(scenarios: list[str], backend: Backend) -> list[list[str]]:
    """Which scenarios share a server: kill and outage each take one down, so they get their own;
    the rest share one, the LIST (which leaves 20,000 claims behind) last."""
    alone: list[list[str]] = [[name] for name in ("kill", "outage") if name in scenarios and (name != "outage" or backend.postgres is not None)]
    shared: list[str] = [name for name in ("watches", "slow", "list") if name in scenarios]
    return alone + ([shared] if shared else [])


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}")
    parser.add_argument("--writers", type=int, default=16, help="clients creating claims in kill and outage")
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds of writing before the SIGKILL")
    parser.add_argument("--outage", type=float, default=15.0, help="seconds the database is down")
    parser.add_argument("--outage-watchers", type=int, default=10, help="watches open through the outage")
    parser.add_argument("--watches", type=int, default=2000, help="watches open at once")
    parser.add_argument("--probe-seconds", type=float, default=5.0, help="seconds of ordinary requests with and without the watches")
    parser.add_argument("--idle", type=int, default=500, help="connections that send nothing")
    parser.add_argument("--slowloris", type=int, default=50, help="connections that send a header line every 2 s")
    parser.add_argument("--slow-seconds", type=float, default=40.0, help="seconds the slow clients stay (the server cuts them at 32)")
    parser.add_argument("--list-claims", type=int, default=20_000, help="claims in the LISTed namespace")
    parser.add_argument("--page", type=int, default=500, help="page size of the paged LIST")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in scenarios if s not in SCENARIOS] + [b for b in backends if b not in ("sqlite", "postgres")]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    # Thousands of connections on both ends: as many file descriptors as we may have.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results: dict[str, dict[str, Figures]] = {}
    with tempfile.TemporaryDirectory(prefix="dra-faults-") as tmp:
        workdir = Path(tmp)
        for name in backends:
            with Backend(name, workdir) as backend:
                for run in server_runs(scenarios, backend):
                    figures = asyncio.run(run_scenarios(run, backend, backend.new_database(), workdir, args))
                    results.setdefault(name, {}).update(figures)
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
