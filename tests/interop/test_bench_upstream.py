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
from tests.e2e.test_benchmark_runs import run_benchmark
from tests.interop.upstream import needs_upstream, upstream_binaries

pytestmark = [*needs_upstream, pytest.mark.slow]


def api_benchmark(tmp_path: Path, *args: str) -> Any:
    """``bench.api --against-upstream`` on SQLite with these flags: its figures."""
    upstream_binaries()  # built first under DRA_REQUIRE_GO, as the other interop tests do
    out = tmp_path / "api.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.api", "--against-upstream", "--sqlite", *args, "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return orjson.loads(out.read_bytes())


@pytest.mark.parametrize("media", ["json", "protobuf"])
def test_api_phases_run_on_both_servers_without_errors(tmp_path: Path, media: str) -> None:
    sizes = ["--clients", "2", "--duration", "0.5", "--warmup", "0", "--list-size", "10", "--settle", "0"]
    figures = api_benchmark(tmp_path, *sizes, *(["--protobuf"] if media == "protobuf" else []))
    assert [row["phase"] for row in figures["rows"]] == ["create", "update", "get", "list"]
    for row in figures["rows"]:
        assert row["upstream_per_s"] > 0 and row["this_per_s"] > 0, row
        assert row["upstream_errors"] == row["this_errors"] == 0, row
        assert row["upstream_cpu_us"] and row["this_cpu_us"], row
    assert figures["meta"]["sides"]["upstream"].startswith("kube-apiserver v1.37.2 + etcd")
    assert figures["meta"]["media_type"] == {"json": "application/json", "protobuf": "application/vnd.kubernetes.protobuf"}[media]


def test_scheduler_binds_every_pod_on_all_three_stacks(tmp_path: Path) -> None:
    upstream_binaries()
    _run, result = run_benchmark(tmp_path, "--against-upstream", "--nodes", "2", "--pods", "10")
    assert set(result["stacks"]) == {"this", "upstream-scheduler", "upstream"}
    for stack, run in result["stacks"].items():
        for phase in ("baseline", "dra"):
            assert run[phase]["bound"] == run[phase]["pods"] == 10, (stack, phase)
        assert run["dra"]["requests_per_pod"].get("POST resourceclaims") == 1, stack  # claims made from the template

