"""The fields feature gates guard, one row each: which gates, where, and when a stored object uses it.

Upstream's strategies drop a field whose gate is off from what a create or update writes, unless
the object being replaced already uses it (pkg/api/resource's ``dropDisabled...Fields``, pkg/api/pod's
``dropDisabledFields``). Here every such rule is one ``GatedField`` in ``GATED_FIELDS``, and the rest
follows from the table:

- the API server drops them (``drop_disabled``, called by each kind's strategy for the shapes it
  holds, ``app.registry``);
- fields the official OpenAPI lacks (this project's proposals) carry their schema here, which the
  kinds hand to strict field validation and pruning (``schema_properties``);
- the scheduler's allocator knows which gates it honours (``ALLOCATOR_FIELD_GATES``).

Paths are dotted keys from the shape's root; ``name[]`` walks every item of a list, ``name{}``
every value of a map. A path that meets something else (missing, null, another JSON type) ends
there quietly: validation reports malformed objects, dropping never does.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.features import KNOWN_FEATURES, Gate

# Shapes: where a row's paths start. A kind's strategy applies the rows of each shape it holds.
POD = "Pod"  # a pod, and a pod template's spec as {"spec": ...}
JOB = "Job"
WORKLOAD_SPEC = "WorkloadSpec"
POD_GROUP = "PodGroup"
RESOURCE_CLAIM = "ResourceClaim"
CLAIM_SPEC = "ResourceClaimSpec"  # a claim's spec, and a template's spec.spec
SLICE_SPEC = "ResourceSliceSpec"
DEVICE_CLASS_SPEC = "DeviceClassSpec"
POOL_STATUS_REQUEST_SPEC = "ResourcePoolStatusRequestSpec"

_RESOURCE_V1 = "io.k8s.api.resource.v1."

_LIST, _MAP = "[]", "{}"


def _plain_prefix(steps: tuple[tuple[str, str], ...]) -> int:
    count = 0
    for _, walk in steps:
        if walk:
            break
        count += 1
    return count


@dataclass(frozen=True)
class _Paths:
    """Paths that end in the same objects: the steps to those objects, and the keys there."""

    steps: tuple[tuple[str, str], ...]  # (key, "" | "[]" | "{}")
    keys: tuple[str, ...]
    # The leading steps into one object (no list or map): followed without building lists.
    plain: int = 0

    @staticmethod
    def parse(paths: Iterable[str]) -> tuple[_Paths, ...]:
        """``paths`` grouped by where they end, so that one walk serves all the keys of a place."""
        grouped: dict[tuple[tuple[str, str], ...], list[str]] = {}
        for path in paths:
            parts = path.split(".")
            steps = tuple((p[:-2], p[-2:]) if p.endswith((_LIST, _MAP)) else (p, "") for p in parts[:-1])
            grouped.setdefault(steps, []).append(parts[-1])
        return tuple(_Paths(steps, tuple(keys), _plain_prefix(steps)) for steps, keys in grouped.items())

    def parents(self, root: Any) -> list[dict[str, Any]]:
        """The objects that hold the last key (each at most once; on the hot path of every update)."""
        node = root
        for key, _ in self.steps[: self.plain]:
            if not isinstance(node, dict):
                return []
            node = node.get(key)
        level: list[Any] = [node]
        for key, walk in self.steps[self.plain :]:
            nxt: list[Any] = []
            for node in level:
                if not isinstance(node, dict):
                    continue
                value = node.get(key)
                if not walk:
                    nxt.append(value)
                elif walk == _LIST:
                    if isinstance(value, list):
                        nxt.extend(value)
                elif isinstance(value, dict):
                    nxt.extend(value.values())
            if not nxt:
                return []
            level = nxt
        return [node for node in level if isinstance(node, dict)]


@dataclass(frozen=True)
class _Strip:
    """Paths to drop as a tree: the keys cleared from an object, then the steps into the objects
    below it. One walk clears every path, each place visited once, however many rows share it."""

    keys: tuple[str, ...]
    steps: tuple[tuple[str, str, _Strip], ...]  # (key, "" | "[]" | "{}", what to strip there)

    @staticmethod
    def parse(paths: Iterable[str]) -> _Strip:
        tree: dict[str, Any] = {}  # key -> True (cleared here) | {walk: subtree}
        for path in paths:
            node = tree
            parts = path.split(".")
            for part in parts[:-1]:
                key, walk = (part[:-2], part[-2:]) if part.endswith((_LIST, _MAP)) else (part, "")
                below = node.setdefault(key, {})
                if below is True:  # cleared here already: nothing below it is left to clear
                    break
                node = below.setdefault(walk, {})
            else:
                node[parts[-1]] = True
        return _Strip._freeze(tree)

    @staticmethod
    def _freeze(tree: dict[str, Any]) -> _Strip:
        keys = tuple(key for key, below in tree.items() if below is True)
        steps = tuple(
            (key, walk, _Strip._freeze(subtree)) for key, below in tree.items() if below is not True for walk, subtree in below.items()
        )
        return _Strip(keys, steps)

    def apply(self, obj: dict[str, Any]) -> None:
        for key in self.keys:
            obj.pop(key, None)
        for key, walk, below in self.steps:
            value = obj.get(key)
            if value is None:
                continue
            if not walk:
                if isinstance(value, dict):
                    below.apply(value)
            elif walk == _LIST:
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict):
                            below.apply(item)
            elif isinstance(value, dict):
                for item in value.values():
                    if isinstance(item, dict):
                        below.apply(item)


@dataclass(frozen=True)
class GatedField:
    """Fields a disabled gate drops together, and when the stored object counts as using them.

    ``gates``: the fields are kept when every one is on. ``drops``: the paths cleared. The stored
    object uses them when a path of ``used_if_set`` holds a non-null value or a path of
    ``used_if_nonempty`` a non-empty one (upstream's ``!= nil`` and ``len() > 0``); with neither
    given, when a dropped path is set. ``schema``: the JSON schema of a field the official OpenAPI
    lacks, added to the definition ``schema_definition`` as a property named as the path's last key.
    ``allocator``: the scheduler's allocator honours the field, so it reads the gate.
    """

    gates: tuple[str, ...]
    shape: str
    drops: tuple[str, ...]
    used_if_set: tuple[str, ...] = ()
    used_if_nonempty: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None
    schema_definition: str = ""
    allocator: bool = False
    _strip: _Strip = field(init=False, repr=False, compare=False)
    _set_paths: tuple[_Paths, ...] = field(init=False, repr=False, compare=False)
    _nonempty_paths: tuple[_Paths, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for gate in self.gates:
            if gate not in KNOWN_FEATURES:
                raise ValueError(f"unknown feature gate {gate}")
        if self.schema is not None and (not self.schema_definition or len(self.drops) != 1):
            raise ValueError("a field with a schema names its definition and is its row's only path")
        used_if_set = self.used_if_set if self.used_if_set or self.used_if_nonempty else self.drops
        object.__setattr__(self, "_strip", _Strip.parse(self.drops))
        object.__setattr__(self, "_set_paths", _Paths.parse(used_if_set))
        object.__setattr__(self, "_nonempty_paths", _Paths.parse(self.used_if_nonempty))

    def enabled(self, gates: Any) -> bool:
        for gate in self.gates:  # noqa: SIM110 (no generator: every write asks every row of its shapes)
            if not gates.enabled(gate):
                return False
        return True

    def used_by(self, old: Any) -> bool:
        if not isinstance(old, dict):
            return False
        for paths in self._set_paths:
            for parent in paths.parents(old):
                for key in paths.keys:
                    if parent.get(key) is not None:
                        return True
        for paths in self._nonempty_paths:
            for parent in paths.parents(old):
                for key in paths.keys:
                    if parent.get(key):
                        return True
        return False

    def drop(self, new: dict[str, Any]) -> None:
        self._strip.apply(new)


def _row(gates: str | tuple[str, ...], shape: str, *drops: str, **rest: Any) -> GatedField:
    return GatedField((gates,) if isinstance(gates, str) else gates, shape, drops, **rest)


_EXACTLY = "devices.requests[].exactly"
_SUBREQUESTS = "devices.requests[].firstAvailable[]"
_RESULTS = "status.allocation.devices.results[]"

# In upstream's order of dropping within each shape (it matters where one drop empties the place
# of another: tolerations go after firstAvailable).
GATED_FIELDS: tuple[GatedField, ...] = (
    # --- ResourceClaimSpec (claims and templates) ---
    _row(Gate.DRAAdminAccess, CLAIM_SPEC, f"{_EXACTLY}.adminAccess", allocator=True),
    _row(Gate.DRAPrioritizedList, CLAIM_SPEC, "devices.requests[].firstAvailable", used_if_nonempty=("devices.requests[].firstAvailable",), allocator=True),
    _row(
        Gate.DRADeviceTaints, CLAIM_SPEC, f"{_EXACTLY}.tolerations", f"{_SUBREQUESTS}.tolerations",
        used_if_nonempty=(f"{_EXACTLY}.tolerations", f"{_SUBREQUESTS}.tolerations"), allocator=True,
    ),
    _row(
        Gate.DRAConsumableCapacity, CLAIM_SPEC, "devices.constraints[].distinctAttribute", f"{_EXACTLY}.capacity", f"{_SUBREQUESTS}.capacity",
        allocator=True,
    ),
    _row(
        Gate.DRADerivedAttributes, CLAIM_SPEC, f"{_EXACTLY}.derivedAttributes", f"{_SUBREQUESTS}.derivedAttributes",
        used_if_nonempty=(f"{_EXACTLY}.derivedAttributes", f"{_SUBREQUESTS}.derivedAttributes"),
    ),
    _row(
        Gate.DRAReservedForWorkloads, CLAIM_SPEC, "reservedFor", allocator=True,
        schema_definition=_RESOURCE_V1 + "ResourceClaimSpec",
        schema={
            "description": f"KEP-5194 (gate {Gate.DRAReservedForWorkloads}): the consumer the claim is reserved for "
            "once allocated, instead of the pods that use it.",
            "allOf": [{"$ref": f"#/$defs/{_RESOURCE_V1}ResourceClaimConsumerReference"}],
        },
    ),
    # --- ResourceClaim (its status; "in use" may look at the stored spec) ---
    _row(
        Gate.DRAAdminAccess, RESOURCE_CLAIM, f"{_RESULTS}.adminAccess",
        used_if_set=(f"spec.{_EXACTLY}.adminAccess", f"{_RESULTS}.adminAccess"),
    ),
    _row(Gate.DRAResourceClaimDeviceStatus, RESOURCE_CLAIM, "status.devices", used_if_nonempty=("status.devices",)),
    _row(
        Gate.DRAConsumableCapacity, RESOURCE_CLAIM, f"{_RESULTS}.shareID", f"{_RESULTS}.consumedCapacity", "status.devices[].shareID",
        used_if_set=(f"{_RESULTS}.shareID", "status.devices[].shareID"), used_if_nonempty=(f"{_RESULTS}.consumedCapacity",),
    ),
    _row(
        Gate.DRADeviceBindingConditions, RESOURCE_CLAIM, f"{_RESULTS}.bindingConditions", f"{_RESULTS}.bindingFailureConditions",
        used_if_nonempty=(f"{_RESULTS}.bindingConditions", f"{_RESULTS}.bindingFailureConditions"),
    ),
    _row(Gate.DRADeviceTaints, RESOURCE_CLAIM, f"{_RESULTS}.tolerations", used_if_nonempty=(f"{_RESULTS}.tolerations",)),
    _row(Gate.DRAOptionalNodeOperations, RESOURCE_CLAIM, f"{_RESULTS}.skipNodeOperations", used_if_nonempty=(f"{_RESULTS}.skipNodeOperations",)),
    _row(
        Gate.DRAReservedForWorkloads, RESOURCE_CLAIM, "status.allocation.reservedForAnyPod",
        schema_definition=_RESOURCE_V1 + "AllocationResult",
        schema={
            "description": f"KEP-5194 (gate {Gate.DRAReservedForWorkloads}): any pod may use the allocated devices.",
            "type": ["boolean", "null"],
        },
    ),
    # --- ResourceSliceSpec ---
    _row(Gate.DRADeviceTaints, SLICE_SPEC, "devices[].taints", used_if_nonempty=("devices[].taints",), allocator=True),
    _row(
        Gate.DRAPartitionableDevices, SLICE_SPEC, "sharedCounters", "perDeviceNodeSelection",
        "devices[].consumesCounters", "devices[].nodeName", "devices[].nodeSelector", "devices[].allNodes",
        used_if_set=("sharedCounters", "perDeviceNodeSelection", "devices[].nodeName", "devices[].nodeSelector", "devices[].allNodes"),
        used_if_nonempty=("devices[].consumesCounters",), allocator=True,
    ),
    _row(Gate.DRAPartitionableDevicesType, SLICE_SPEC, "partitionTypeAttribute"),
    _row(
        Gate.DRADeviceCompatibilityGroups, SLICE_SPEC, "devices[].consumesCounters[].compatibilityGroups",
        used_if_nonempty=("devices[].consumesCounters[].compatibilityGroups",),
    ),
    _row(Gate.DRAConsumableCapacity, SLICE_SPEC, "devices[].allowMultipleAllocations", "devices[].capacity{}.requestPolicy", allocator=True),
    _row(
        (Gate.DRADeviceBindingConditions, Gate.DRAResourceClaimDeviceStatus), SLICE_SPEC,
        "devices[].bindsToNode", "devices[].bindingConditions", "devices[].bindingFailureConditions",
        used_if_set=("devices[].bindsToNode",), used_if_nonempty=("devices[].bindingConditions", "devices[].bindingFailureConditions"),
        allocator=True,
    ),
    _row(
        Gate.DRAListTypeAttributes, SLICE_SPEC,
        "devices[].attributes{}.bools", "devices[].attributes{}.ints", "devices[].attributes{}.strings", "devices[].attributes{}.versions",
        allocator=True,
    ),
    _row(Gate.DRAOptionalNodeOperations, SLICE_SPEC, "skipNodeOperations", used_if_nonempty=("skipNodeOperations",)),
    _row(
        Gate.DRANodeAllocatableResources, SLICE_SPEC, "devices[].nodeAllocatableResources",
        used_if_nonempty=("devices[].nodeAllocatableResources",), allocator=True,
    ),
    # --- DeviceClassSpec, ResourcePoolStatusRequestSpec ---
    _row(Gate.DRAExtendedResource, DEVICE_CLASS_SPEC, "extendedResourceName", allocator=True),
    _row(Gate.DRAPartitionableDevicesType, POOL_STATUS_REQUEST_SPEC, "defaultPartitionTypeAttribute"),
    # --- Pod (pods and pod templates; "in use" of the status looks at the stored spec, as upstream) ---
    _row(
        Gate.DynamicResourceAllocation, POD, "spec.resourceClaims",
        "spec.containers[].resources.claims", "spec.initContainers[].resources.claims", "spec.ephemeralContainers[].resources.claims",
        "status.resourceClaimStatuses",
        used_if_nonempty=("spec.resourceClaims",),
    ),
    _row(Gate.DRAExtendedResource, POD, "status.extendedResourceClaimStatus", used_if_nonempty=("status.extendedResourceClaimStatus",)),
    _row(
        Gate.DRANodeAllocatableResources, POD, "status.nodeAllocatableResourceClaimStatuses",
        used_if_nonempty=("status.nodeAllocatableResourceClaimStatuses",),
    ),
    _row(Gate.GenericWorkload, POD, "spec.schedulingGroup", used_if_nonempty=("spec.schedulingGroup",), allocator=True),
    # --- Job (WorkloadWithJob depends on GenericWorkload upstream), Workload, PodGroup ---
    _row(Gate.GenericWorkload, JOB, "spec.scheduling"),
    _row(
        Gate.DRAWorkloadResourceClaims, WORKLOAD_SPEC, "podGroupTemplates[].resourceClaims",
        used_if_nonempty=("podGroupTemplates[].resourceClaims",), allocator=True,
    ),
    _row(Gate.DRAWorkloadResourceClaims, POD_GROUP, "spec.resourceClaims", used_if_nonempty=("spec.resourceClaims",), allocator=True),
    _row(Gate.DRAWorkloadResourceClaims, POD_GROUP, "status.resourceClaimStatuses", used_if_nonempty=("status.resourceClaimStatuses",)),
)  # fmt: skip

_BY_SHAPE: dict[str, tuple[GatedField, ...]] = {}
for _field in GATED_FIELDS:
    _BY_SHAPE[_field.shape] = (*_BY_SHAPE.get(_field.shape, ()), _field)


@dataclass(frozen=True)
class _Plan:
    """What one shape's writes drop under one gates object: its rows whose gates are off (in the
    table's order), and all their paths as one tree, for a write that replaces nothing using them."""

    rows: tuple[GatedField, ...]
    strip: _Strip

    @staticmethod
    def of(shape: str, gates: Any) -> _Plan:
        rows = tuple(row for row in _BY_SHAPE.get(shape, ()) if not row.enabled(gates))
        return _Plan(rows, _Strip.parse(path for row in rows for path in row.drops))

    def drop(self, new: dict[str, Any], old: Any) -> None:
        if isinstance(old, dict):
            for gated in self.rows:
                if gated.used_by(old):
                    # Some field stays, as the stored object uses it: row by row.
                    for row in self.rows:
                        if not row.used_by(old):
                            row.drop(new)
                    return
        self.strip.apply(new)


# The plans of each gates object, by shape: gates do not change once made, and every write would
# otherwise ask every row. Keyed by identity (FeatureGates is a Mapping, so unhashable) and
# forgotten with the object.
_plans: dict[int, tuple[weakref.ReferenceType[Any], dict[str, _Plan]]] = {}


def _plan(shape: str, gates: Any) -> _Plan:
    key = id(gates)
    entry = _plans.get(key)
    if entry is None or entry[0]() is not gates:
        try:
            ref = weakref.ref(gates, lambda _ref: _plans.pop(key, None))
        except TypeError:  # an object that takes no weak reference: ask it every time
            return _Plan.of(shape, gates)
        entry = _plans[key] = (ref, {})
    plan = entry[1].get(shape)
    if plan is None:
        plan = entry[1][shape] = _Plan.of(shape, gates)
    return plan


def drop_disabled(shape: str, new: Any, old: Any, gates: Any) -> None:
    """Clear from ``new`` (an object of ``shape``) the fields of disabled gates that ``old``, the
    stored object it replaces (None on create), does not use."""
    if isinstance(new, dict):
        _plan(shape, gates).drop(new, old)


def schema_properties(shapes: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The properties the official definitions lack, of the rows of ``shapes``: definition name ->
    property name -> JSON schema (a kind's ``extra_schema_properties``)."""
    properties: dict[str, dict[str, Any]] = {}
    wanted = set(shapes)
    for gated in GATED_FIELDS:
        if gated.schema is not None and gated.shape in wanted:
            name = gated.drops[0].rsplit(".", 1)[-1]
            properties.setdefault(gated.schema_definition, {})[name] = dict(gated.schema)
    return properties


# The gates of the fields the allocator honours: the scheduler reads these through its features.
ALLOCATOR_FIELD_GATES: frozenset[str] = frozenset(g for gated in GATED_FIELDS if gated.allocator for g in gated.gates)
