"""``python -m bench.api --against-upstream``: this server's figures beside upstream's
kube-apiserver + etcd, each started fresh per round."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import ssl
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import JSON, PROTOBUF, PhaseResult, _fmt, _merged
from bench.cpu import CpuMeter
from bench.machine import load_average
from bench.phases import Bench, Options
from bench.rawdb import _database

# ----------------------------------------------------------------------------- against upstream

# --against-upstream: these phases against upstream's kube-apiserver + etcd and against this server
# + its database, each started fresh per round, both over HTTPS as the admin (a client certificate
# in system:masters) with Node,RBAC on, so transport, authentication and authorization cost alike.
UPSTREAM_PHASES = ("create", "update", "get", "list")
SIDES = ("upstream", "this")

# (base URL, client TLS context, server pid, database pid, description)
SideStack = tuple[str, ssl.SSLContext, int | None, int | None, str]


@contextlib.contextmanager
def _upstream_stack(directory: Path) -> Iterator[SideStack]:
    """kube-apiserver on etcd; etcd syncs its writes as Postgres does here (fsync on)."""
    from devtools.upstream import ETCD_VERSION, KUBERNETES_VERSION, UpstreamControlPlane

    with UpstreamControlPlane(directory, workers=False, etcd_fsync=True) as plane:
        assert plane.apiserver is not None and plane.etcd is not None
        context = plane.credentials.httpx_options("admin")["verify"]
        assert isinstance(context, ssl.SSLContext)
        desc = f"kube-apiserver {KUBERNETES_VERSION} + etcd {ETCD_VERSION} (fsync on)"
        yield plane.url, context, plane.apiserver.process.pid, plane.etcd.process.pid, desc


@contextlib.contextmanager
def _this_stack(directory: Path, args: argparse.Namespace, server_args: list[str]) -> Iterator[SideStack]:
    """``python -m app serve`` with the same kind of credentials, on a throwaway Postgres (fsync on) or SQLite."""
    from devtools.credentials import ClusterCredentials
    from devtools.server import ServerProcess as SecureServer
    from devtools.server import migrate

    credentials = ClusterCredentials.ensure(directory / "pki")
    context = credentials.httpx_options("admin")["verify"]
    assert isinstance(context, ssl.SSLContext)
    with _database(args, directory) as (db_url, _raw, db_pid):
        assert db_url is not None
        migrate(db_url)
        server = SecureServer(db_url, *server_args, log_path=directory / "server.log", credentials=credentials)
        with server:
            assert server.process is not None
            desc = "this server + " + ("SQLite (in process)" if args.sqlite else "Postgres (fsync on)")
            yield server.url, context, server.process.pid, db_pid, desc


def _cpu_us_per_request(result: PhaseResult) -> float | None:
    """Server + database CPU per successful request, in µs: both sides pay for their storage."""
    cores = [result.cpu_cores.get(k) for k in ("server", "db")]
    if cores[0] is None or not result.ok:
        return None
    return sum(c or 0.0 for c in cores) * result.elapsed_s / result.ok * 1e6


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


async def against_upstream(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Every phase at every concurrency on both stacks, ``--rounds`` times with the order of the
    sides alternating; returns the JSON document and prints this server's figures beside upstream's."""
    phases = [p for p in UPSTREAM_PHASES if p in opts.phases]
    runs: dict[str, list[PhaseResult]] = {side: [] for side in SIDES}
    descriptions: dict[str, str] = {}
    notes: list[str] = []
    failures: list[str] = []
    meta: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average_start": load_average(),
                            "cpus": os.cpu_count(), "duration_s": opts.duration, "rounds": args.rounds, "clients": opts.clients,
                            "media_type": PROTOBUF if opts.protobuf else JSON}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dra-bench-upstream-") as tmpdir:
        for round_ in range(args.rounds):
            for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
                directory = Path(tmpdir) / f"{side}-{round_}"
                directory.mkdir()
                stack = _upstream_stack(directory) if side == "upstream" else _this_stack(directory, args, opts.server_args)
                with stack as (url, context, server_pid, db_pid, desc):
                    descriptions[side] = desc
                    print(f"-- round {round_ + 1}: {desc} at {url}", flush=True)
                    # kube-apiserver keeps busy for a while after /readyz (post-start hooks, bootstrap
                    # policy, API discovery): both sides get the same idle time before the clock runs.
                    await asyncio.sleep(args.settle)
                    bench = Bench(dataclasses.replace(opts, ssl_context=context), url, None, CpuMeter(server_pid, db_pid))
                    await bench.ensure_namespaces()
                    if "list" in phases:
                        await bench.prepare_list()
                    steps = {"create": bench.server_create, "update": bench.server_update, "get": bench.server_get, "list": bench.server_list}
                    for n in opts.clients:
                        for phase in phases:
                            await steps[phase](n)
                    runs[side] += bench.results
                    notes += [f"{side}: {note}" for note in bench.notes]
                    failures += [f"{side}: {failure}" for failure in bench.failures]
    meta.update(sides=descriptions, notes=notes, failures=failures, load_average_end=load_average())
    rows: list[dict[str, Any]] = []
    for n in opts.clients:
        for phase in phases:
            merged = {side: _merged([r for r in runs[side] if r.phase == phase and r.clients == n], phase) for side in SIDES}
            cpu = {side: _cpu_us_per_request(merged[side]) for side in SIDES}
            rows.append({
                "phase": phase, "clients": n,
                **{f"{side}_per_s": merged[side].rate for side in SIDES},
                **{f"{side}_cpu_us": None if (us := cpu[side]) is None else round(us, 1) for side in SIDES},
                **{f"{side}_p99_ms": merged[side].p99_ms for side in SIDES},
                **{f"{side}_errors": sum(merged[side].errors.values()) + merged[side].conflicts for side in SIDES},
                "rate_ratio": _ratio(merged["this"].rate, merged["upstream"].rate),
                "cpu_ratio": _ratio(cpu["this"], cpu["upstream"]),
                "other_cores": max(merged[side].cpu_cores.get("other") or 0.0 for side in SIDES),
            })  # fmt: skip
    print_side_by_side(meta, rows)
    return {"meta": meta, "rows": rows, "results": {side: [asdict(r) for r in runs[side]] for side in SIDES}}


