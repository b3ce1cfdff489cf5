"""API benchmark: the DRA API server against raw database round trips, measured in one run.

Starts a throwaway Postgres (fsync on), migrates it, starts ``python -m app serve`` as a real
subprocess on 127.0.0.1 and measures, for each client concurrency, creates/s, updates/s,
GETs/s and LISTs (1,000 objects)/s of ResourceClaims, plus watch delivery latency with 100
watchers under a fixed write rate. The same documents go through the same driver (asyncpg,
or aiosqlite with ``--sqlite``) as single-row statements, and every server figure is printed
next to its raw figure with the ratio server/raw. Targets are reported PASS/MISS only.

Run ``python -m bench.api --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from bench.against_upstream import against_upstream
from bench.common import NS_CRUD, PhaseResult, _fmt, _merged
from bench.cpu import CpuMeter
from bench.machine import load_average, reports_machine
from bench.phases import Bench, Options
from bench.rawdb import _check_loopback, _database
from bench.serverprocess import ServerProcess
from bench.transport import close_all

# ----------------------------------------------------------------------------- authentication and authorization


# Who the auth phase sends requests as, besides nobody: a member of system:masters, and a user
# RBAC allows through a RoleBinding (among the default bindings every authenticated user has).
AUTH_USERS = {"admin": ("bench-admin-token", "bench-admin", "system:masters"), "rbac": ("bench-user-token", "bench-user", "")}
# Rounds of off, admin, rbac in turn, so that a change in the machine's other load weighs on every side alike.
AUTH_ROUNDS = 2


async def _grant_claim_reads(admin: Bench, user: str) -> None:
    """A Role that may get claims in the benchmark's namespace, bound to ``user``."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS_CRUD}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "bench-claim-reader"},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]}]}  # fmt: skip
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bench-claim-reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench-claim-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}  # fmt: skip
    (client,) = admin.clients(1)
    try:
        for path, body in ((f"{rbac}/roles", role), (f"{rbac}/rolebindings", binding)):
            status, text = await client.request("POST", path, orjson.dumps(body))
            if status not in (201, 409):
                raise RuntimeError(f"auth phase: POST {path} answered {status}: {text[:300]!r}")
    finally:
        await close_all([client])


def _cpu_per_request(result: PhaseResult) -> float | None:
    cores = result.cpu_cores.get("server")
    return cores * result.elapsed_s / result.ok if cores and result.ok else None


async def auth_cost(opts: Options, bench: Bench, db_url: str, tmp: Path, plain_pid: int | None, db_pid: int | None) -> dict[str, Any] | None:
    """The same GET load, on the same database, against a second server that authenticates bearer
    tokens and authorizes with Node,RBAC, as an admin (system:masters) and as a user a RoleBinding
    allows: server CPU per request of each against the same run's server without auth."""
    n = max(opts.clients)
    tokens = tmp / "tokens.csv"
    tokens.write_text("".join(f'{token},{user},{user}-uid' + (f',"{groups}"' if groups else "") + "\n" for token, user, groups in AUTH_USERS.values()))
    auth_server = ServerProcess(
        db_url, tmp / "server-auth.log", [*opts.server_args, "--authorization-mode", "Node,RBAC", "--token-auth-file", str(tokens)]
    )
    auth_server.start()
    try:
        sides: dict[str, Bench] = {"off": Bench(opts, bench.base_url, None, CpuMeter(plain_pid, db_pid))}
        for side, (token, _user, _groups) in AUTH_USERS.items():
            authed_opts = dataclasses.replace(opts, headers={**opts.headers, "Authorization": f"Bearer {token}"})
            sides[side] = Bench(authed_opts, auth_server.base_url, None, CpuMeter(auth_server.pid, db_pid))
        await _grant_claim_reads(sides["admin"], AUTH_USERS["rbac"][1])
        for side_bench in sides.values():
            side_bench.created = bench.created
        for _round in range(AUTH_ROUNDS):
            for side, side_bench in sides.items():
                print(f"  auth-{side}:", flush=True)
                await side_bench.server_get(n)
    finally:
        auth_server.stop()
    merged = {side: _merged(b.results, f"get/auth-{side}") for side, b in sides.items()}
    bench.results.extend(merged.values())
    figures: dict[str, Any] = {}
    cost_off = _cpu_per_request(merged["off"])
    figures["cpu_us_per_get_off"] = cost_off and cost_off * 1e6
    line = [f"  authn+authz: server CPU per GET {_fmt(cost_off and cost_off * 1e6, 0)} us off"]
    for side in AUTH_USERS:
        cost_on = _cpu_per_request(merged[side])
        share = (cost_on - cost_off) / cost_on if cost_off and cost_on else None
        figures[f"cpu_us_per_get_{side}"] = cost_on and cost_on * 1e6
        figures[f"auth_share_{side}"] = share
        line.append(f"{_fmt(cost_on and cost_on * 1e6, 0)} us as {side} ({_fmt(share and share * 100, 1)}% of the request, x{_fmt(cost_on / cost_off if cost_on and cost_off else None, 3)} of off)")
    print(", ".join(line), flush=True)
    return figures


