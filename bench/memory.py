"""Memory benchmark: how much RSS a real API server process gains per byte of JSON it holds.

For each database (SQLite, and a throwaway Postgres unless ``--sqlite-only``) and each scenario,
a fresh ``python -m app serve`` (bench.api's ServerProcess) is started, loaded and measured:

* ``slices``: ``--slices`` ResourceSlices of 128 devices each (default 2,000), and ``slices-large``
  with ``--slices-large`` of them (default 10,000);
* ``claims``: ``--claims`` small ResourceClaims (default 100,000; bench.api's documents);
* after each load, ``--clients`` clients (default 10) each read a full LIST and then open a
  watch from resourceVersion 0 and read its initial events; the watches stay open.

Printed per scenario: the server's RSS before loading, after loading (at rest), after the
clients (at rest, watches open), the peak during the LISTs and watches (VmHWM, reset before the
phase), the serialised size the server holds (its ``apiserver_watch_cache_bytes``), and the
ratios growth/serialised against the targets: at most 2x at rest, 3x at peak.

Worker scenarios: when ``bench/memory_workers.py`` exists, ``bench.memory_workers.scenarios()``
returns more callables; each is called with this run's argparse namespace (or with nothing if it
takes no argument) and returns a result dict (``name``, ``rss_before``, ``rss_after``,
``rss_peak``, ``serialized``, ``ratio``, ``target``, ...) or a list of them, printed in the
same table.

Run ``python -m bench.memory --help``; ``make bench-memory``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.common import ROOT, claim_bytes
from bench.machine import reports_machine
from bench.serverprocess import ServerProcess

GROUP = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.memory.example.com"
AT_REST_TARGET = 2.0
PEAK_TARGET = 3.0
PAGE = 1 << 20


# ----------------------------------------------------------------------------- documents


def large_slice(index: int, devices: int = 128) -> bytes:
    """A ResourceSlice of a large GPU node: ``devices`` devices with the attributes and
    capacities a real driver publishes (about 200 bytes of JSON each)."""
    node = f"node-{index:05d}"
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{d}",
                    "attributes": {
                        "model": {"string": "LATEST-GPU-MODEL"},
                        "uuid": {"string": f"gpu-{index:05d}-{d:04d}-5f3c9a7e"},
                        "driverVersion": {"version": "550.54.15"},
                        "index": {"int": d},
                    },
                    "capacity": {"memory": {"value": "80Gi"}, "cores": {"value": "132"}},
                }
                for d in range(devices)
            ],
        },
    }
    return orjson.dumps(body)


# ----------------------------------------------------------------------------- measurement


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` now."""
    return _status_kb(pid, "VmRSS") * 1024


