"""bench.instructions runs its workloads end to end at toy sizes; --no-valgrind keeps the test
quick (a counted run takes minutes under valgrind; bench/README.md has measured ones), one
counted run checks that callgrind collects between the switches."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from devtools.postgres import find_postgres_bin
from devtools.server import REPO_ROOT

pytestmark = pytest.mark.skipif(find_postgres_bin() is None, reason="needs PostgreSQL")


def run(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.instructions", *args, "--json", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return orjson.loads(out.read_bytes())  # type: ignore[no-any-return]


@pytest.mark.parametrize("args", [("--workload", "scheduler", "--requests", "2"), ("--workload", "update", "--protobuf", "--requests", "16")])
def test_the_workloads_run_without_errors(tmp_path: Path, args: tuple[str, ...]) -> None:
    [figures] = run(tmp_path, *args, "--no-valgrind")
    assert figures["count"] == int(args[-1])


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_instructions_are_counted_between_the_switches(tmp_path: Path) -> None:
    [figures] = run(tmp_path, "--workload", "get", "--requests", "32")
    # A GET is hundreds of thousands of instructions; the server's start (tens of millions) is not counted.
    assert 50_000 < figures["per_request"] < 5_000_000
