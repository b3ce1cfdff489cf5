"""Feature gates: upstream flag syntax, v1.37 defaults, locked gates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devtools.server import REPO_ROOT
from kube.features import KNOWN_FEATURES, FeatureGateError, FeatureGates, Gate, gates_flag


def test_defaults_match_v137() -> None:
    gates = FeatureGates()
    assert gates.enabled(Gate.DynamicResourceAllocation)
    assert gates.enabled(Gate.DRAPartitionableDevices)
    assert not gates.enabled(Gate.DRAReservedForWorkloads)
    assert not gates.enabled(Gate.DRANodeAllocatableResources)
    assert len(gates) == len(KNOWN_FEATURES)


def test_parse_overrides_and_flag_round_trip() -> None:
    gates = FeatureGates.parse(f"{Gate.DRAReservedForWorkloads}=true, {Gate.DRAConsumableCapacity}=false")
    assert gates.enabled(Gate.DRAReservedForWorkloads)
    assert not gates.enabled(Gate.DRAConsumableCapacity)
    assert FeatureGates.parse(gates.flag_value()) == gates


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (gates_flag({Gate.DynamicResourceAllocation: False}), f"cannot set feature gate {Gate.DynamicResourceAllocation} to false, feature is locked to true"),
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        (Gate.DRAAdminAccess, f"missing bool value for {Gate.DRAAdminAccess}"),
        (f"{Gate.DRADeviceTaints}=maybe", f"invalid value of {Gate.DRADeviceTaints}=maybe"),
    ],
)
def test_refused_values(flag: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        FeatureGates.parse(flag)


def test_server_refuses_to_start_with_a_locked_gate_off() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--feature-gates", gates_flag({Gate.DRAPrioritizedList: False}), "--database-url", "sqlite:///:memory:"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "feature is locked to true" in result.stderr


def test_top_level_help_lists_the_server_flags() -> None:
    result = subprocess.run([sys.executable, "-m", "app", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for flag in ("--listen", "--database-url", "--feature-gates", "--log-level", "--default-watch-cache-size", "--compaction-window"):
        assert flag in result.stdout