def peak_bytes(pid: int) -> int:
    """The peak RSS of ``pid`` since the last ``reset_peak`` (VmHWM)."""
    return _status_kb(pid, "VmHWM") * 1024


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux: 5 > /proc/PID/clear_refs); False where not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class PeakSampler:
    """The highest RSS seen every 20 ms: the fallback where VmHWM cannot be reset."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, rss_bytes(self.pid))
            await asyncio.sleep(0.02)

    def __enter__(self) -> PeakSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.peak = max(self.peak, rss_bytes(self.pid))


async def settle(pid: int, seconds: float = 3.0) -> int:
    """RSS after the server has been idle for ``seconds`` (the lowest sample of the last second)."""
    await asyncio.sleep(max(seconds - 1.0, 0))
    low = rss_bytes(pid)
    for _ in range(10):
        await asyncio.sleep(0.1)
        low = min(low, rss_bytes(pid))
    return low


# ----------------------------------------------------------------------------- HTTP


class Http:
    """A minimal streaming HTTP/1.1 client: bodies are counted and dropped, never kept."""

    def __init__(self, base_url: str) -> None:
        match = re.match(r"http://([^:/]+):(\d+)", base_url)
        assert match is not None
        self.host, self.port = match.group(1), int(match.group(2))

    async def _open(self, method: str, path: str, body: bytes | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[bytes, bytes]]:
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=PAGE)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + (body or b""))
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:]) if k}
        return reader, writer, int(lines[0].split(b" ", 2)[1]), headers

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> Any:
        chunked = b"content-length" not in headers
        while True:
            left = int((await reader.readline()).split(b";", 1)[0], 16) if chunked else int(headers[b"content-length"])
            if left == 0:
                return
            while left:
                data = await reader.read(min(left, PAGE))
                if not data:
                    return
                left -= len(data)
                yield data
            if not chunked:
                return
            await reader.readexactly(2)

    async def post(self, path: str, body: bytes) -> int:
        reader, writer, status, headers = await self._open("POST", path, body)
        async for _ in self._chunks(reader, headers):
            pass
        writer.close()
        return status

    async def get_json(self, path: str) -> Any:
        reader, writer, _status, headers = await self._open("GET", path, None)
        data = b"".join([chunk async for chunk in self._chunks(reader, headers)])
        writer.close()
        return orjson.loads(data)

    async def list_size(self, path: str) -> int:
        """Read a whole LIST, keeping none of it: its size in bytes."""
        reader, writer, status, headers = await self._open("GET", path, None)
        if status != 200:
            raise RuntimeError(f"LIST {path}: {status}")
        total = 0
        async for chunk in self._chunks(reader, headers):
            total += len(chunk)
        writer.close()
        return total

    async def watch_initial(self, path: str, count: int) -> tuple[asyncio.StreamWriter, int]:
        """Open a watch from resourceVersion 0 and read ``count`` events; the stream stays open."""
        reader, writer, status, headers = await self._open("GET", f"{path}?watch=1&resourceVersion=0", None)
        if status != 200:
            raise RuntimeError(f"WATCH {path}: {status}")
        seen = 0
        total = 0
        async for chunk in self._chunks(reader, headers):
            seen += chunk.count(b"\n")
            total += len(chunk)
            if seen >= count:
                break
        return writer, total


async def create_all(http: Http, path: str, bodies: Iterator[bytes], concurrency: int = 16) -> int:
    """POST each body (``concurrency`` at once); the number created."""
    created = 0
    lock = asyncio.Lock()

    async def worker() -> None:
        nonlocal created
        session = _Session(http)
        try:
            while True:
                async with lock:
                    body = next(bodies, None)
                if body is None:
                    return
                status = await session.post(path, body)
                if status != 201:
                    raise RuntimeError(f"POST {path}: {status}")
                created += 1
        finally:
            session.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return created


class _Session:
    """One keep-alive connection for many POSTs (creating 100,000 objects)."""

    def __init__(self, http: Http) -> None:
        self.http = http
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.http.host, self.http.port, limit=PAGE)
        assert self.reader is not None
        head = f"POST {path} HTTP/1.1\r\nHost: {self.http.host}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:]) if k}
        async for _ in Http._chunks(self.reader, headers):
            pass
        return int(lines[0].split(b" ", 2)[1])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def cache_bytes(http: Http, resource: str) -> int:
    """The serialised bytes the server reports holding for ``resource`` (/metrics)."""
    reader, writer, _status, headers = await http._open("GET", "/metrics", None)
    text = b"".join([c async for c in Http._chunks(reader, headers)]).decode()
    writer.close()
    match = re.search(rf'^apiserver_watch_cache_bytes{{resource="{re.escape(resource)}"}} (\S+)$', text, re.M)
    return int(float(match.group(1))) if match else 0


# ----------------------------------------------------------------------------- scenarios


@dataclass
class Result:
    name: str
    database: str
    objects: int
    serialized: int
    rss_before: int
    rss_loaded: int
    rss_after_clients: int = 0
    rss_peak_clients: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def ratios(self) -> list[tuple[str, float, float]]:
        """(what, ratio, target) for each figure measured."""
        s = max(self.serialized, 1)
        out = [("at rest", (self.rss_loaded - self.rss_before) / s, AT_REST_TARGET)]
        if self.rss_after_clients:
            out.append(("after clients", (self.rss_after_clients - self.rss_before) / s, AT_REST_TARGET))
            out.append(("peak in clients", (self.rss_peak_clients - self.rss_before) / s, PEAK_TARGET))
        return out


@dataclass
class Scenario:
    """Load ``count`` objects made by ``make`` into ``resource`` at ``path``, then run the clients."""

    name: str
    resource: str
    path: str
    count: int
    make: Callable[[int], bytes]
    namespace: str = ""


async def run_scenario(scenario: Scenario, server: ServerProcess, database: str, clients: int) -> Result:
    assert server.pid is not None
    pid = server.pid
    http = Http(server.base_url)
    started = time.perf_counter()
    if scenario.namespace:
        ns = orjson.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scenario.namespace}})
        await http.post("/api/v1/namespaces", ns)
    before = await settle(pid, 2.0)
    await create_all(http, scenario.path, (scenario.make(i) for i in range(scenario.count)))
    loaded = await settle(pid)
    # What the server says it holds; a server without that figure (an older checkout): the LIST's size.
    serialized = await cache_bytes(http, scenario.resource) or await http.list_size(scenario.path)
    result = Result(scenario.name, database, scenario.count, serialized, before, loaded)
    if clients:
        exact_peak = reset_peak(pid)
        with PeakSampler(pid) as sampler:

            async def client() -> asyncio.StreamWriter:
                await http.list_size(scenario.path)
                writer, _ = await http.watch_initial(scenario.path, scenario.count)
                return writer

            writers = await asyncio.gather(*(client() for _ in range(clients)))
        result.rss_peak_clients = max(peak_bytes(pid) if exact_peak else 0, sampler.peak)
        result.rss_after_clients = await settle(pid)
        for writer in writers:
            writer.close()
        if not exact_peak:
            result.notes.append("peak sampled every 20 ms (VmHWM could not be reset)")
    result.seconds = time.perf_counter() - started
    return result


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    out: list[Scenario] = []
    if args.slices:
        out.append(Scenario(f"{args.slices} slices x128", "resourceslices.resource.k8s.io", f"{GROUP}/resourceslices", args.slices, large_slice))
    if args.slices_large:
        out.append(
            Scenario(f"{args.slices_large} slices x128", "resourceslices.resource.k8s.io", f"{GROUP}/resourceslices", args.slices_large, large_slice)
        )
    if args.claims:
        ns = "bench-memory"
        out.append(
            Scenario(
                f"{args.claims} claims",
                "resourceclaims.resource.k8s.io",
                f"{GROUP}/namespaces/{ns}/resourceclaims",
                args.claims,
                lambda i: claim_bytes(f"claim-{i:06d}", ns, i),
                namespace=ns,
            )
        )
    return out


@contextlib.contextmanager
def databases(args: argparse.Namespace, tmp: Path) -> Iterator[list[tuple[str, Callable[[str], str]]]]:
    """(name, url for a scenario) for each database measured: a fresh database per scenario."""
    out: list[tuple[str, Callable[[str], str]]] = []
    if not args.postgres_only:
        out.append(("sqlite", lambda tag: f"sqlite+aiosqlite:///{tmp / (tag + '.sqlite')}"))
    if args.sqlite_only:
        yield out
        return
    from devtools.postgres import PostgresNotAvailable, ThrowawayPostgres, _execute, _run_coro, _with_database

    try:
        with ThrowawayPostgres(fast=True, database="dra_memory") as pg:

            def pg_url(tag: str) -> str:
                _run_coro(_execute(pg.dsn, f"CREATE DATABASE dra_memory_{tag}"))
                return _with_database(pg.url, f"dra_memory_{tag}")

            out.append(("postgres", pg_url))
            yield out
    except PostgresNotAvailable as exc:
        print(f"postgres: not measured ({exc})", file=sys.stderr)
        yield out


def worker_scenarios() -> list[Callable[..., Any]]:
    """The worker scenarios of bench/memory_workers.py, when that module exists."""
    try:
        from bench import memory_workers  # type: ignore[attr-defined]
    except ImportError:
        return []
    return list(memory_workers.scenarios())


def _call(scenario: Callable[..., Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    takes_args = bool(inspect.signature(scenario).parameters)
    outcome = scenario(args) if takes_args else scenario()
    if inspect.iscoroutine(outcome):
        outcome = asyncio.run(outcome)
    if outcome is None:
        return []
    return list(outcome) if isinstance(outcome, list) else [outcome]


# ----------------------------------------------------------------------------- report


def mb(value: float) -> str:
    return f"{value / 1e6:,.1f}"


def verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio <= target else "MISS"


def print_report(results: list[Result], extra: list[dict[str, Any]]) -> None:
    print()
    print(f"{'scenario':<24} {'db':<9} {'serialized MB':>13} {'RSS before':>10} {'loaded':>8} {'+clients':>9} {'peak':>8}  ratios (target)")
    for r in results:
        ratios = "  ".join(f"{what} {ratio:.2f}x (<= {target:g}x) {verdict(ratio, target)}" for what, ratio, target in r.ratios())
        print(
            f"{r.name:<24} {r.database:<9} {mb(r.serialized):>13} {mb(r.rss_before):>10} {mb(r.rss_loaded):>8} "
            f"{mb(r.rss_after_clients):>9} {mb(r.rss_peak_clients):>8}  {ratios}"
        )
        for note in r.notes:
            print(f"    note: {note}")
    for item in extra:
        if isinstance(item, dict) and "ratio" in item and "target" in item:
            # Either this module's names or the workers' (worker, cluster, watched_bytes, before, after, peak).
            name = item.get("name") or f"{item.get('worker', '?')} {item.get('cluster', '')}"
            serialized = item.get("serialized", item.get("watched_bytes", 0))
            before, after, peak = (item.get(k, item.get(alt, 0)) for k, alt in (("rss_before", "before"), ("rss_after", "after"), ("rss_peak", "peak")))
            print(
                f"{name:<24} {item.get('database', '-'):<9} {mb(serialized):>13} {mb(before):>10} {mb(after):>8} {'':>9} {mb(peak):>8}  "
                f"{item['ratio']:.2f}x (<= {item['target']:g}x) {verdict(item['ratio'], item['target'])}"
            )
        else:
            print(f"{item}")
    print("(MB = 10^6 bytes; ratios are RSS growth over the serialised size the server holds)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--slices", type=int, default=2000, help="ResourceSlices of 128 devices in the first scenario (0: skip)")
    p.add_argument("--slices-large", type=int, default=10000, help="ResourceSlices of 128 devices in the second scenario (0: skip)")
    p.add_argument("--claims", type=int, default=100_000, help="small ResourceClaims (0: skip)")
    p.add_argument("--clients", type=int, default=10, help="clients that each LIST and watch from resourceVersion 0 after the load")
    p.add_argument("--sqlite-only", action="store_true", help="skip Postgres")
    p.add_argument("--postgres-only", action="store_true", help="skip SQLite")
    p.add_argument("--no-workers", action="store_true", help="skip bench/memory_workers.py's scenarios")
    p.add_argument("--quick", action="store_true", help="small sizes for a run of a few minutes (500 slices, 2,000 large, 20,000 claims)")
    p.add_argument("--server-root", type=Path, default=ROOT, help="run the server from this checkout (e.g. main's, for a baseline)")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--server-arg", action="append", default=[], help="extra argument for `python -m app serve` (repeatable)")
    args = p.parse_args(argv)
    if args.quick:
        args.slices, args.slices_large, args.claims = min(args.slices, 500), min(args.slices_large, 2000), min(args.claims, 20_000)
    return args


async def _run_one(scenario: Scenario, url: str, database: str, tmp: Path, args: argparse.Namespace) -> Result:
    server = ServerProcess(url, tmp / f"server-{database}.log", ["--log-level", "warning", *args.server_arg], root=args.server_root)
    await asyncio.to_thread(server.start)
    try:
        return await run_scenario(scenario, server, database, args.clients)
    finally:
        await asyncio.to_thread(server.stop)


@reports_machine
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmpdir:
        tmp = Path(tmpdir)
        with databases(args, tmp) as dbs:
            for database, url_for in dbs:
                for index, scenario in enumerate(scenarios(args)):
                    url = url_for(f"s{index}")
                    result = asyncio.run(_run_one(scenario, url, database, tmp, args))
                    results.append(result)
                    print(f"{result.name} on {result.database}: done in {result.seconds:.0f}s", flush=True)
    extra: list[dict[str, Any]] = []
    if not args.no_workers:
        for worker in worker_scenarios():
            extra.extend(_call(worker, args))
    print_report(results, extra)
    if args.json:
        args.json.write_text(json.dumps({"results": [asdict(r) for r in results], "workers": extra}, indent=2, default=str))
    misses = [r for r in results for what, ratio, target in r.ratios() if ratio > target]
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
