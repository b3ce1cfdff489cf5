"""Feature gates: upstream flag syntax, v1.37 defaults, locked gates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devtools.server import REPO_ROOT
from kube.features import KNOWN_FEATURES, FeatureGateError, FeatureGates


def test_defaults_match_v137() -> None:
    gates = FeatureGates()
    assert gates.enabled("DynamicResourceAllocation")
    assert gates.enabled("DRAPartitionableDevices")
    assert not gates.enabled("DRAReservedForWorkloads")
    assert not gates.enabled("DRANodeAllocatableResources")
    assert len(gates) == len(KNOWN_FEATURES)


def test_parse_overrides_and_flag_round_trip() -> None:
    gates = FeatureGates.parse("DRAReservedForWorkloads=true, DRAConsumableCapacity=false")
    assert gates.enabled("DRAReservedForWorkloads")
    assert not gates.enabled("DRAConsumableCapacity")
    assert FeatureGates.parse(gates.flag_value()) == gates


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("DynamicResourceAllocation=false", "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("DRAAdminAccess", "missing bool value for DRAAdminAccess"),
        ("DRADeviceTaints=maybe", "invalid value of DRADeviceTaints=maybe"),
    ],
)
def test_refused_values(flag: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        FeatureGates.parse(flag)


def test_server_refuses_to_start_with_a_locked_gate_off() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--feature-gates", "DRAPrioritizedList=false", "--database-url", "sqlite:///:memory:"],
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
