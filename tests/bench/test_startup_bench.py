"""bench.startup with one start a phase and a light neighbour (a small disk writer): it measures
every start, quiet and busy, and prints the ratios (figures are not judged here; README has the
measured ones)."""

from __future__ import annotations

import json

import pytest

from bench import startup

pytestmark = pytest.mark.slow


def test_the_benchmark_times_a_start_quiet_and_beside_its_neighbour(capsys: pytest.CaptureFixture[str]) -> None:
    # No busy process and a small disk writer: this runs inside the test suite, beside its other tests.
    assert startup.main(["--rounds", "1", "--cpus", "0", "--disk-mib", "8", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for phase in ("quiet", "busy"):
        figures = result[phase]["this"]
        assert figures["ready_s"] > figures["bootstrap_s"] > 0
        assert figures["commits"] >= 2, "the system namespaces, then the rest"
        assert len(figures["starts"]) == 1
    assert set(result["busy_over_quiet"]["this"]) == {"ready_s", "bootstrap_s"}
    assert result["neighbour"].startswith("0 busy processes (2-ms bursts, 1-ms sleeps), a disk writer (8 MiB")
