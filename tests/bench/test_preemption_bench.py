"""bench.preemption on a tiny in-memory cluster: it decides a preemption and prints its ratio
(figures are not judged here; bench/README.md has the measured ones)."""

from __future__ import annotations

import json

import pytest

from bench import preemption


def test_the_benchmark_measures_a_real_preemption(capsys: pytest.CaptureFixture[str]) -> None:
    assert preemption.main(["--nodes", "3", "--devices", "2", "--repeat", "1", "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["results"]
    # Both devices of the first node are held; the least important holder is the one victim.
    assert (result["nodes"], result["victims"]) == (3, ["low-0-1"])
    assert result["preemption_ms"] > 0 and result["cycle_ms"] > 0


def test_a_cluster_where_preemption_cannot_help_is_refused_rather_than_measured() -> None:
    with pytest.raises(SystemExit, match="no preemption at 1 nodes"):
        preemption.main(["--nodes", "1", "--devices", "0", "--repeat", "1"])
