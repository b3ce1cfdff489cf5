"""Feature gates with upstream v1.37 stages and defaults, in upstream's flag syntax.

The server and every worker parse the same ``--feature-gates`` value, so they agree
on what is enabled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ALPHA = "ALPHA"
BETA = "BETA"
GA = "GA"


@dataclass(frozen=True)
class FeatureSpec:
    default: bool
    stage: str
    locked: bool = False


# Every gate this project knows, declared once: its name (the constant), upstream v1.37 default
# and stage (k8s.io/kubernetes pkg/features), and whether it is locked. The rest of the tree names
# a gate only through these constants (tests/test_gate_names.py enforces it), so a gate cannot be
# misspelt or restated with another default.
KNOWN_FEATURES: dict[str, FeatureSpec] = {}


def _declare(name: str, default: bool, stage: str, *, locked: bool = False) -> str:
    KNOWN_FEATURES[name] = FeatureSpec(default, stage, locked)
    return name


class Gate:
    """The gate names, spelt as upstream's Go constants: ``gates.enabled(Gate.DRAAdminAccess)``."""

    DynamicResourceAllocation = _declare("DynamicResourceAllocation", True, GA, locked=True)
    DRAAdminAccess = _declare("DRAAdminAccess", True, GA, locked=True)
    DRAPrioritizedList = _declare("DRAPrioritizedList", True, GA, locked=True)
    DRADeviceTaints = _declare("DRADeviceTaints", True, GA)
    DRADeviceTaintRules = _declare("DRADeviceTaintRules", True, GA)
    DRAPartitionableDevices = _declare("DRAPartitionableDevices", True, BETA)
    DRAPartitionableDevicesType = _declare("DRAPartitionableDevicesType", False, ALPHA)
    DRADeviceCompatibilityGroups = _declare("DRADeviceCompatibilityGroups", False, ALPHA)
    DRAResourceClaimDeviceStatus = _declare("DRAResourceClaimDeviceStatus", True, GA, locked=True)
    DRAConsumableCapacity = _declare("DRAConsumableCapacity", True, BETA)
    DRAFractionalCapacityRange = _declare("DRAFractionalCapacityRange", False, BETA)
    DRADeviceBindingConditions = _declare("DRADeviceBindingConditions", True, BETA)
    DRAExtendedResource = _declare("DRAExtendedResource", True, GA, locked=True)
    DRAListTypeAttributes = _declare("DRAListTypeAttributes", False, ALPHA)
    DRADerivedAttributes = _declare("DRADerivedAttributes", False, ALPHA)
    DRAOptionalNodeOperations = _declare("DRAOptionalNodeOperations", False, ALPHA)
    DRANodeAllocatableResources = _declare("DRANodeAllocatableResources", False, ALPHA)
    DRAWorkloadResourceClaims = _declare("DRAWorkloadResourceClaims", False, BETA)
    DRAResourcePoolStatus = _declare("DRAResourcePoolStatus", False, ALPHA)
    DRAResourceClaimGranularStatusAuthorization = _declare("DRAResourceClaimGranularStatusAuthorization", True, BETA)
    DRASchedulerFilterTimeout = _declare("DRASchedulerFilterTimeout", True, BETA)
    GenericWorkload = _declare("GenericWorkload", False, BETA)
    # KEP-3243: a spread constraint's matchLabelKeys; with the merge (beta, v1.34) kube-apiserver
    # writes them into the constraint's labelSelector when it creates the pod.
    MatchLabelKeysInPodTopologySpread = _declare("MatchLabelKeysInPodTopologySpread", True, BETA)
    MatchLabelKeysInPodTopologySpreadSelectorMerge = _declare("MatchLabelKeysInPodTopologySpreadSelectorMerge", True, BETA)
    # KEP-5142: an idle scheduler pops the pod whose backoff ends first instead of waiting it out.
    SchedulerPopFromBackoffQ = _declare("SchedulerPopFromBackoffQ", True, BETA)
    PodSchedulingReadiness = _declare("PodSchedulingReadiness", True, GA, locked=True)
    NodeDeclaredFeatures = _declare("NodeDeclaredFeatures", True, GA, locked=True)
    ResourceHealthStatus = _declare("ResourceHealthStatus", True, BETA)
    # KEP-5194 as originally proposed (see README): claim.spec.reservedFor, allocation.reservedForAnyPod.
    DRAReservedForWorkloads = _declare("DRAReservedForWorkloads", False, ALPHA)
    # KEP-5690: preemption that frees devices. Upstream adds it at beta in v1.38; v1.37 preempts
    # only for cpu, memory and pod slots. On here; false gives v1.37's behaviour (see README).
    DRAPreemption = _declare("DRAPreemption", True, BETA)
    # KEP-5284, from k8s.io/apiserver: impersonation constrained to what the request does (app.auth.impersonation).
    ConstrainedImpersonation = _declare("ConstrainedImpersonation", True, BETA)
    # KEP-5793, from k8s.io/apiserver: admission configuration from manifests. Only its API side is
    # here: names ending in ".static.k8s.io" are reserved (app.registry.admissionregistration).
    ManifestBasedAdmissionControlConfig = _declare("ManifestBasedAdmissionControlConfig", True, BETA)


def gates_flag(settings: Mapping[str, bool]) -> str:
    """``settings`` in ``--feature-gates`` syntax: ``gates_flag({Gate.GenericWorkload: True})`` is
    ``"GenericWorkload=true"`` (for tests and tools that start programs with gates set)."""
    return ",".join(f"{name}={str(value).lower()}" for name, value in settings.items())


class FeatureGateError(ValueError):
    """A --feature-gates value that upstream would refuse."""


class FeatureGates(Mapping[str, bool]):
    """The effective gate values: defaults overridden by the flag."""

    def __init__(self, overrides: Mapping[str, bool] | None = None) -> None:
        self._values = {name: spec.default for name, spec in KNOWN_FEATURES.items()}
        for name, value in (overrides or {}).items():
            self._set(name, value)

    def _set(self, name: str, value: bool) -> None:
        spec = KNOWN_FEATURES.get(name)
        if spec is None:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        if spec.locked and value != spec.default:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to {str(spec.default).lower()}"
            )
        self._values[name] = value

    @classmethod
    def parse(cls, text: str | None) -> FeatureGates:
        """Parse ``A=true,B=false`` (upstream's flag syntax)."""
        overrides: dict[str, bool] = {}
        for part in (text or "").split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise FeatureGateError(f"missing bool value for {part}")
            name, raw = (s.strip() for s in part.split("=", 1))
            lowered = raw.lower()
            if lowered not in ("true", "false", "1", "0", "t", "f"):
                raise FeatureGateError(f"invalid value of {name}={raw}, err: strconv.ParseBool: parsing {raw!r}: invalid syntax")
            overrides[name] = lowered in ("true", "1", "t")
        return cls(overrides)

    def enabled(self, name: str) -> bool:
        return self._values[name]

    def __getitem__(self, name: str) -> bool:
        return self._values[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def describe(self) -> list[dict[str, object]]:
        """What /featuregates answers: every gate with stage, default and effective value."""
        return [
            {
                "name": name,
                "stage": spec.stage,
                "default": spec.default,
                "lockToDefault": spec.locked,
                "enabled": self._values[name],
            }
            for name, spec in sorted(KNOWN_FEATURES.items())
        ]

    def flag_value(self) -> str:
        """The non-default settings, in flag syntax (to pass the same gates to workers)."""
        return ",".join(
            f"{n}={str(v).lower()}" for n, v in sorted(self._values.items()) if v != KNOWN_FEATURES[n].default
        )
