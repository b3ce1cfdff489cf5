"""bench.scheduler fails when a phase ends with pods unbound: a timeout is an error, not a lower rate."""

from __future__ import annotations

import subprocess
import sys

from devtools.server import REPO_ROOT


def test_scheduler_benchmark_exits_nonzero_when_pods_stay_unbound() -> None:
    # --timeout 0: the phase stops waiting as soon as its pods are created, before any can be bound.
    run = subprocess.run(
        [sys.executable, "-m", "bench.scheduler", "--sqlite", "--nodes", "1", "--pods", "10", "--no-baseline", "--timeout", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "not every pod was bound" in run.stderr
