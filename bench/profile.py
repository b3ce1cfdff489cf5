"""Where the API server's CPU goes, per request: create, update (status), GET, LIST and watch fan-out.

Starts the same throwaway Postgres and ``python -m app serve`` subprocess as ``bench.api`` (its
pieces, not a copy), but the server runs under a switchable cProfile. Each phase runs twice with
the same load: first unprofiled, to measure the server's CPU per request from /proc (the true
cost), then profiled, to split that cost by module and function. The profiler's own overhead
inflates every Python call alike, so the split is reported as shares of the profiled time, scaled
to the unprofiled microseconds per request.

``--ab-rounds N`` measures instead, in N alternating rounds against one database, a server on the
modules' Python source (``DRA_PURE_PYTHON=1``) and one on the compiled modules, phase by phase,
and prints each figure of the two side by side (median over the rounds).

Run ``python -m bench.profile --help``; see bench/README.md ("Server CPU profile").
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from bench.api import _cpu_per_request, _loop_factory
from bench.common import ROOT
from bench.cpu import CpuMeter
from bench.machine import reports_machine
from bench.phases import Bench, Options
from bench.rawdb import _database
from bench.serverprocess import ServerProcess
from bench.transport import close_all
from kube.compiled import PURE_ENV

PHASES = ("create", "update", "get", "list", "watch")
SERVE_FLAG = "--serve-profiled"
# The server process: where dumps go, and the signals that start and stop one profile.
DUMP_DIR_ENV = "DRA_PROFILE_DIR"
START_SIGNAL = signal.SIGUSR1
STOP_SIGNAL = signal.SIGUSR2


# ----------------------------------------------------------------------------- inside the server


def serve_profiled(argv: list[str]) -> int:
    """``app serve`` with a profiler SIGUSR1 starts and SIGUSR2 stops (dumping N.pstats, N = 1, 2, ...)."""
    out = Path(os.environ[DUMP_DIR_ENV])
    state: dict[str, Any] = {"prof": None, "seq": 0}

    def start(_sig: int, _frame: Any) -> None:
        prof = cProfile.Profile()
        state["prof"] = prof
        prof.enable()

    def stop(_sig: int, _frame: Any) -> None:
        prof = state["prof"]
        if prof is None:
            return
        prof.disable()
        state["prof"] = None
        state["seq"] += 1
        tmp = out / f"{state['seq']}.tmp"
        prof.dump_stats(str(tmp))
        tmp.rename(out / f"{state['seq']}.pstats")

    signal.signal(START_SIGNAL, start)
    signal.signal(STOP_SIGNAL, stop)
    from app.__main__ import main as app_main

    return app_main(argv)


class ProfiledServer(ServerProcess):
    """``bench.api``'s server subprocess, started through :func:`serve_profiled`."""

    def __init__(self, database_url: str, tmp: Path, extra_args: list[str]) -> None:
        super().__init__(database_url, tmp / "server.log", extra_args)
        self.dump_dir = tmp / "pstats"
        self.dump_dir.mkdir()
        os.environ[DUMP_DIR_ENV] = str(self.dump_dir)
        self.dumps = 0

    def command(self) -> list[str]:
        """``python -m bench.profile --serve-profiled serve ...`` instead of ``python -m app serve ...``."""
        base = super().command()
        return [base[0], "-m", "bench.profile", SERVE_FLAG, *base[3:]]

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the server process (not its group)."""
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    async def collect(self, timeout: float = 60.0) -> pstats.Stats:
        """Stop the running profile and load its dump."""
        self.signal(STOP_SIGNAL)
        self.dumps += 1
        path = self.dump_dir / f"{self.dumps}.pstats"
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no profile dump {path} after {timeout}s; log:\n{self.log_tail()}")
            await asyncio.sleep(0.05)
        return pstats.Stats(str(path))


# ----------------------------------------------------------------------------- attribution


def area(filename: str, func: str) -> str:
    """A readable owner for a profiled function: project module, third-party package or builtin."""
    if filename == "~":
        # C functions: "<built-in method orjson.dumps>", "<method 'execute' of ... objects>".
        name = func.strip("<>")
        for prefix in ("built-in method ", "built-in function ", "method "):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        return "C: " + name.split(" of ")[-1].strip("'") if " of " in name else "C: " + name
    path = Path(filename)
    try:
        rel = path.resolve().relative_to(ROOT)
        return ".".join(rel.with_suffix("").parts)
    except ValueError:
        pass
    parts = path.parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if "python3" in "".join(parts):
        return "stdlib: " + path.stem
    return path.stem


def split(stats: pstats.Stats, requests: int) -> tuple[dict[str, float], list[tuple[str, float, float]], float]:
    """(exclusive profiled seconds per area, top functions as (name, own s, cumulative s), total seconds)."""
    by_area: dict[str, float] = defaultdict(float)
    funcs: list[tuple[str, float, float]] = []
    total = 0.0
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, func), (_cc, _nc, tt, ct, _callers) in raw.items():
        total += tt
        owner = area(filename, func)
        by_area[owner] += tt
        funcs.append((f"{owner}:{func}" + (f":{line}" if line else ""), tt, ct))
    funcs.sort(key=lambda f: -f[1])
    return dict(by_area), funcs, total


# ----------------------------------------------------------------------------- the run


async def measured(bench: Bench, phase: str, n: int) -> tuple[int, float, float | None]:
    """Run one phase; (requests, seconds, server CPU µs per request from /proc)."""
    ok, elapsed, us, _p99 = await measured_p99(bench, phase, n)
    return ok, elapsed, us


async def measured_p99(bench: Bench, phase: str, n: int) -> tuple[int, float, float | None, float | None]:
    """Run one phase; (requests, seconds, server CPU µs per request, p99 ms: of the requests, or of
    the events' delivery for a watch)."""
    if phase == "watch":
        w = await bench.watch_latency()
        cores = (w.get("cpu_cores") or {}).get("server")
        ok = int(w.get("writes_ok") or 0)
        elapsed = bench.o.watch_duration
        return ok, elapsed, (cores * elapsed / ok * 1e6 if cores and ok else None), w.get("p99_ms")
    run: dict[str, Callable[[int], Awaitable[None]]] = {
        "create": bench.server_create,
        "update": bench.server_update,
        "get": bench.server_get,
        "list": bench.server_list,
    }
    await run[phase](n)
    res = bench.results[-1]
    cpu = _cpu_per_request(res)
    return res.ok, res.elapsed_s, (cpu * 1e6 if cpu else None), res.p99_ms


async def profile_run(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Start database and server, run each phase unprofiled then profiled, return the figures."""
    report: dict[str, Any] = {"clients": opts.clients[0], "duration_s": opts.duration, "phases": {}}
    with tempfile.TemporaryDirectory(prefix="dra-profile-") as tmpdir, _database(args, Path(tmpdir)) as (db_url, _raw, db_pid):
        assert db_url is not None
        server = ProfiledServer(db_url, Path(tmpdir), opts.server_args)
        print("starting: python " + " ".join(server.command()[1:]), flush=True)
        server.start()
        try:
            bench = Bench(opts, server.base_url, None, CpuMeter(server.pid, db_pid))
            await bench.ensure_namespaces()
            if "list" in opts.phases:
                await bench.prepare_list()
            n = opts.clients[0]
            for phase in PHASES:
                if phase not in opts.phases:
                    continue
                print(f"-- {phase}: unprofiled", flush=True)
                ok, elapsed, us = await measured(bench, phase, n)
                print(f"-- {phase}: profiled", flush=True)
                server.signal(START_SIGNAL)
                await wake(bench)
                p_ok, _p_elapsed, p_us = await measured(bench, phase, n)
                stats = await server.collect()
                by_area, funcs, total = split(stats, p_ok)
                report["phases"][phase] = {
                    "requests": ok,
                    "rate": round(ok / elapsed, 1) if elapsed else None,
                    "server_cpu_us": us and round(us, 1),
                    "profiled_requests": p_ok,
                    "profiled_cpu_us": p_us and round(p_us, 1),
                    "profiled_seconds": round(total, 4),
                    "areas": {k: v / total for k, v in sorted(by_area.items(), key=lambda kv: -kv[1]) if total},
                    "functions": [(name, tt / total, ct / total) for name, tt, ct in funcs[: max(args.top * 4, 100)] if total],
                }
        finally:
            server.stop()
    return report


async def ab_run(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Alternate a pure-Python server and a compiled one on one database; every phase's figures per side."""
    sides = {"pure": "1", "compiled": "0"}
    rounds: dict[str, dict[str, list[dict[str, Any]]]] = {side: defaultdict(list) for side in sides}
    with tempfile.TemporaryDirectory(prefix="dra-profile-") as tmpdir, _database(args, Path(tmpdir)) as (db_url, _raw, db_pid):
        assert db_url is not None
        prepared = False
        for r in range(args.ab_rounds):
            for side, flag in sides.items():
                os.environ[PURE_ENV] = flag
                server = ServerProcess(db_url, Path(tmpdir) / f"server-{side}.log", opts.server_args)
                try:
                    server.start()
                finally:
                    os.environ.pop(PURE_ENV, None)
                try:
                    bench = Bench(opts, server.base_url, None, CpuMeter(server.pid, db_pid))
                    if not prepared:
                        await bench.ensure_namespaces()
                        if "list" in opts.phases:
                            await bench.prepare_list()
                        prepared = True
                    for phase in PHASES:
                        if phase in opts.phases:
                            print(f"-- round {r + 1}, {side}: {phase}", flush=True)
                            ok, elapsed, us, p99 = await measured_p99(bench, phase, opts.clients[0])
                            rounds[side][phase].append({"rate": ok / elapsed if elapsed else None, "cpu_us": us, "p99_ms": p99})
                    # The server loads every claim into its watch cache at start: its RSS after the phases.
                    rounds[side]["rss"].append({"rate": None, "cpu_us": None, "p99_ms": None, "rss_mib": _rss_mib(server.pid)})
                finally:
                    server.stop()
    return {"clients": opts.clients[0], "duration_s": opts.duration, "rounds": args.ab_rounds,
            "sides": {side: dict(phases) for side, phases in rounds.items()}}


def _rss_mib(pid: int | None) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def _median(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    mid = len(known) // 2
    return known[mid] if len(known) % 2 else (known[mid - 1] + known[mid]) / 2


def print_ab(report: dict[str, Any]) -> None:
    """Pure vs compiled, per phase: medians over the rounds."""
    print()
    print(f"Pure Python vs compiled at {report['clients']} client(s), median of {report['rounds']} alternating round(s)")
    print()
    print("| phase | server CPU µs/request pure | compiled | ratio | requests/s pure | compiled | p99 ms pure | compiled |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    pure, comp = report["sides"]["pure"], report["sides"]["compiled"]
    for phase in PHASES:
        if phase not in pure:
            continue
        fig = {side: {k: _median([r[k] for r in data[phase]]) for k in ("rate", "cpu_us", "p99_ms")} for side, data in (("p", pure), ("c", comp))}
        ratio = fig["c"]["cpu_us"] / fig["p"]["cpu_us"] if fig["c"]["cpu_us"] and fig["p"]["cpu_us"] else None
        print(f"| {phase} | {_f(fig['p']['cpu_us'])} | {_f(fig['c']['cpu_us'])} | {'-' if ratio is None else f'{ratio:.2f}'} "
              f"| {_f(fig['p']['rate'])} | {_f(fig['c']['rate'])} | {_f1(fig['p']['p99_ms'])} | {_f1(fig['c']['p99_ms'])} |")
    rss = {side: _median([r["rss_mib"] for r in data.get("rss", [])]) for side, data in (("p", pure), ("c", comp))}
    print(f"\nserver RSS after the phases (same objects stored): pure {_f1(rss['p'])} MiB, compiled {_f1(rss['c'])} MiB")


def _f1(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


async def wake(bench: Bench) -> None:
    """One request, so an idle event loop runs the signal handler before the clock starts."""
    [c] = bench.clients(1)
    try:
        await c.request("GET", "/readyz")
    finally:
        await close_all([c])


def print_tables(report: dict[str, Any], top: int) -> None:
    """Per phase: µs per request, then the areas and functions that take them."""
    print()
    print(f"Server CPU per request at {report['clients']} client(s) (µs from /proc, unprofiled run; split from the profiled run)")
    for phase, p in report["phases"].items():
        us = p["server_cpu_us"]
        print()
        print(f"## {phase}: {p['rate']}/s, {_f(us)} µs server CPU per request ({_f(p['profiled_cpu_us'])} µs under the profiler)")
        print()
        print("| area | share | µs/request |")
        print("|---|---:|---:|")
        for name, share in list(p["areas"].items())[:top]:
            print(f"| {name} | {share * 100:.1f}% | {_f(us and us * share)} |")
        print()
        print("| function (own time) | share | µs/request | incl. callees |")
        print("|---|---:|---:|---:|")
        for name, own, cum in p["functions"][:top]:
            print(f"| {name} | {own * 100:.1f}% | {_f(us and us * own)} | {_f(us and us * cum)} |")


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Options]:
    """Command line."""
    ap = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=16, help="client concurrency (default 16)")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per phase and run (default 3)")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"subset of {','.join(PHASES)}")
    ap.add_argument("--list-size", type=int, default=1000, help="objects per LIST (default 1000)")
    ap.add_argument("--watchers", type=int, default=100, help="watchers in the watch phase (default 100)")
    ap.add_argument("--watch-rate", type=float, default=200.0, help="creates/s in the watch phase (default 200)")
    ap.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    ap.add_argument("--sqlite", action="store_true", help="the embedded SQLite backend instead of a throwaway Postgres")
    ap.add_argument("--database-url", default=None, help="an existing Postgres on 127.0.0.1 instead of a throwaway one")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for `app serve` (repeatable)")
    ap.add_argument("--ab-rounds", type=int, default=0, help="instead of profiling: N alternating rounds of a pure-Python and a compiled server")
    ap.add_argument("--json", dest="json_path", default=None, help="write every figure (and the top functions) to this file")
    args = ap.parse_args(argv)
    args.server_url = None  # bench.api's _database: always a database of our own
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    if phases - set(PHASES):
        ap.error(f"unknown phases: {sorted(phases - set(PHASES))}")
    if not 1 <= args.clients <= 1000 or not 0 < args.duration <= 600:
        ap.error("--clients must be in 1..1000 and --duration in (0, 600]")
    opts = Options(
        clients=[args.clients],
        duration=args.duration,
        warmup=0.5,
        list_size=args.list_size,
        watchers=args.watchers,
        watch_rate=args.watch_rate,
        watch_duration=args.duration,
        client_kind="raw",
        phases=phases,
        headers={},
        server_args=args.server_arg,
    )
    return args, opts


@reports_machine
def main(argv: list[str] | None = None) -> int:
    """Entry point (also the profiled server's, with ``--serve-profiled``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [SERVE_FLAG]:
        return serve_profiled(argv[1:])
    args, opts = parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(True)) as runner:
            report = runner.run(ab_run(args, opts) if args.ab_rounds > 0 else profile_run(args, opts))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.ab_rounds > 0:
        print_ab(report)
    else:
        print_tables(report, args.top)
    if args.json_path:
        Path(args.json_path).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        print(f"\nfigures written to {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
