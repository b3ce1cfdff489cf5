"""``make bench-upstream``'s code paths at toy sizes, so they cannot rot: bench.api and bench.scheduler
with ``--against-upstream`` run end to end against upstream's binaries and this project's stack (SQLite
here, for speed; the make target uses Postgres). Figures are not judged: the machines running tests
are shared, and bench/README.md has a measured run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from devtools.server import REPO_ROOT
from tests.interop.upstream import needs_upstream, upstream_binaries

pytestmark = [*needs_upstream, pytest.mark.slow]


def bench(tmp_path: Path, module: str, *args: str) -> Any:
    upstream_binaries()  # built first under DRA_REQUIRE_GO, as the other interop tests do
    out = tmp_path / f"{module}.json"
    run = subprocess.run(
        [sys.executable, "-m", module, "--against-upstream", "--sqlite", *args, "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return orjson.loads(out.read_bytes())


def test_api_phases_run_on_both_servers_without_errors(tmp_path: Path) -> None:
    figures = bench(tmp_path, "bench.api", "--clients", "2", "--duration", "0.5", "--warmup", "0", "--list-size", "10", "--settle", "0")
    assert [row["phase"] for row in figures["rows"]] == ["create", "update", "get", "list"]
    for row in figures["rows"]:
        assert row["upstream_per_s"] > 0 and row["this_per_s"] > 0, row
        assert row["upstream_errors"] == row["this_errors"] == 0, row
        assert row["upstream_cpu_us"] and row["this_cpu_us"], row
    assert figures["meta"]["sides"]["upstream"].startswith("kube-apiserver v1.37.2 + etcd")


def test_scheduler_binds_every_pod_on_all_three_stacks(tmp_path: Path) -> None:
    (result,) = bench(tmp_path, "bench.scheduler", "--nodes", "2", "--pods", "10", "--timeout", "120")
    assert set(result["stacks"]) == {"this", "upstream-scheduler", "upstream"}
    for stack, run in result["stacks"].items():
        for phase in ("baseline", "dra"):
            assert run[phase]["bound"] == run[phase]["pods"] == 10, (stack, phase)
        assert run["dra"]["requests_per_pod"].get("POST resourceclaims") == 1, stack  # claims made from the template

