"""The API server's start on a fresh SQLite database: seconds from launch to a passing ``/readyz``,
the bootstrap's share of them, and the group commits the start took, quiet and beside a busy
neighbour this benchmark starts itself, in one run.

    python -m bench.startup [--rounds 3] [--baseline DIR] [--json]

Each start is ``python -m app serve`` on a new, empty database file (the server creates its schema,
then writes the objects every cluster starts with). *ready* is launch to the first 200 from
``/readyz``; *bootstrap* is, from the server's log, the storage loaded to the application's start
complete (the bootstrap objects, as ``app/server.py`` writes them); *commits* is
``apiserver_storage_group_commits`` at ready. The busy phase runs beside ``bench.neighbour``: eight
processes a core working in short bursts (as a test suite's servers and clients do) and a disk
writer in the same temp directory as the databases. Each figure is the median of ``--rounds``
starts; the ratios busy / quiet come from the same run.

``--baseline DIR`` starts another checkout's server (e.g. ``/work/main``, with this interpreter)
alternately with this one's in both phases, for before/after ratios from the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT
from bench.machine import load_average, reports_machine
from bench.neighbour import Neighbour
from bench.serverprocess import ServerProcess

COMMITS = re.compile(r"^apiserver_storage_group_commits (\S+)$", re.MULTILINE)
# The server's log lines that bound the bootstrap (uvicorn's own line says the start is complete).
LOADED = '"logger":"app.storage","msg":"loaded '
COMPLETE = '"msg":"Application startup complete."'
READY_TIMEOUT = 600.0


def _timestamp(log: str, marker: str) -> float | None:
    for line in log.splitlines():
        if marker in line:
            return datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
    return None


def start_once(root: Path, tmp: Path) -> dict[str, float]:
    """One start of ``root``'s server on a new database in ``tmp``: its figures."""
    server = ServerProcess(f"sqlite:///{tmp / 'dra.sqlite'}", tmp / "server.log", [], root=root)
    started = time.monotonic()
    server.launch()
    try:
        server.wait_ready(READY_TIMEOUT, poll=0.02)
        ready = time.monotonic() - started
        commits = COMMITS.search(httpx.get(server.base_url + "/metrics", timeout=30).text)
    finally:
        server.stop()
    log = server.log_tail(limit=1_000_000)
    loaded, complete = _timestamp(log, LOADED), _timestamp(log, COMPLETE)
    if commits is None or loaded is None or complete is None:
        raise RuntimeError(f"the server's metrics or log lack what is measured; log {server.log_path}:\n{server.log_tail()}")
    return {"ready_s": round(ready, 3), "bootstrap_s": round(complete - loaded, 3), "commits": float(commits.group(1))}


def phase(roots: dict[str, Path], rounds: int) -> dict[str, dict[str, Any]]:
    """``rounds`` starts of each checkout, alternating: the medians and every start's figures."""
    starts: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    for _ in range(rounds):
        for name, root in roots.items():
            with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
                starts[name].append(start_once(root, Path(tmp)))
    return {
        name: {**{key: round(statistics.median(s[key] for s in runs), 3) for key in runs[0]}, "starts": runs}
        for name, runs in starts.items()
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def run(rounds: int, baseline: Path | None, neighbour: Neighbour) -> dict[str, Any]:
    roots = {"this": ROOT, **({"baseline": baseline} if baseline is not None else {})}
    quiet_load = load_average()
    quiet = phase(roots, rounds)
    with neighbour:
        neighbour.warm_up()
        busy_load = load_average()
        busy = phase(roots, rounds)
        busy_load_end = load_average()
    result: dict[str, Any] = {
        "rounds": rounds,
        "neighbour": neighbour.describe(),
        "quiet": quiet,
        "busy": busy,
        "load_average": {"quiet_start": quiet_load, "busy_start": busy_load, "busy_end": busy_load_end},
        "busy_over_quiet": {name: {key: _ratio(busy[name][key], quiet[name][key]) for key in ("ready_s", "bootstrap_s")} for name in roots},
    }
    if baseline is not None:
        result["baseline_root"] = str(baseline)
        result["this_over_baseline"] = {
            phase_name: {key: _ratio(figures["this"][key], figures["baseline"][key]) for key in ("ready_s", "bootstrap_s", "commits")}
            for phase_name, figures in (("quiet", quiet), ("busy", busy))
        }
    return result


def print_table(result: dict[str, Any]) -> None:
    print(f"server start on a fresh SQLite database, median of {result['rounds']} starts each")
    print(f"{'':<10}{'':<11}{'quiet':>12}{'busy':>12}{'busy/quiet':>12}")
    for name in result["quiet"]:
        quiet, busy, ratio = result["quiet"][name], result["busy"][name], result["busy_over_quiet"][name]
        label = "this" if name == "this" else f"baseline ({result['baseline_root']})"
        print(label)
        print(f"{'':<10}{'ready':<11}{quiet['ready_s']:>10.2f} s{busy['ready_s']:>10.2f} s{ratio['ready_s']:>11}x")
        print(f"{'':<10}{'bootstrap':<11}{quiet['bootstrap_s']:>10.2f} s{busy['bootstrap_s']:>10.2f} s{ratio['bootstrap_s']:>11}x")
        print(f"{'':<10}{'commits':<11}{quiet['commits']:>12.0f}{busy['commits']:>12.0f}")
    for phase_name, ratios in (result.get("this_over_baseline") or {}).items():
        print(f"this / baseline, {phase_name}: " + ", ".join(f"{key.removesuffix('_s')} {value}x" for key, value in ratios.items()))
    loads = result["load_average"]
    print(f"busy: beside {result['neighbour']}; load average {' '.join(map(str, loads['quiet_start']))} quiet, "
          f"{' '.join(map(str, loads['busy_start']))} -> {' '.join(map(str, loads['busy_end']))} busy")


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="starts of each checkout in each phase (default 3)")
    parser.add_argument("--baseline", type=Path, help="another checkout started alternately with this one, e.g. /work/main")
    parser.add_argument("--cpus", type=int, help="busy processes of the busy phase (default: eight a core)")
    parser.add_argument("--disk-mib", type=int, default=1024, help="MiB the disk writer writes between fsyncs (default 1024; 0: no disk writer)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "app" / "__main__.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a checkout of this project")
    # The busy phase cannot outlast this bound: its neighbour stops by itself.
    neighbour = Neighbour(seconds=args.rounds * (2 if args.baseline else 1) * READY_TIMEOUT, cpus=args.cpus, disk_mib=args.disk_mib)
    try:
        result = run(args.rounds, args.baseline, neighbour)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