# ----------------------------------------------------------------------------- report


def evaluate_targets(results: list[PhaseResult], watch: dict[str, Any] | None) -> list[dict[str, Any]]:
    """PASS/MISS of the published targets (informational only)."""
    by = {(r.phase, r.side, r.clients): r for r in results}
    out: list[dict[str, Any]] = []
    s16, r16 = by.get(("create", "server", 16)), by.get(("create", "raw", 16))
    if s16 and r16 and r16.rate > 0:
        ratio = s16.rate / r16.rate
        out.append(
            {
                "target": "creates/s at 16 clients >= 0.5x raw inserts",
                "value": round(ratio, 3),
                "status": "PASS" if ratio >= 0.5 else "MISS",
            }
        )
    else:
        out.append({"target": "creates/s at 16 clients >= 0.5x raw inserts", "value": None, "status": "n/a"})
    gets = [r for r in results if r.phase == "get" and r.side == "server"]
    if gets:
        best = max(gets, key=lambda r: r.rate)
        out.append(
            {
                "target": "GETs >= 5,000/s",
                "value": best.rate,
                "clients": best.clients,
                "status": "PASS" if best.rate >= 5000 else "MISS",
            }
        )
    else:
        out.append({"target": "GETs >= 5,000/s", "value": None, "status": "n/a"})
    name = "watch p99 < 50 ms at 500 writes/s"
    if watch and watch.get("p99_ms") is not None:
        p99 = float(watch["p99_ms"])
        complete = watch["events_received"] >= watch["events_expected"] > 0
        rate_ok = watch["achieved_rate"] >= 0.95 * 500
        status = "PASS" if p99 < 50 and complete and rate_ok else "MISS"
        note = []
        if not complete:
            note.append(f"{watch['events_expected'] - watch['events_received']} events missing")
        if not rate_ok:
            note.append(f"writer reached {watch['achieved_rate']}/s")
        out.append({"target": name, "value": p99, "status": status, "note": "; ".join(note)})
    else:
        out.append({"target": name, "value": None, "status": "n/a"})
    return out


PHASE_ORDER = ["create", "update", "get", "list", "get/auth-off", "get/auth-admin", "get/auth-rbac"]


