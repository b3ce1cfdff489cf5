"""The HTTP floor benchmark runs end to end at toy sizes (figures are not judged here: machines
running the suite are shared; bench/README.md has a measured run)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from devtools.server import REPO_ROOT

PHASES = {"minimal GET", "minimal POST", "api GET", "api create"}


def run_floor(tmp_path: Path, servers: str) -> dict:
    out = tmp_path / "floor.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.httpfloor", "--servers", servers, "--rounds", "1", "--duration", "0.3", "--clients", "2", "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return orjson.loads(out.read_bytes())


def test_uvicorn_serves_every_phase_without_errors(tmp_path: Path) -> None:
    figures = run_floor(tmp_path, "uvicorn")
    assert set(figures["results"]) == PHASES
    for phase in PHASES:
        (uvicorn,) = figures["results"][phase]["uvicorn"]
        assert uvicorn["rps"] > 0 and uvicorn["errors"] == 0, phase


@pytest.mark.skipif(importlib.util.find_spec("granian") is None, reason="granian is in the bench extra only")
def test_granian_serves_the_same_app_and_its_client_certificate_handling_is_reported(tmp_path: Path) -> None:
    figures = run_floor(tmp_path, "uvicorn,granian")
    for phase in PHASES:
        assert figures["results"][phase]["granian"][0]["errors"] == 0, phase
    assert set(figures["tls"]) == {"cluster CA certificate", "foreign certificate", "no certificate"}
    assert figures["tls"]["cluster CA certificate"].startswith("HTTP 200")
