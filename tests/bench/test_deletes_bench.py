"""bench.deletes on a few pods: both ways delete every pod and the namespace, and it prints their
ratio (figures are not judged here; README has the measured ones)."""

from __future__ import annotations

import json

import pytest

from bench import deletes

pytestmark = pytest.mark.slow


def test_the_benchmark_deletes_every_pod_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    assert deletes.main(["--pods", "20", "--workers", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["pods"], result["workers"]) == (20, 4)
    for way in ("one_by_one", "together"):
        assert result[way]["deletecollection_s"] > 0 and result[way]["namespace_s"] > 0
    assert set(result["ratio"]) == {"deletecollection_s", "namespace_s"}
