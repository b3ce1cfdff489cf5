"""The fault benchmark runs end to end at toy sizes on SQLite (figures are not judged here: machines
running the suite are shared; README has a measured run). What must hold at any size is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from devtools.server import REPO_ROOT


def test_fault_benchmark_runs_and_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    out = tmp_path / "faults.json"
    sizes = ["--writers", "4", "--kill-after", "1", "--watches", "20", "--probe-seconds", "0.5"]
    sizes += ["--idle", "5", "--slowloris", "2", "--slow-seconds", "1", "--list-claims", "150", "--page", "40"]
    run = subprocess.run(
        [sys.executable, "-m", "bench.faults", "--backends", "sqlite", *sizes, "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = orjson.loads(out.read_bytes())["sqlite"]
    assert set(figures) == {"kill", "watches", "slow", "list"}, "no outage without a database server"
    assert figures["kill"]["acknowledged creates"] > 0 and figures["kill"]["acknowledged creates lost"] == 0
    assert figures["watches"]["one event to every watch: received, last after (ms)"].startswith("20/20, ")
    assert figures["slow"]["answered within 1 s"].split("/")[0] == figures["slow"]["answered within 1 s"].split("/")[1]
    assert figures["list"]["whole LIST: items, MB, s"].startswith("150, ")
    assert figures["list"]["paged LIST: items, pages, s"].startswith("150, 4, ")
    assert "MISS" not in run.stdout
