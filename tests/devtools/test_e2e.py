"""The e2e runner's reading of Ginkgo's report and its table (devtools/e2e.py); `make e2e` runs the suite itself."""

from __future__ import annotations

import io
import json
from pathlib import Path

from devtools.e2e import SPEC_SETS, SpecResult, print_table, read_report
from kube.features import Gate, gates_flag


def _spec(leaf: str, state: str, failure: str = "", kind: str = "It") -> dict[str, object]:
    return {
        "ContainerHierarchyTexts": ["[sig-node] [DRA]", "control plane"],
        "LeafNodeText": leaf,
        "LeafNodeType": kind,
        "State": state,
        "RunTime": 2_500_000_000,
        **({"Failure": {"Message": failure}} if failure else {}),
    }


def test_the_report_keeps_the_specs_that_ran_with_their_failures(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    suite = {"SpecReports": [
        _spec("uses all resources", "passed"),
        _spec("must deallocate after use", "failed", "wait for service account \"default\"\n  timed out"),
        _spec("registers plugin", "skipped"),  # left out by the label filter
        _spec("needs two nodes", "skipped", "2 ready nodes required, only have 1"),  # skipped by the spec itself
        _spec("", "passed", kind="SynchronizedBeforeSuite"),
    ]}  # fmt: skip
    report.write_text(json.dumps([suite]))

    results = read_report(report)

    assert [(r.name, r.state) for r in results] == [
        ("[sig-node] [DRA] control plane must deallocate after use", "failed"),
        ("[sig-node] [DRA] control plane needs two nodes", "skipped"),
        ("[sig-node] [DRA] control plane uses all resources", "passed"),
    ]
    assert results[0].failure.startswith('wait for service account "default"')
    assert results[2].seconds == 2.5


def test_the_table_sets_each_stacks_result_side_by_side_with_the_first_words_of_a_failure() -> None:
    out = io.StringIO()
    results = {
        ("default", "project"): [SpecResult("spec a", "failed", 3.0, "boom\nand more"), SpecResult("spec b", "passed", 1.0)],
        ("default", "upstream"): [SpecResult("spec a", "passed", 2.0), SpecResult("spec b", "passed", 1.0)],
    }

    print_table(results, out)

    text = out.getvalue()
    assert " failed 3s   passed 2s  spec a" in text
    assert "project: boom and more" in text
    assert "project: 1 of 2 passed" in text and "upstream: 2 of 2 passed" in text


def test_the_spec_sets_leave_out_the_specs_that_need_a_kubelet() -> None:
    for spec_set in SPEC_SETS.values():
        assert f"!Feature:{Gate.DynamicResourceAllocation}" in spec_set.label_filter
    assert "resource.k8s.io/v1alpha3=true" in SPEC_SETS["offbydefault"].runtime_config
    assert gates_flag({Gate.DRAResourcePoolStatus: True}) in SPEC_SETS["offbydefault"].feature_gates