def print_report(
    meta: dict[str, Any], results: list[PhaseResult], watch: dict[str, Any] | None, targets: list[dict[str, Any]]
) -> None:
    """Readable table of every figure."""
    print()
    print("=" * 118)
    print(f"DRA API benchmark  server: {meta['server']}")
    print(f"  database: {meta['database']}   raw baseline: {meta['raw_driver']}   http client: {meta['client']}")
    print(
        f"  machine: {meta['cpus']} CPUs, Python {meta['python']}; duration {meta['duration_s']} s/phase, "
        f"warmup {meta['warmup_s']} s; load average {meta.get('load_average_start')} -> {meta.get('load_average_end')}"
    )
    print("=" * 118)
    header = (
        f"{'phase':<8}{'clients':>8}{'server/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'raw/s':>11}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'srv/raw':>9}{'409s':>6}{'errors':>8}  cpu cores client/server/db/other"
    )
    print(header)
    print("-" * 118)
    by = {(r.phase, r.side, r.clients): r for r in results}
    keys = sorted(
        {(r.phase, r.clients) for r in results}, key=lambda k: (PHASE_ORDER.index(k[0]), k[1])
    )
    for phase, n in keys:
        s, r = by.get((phase, "server", n)), by.get((phase, "raw", n))
        ratio = s.rate / r.rate if s and r and r.rate else None
        cpu = s.cpu_cores if s else {}
        cpu_s = "/".join(_fmt(cpu.get(k), 2) for k in ("client", "server", "db", "other")) if s else "-"
        print(
            f"{phase:<8}{n:>8}{_fmt(s.rate if s else None):>11}{_fmt(s.p50_ms if s else None, 2):>9}"
            f"{_fmt(s.p99_ms if s else None, 2):>9}{_fmt(r.rate if r else None):>11}"
            f"{_fmt(r.p50_ms if r else None, 2):>9}{_fmt(r.p99_ms if r else None, 2):>9}"
            f"{_fmt(ratio, 3):>9}{(s.conflicts if s else 0):>6}{(sum(s.errors.values()) if s else 0):>8}  {cpu_s}"
        )
    print("-" * 118)
    print("  create = POST ResourceClaim vs raw INSERT; update = PUT with resourceVersion vs raw UPDATE by id;")
    returned = sorted({str(r.extra.get("objects_per_list")) for r in results if r.phase == "list" and r.side == "server"})
    print(f"  get = GET one claim vs raw SELECT by name; list = LIST of {' or '.join(returned) or '-'} claims (as returned) vs raw SELECT of the same rows.")
    if watch:
        print(
            f"watch: {watch['watchers']} watchers, writer {watch.get('achieved_rate')}/s "
            f"(target {watch['target_rate']}/s, {watch.get('writes_ok')} writes, errors {watch.get('write_errors')})"
            f"; events {watch.get('events_received')}/{watch.get('events_expected')}; latency write-response -> "
            f"event p50 {watch.get('p50_ms')} ms, p90 {watch.get('p90_ms')} ms, p99 {watch.get('p99_ms')} ms, "
            f"max {watch.get('max_ms')} ms; cpu {watch.get('cpu_cores')}"
        )
        if watch.get("watch_errors") or watch.get("stream_errors"):
            print(f"  watch problems: {watch.get('watch_errors')} {watch.get('stream_errors')}")
    others = [r.cpu_cores.get("other") or 0.0 for r in results] + [
        float((watch or {}).get("cpu_cores", {}).get("other") or 0)
    ]
    if max(others, default=0.0) > 0.3:
        print(f"  WARNING: other processes used up to {max(others):.2f} cores during a phase; figures are noisy.")
    print("targets (informational, never fail the run):")
    for t in targets:
        extra = f" (at {t['clients']} clients)" if "clients" in t else ""
        note = f" - {t['note']}" if t.get("note") else ""
        print(f"  [{t['status']:>4}] {t['target']}: {t['value']}{extra}{note}")
    for n in meta.get("notes", []):
        print(f"  note: {n}")


# ----------------------------------------------------------------------------- orchestration