def print_side_by_side(meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The comparison table: this server's rate and CPU per request beside upstream's."""
    print()
    print("=" * 118)
    print(f"this server beside upstream, one run: {meta['sides'].get('this')}  vs  {meta['sides'].get('upstream')}")
    print(f"  HTTPS with the admin's client certificate, Node,RBAC, {meta['media_type']} on both; {meta['rounds']} round(s) of "
          f"{meta['duration_s']} s per phase; load average {meta['load_average_start']} -> {meta['load_average_end']}")  # fmt: skip
    print("  CPU per request = the server's and its storage's processes (upstream: kube-apiserver + etcd)")
    print("=" * 118)
    print(f"{'phase':<8}{'clients':>8}{'upstream/s':>12}{'this/s':>10}{'this÷up':>9}{'up µs/req':>11}{'this µs/req':>13}"
          f"{'this÷up':>9}{'p99 ms up/this':>18}{'errors up/this':>16}")  # fmt: skip
    print("-" * 118)
    for r in rows:
        p99 = f"{_fmt(r['upstream_p99_ms'], 1)}/{_fmt(r['this_p99_ms'], 1)}"
        print(
            f"{r['phase']:<8}{r['clients']:>8}{_fmt(r['upstream_per_s']):>12}{_fmt(r['this_per_s']):>10}{_fmt(r['rate_ratio'], 2):>9}"
            f"{_fmt(r['upstream_cpu_us'], 0):>11}{_fmt(r['this_cpu_us'], 0):>13}{_fmt(r['cpu_ratio'], 2):>9}{p99:>18}"
            f"{str(r['upstream_errors']) + '/' + str(r['this_errors']):>16}"
        )
    print("-" * 118)
    others = max((r["other_cores"] for r in rows), default=0.0)
    if others > 0.3:
        print(f"  WARNING: other processes used up to {others:.2f} cores during a phase (loaded machine); figures are noisy.")
    for note in meta["notes"]:
        print(f"  note: {note}")