async def run(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Run the whole benchmark; returns the JSON document."""
    with (
        tempfile.TemporaryDirectory(prefix="dra-bench-") as tmpdir,
        _database(args, Path(tmpdir)) as (
            db_url,
            raw,
            db_pid,
        ),
    ):
        server: ServerProcess | None = None
        if args.server_url:
            _check_loopback(args.server_url, "--server-url")
            base_url = args.server_url.rstrip("/")
            server_desc = f"{base_url} (already running)"
        else:
            assert db_url is not None
            server = ServerProcess(db_url, Path(tmpdir) / "server.log", opts.server_args)
            server_desc = "python " + " ".join(server.command()[1:])
            print(f"starting: {server_desc}", flush=True)
            server.start()
            base_url = server.base_url
        db_desc: dict[str, str] = {}
        if raw is not None:
            db_desc = await raw.describe()
        meta: dict[str, Any] = {
            "server": server_desc,
            "database": ("sqlite " if args.sqlite else "postgres ") + " ".join(f"{k}={v}" for k, v in db_desc.items())
            if db_desc
            else "unknown (no --database-url)",
            "raw_driver": raw.driver if raw else "none",
            "client": {
                "raw": "raw asyncio streams, HTTP/1.1 keep-alive, one connection per client",
                "httpx": "httpx.AsyncClient, HTTP/1.1 keep-alive pool sized to the clients",
            }[opts.client_kind]
            + f" ({type(asyncio.get_running_loop()).__module__.split('.')[0]} event loop)",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "duration_s": opts.duration,
            "warmup_s": opts.warmup,
            "clients": opts.clients,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_start": load_average(),
        }
        bench = Bench(opts, base_url, raw, CpuMeter(server.pid if server else None, db_pid))
        watch: dict[str, Any] | None = None
        try:
            await bench.ensure_namespaces()
            if "list" in opts.phases:
                await bench.prepare_list()
            for n in opts.clients:
                print(f"-- {n} client(s)", flush=True)
                if raw is not None and "raw" in opts.phases:
                    await bench.raw_phases(n)
                if "create" in opts.phases:
                    await bench.server_create(n)
                if "update" in opts.phases:
                    await bench.server_update(n)
                if "get" in opts.phases:
                    await bench.server_get(n)
                if "list" in opts.phases:
                    await bench.server_list(n)
            if "watch" in opts.phases:
                print("-- watch", flush=True)
                watch = await bench.watch_latency()
            if "auth" in opts.phases and server is not None and db_url is not None:
                print("-- authentication and authorization", flush=True)
                auth = await auth_cost(opts, bench, db_url, Path(tmpdir), server.pid, db_pid)
                if auth is not None:
                    meta["auth"] = auth
        finally:
            if raw is not None:
                await raw.drop()
            if server is not None:
                if server.proc is not None and server.proc.poll() is not None:
                    bench.notes.append(f"server exited early; log tail:\n{server.log_tail()}")
                server.stop()
        meta["notes"] = bench.notes
        meta["failures"] = bench.failures
        meta["load_average_end"] = load_average()
        targets = evaluate_targets(bench.results, watch)
        print_report(meta, bench.results, watch, targets)
        return {"meta": meta, "results": [asdict(r) for r in bench.results], "watch": watch, "targets": targets}


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Options]:
    """Command line."""
    ap = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,16,64", help="comma-separated client concurrencies (default 1,16,64)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per measured phase (default 5)")
    ap.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each phase (default 0.5)")
    ap.add_argument("--list-size", type=int, default=1000, help="objects per LIST (default 1000)")
    ap.add_argument("--watchers", type=int, default=100, help="concurrent watchers (default 100)")
    ap.add_argument("--watch-rate", type=float, default=500.0, help="writes/s during the watch phase (default 500)")
    ap.add_argument("--watch-duration", type=float, default=None, help="seconds of writes (default --duration)")
    ap.add_argument(
        "--client",
        dest="client_kind",
        choices=["raw", "httpx"],
        default="raw",
        help="HTTP client: raw asyncio streams (default; cheapest on 2 cores) or httpx",
    )
    ap.add_argument(
        "--phases", default="raw,create,update,get,list,watch,auth", help="subset of raw,create,update,get,list,watch,auth (auth: GET with auth on vs off)"
    )
    ap.add_argument("--database-url", default=None, help="use this Postgres (127.0.0.1) instead of a throwaway one")
    ap.add_argument("--sqlite", action="store_true", help="run against the embedded SQLite backend")
    ap.add_argument("--server-url", default=None, help="benchmark an already running server (http://127.0.0.1:PORT)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for `app serve` (repeatable)")
    ap.add_argument(
        "--no-uvloop", dest="uvloop", action="store_false", help="use asyncio's own event loop in the client"
    )
    ap.add_argument("--token", default=None, help="bearer token sent with every request")
    ap.add_argument("--json", dest="json_path", default=None, help="write all figures to this JSON file")
    ap.add_argument(
        "--against-upstream",
        action="store_true",
        help="the create,update,get,list phases against upstream's kube-apiserver + etcd and against this server, "
        "both over HTTPS with client certificates, side by side (needs make upstream)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="--against-upstream: rounds, the sides' order alternating (default 1)")
    ap.add_argument(
        "--protobuf", action="store_true", help="claims sent and read as Kubernetes protobuf instead of JSON (no watch phase)"
    )
    ap.add_argument("--settle", type=float, default=10.0, help="--against-upstream: idle seconds after a server starts (default 10)")
    args = ap.parse_args(argv)
    if args.sqlite and args.database_url:
        ap.error("--sqlite and --database-url are exclusive")
    if args.against_upstream and (args.server_url or args.database_url or args.token):
        ap.error("--against-upstream starts both servers itself: no --server-url, --database-url or --token")
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds must be between 1 and 100")
    try:
        clients = [int(x) for x in args.clients.split(",") if x.strip()]
    except ValueError:
        ap.error("--clients expects integers like 1,16,64")
    if not clients or min(clients) < 1 or max(clients) > 1000:
        ap.error("--clients must be between 1 and 1000")
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    unknown = phases - {"raw", "create", "update", "get", "list", "watch", "auth"}
    if unknown:
        ap.error(f"unknown phases: {sorted(unknown)}")
    if args.protobuf:
        phases.discard("watch")  # the watchers read JSON lines
    if args.duration <= 0 or args.duration > 3600 or args.watch_rate <= 0 or not 0 < args.watchers <= 10_000:
        ap.error("duration must be in (0, 3600], watch-rate > 0, watchers in 1..10000")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    opts = Options(
        clients=clients,
        duration=args.duration,
        warmup=max(0.0, args.warmup),
        list_size=args.list_size,
        watchers=args.watchers,
        watch_rate=args.watch_rate,
        watch_duration=args.watch_duration or args.duration,
        client_kind=args.client_kind,
        phases=phases,
        headers=headers,
        server_args=args.server_arg,
        protobuf=args.protobuf,
    )
    return args, opts


def _loop_factory(use_uvloop: bool) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when wanted and installed (the server uses it too), else asyncio's default."""
    if not use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


@reports_machine
def main(argv: list[str] | None = None) -> int:
    """Entry point: run, print, optionally write JSON. Exit status ignores target misses."""
    args, opts = parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(args.uvloop)) as runner:
            doc = runner.run(against_upstream(args, opts) if args.against_upstream else run(args, opts))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json_path:
        Path(args.json_path).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        print(f"figures written to {args.json_path}")
    if doc["meta"].get("failures"):
        print("error: figures that do not measure what they say:\n  " + "\n  ".join(doc["meta"]["failures"]), file=sys.stderr)
        return 1
    # A side that served none of a phase's requests is a broken comparison, not a slow one.
    failed = [f"{r['phase']} at {r['clients']}" for r in doc.get("rows", []) if not (r["upstream_per_s"] and r["this_per_s"])]
    if failed:
        print(f"error: a side served no requests in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
