"""Structured-parameters device allocation (upstream's DRA allocator, "incubating" flavour).

Pure logic, no I/O: the scheduler feeds it the objects its informers hold and writes the
results itself.

* :class:`ResourceIndex` holds ResourceSlices (DeviceTaintRules applied), DeviceClasses and a
  per-node view of usable pools. Build it once and update it incrementally
  (``set_slice``/``remove_slice``/...); per-device CEL results live on the prepared devices, so
  they survive as long as the slice (uid, generation) does.
* :class:`AllocatedState` says which devices, shares and capacity are already taken (allocated
  claims plus the scheduler's in-flight allocations).
* :class:`Allocator` (one per scheduling cycle) answers ``allocate(node, claims)`` with
  :class:`Allocated` (one ``status.allocation`` dict per claim) or :class:`Unschedulable`, and
  raises :class:`AllocationError` for problems with the input itself (bad CEL, unknown class,
  feature disabled), which the scheduler reports as an Error status like upstream.

The search is upstream's ``allocateOne``: depth first over claims, requests and device slots,
trying devices in a deterministic order (pools by driver/pool, binding-condition pools last,
slices by name, devices in slice order), combinations only within a request, first full
solution wins, everything undone on backtrack. Like upstream it gives up on a path as soon as
a claim cannot stay within the result limit whatever the devices. A search still running
after ``BOUND_AFTER_STEPS`` starts over with supply checks that drop paths without any
solution, so it finds the same first solution as the plain search, usually far sooner; the
filter timeout stays the last resort.
"""

from __future__ import annotations

import sys
import time
import uuid
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from operator import attrgetter
from typing import Any

import orjson

from kube.cel import CELCompileError, CELRuntimeError, CompiledSelector, DeviceView, compile_selector
from kube.devicetaints import rule_selects
from kube.labels import node_selector_matches
from kube.pods import claim_status_amounts
from kube.quantity import DECIMAL_SI, Quantity
from kube.tolerations import tolerations_tolerate

DeviceID = tuple[str, str, str]  # (driver, pool, device)
PoolID = tuple[str, str]  # (driver, pool)

MAX_RESULTS = 32  # AllocationResultsMaxSize: results per claim
# A search still running after this many steps also checks supply before trying devices
# (``Allocator(bound_after=...)``); searches that finish sooner never pay for those checks.
BOUND_AFTER_STEPS = 256
_CHECKPOINT_STEPS = 256  # deadline (and supply check) checks this often
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class AllocationError(Exception):
    """The input cannot be allocated on any node (bad CEL, unknown class, disabled feature...).

    Upstream aborts the scheduling attempt with an Error status for these. ``device`` names the
    device a failing selector was evaluated on (not part of upstream's message; for logs and tests).
    """

    device: str | None = None


class Allocated:
    """A solution: one ``status.allocation`` dict per input claim, same order.

    The dicts are built on first access, so filtering many nodes only pays for the search.
    """

    __slots__ = ("_allocations", "_build", "_exclusive", "free_left")

    def __init__(
        self,
        allocations: list[dict[str, Any]] | None = None,
        build: Callable[[], list[dict[str, Any]]] | None = None,
        exclusive: int | None = None,
        free_left: int | None = None,
    ) -> None:
        self._allocations = allocations
        self._build = build
        self._exclusive = exclusive
        # Devices of the node nobody has allocated exclusively, minus this solution's (the score).
        self.free_left = free_left

    @property
    def exclusive_devices(self) -> int:
        """Results that take a device exclusively (neither admin access nor a share).

        Known from the search without building the dicts, so scoring many nodes stays cheap.
        """
        if self._exclusive is None:
            self._exclusive = sum(
                1 for a in self.allocations for r in (a.get("devices") or {}).get("results") or [] if not r.get("adminAccess") and not r.get("shareID")
            )
        return self._exclusive

    @property
    def allocations(self) -> list[dict[str, Any]]:
        """The ``status.allocation`` dicts (built once)."""
        if self._allocations is None:
            self._allocations = self._build() if self._build is not None else []
            self._build = None
        return self._allocations

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Allocated) and self.allocations == other.allocations

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Allocated({self.allocations!r})"


class Unschedulable:
    """No solution on this node; ``message`` says what the user can change.

    ``reason`` is the short per-node form the scheduler counts; the details after it are worked
    out only when ``message`` is read, because most nodes that fail are never explained.
    """

    __slots__ = ("_details", "_message", "reason")

    def __init__(self, message: str | None = None, *, reason: str = "", details: Callable[[], str] | None = None) -> None:
        self.reason = reason or (message or "").split(": ", 1)[0]
        self._message = message
        self._details = details

    @property
    def message(self) -> str:
        """The whole explanation (built once)."""
        if self._message is None:
            self._message = f"{self.reason}: {self._details()}" if self._details is not None else self.reason
            self._details = None
        return self._message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unschedulable) and self.message == other.message

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Unschedulable({self.message!r})"


AllocationOutcome = Allocated | Unschedulable


@dataclass(frozen=True)
class AllocatorFeatures:
    """The allocator's view of the feature gates (upstream ``AllocatorFeatures()``)."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True
    # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus together.
    binding_conditions: bool = True
    consumable_capacity: bool = True
    list_attributes: bool = False
    node_allocatable_resources: bool = False
    # KEP-5194: not an allocator rule, but the scheduler reads all its gates from here.
    reserved_for_workloads: bool = False
    # The Workload API (PodGroups, gangs) and KEP-5729's PodGroup claims, likewise.
    generic_workload: bool = False
    workload_resource_claims: bool = False
    # KEP-5690 (DRAPreemption): preemption may free devices, not only cpu, memory and pod slots.
    dra_preemption: bool = True
    # Extended resources backed by devices (DRAExtendedResource): the scheduler's special claim.
    extended_resource: bool = True

    @classmethod
    def from_gates(cls, gates: Mapping[str, bool]) -> AllocatorFeatures:
        """Map feature gates (e.g. ``kube.features.FeatureGates``) to allocator features."""

        def on(name: str, default: bool) -> bool:
            return bool(gates.get(name, default))

        taints = on("DRADeviceTaints", True)
        return cls(
            admin_access=on("DRAAdminAccess", True),
            prioritized_list=on("DRAPrioritizedList", True),
            partitionable_devices=on("DRAPartitionableDevices", True),
            device_taints=taints,
            device_taint_rules=taints and on("DRADeviceTaintRules", True),
            binding_conditions=on("DRADeviceBindingConditions", True) and on("DRAResourceClaimDeviceStatus", True),
            consumable_capacity=on("DRAConsumableCapacity", True),
            list_attributes=on("DRAListTypeAttributes", False),
            node_allocatable_resources=on("DRANodeAllocatableResources", False),
            reserved_for_workloads=on("DRAReservedForWorkloads", False),
            generic_workload=on("GenericWorkload", False),
            workload_resource_claims=on("GenericWorkload", False) and on("DRAWorkloadResourceClaims", False),
            dra_preemption=on("DRAPreemption", True),
            extended_resource=on("DRAExtendedResource", True),
        )


# --- prepared devices and the resource index ----------------------------------------------------


def _quantity(value: Any) -> Quantity:
    return value if isinstance(value, Quantity) else Quantity.parse(value)


# A device's attributes are not kept: they are read from its slice (the informer's compact copy)
# when a CEL view or a constraint needs them. Decoded attributes and CEL views (``DeviceView``,
# several times the device's JSON) are kept for the devices read last, process-wide; CEL results
# stay cached per device, so a view is rebuilt only for a new expression.
VIEWS_KEPT = 1024
SHARED_KEPT = 4096  # distinct device values (capacities, counters, taints...) shared across slices
_viewed: deque[_Device] = deque()
# The devices of the slice read last (record, its devices): a search reads one slice's devices in a row.
_last_read: list[tuple[_Slice, Sequence[Mapping[str, Any]]]] = []

# Shared by every device without the field; like everything prepared, never modified.
_NO_LIST: list[Any] = []
_NO_MAP: dict[str, Any] = {}
_UNSET = object()


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a JSON value (types kept apart: 1, 1.0 and true differ)."""
    if isinstance(value, dict):
        return ("d", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("l", tuple(_freeze(v) for v in value))
    return (type(value).__name__, value)


class _SharedValues:
    """Equal values among devices, kept once: a fleet of identical GPUs repeats the same capacity,
    counters and taints in every device of every slice, and each decoded copy costs several times
    its JSON. One per index; best effort and bounded (forgets everything past ``SHARED_KEPT``
    distinct values; values already shared stay so). Shared values are never modified."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}
        self._capacities: dict[int, tuple[Mapping[str, Any], dict[str, Quantity], dict[str, Mapping[str, Any]]]] = {}

    def _remember(self, key: Any, value: Any) -> Any:
        if len(self._values) >= SHARED_KEPT:
            self._values.clear()
            self._capacities.clear()
        return self._values.setdefault(key, value)

    def value(self, value: Any) -> Any:
        """``value``, or an equal one seen before."""
        if not value:
            return value
        key = _freeze(value)
        found = self._values.get(key)
        return found if found is not None else self._remember(key, value)

    def derived(self, raw: Any, build: Callable[[Any], Any]) -> Any:
        """``build(raw)``, once per distinct ``raw`` value."""
        if not raw:
            return None
        key = ("derived", _freeze(raw))
        made = self._values.get(key)
        return made if made is not None else self._remember(key, build(raw))

    def capacity(self, raw: Mapping[str, Any]) -> tuple[dict[str, Quantity], dict[str, Mapping[str, Any]]]:
        """Capacity quantities and request policies of a (shared) ``capacity`` value."""
        prepared = self._capacities.get(id(raw))
        if prepared is None or prepared[0] is not raw:
            capacity: dict[str, Quantity] = {}
            policies: dict[str, Mapping[str, Any]] = {}
            for key, cap in raw.items():
                capacity[key] = _quantity(cap.get("value", "0"))
                if cap.get("requestPolicy"):
                    policies[key] = cap["requestPolicy"]
            prepared = self._capacities[id(raw)] = (raw, capacity or _NO_MAP, policies or _NO_MAP)
        return prepared[1], prepared[2]


def _consumes(raw: list[Mapping[str, Any]]) -> list[tuple[str, dict[str, Quantity]]]:
    return [(c.get("counterSet", ""), {k: _quantity(v.get("value", "0")) for k, v in (c.get("counters") or {}).items()}) for c in raw]


class _Placement:
    """What a device shares with others of its slice (one instance per distinct combination): its
    slice, the node selection it was published with and the one its allocation carries, and the
    fields allocation reads rarely."""

    __slots__ = (
        "all_nodes", "binding_failure_conditions", "binds_to_node", "node_allocatable", "node_local", "node_name", "node_selector",
        "policies", "raw_capacity", "record",
    )  # fmt: skip

    def __init__(self, record: _Slice, spec: Mapping[str, Any], dev: Mapping[str, Any], shared: _SharedValues) -> None:
        self.record = record
        self.raw_capacity: Mapping[str, Any] = shared.value(dev.get("capacity")) or _NO_MAP
        self.policies = shared.capacity(self.raw_capacity)[1]
        self.node_allocatable: Mapping[str, Any] = shared.value(dev.get("nodeAllocatableResources")) or _NO_MAP
        self.binding_failure_conditions: list[str] = shared.value(list(dev.get("bindingFailureConditions") or [])) or _NO_LIST
        self.binds_to_node = bool(dev.get("bindsToNode"))
        # The device's own node selection (per-device node selection), as published.
        self.node_name: str = dev.get("nodeName") or ""
        self.all_nodes = bool(dev.get("allNodes"))
        # Node selection that ends up in the allocation result.
        if spec.get("perDeviceNodeSelection"):
            self.node_local = bool(dev.get("nodeName"))
            self.node_selector = None if dev.get("allNodes") else shared.value(dev.get("nodeSelector"))
        else:
            self.node_local = bool(spec.get("nodeName"))
            self.node_selector = spec.get("nodeSelector")

    def key(self) -> tuple[Any, ...]:
        return (
            id(self.raw_capacity), id(self.node_allocatable), id(self.binding_failure_conditions), self.binds_to_node, self.node_name,
            self.all_nodes, self.node_local, id(self.node_selector),
        )  # fmt: skip


class _Device:
    """One published device, prepared once per slice version; caches CEL results.

    Keeps what the search reads on every device (equal values of a slice's devices shared, absent
    fields one empty list or map) and a ``_Placement`` shared with the slice's like devices; the
    attributes are read from the slice when needed (see ``VIEWS_KEPT``).
    """

    __slots__ = (
        "allow_multiple", "attrs", "binding_conditions", "capacity", "cel", "cel_expression", "cel_result", "consumes", "id", "name",
        "placement", "position", "taints", "view",
    )  # fmt: skip

    def __init__(
        self, spec: Mapping[str, Any], dev: Mapping[str, Any], record: _Slice, position: int, taints: list[dict[str, Any]],
        shared: _SharedValues | None = None, placements: dict[tuple[Any, ...], _Placement] | None = None,
    ) -> None:  # fmt: skip
        shared = shared or _SharedValues()
        name = dev.get("name", "")
        self.name: str = sys.intern(name) if type(name) is str else name
        self.id: DeviceID = (record.driver, record.pool, self.name)
        placement = _Placement(record, spec, dev, shared)
        if placements is not None:
            placement = placements.setdefault(placement.key(), placement)
        self.placement = placement
        self.position = position
        self.capacity = shared.capacity(placement.raw_capacity)[0]
        self.allow_multiple = bool(dev.get("allowMultipleAllocations"))
        self.consumes: list[tuple[str, dict[str, Quantity]]] = shared.derived(dev.get("consumesCounters"), _consumes) or _NO_LIST
        self.taints = shared.value(taints) or _NO_LIST
        self.binding_conditions: list[str] = shared.value(list(dev.get("bindingConditions") or [])) or _NO_LIST
        self.attrs: Mapping[str, Any] | None = None  # decoded while the device is among the VIEWS_KEPT read last
        self.view: DeviceView | None = None
        self.cel_expression: str | None = None  # the first expression evaluated and its result, then ``cel``
        self.cel_result: bool | CELRuntimeError = False
        self.cel: dict[str, bool | CELRuntimeError] | None = None

    driver = property(lambda self: self.id[0])
    pool = property(lambda self: self.id[1])
    # Read where the search rarely looks: shared with the slice's like devices.
    raw_capacity = property(attrgetter("placement.raw_capacity"))
    policies = property(attrgetter("placement.policies"))
    node_allocatable = property(attrgetter("placement.node_allocatable"))
    binding_failure_conditions = property(attrgetter("placement.binding_failure_conditions"))
    binds_to_node = property(attrgetter("placement.binds_to_node"))
    node_name = property(attrgetter("placement.node_name"))
    all_nodes = property(attrgetter("placement.all_nodes"))
    node_local = property(attrgetter("placement.node_local"))
    node_selector = property(attrgetter("placement.node_selector"))

    @property
    def attributes(self) -> Mapping[str, Any]:
        """The device's attributes as published (read from its slice, kept while recently used)."""
        attrs = self.attrs
        if attrs is None:
            record = self.placement.record
            if _last_read and _last_read[0][0] is record:
                devices = _last_read[0][1]
            else:
                devices = record.spec().get("devices") or _NO_LIST
                _last_read[:] = [(record, devices)]
            dev = devices[self.position] if self.position < len(devices) else _NO_MAP
            if dev.get("name") != self.name:  # the slice changed since (its new version replaces this device soon)
                dev = next((d for d in devices if d.get("name") == self.name), _NO_MAP)
            attrs = self.attrs = dev.get("attributes") or _NO_MAP
            _viewed.append(self)  # a device is there while its attributes are kept
            if len(_viewed) > VIEWS_KEPT:
                old = _viewed.popleft()
                old.view = old.attrs = None
        return attrs

    def evaluate(self, selector: CompiledSelector, deadline: float | None = None) -> bool:
        """A selector's result for this device, cached by expression (errors too, but not an
        evaluation interrupted at ``deadline``)."""
        expression = selector.expression
        if self.cel_expression == expression:
            cached: bool | CELRuntimeError = self.cel_result
        else:
            cel = self.cel
            found = cel.get(expression, _UNSET) if cel is not None else _UNSET
            cached = self._evaluate(selector, expression, deadline) if found is _UNSET else found  # type: ignore[assignment]
        if cached is True or cached is False:
            return cached
        raise cached

    def cached_result(self, expression: str) -> bool | CELRuntimeError | None:
        """The remembered result of ``expression`` on this device, if any."""
        if self.cel_expression == expression:
            return self.cel_result
        return self.cel.get(expression) if self.cel is not None else None

    def _evaluate(self, selector: CompiledSelector, expression: str, deadline: float | None) -> bool | CELRuntimeError:
        """Evaluate and remember a selector not evaluated on this device before."""
        view = self.view
        if view is None:
            view = self.view = DeviceView({
                "driver": self.id[0], "attributes": self.attributes, "capacity": self.placement.raw_capacity,
                "allowMultipleAllocations": self.allow_multiple,
            })  # fmt: skip
        result: bool | CELRuntimeError
        try:
            result = bool(selector.evaluate(view, deadline=deadline))
        except CELRuntimeError as exc:
            if exc.interrupted:
                raise
            result = exc
        if self.cel_expression is None:
            self.cel_expression, self.cel_result = expression, result
        else:
            if self.cel is None:
                self.cel = {}
            self.cel[expression] = result
        return result


def _device_matches_node(dev: _Device, node: Mapping[str, Any], node_name: str) -> bool:
    """Per-device node selection: whether the device is reachable from ``node``."""
    if dev.node_name:
        return dev.node_name == node_name
    if dev.all_nodes:
        return True
    if dev.node_selector is not None:
        return node_selector_matches(dev.node_selector, node)
    return False


class _Slice:
    """What the index keeps of one ResourceSlice: the fields pools and node views are built from,
    and the object itself, or a loader when the caller keeps it compactly (read only to prepare
    the devices, once per slice version)."""

    __slots__ = ("all_nodes", "count", "driver", "generation", "load", "node_name", "node_selector", "obj", "per_device", "pool", "shared_counters")

    def __init__(self, obj: Mapping[str, Any], load: Callable[[], Mapping[str, Any] | None] | None) -> None:
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        self.driver: str = spec.get("driver", "")
        self.pool: str = pool.get("name", "")
        self.generation = int(pool.get("generation", 0))
        self.count = int(pool.get("resourceSliceCount", 0))
        self.node_name: str = spec.get("nodeName") or ""
        self.all_nodes = bool(spec.get("allNodes"))
        self.node_selector: Mapping[str, Any] | None = spec.get("nodeSelector")
        self.per_device = bool(spec.get("perDeviceNodeSelection"))
        self.shared_counters: list[Mapping[str, Any]] = spec.get("sharedCounters") or []
        self.obj = obj if load is None else None
        self.load = load

    def spec(self) -> Mapping[str, Any]:
        obj = self.obj if self.obj is not None else self.load() if self.load is not None else None
        return (obj or {}).get("spec") or {}


@dataclass
class _PoolView:
    """A pool as seen from one node."""

    id: PoolID
    devices: list[_Device]  # devices targeting the node, in allocation order
    incomplete: bool = False
    invalid: str | None = None
    has_binding: bool = False


@dataclass
class _NodeView:
    pools: list[_PoolView]
    candidates: list[_Device]  # devices of usable (complete, valid) pools, in allocation order
    # Candidates not allocated exclusively, for one AllocatedState at the pools' change counts
    # (see AllocatedState.free_candidates).
    free: tuple[Any, int, list[_Device]] | None = None


class ResourceIndex:
    """ResourceSlices, DeviceClasses and DeviceTaintRules, indexed for allocation.

    Slices are grouped by node name and by pool; the per-node pool view is computed on first use
    and cached until a slice or rule changes. Prepared devices (with their CEL result cache) are
    kept per slice version, so an unrelated update does not discard them.
    """

    def __init__(
        self,
        slices: Iterable[Mapping[str, Any]] = (),
        classes: Iterable[Mapping[str, Any]] = (),
        taint_rules: Iterable[Mapping[str, Any]] = (),
        features: AllocatorFeatures | None = None,
    ) -> None:
        self.features = features or AllocatorFeatures()
        self._slices: dict[str, _Slice] = {}
        self.classes: dict[str, Mapping[str, Any]] = {}
        self.classes_version = 0  # bumped on every class change (SearchCache entries depend on classes)
        self._rules: dict[str, Mapping[str, Any]] = {}
        self._devices: dict[str, tuple[_Slice, list[_Device]]] = {}
        self._by_node: dict[str, list[str]] = {}
        self._other: list[str] = []  # slices without spec.nodeName
        self._by_pool: dict[PoolID, list[str]] = {}
        self._views: dict[str, tuple[Mapping[str, Any], Any, _NodeView]] = {}  # node name -> (node, labels, view)
        self._pool_devices: dict[PoolID, tuple[dict[str, _Device], dict[str, dict[str, Quantity]], str | None]] = {}
        self._shared = _SharedValues()
        self._dirty = True
        for s in slices:
            self.set_slice(s)
        for c in classes:
            self.set_class(c)
        for r in taint_rules:
            self._rules[r["metadata"]["name"]] = r

    # --- incremental updates ---

    def set_slice(self, obj: Mapping[str, Any], load: Callable[[], Mapping[str, Any] | None] | None = None) -> None:
        """Add or replace a ResourceSlice. With ``load`` (which returns this version of the object)
        the index keeps only what it indexes by, and reads the devices through ``load`` when it
        prepares them."""
        self._slices[obj["metadata"]["name"]] = _Slice(obj, load)
        self._dirty = True

    def remove_slice(self, name: str) -> None:
        """Forget a ResourceSlice."""
        self._slices.pop(name, None)
        self._devices.pop(name, None)
        self._dirty = True

    def set_class(self, obj: Mapping[str, Any]) -> None:
        """Add or replace a DeviceClass."""
        self.classes[obj["metadata"]["name"]] = obj
        self.classes_version += 1

    def remove_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        self.classes.pop(name, None)
        self.classes_version += 1

    def set_taint_rule(self, obj: Mapping[str, Any]) -> None:
        """Add or replace a DeviceTaintRule (re-taints every device)."""
        self._rules[obj["metadata"]["name"]] = obj
        self._devices.clear()
        self._dirty = True

    def remove_taint_rule(self, name: str) -> None:
        """Forget a DeviceTaintRule."""
        if self._rules.pop(name, None) is not None:
            self._devices.clear()
            self._dirty = True

    # --- derived structures ---

    def _usable(self, record: _Slice) -> bool:
        # With partitionable devices off, upstream skips these slices entirely.
        return self.features.partitionable_devices or not (record.per_device or record.shared_counters)

    def _rebuild(self) -> None:
        self._by_node = {}
        self._other = []
        self._by_pool = {}
        self._views = {}
        self._pool_devices = {}
        for name in sorted(self._slices):
            record = self._slices[name]
            if not self._usable(record):
                continue
            if record.node_name:
                self._by_node.setdefault(record.node_name, []).append(name)
            else:
                self._other.append(name)
            self._by_pool.setdefault((record.driver, record.pool), []).append(name)
        self._dirty = False

    def slice_devices(self, name: str) -> list[_Device]:
        """Prepared devices of a slice (cached per slice version)."""
        record = self._slices[name]
        cached = self._devices.get(name)
        if cached is not None and cached[0] is record:
            return cached[1]
        spec = record.spec()
        driver, pool = record.driver, record.pool
        rules = list(self._rules.values()) if self.features.device_taint_rules else []
        devices = []
        shared = self._shared
        placements: dict[tuple[Any, ...], _Placement] = {}
        for position, dev in enumerate(spec.get("devices") or []):
            taints = list(dev.get("taints") or []) if self.features.device_taints else []
            for rule in rules:
                if rule_selects(rule, driver, pool, dev.get("name", "")):
                    taints.append((rule.get("spec") or {}).get("taint") or {})
            devices.append(_Device(spec, dev, record, position, taints, shared, placements))
        self._devices[name] = (record, devices)
        _last_read[:] = [(record, spec.get("devices") or _NO_LIST)]  # CEL views of these devices come next
        return devices

    def _pool_generation(self, names: list[str]) -> tuple[int, list[str]]:
        """Newest generation among ``names`` and the slices that have it."""
        best = -1
        chosen: list[str] = []
        for n in names:
            gen = self._slices[n].generation
            if gen > best:
                best, chosen = gen, [n]
            elif gen == best:
                chosen.append(n)
        return best, chosen

    def _pool_info(self, pool_id: PoolID, names: list[str]) -> tuple[dict[str, _Device], dict[str, dict[str, Quantity]], str | None]:
        """All devices and counter sets of the pool at one generation, plus a validation error."""
        cached = self._pool_devices.get(pool_id)
        if cached is not None:
            return cached
        devices: dict[str, _Device] = {}
        counters: dict[str, dict[str, Quantity]] = {}
        problem: str | None = None
        for n in names:
            for cs in self._slices[n].shared_counters:
                if cs.get("name") in counters and problem is None:
                    problem = f"duplicate counter set name {cs.get('name')}"
                counters[cs.get("name", "")] = {k: _quantity(v.get("value", "0")) for k, v in (cs.get("counters") or {}).items()}
            for d in self.slice_devices(n):
                if d.name in devices and problem is None:
                    problem = f"duplicate device name {d.name}"
                devices[d.name] = d
        if problem is None:
            for d in devices.values():
                for set_name, used in d.consumes:
                    if set_name not in counters:
                        problem = f"device {d.name} consumes counters from unknown counter set {set_name}"
                        break
                    missing = sorted(set(used) - set(counters[set_name]))
                    if missing:
                        problem = f"device {d.name} consumes unknown counter {missing[0]} of counter set {set_name}"
                        break
                if problem:
                    break
        info = (devices, counters, problem)
        self._pool_devices[pool_id] = info
        return info

    def pool_counters(self, pool_id: PoolID) -> tuple[dict[str, _Device], dict[str, dict[str, Quantity]]]:
        """Devices and shared counters of the newest complete-or-not generation of a pool."""
        if self._dirty:
            self._rebuild()
        names = self._by_pool.get(pool_id, [])
        _, chosen = self._pool_generation(names)
        devices, counters, _ = self._pool_info(pool_id, chosen)
        return devices, counters

    def device(self, device_id: DeviceID) -> _Device | None:
        """Look a device up in the newest generation of its pool."""
        devices, _ = self.pool_counters((device_id[0], device_id[1]))
        return devices.get(device_id[2])

    def node_view(self, node: Mapping[str, Any]) -> _NodeView:
        """Pools usable from ``node`` and the ordered candidate devices (cached per node labels)."""
        if self._dirty:
            self._rebuild()
        meta = node.get("metadata") or {}
        node_name: str = meta.get("name", "")
        cached = self._views.get(node_name)
        if cached is not None and cached[0] is node:
            return cached[2]  # the same node object: labels cannot have changed
        labels = meta.get("labels") or {}
        if cached is not None and cached[1] == labels:
            self._views[node_name] = (node, cached[1], cached[2])
            return cached[2]
        view = self._build_view(node, node_name)
        self._views[node_name] = (node, labels, view)  # informer objects are never changed in place: no copy
        return view

    def _build_view(self, node: Mapping[str, Any], node_name: str) -> _NodeView:
        relevant: dict[PoolID, list[str]] = {}
        per_device: set[str] = set()
        for name in self._by_node.get(node_name, []):
            record = self._slices[name]
            relevant.setdefault((record.driver, record.pool), []).append(name)
        for name in self._other:
            record = self._slices[name]
            if record.all_nodes:
                ok = True
            elif record.per_device:
                ok = any(_device_matches_node(d, node, node_name) for d in self.slice_devices(name))
                # A counter-only slice carries no devices; it is pulled in via the pool instead.
                per_device.add(name)
            elif record.node_selector is not None:
                ok = node_selector_matches(record.node_selector, node)
            else:
                ok = False  # unknown future node selection mode
            if ok:
                relevant.setdefault((record.driver, record.pool), []).append(name)
        pools: list[_PoolView] = []
        for pool_id, names in relevant.items():
            gen, chosen = self._pool_generation(names)
            count = self._slices[chosen[0]].count
            pool = _PoolView(pool_id, [])
            all_gen, all_chosen = self._pool_generation(self._by_pool.get(pool_id, []))
            if len(chosen) != count:
                if all_gen > gen:
                    continue  # obsolete: a newer generation is being published elsewhere
                pool.incomplete = len(all_chosen) != count
            for name in sorted(chosen):
                for dev in self.slice_devices(name):
                    if name in per_device and not _device_matches_node(dev, node, node_name):
                        continue
                    pool.devices.append(dev)
                    if dev.binding_conditions:
                        pool.has_binding = True
            if not pool.incomplete:
                if all_gen == gen:
                    # Validate against every slice of that generation (also those for other nodes).
                    pool.invalid = self._pool_info(pool_id, all_chosen)[2]
                else:
                    pool.invalid = self._validate_only(chosen)
            pools.append(pool)
        pools.sort(key=lambda p: (p.has_binding, p.id))
        usable = [p for p in pools if not p.incomplete and p.invalid is None]
        # Lists here are never changed once built: one pool's list serves as the candidates too.
        candidates = usable[0].devices if len(usable) == 1 else [d for p in usable for d in p.devices]
        return _NodeView(pools, candidates)

    def _validate_only(self, names: list[str]) -> str | None:
        """Duplicate-name check for a stale-but-complete generation (kept like upstream)."""
        seen: set[str] = set()
        for n in names:
            for d in self.slice_devices(n):
                if d.name in seen:
                    return f"duplicate device name {d.name}"
                seen.add(d.name)
        return None


# --- allocated state -------------------------------------------------------------------------------


@dataclass
class AllocatedState:
    """Devices already taken: exclusive devices, shares and aggregated consumed capacity."""

    devices: set[DeviceID] = field(default_factory=set)
    shared_ids: set[tuple[str, str, str, str]] = field(default_factory=set)
    shared_devices: set[DeviceID] = field(default_factory=set)
    capacity: dict[DeviceID, dict[str, Quantity]] = field(default_factory=dict)
    # Allocations added per pool (exclusive or shared): what was worked out for a node's pools
    # (free devices, a search) stays valid while their counts do not move.
    pool_changes: dict[PoolID, int] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[Mapping[str, Any]], in_flight: Iterable[Mapping[str, Any]] | Mapping[str, Any] = ()) -> AllocatedState:
        """Build from allocated claims plus in-flight ones (uid -> claim, or claims); in-flight wins per uid."""
        by_uid: dict[str, Mapping[str, Any]] = {}
        for c in claims:
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        flight = in_flight.values() if isinstance(in_flight, Mapping) else in_flight
        for c in flight:
            by_uid[(c.get("metadata") or {}).get("uid") or str(id(c))] = c
        state = cls()
        for c in by_uid.values():
            state.add_allocation((c.get("status") or {}).get("allocation"))
        return state

    def add_allocation(self, allocation: Mapping[str, Any] | None) -> None:
        """Account one ``status.allocation``; admin-access results never block others."""
        if not allocation:
            return
        for r in (allocation.get("devices") or {}).get("results") or []:
            if r.get("adminAccess"):
                continue
            dev_id = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            self.pool_changes[dev_id[:2]] = self.pool_changes.get(dev_id[:2], 0) + 1
            if r.get("shareID"):
                self.shared_ids.add((*dev_id, r["shareID"]))
                self.shared_devices.add(dev_id)
                agg = self.capacity.setdefault(dev_id, {})
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) + _quantity(value)
            else:
                self.devices.add(dev_id)

    def changed(self, add: Iterable[Mapping[str, Any]] = (), remove: Iterable[Mapping[str, Any]] = ()) -> AllocatedState:
        """A copy with ``remove``'s devices released and ``add``'s taken (a what-if for preemption;
        the copy moves every pool's change count, so no cached search of this state is reused)."""
        state = AllocatedState(
            set(self.devices), set(self.shared_ids), set(self.shared_devices),
            {dev: dict(amounts) for dev, amounts in self.capacity.items()}, {pool: n + 1 for pool, n in self.pool_changes.items()},
        )  # fmt: skip
        for allocation in remove:
            for r in (allocation.get("devices") or {}).get("results") or []:
                if r.get("adminAccess"):
                    continue
                dev_id = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                if not r.get("shareID"):
                    state.devices.discard(dev_id)
                    continue
                state.shared_ids.discard((*dev_id, r["shareID"]))
                if not any(s[:3] == dev_id for s in state.shared_ids):
                    state.shared_devices.discard(dev_id)
                agg = state.capacity.get(dev_id, {})
                for key, value in (r.get("consumedCapacity") or {}).items():
                    agg[key] = agg.get(key, Quantity(0)) - _quantity(value)
        for allocation in add:
            state.add_allocation(allocation)
        return state

    def stamp(self, view: _NodeView) -> int:
        """Changes to the view's pools so far; counts only grow, so their sum moves whenever one does."""
        changes = self.pool_changes
        pools = view.pools
        return changes.get(pools[0].id, 0) if len(pools) == 1 else sum(changes.get(p.id, 0) for p in pools)

    def free_candidates(self, view: _NodeView) -> list[_Device]:
        """The view's candidates minus devices allocated exclusively.

        Kept on the view across scheduling cycles and recomputed only when an allocation lands
        in one of its pools (the scheduler's state only grows between rebuilds), instead of once
        per node per cycle.
        """
        stamp = self.stamp(view)
        cached = view.free
        if cached is not None and cached[0] is self and cached[1] == stamp:
            return cached[2]
        taken = self.devices
        free = [d for d in view.candidates if d.id not in taken]
        if len(free) == len(view.candidates):
            free = view.candidates  # nothing taken: the same list, not a copy
        view.free = (self, stamp, free)
        return free


# --- prepared claims -------------------------------------------------------------------------------


@dataclass(eq=False)
class _Request:
    """A request without subrequests, or one subrequest."""

    name: str  # "req" or "req/sub"
    claim_ref: str
    parent: str  # top-level request name
    sub: str  # subrequest name or ""
    class_name: str
    class_obj: Mapping[str, Any]
    class_selectors: list[CompiledSelector]
    selectors: list[CompiledSelector]
    admin: bool
    all_mode: bool
    count: int
    tolerations: list[dict[str, Any]]
    capacity: dict[str, Quantity]
    subrequests: list[_Request] = field(default_factory=list)
    match: dict[_Device, bool] = field(default_factory=dict)


@dataclass(eq=False)
class _Constraint:
    requests: frozenset[str]
    attribute: str
    distinct: bool
    values: list[Any] = field(default_factory=list)  # one entry per device in scope (LIFO)

    def applies(self, req: _Request) -> bool:
        return not self.requests or req.parent in self.requests or (bool(req.sub) and req.name in self.requests)

    def admits(self, value: frozenset[Any] | None) -> bool:
        """Whether a device with this attribute value can join the devices taken so far."""
        if value is None:
            return False
        if self.distinct:
            return all(not (value & other) for other in self.values)
        return not self.values or bool(value & self.values[-1])


@dataclass(eq=False)
class _Claim:
    obj: Mapping[str, Any]
    ref: str  # namespace/name
    requests: list[_Request]
    constraints: list[tuple[frozenset[str], str, bool]]
    has_config: bool = True
    # The fewest results the claim can take; None when an "All" request makes it node dependent.
    fewest: int | None = None


def _claim_ref(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")


def _attribute_value(device: _Device, name: str, lists: bool) -> frozenset[Any] | None:
    """Value of a fully qualified attribute as a set of typed values (scalars: one element)."""
    attr = device.attributes.get(name)
    if attr is None:
        domain, _, short = name.partition("/")
        if domain == device.driver:
            attr = device.attributes.get(short)
    if not isinstance(attr, Mapping):
        return None
    for kind in ("int", "bool", "string", "version"):
        if attr.get(kind) is not None:
            return frozenset({(kind, attr[kind])})
    if lists:
        for kind in ("ints", "bools", "strings", "versions"):
            if attr.get(kind):
                return frozenset((kind[:-1], v) for v in attr[kind])
    return None


def _untolerated(device: _Device, req: _Request) -> bool:
    return any(t.get("effect") in _BLOCKING_EFFECTS and not tolerations_tolerate(req.tolerations, t) for t in device.taints)


def _round_to_policy(requested: Quantity, policy: Mapping[str, Any]) -> Quantity | None:
    """Apply a requestPolicy to a requested amount; None if the device cannot serve it."""
    valid_range = policy.get("validRange")
    if valid_range:
        low = _quantity(valid_range.get("min", "0"))
        value = max(requested, low)
        if valid_range.get("step"):
            step = _quantity(valid_range["step"]).as_fraction()
            if step > 0:
                steps = -(-(value.as_fraction() - low.as_fraction()) // step)
                value = _from_fraction(low.as_fraction() + steps * step, requested.format)
        if valid_range.get("max") is not None and value > _quantity(valid_range["max"]):
            return None
        return value
    valid_values = policy.get("validValues")
    if valid_values:
        for v in sorted((_quantity(x) for x in valid_values), key=lambda q: q.as_fraction()):
            if v >= requested:
                return v
        return None
    return requested


def _from_fraction(value: Fraction, fmt: str = DECIMAL_SI) -> Quantity:
    """An exact Quantity for a decimal fraction, rounded up at nano precision otherwise."""
    scale = 0
    while value.denominator != 1 and scale < 9:
        value *= 10
        scale += 1
    whole = -(-value.numerator // value.denominator)
    return Quantity.from_scaled(whole, -scale).with_format(fmt)


def _consumption(device: _Device, req: _Request) -> dict[str, Quantity] | None:
    """Capacity a shared device gives to ``req`` (all capacities), or None if it cannot."""
    if any(k not in device.capacity for k in req.capacity):
        return None
    out: dict[str, Quantity] = {}
    for key, total in device.capacity.items():
        policy = device.policies.get(key) or {}
        if key in req.capacity:
            amount = _round_to_policy(req.capacity[key], policy)
            if amount is None:
                return None
        elif policy.get("default") is not None:
            amount = _quantity(policy["default"])
        else:
            amount = total
        out[key] = amount
    return out


# --- the allocator ---------------------------------------------------------------------------------


class Allocator:
    """Allocates claims on candidate nodes; build one per scheduling cycle (state is fixed)."""

    def __init__(
        self,
        index: ResourceIndex,
        allocated: AllocatedState | None = None,
        features: AllocatorFeatures | None = None,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        share_id: Callable[[], str] | None = None,
        timeout: float | None = None,
        cache: SearchCache | None = None,
        bound_after: int = BOUND_AFTER_STEPS,
    ) -> None:
        self.index = index
        self.cache = cache
        self.bound_after = bound_after
        self.last_steps = 0  # steps of the last search (benchmarks and tests read it)
        # Upstream's filterTimeout (DRASchedulerFilterTimeout): one node's search is abandoned
        # after this many seconds, so a pathological claim cannot stall the scheduler.
        self.timeout = timeout
        # The running search's deadline: selector evaluations stop there too, as cel-go's do
        # under upstream's filter context ("operation interrupted").
        self.deadline: float | None = None
        self.allocated = allocated or AllocatedState()
        self.features = features or index.features
        # None: admission already checked the admin-access label (not re-checked here).
        self.namespace_labels = namespace_labels
        self.share_id = share_id or (lambda: str(uuid.uuid4()))
        self._prepared: dict[tuple[Any, ...], list[_Claim]] = {}
        self._available: dict[PoolID, dict[tuple[str, str], Fraction]] = {}
        self._last_prepared: tuple[Sequence[Mapping[str, Any]], list[_Claim]] | None = None
        self._signature: tuple[Sequence[Mapping[str, Any]], bytes | None] | None = None

    # --- preparation (node independent, cached per claim versions) ---

    def _prepare(self, claims: Sequence[Mapping[str, Any]]) -> list[_Claim]:
        last = self._last_prepared
        if last is not None and last[0] is claims and len(last[1]) == len(claims):
            return last[1]  # the same claim list for every node of a cycle
        key = tuple(
            ((c.get("metadata") or {}).get("uid"), (c.get("metadata") or {}).get("resourceVersion"), id(c)) for c in claims
        )
        cached = self._prepared.get(key)
        if cached is None:
            cached = [self._prepare_claim(c) for c in claims]
            if len(self._prepared) > 256:
                self._prepared.clear()
            self._prepared[key] = cached
        self._last_prepared = (claims, cached)
        return cached

    def _compile(self, expression: str, where: str, i: int) -> CompiledSelector:
        try:
            # Stored expressions are not re-checked against the estimated cost (upstream's
            # scheduler does not either); evaluation stops at the runtime cost limit.
            return compile_selector(expression, cost_limit=None)
        except CELCompileError as exc:
            raise AllocationError(f"{where}: selector #{i}: CEL compile error: {exc}") from None

    def _selectors(self, raw: Sequence[Mapping[str, Any]], where: str, missing: str) -> list[CompiledSelector]:
        out = []
        for i, sel in enumerate(raw or []):
            cel = sel.get("cel") or {}
            if not cel.get("expression"):
                raise AllocationError(missing.format(i=i))
            out.append(self._compile(cel["expression"], where, i))
        return out

    def _prepare_request(self, claim: Mapping[str, Any], ref: str, raw: Mapping[str, Any], parent: str, sub: str) -> _Request:
        name = f"{parent}/{sub}" if sub else parent
        where = f"claim {ref}, request {name}"
        selectors = self._selectors(
            raw.get("selectors") or [], f"claim {ref}", where + ", selector #{i}: CEL expression empty (unsupported selector type?)"
        )
        if "adminAccess" in raw and raw.get("adminAccess") is not None and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        capacity_raw = (raw.get("capacity") or {}).get("requests") or {}
        if capacity_raw and not self.features.consumable_capacity:
            raise AllocationError(f"{where}: has capacity requests, but the DRAConsumableCapacity feature is disabled")
        class_name = raw.get("deviceClassName") or ""
        if not class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        class_obj = self.index.classes.get(class_name)
        if class_obj is None:
            # Upstream wraps the lister's NotFound error.
            raise AllocationError(f'{where}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io "{class_name}" not found')
        class_selectors = self._selectors(
            (class_obj.get("spec") or {}).get("selectors") or [], f"class {class_name}",
            f"class {class_name}" + ": selector #{i}: CEL expression empty (unsupported selector type?)",
        )
        mode = raw.get("allocationMode") or "ExactCount"
        if mode not in ("ExactCount", "All"):
            raise AllocationError(f"{where}: unsupported count mode {mode}")
        admin = bool(raw.get("adminAccess"))
        if admin and self.namespace_labels is not None:
            ns = (claim.get("metadata") or {}).get("namespace", "")
            if (self.namespace_labels.get(ns) or {}).get(ADMIN_ACCESS_LABEL) != "true":
                raise _NotAdmin(
                    f"{where}: admin access requires the namespace {ns} to be labelled {ADMIN_ACCESS_LABEL}=\"true\""
                )
        return _Request(
            name=name, claim_ref=ref, parent=parent, sub=sub, class_name=class_name, class_obj=class_obj,
            class_selectors=class_selectors, selectors=selectors, admin=admin, all_mode=mode == "All",
            count=int(raw.get("count") or 1) if mode == "ExactCount" else 0,
            tolerations=list(raw.get("tolerations") or []),
            capacity={k: _quantity(v) for k, v in capacity_raw.items()},
        )

    def _prepare_claim(self, claim: Mapping[str, Any]) -> _Claim:
        ref = _claim_ref(claim)
        devices = (claim.get("spec") or {}).get("devices") or {}
        requests: list[_Request] = []
        fewest: int | None = 0
        for raw in devices.get("requests") or []:
            name = raw.get("name", "")
            if raw.get("firstAvailable"):
                if not self.features.prioritized_list:
                    raise AllocationError(f"claim {ref}, request {name}: has subrequests, but the DRAPrioritizedList feature is disabled")
                subs = [self._prepare_request(claim, ref, s, name, s.get("name", "")) for s in raw["firstAvailable"]]
                requests.append(_Request(name, ref, name, "", "", {}, [], [], False, False, 0, [], {}, subrequests=subs))
                if fewest is not None:
                    fewest = None if any(s.all_mode for s in subs) else fewest + min(s.count for s in subs)
            else:
                req = self._prepare_request(claim, ref, raw.get("exactly") or {}, name, "")
                requests.append(req)
                if fewest is not None:
                    fewest = None if req.all_mode else fewest + req.count
        constraints = []
        for c in devices.get("constraints") or []:
            if c.get("matchAttribute"):
                constraints.append((frozenset(c.get("requests") or ()), c["matchAttribute"], False))
            elif c.get("distinctAttribute"):
                constraints.append((frozenset(c.get("requests") or ()), c["distinctAttribute"], True))
            else:
                raise AllocationError("empty constraint (unsupported constraint type?)")
        has_config = bool(devices.get("config")) or any(
            (r.class_obj.get("spec") or {}).get("config") for top in requests for r in (top.subrequests or [top])
        )
        return _Claim(claim, ref, requests, constraints, has_config, fewest)

    # --- per-node entry point ---

    def allocate(self, node: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], allocation_timestamp: str | None = None) -> AllocationOutcome:
        """Find one allocation per claim on ``node`` (claims in pod order), or say why not.

        ``allocation_timestamp`` (RFC 3339) is written to every allocation when binding
        conditions are enabled, as upstream's PreBind does.
        """
        if not claims:
            return Allocated([])
        try:
            prepared = self._prepare(claims)
        except _NotAdmin as exc:
            return Unschedulable(str(exc), reason=str(exc))
        view = self.index.node_view(node)
        node_name = (node.get("metadata") or {}).get("name", "")
        signature = self._claims_signature(claims, prepared) if self.cache is not None else None
        stamp = self.allocated.stamp(view) if signature is not None else 0
        if self.cache is not None and signature is not None:
            hit = self.cache.get(node_name, view, self.allocated, stamp, self.index.classes_version, signature)
            if hit is not None:
                if hit.found:
                    return _allocated(hit, allocation_timestamp, self.share_id)
                return self._no_solution(prepared, view, hit.deepest)
        search = _Search(self, prepared, view, node_name)
        self.deadline = search.deadline
        try:
            search.found = search.run()
        except _TimedOut:
            return Unschedulable(TIMED_OUT)
        finally:
            self.deadline = None
            self.last_steps = search.steps
        if self.cache is not None and signature is not None:
            self.cache.put(node_name, view, self.allocated, stamp, self.index.classes_version, signature, search)
        if search.found:
            return _allocated(search, allocation_timestamp, self.share_id)
        return self._no_solution(prepared, view, search.deepest)

    def _no_solution(self, claims: list[_Claim], view: _NodeView, deepest: tuple[int, int]) -> Unschedulable:
        """Why a search that got no further than claim/request ``deepest`` failed (details built when read)."""
        invalid = [p for p in view.pools if p.invalid]
        if invalid:
            details = "; ".join(f"{p.id[0]}/{p.id[1]}: {p.invalid}" for p in invalid)
            return Unschedulable(f"invalid resource pools were encountered: {details}")

        def explain() -> str:
            ci, ri = deepest
            if ci < 0:
                return "no claim could be processed"
            return self.explain_request(claims[ci], claims[ci].requests[ri], view)

        return Unschedulable(reason=CANNOT_ALLOCATE, details=explain)

    def _claims_signature(self, claims: Sequence[Mapping[str, Any]], prepared: list[_Claim]) -> bytes | None:
        """What a search depends on besides node, state and classes: the claims' specs (once per claim list).

        None (no caching) when a request asks for admin access, whose check reads namespace labels.
        """
        cached = self._signature
        if cached is not None and cached[0] is claims:
            return cached[1]
        admin = any(r.admin for c in prepared for top in c.requests for r in (top.subrequests or [top]))
        signature = None if admin else orjson.dumps([c.get("spec") for c in claims])
        self._signature = (claims, signature)
        return signature

    def free_candidates(self, view: _NodeView) -> list[_Device]:
        """The node's candidates minus devices allocated exclusively before."""
        return self.allocated.free_candidates(view)

    # --- counters available per pool (depends only on the allocated state) ---

    def available_counters(self, pool_id: PoolID) -> dict[tuple[str, str], Fraction]:
        """Declared shared counters minus what allocated devices of the pool consume."""
        cached = self._available.get(pool_id)
        if cached is None:
            devices, sets = self.index.pool_counters(pool_id)
            cached = {(s, c): q.as_fraction() for s, counters in sets.items() for c, q in counters.items()}
            for dev in devices.values():
                if dev.consumes and (dev.id in self.allocated.devices or dev.id in self.allocated.shared_devices):
                    for set_name, used in dev.consumes:
                        for c, q in used.items():
                            if (set_name, c) in cached:
                                cached[(set_name, c)] -= q.as_fraction()
            self._available[pool_id] = cached
        return cached

    def explain_request(self, claim: _Claim, req: _Request, view: _NodeView) -> str:
        """Why a request fails on its own: matching vs. available devices."""
        if req.subrequests:
            return f"claim {claim.ref}, request {req.name}: none of the subrequests can be satisfied"
        matching = [d for d in view.candidates if self.selectable(req, d)]
        where = f"claim {claim.ref}, request {req.name}"
        if not matching:
            return f"{where}: no device matches the device class {req.class_name} and the request's selectors"
        free = [d for d in matching if req.admin or (d.allow_multiple and self.features.consumable_capacity) or d.id not in self.allocated.devices]
        tolerated = [d for d in free if not (self.features.device_taints and _untolerated(d, req))]
        need = len(matching) if req.all_mode else req.count
        if len(tolerated) < need:
            noun = "device" if need == 1 else "devices"
            text = f"{where}: needs {need} {noun}, {len(tolerated)} of {len(matching)} matching devices available"
            if len(tolerated) < len(free):
                text += f" ({len(free) - len(tolerated)} with untolerated taints)"
            return text
        return f"{where}: no combination of devices satisfies all requests and constraints"

    def selectable(self, req: _Request, dev: _Device) -> bool:
        """Class and request selectors (cached per request and device); errors are fatal."""
        hit = req.match.get(dev)
        if hit is not None:
            return hit
        ok = True
        if dev.binding_conditions and not self.features.binding_conditions:
            ok = False
        else:
            # Class selectors first: a device the class rejects never reaches a faulty request selector.
            for of_class, sels in ((True, req.class_selectors), (False, req.selectors)):
                for i, sel in enumerate(sels):
                    try:
                        if not dev.evaluate(sel, self.deadline):
                            ok = False
                            break
                    except CELRuntimeError as exc:
                        # Upstream's text: the class or the claim (not the request), cel-go's error alone.
                        where = f"class {req.class_name}" if of_class else f"claim {req.claim_ref}"
                        error = AllocationError(f"{where}: selector #{i}: CEL runtime error: {exc.detail}")
                        error.device = "/".join(dev.id)
                        raise error from None
                if not ok:
                    break
        req.match[dev] = ok
        return ok


class _TimedOut(Exception):
    """The search on one node ran past the allocator's timeout."""


TIMED_OUT = "timed out trying to allocate devices"
CANNOT_ALLOCATE = "cannot allocate all claims"


class _Restart(Exception):
    """The search starts over with its supply checks on."""


class _NotAdmin(Exception):
    """Admin access in a namespace without the admin-access label (unschedulable)."""


@dataclass
class _Pick:
    device: _Device
    request: _Request
    consumed: dict[str, Quantity] | None  # shared device: capacity taken by this share


_NO_CONSTRAINTS: list[_Constraint] = []
_NO_CHANGES: list[Any] = []  # shared, never appended to

# What a search step answers: a solution, no solution on this path, or no solution whatever
# devices are chosen because the claim would exceed MAX_RESULTS (callers then stop trying other
# devices and move on to the next subrequest, as upstream does). 0 is "no verdict yet".
_FOUND, _FAILED, _EXCEEDED = 1, 2, 3

# What taking a device changes: shared?, consumed capacity, counter deltas, constraint values.
_Fit = tuple[bool, dict[str, Quantity] | None, list[tuple[PoolID, tuple[str, str], Fraction]], list[tuple[_Constraint, Any]]]


def _allocated(search: _Search, timestamp: str | None, share_id: Callable[[], str]) -> Allocated:
    """A found solution; the result dicts (fresh share IDs included) are built only if asked for."""
    exclusive = search.exclusive_picks()
    return Allocated(build=lambda: search.build(timestamp, share_id), exclusive=exclusive, free_left=len(search.free) - exclusive)


class SearchCache:
    """The last search per node, reused by later cycles whose claims have the same specs.

    Pods from one ResourceClaimTemplate ask for the same thing, and most nodes a cycle visits did
    not change since an earlier cycle searched them, so the depth-first search would find the
    same devices again, or fail again: once most nodes are full, failures are most of the nodes
    a cycle visits. An entry is valid for the same node view (slices, taint rules and node
    labels; a change replaces the view), the same AllocatedState at the same change count of the
    view's pools, the same DeviceClasses and the same claim specs. A reused failure is explained
    with the current claims (messages name them); timed-out searches and errors are not kept.
    The scheduler owns one; the allocator's result for a node is identical with or without it.
    """

    __slots__ = ("_entries", "hits")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[_NodeView, AllocatedState, int, int, bytes, _Search]] = {}
        self.hits = 0

    def get(self, node: str, view: _NodeView, state: AllocatedState, stamp: int, classes: int, signature: bytes) -> _Search | None:
        entry = self._entries.get(node)
        if entry is None or entry[0] is not view or entry[1] is not state or entry[2] != stamp or entry[3] != classes or entry[4] != signature:
            return None
        self.hits += 1
        return entry[5]

    def put(self, node: str, view: _NodeView, state: AllocatedState, stamp: int, classes: int, signature: bytes, search: _Search) -> None:
        self._entries[node] = (view, state, stamp, classes, signature, search)

    def discard(self, node: str) -> None:
        """Forget a node's entry (the node is gone)."""
        self._entries.pop(node, None)


class _Search:
    """State of one ``allocate`` call: the depth-first search and its undo log.

    The search visits claims, requests, subrequests and device slots in upstream's order and
    stops at the first full solution. It prunes like upstream: a path on which a claim can no
    longer stay within :data:`MAX_RESULTS` answers ``_EXCEEDED``, and every caller up to the
    next choice of subrequest gives up on that path instead of trying other devices. A search
    that runs longer than :data:`BOUND_AFTER_STEPS` starts over and also prunes by supply (see
    ``_enough``): those checks only drop paths without any solution, so the first solution
    stays the same.
    """

    def __init__(self, alloc: Allocator, claims: list[_Claim], view: _NodeView, node_name: str) -> None:
        self.alloc = alloc
        self.features = alloc.features
        self.allocated = alloc.allocated
        self.claims = claims
        self.view = view
        self.node_name = node_name
        self.allocating: dict[DeviceID, set[int]] = {}
        self.shares: dict[DeviceID, int] = {}
        self.capacity: dict[DeviceID, dict[str, Quantity]] = {}
        self.counters: dict[PoolID, dict[tuple[str, str], Fraction]] = {}
        self.results: list[list[_Pick]] = [[] for _ in claims]
        self._attributes: dict[tuple[DeviceID, str], frozenset[Any] | None] = {}
        self.selected: dict[tuple[int, int], int] = {}
        # Constraints keep per-search state; claims without any share one empty list (never appended to).
        self.constraints = [[_Constraint(r, a, d) for r, a, d in c.constraints] if c.constraints else _NO_CONSTRAINTS for c in claims]
        self.all_devices: dict[int, list[_Device]] = {}  # id(_Request) -> devices
        self.deepest = (-1, -1)
        self.free = alloc.free_candidates(view)
        self.deadline = time.monotonic() + alloc.timeout if alloc.timeout is not None else None
        # Steps: search calls plus devices tried in vain, so that long loops reach a checkpoint too.
        self.steps = 0
        self._checkpoint_at = _CHECKPOINT_STEPS
        self.bounded = False  # supply checks on (see _bound)
        self._bound_checked = False
        self._exclusive: int | None = None  # set once the search has succeeded (results are final)
        self.found = False  # the outcome of run(), kept for SearchCache

    def run(self) -> bool:
        for claim in self.claims:
            if claim.fewest is None or claim.fewest > MAX_RESULTS:
                self._validate()
                break
        if self.alloc.bound_after <= 0:
            self._bound_checked = True
            if self._bounds_safe():
                self._bound()
        try:
            return self._request(0, 0) == _FOUND
        except _Restart:
            # Checks added near the top prune most; the first steps are cheap to repeat.
            self._restart()
            self._bound()
            return self._request(0, 0) == _FOUND
        finally:
            self._attributes = {}  # a search kept by SearchCache keeps no attribute values

    # --- before the search: what upstream validates per node ---

    def _validate(self) -> None:
        """Fix the devices of "All" requests and check each claim's result limit with them, in upstream's order."""
        for claim in self.claims:
            fewest = claim.fewest
            if fewest is None:
                fewest = sum(min(self._need(req) for req in top.subrequests or [top]) for top in claim.requests)
            if fewest > MAX_RESULTS:
                raise AllocationError(f"claim {claim.ref}: number of requested devices {fewest} exceeds the claim limit of {MAX_RESULTS}")

    def _need(self, req: _Request) -> int:
        """Devices ``req`` takes: its count, or all matching devices (computed on first use)."""
        if not req.all_mode:
            return req.count
        devices = self.all_devices.get(id(req))
        if devices is None:
            devices = self._all_devices(req)
            self.all_devices[id(req)] = devices
        return len(devices)

    def _all_devices(self, req: _Request) -> list[_Device]:
        out = []
        for pool in self.view.pools:
            where = f"claim {req.claim_ref}, request {req.name}: asks for all devices, but resource pool {pool.id[0]}/{pool.id[1]}"
            if pool.incomplete:
                raise AllocationError(f"{where} is currently being updated")
            if pool.invalid:
                raise AllocationError(f"{where} is currently invalid")
            for dev in pool.devices:
                if not self.alloc.selectable(req, dev):
                    continue
                # Upstream filters by capacity here too: a shared device without room is not part of "all".
                if self.features.consumable_capacity and self._capacity_for(dev, req) is False:
                    continue
                out.append(dev)
        return out

    # --- the depth-first search ---

    def _checkpoint(self) -> None:
        """Every 256 steps: give up past the deadline; start over with the supply checks once the search is long."""
        self._checkpoint_at = self.steps + _CHECKPOINT_STEPS
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _TimedOut
        if not self._bound_checked and self.steps >= self.alloc.bound_after:
            self._bound_checked = True
            if self._bounds_safe():
                raise _Restart

    def _request(self, ci: int, ri: int) -> int:
        """Allocate request ``ri`` of claim ``ci`` and everything after it."""
        self.steps += 1
        if self.steps >= self._checkpoint_at:
            self._checkpoint()
        if ci == len(self.claims):
            return _FOUND
        claim = self.claims[ci]
        if ri == len(claim.requests):
            outcome = self._request(ci + 1, 0)
            # Another claim's limit says nothing about this claim's devices.
            return _FAILED if outcome == _EXCEEDED else outcome
        if (ci, ri) > self.deepest:
            self.deepest = (ci, ri)
        top = claim.requests[ri]
        if not top.subrequests:
            return self._slot(ci, ri, top, 0, 0)
        # Alternatives in order; one that exceeds the limit makes way for the next, which may need fewer.
        all_exceeded = True
        for index, sub in enumerate(top.subrequests):
            self.selected[(ci, ri)] = index
            outcome = self._slot(ci, ri, sub, 0, 0)
            if outcome == _FOUND:
                return _FOUND
            if outcome == _FAILED:
                all_exceeded = False
        return _EXCEEDED if all_exceeded else _FAILED

    def _slot(self, ci: int, ri: int, req: _Request, di: int, start: int) -> int:
        """Place device ``di`` of ``req`` (request ``ri`` of claim ``ci``), trying candidates from ``start``."""
        self.steps += 1
        if self.steps >= self._checkpoint_at:
            self._checkpoint()
        if req.all_mode:
            need = self._need(req)
            if not need:
                return _FAILED  # "All" needs at least one device
        else:
            need = req.count
        if di >= need:
            return self._request(ci, ri + 1)
        if len(self.results[ci]) + need - di > MAX_RESULTS:
            return _EXCEEDED
        if req.all_mode:
            dev = self.all_devices[id(req)][di]
            if self._in_use(ci, req, dev):
                return _FAILED
            undo = self._take(ci, req, dev, must=True)
            if undo is None:
                return _FAILED
            outcome = self._slot(ci, ri, req, di + 1, 0)
            if outcome != _FOUND:
                undo()
            return outcome
        if self.bounded:
            if self._over_limit(ci, ri, need - di):
                return _EXCEEDED
            if not self._enough(ci, ri, req, need - di, start):
                return _FAILED
        selectable = self.alloc.selectable
        if req.admin:
            candidates = self.view.candidates
            for pos in range(start, len(candidates)):
                dev = candidates[pos]
                if self._in_use(ci, req, dev) or not selectable(req, dev):
                    continue
                undo = self._take(ci, req, dev, must=False)
                if undo is None:
                    self.steps += 1
                    continue
                outcome = self._slot(ci, ri, req, di + 1, pos + 1)
                if outcome == _FOUND:
                    return _FOUND
                undo()
                if outcome == _EXCEEDED:
                    return _EXCEEDED
            return _FAILED
        # Normal requests only look at devices not allocated before this cycle (same relative
        # order, so combinations are tried exactly as over the full list).
        candidates = self.free
        allocating = self.allocating
        for pos in range(start, len(candidates)):
            dev = candidates[pos]
            if dev.id in allocating or not selectable(req, dev):
                continue
            undo = self._take(ci, req, dev, must=False)
            if undo is None:
                self.steps += 1
                continue
            outcome = self._slot(ci, ri, req, di + 1, pos + 1)
            if outcome == _FOUND:
                return _FOUND
            undo()
            if outcome == _EXCEEDED:
                return _EXCEEDED
        return _FAILED

    # --- supply checks (bounded mode) ---

    def _bounds_safe(self) -> bool:
        """Whether the supply checks may skip paths without changing what upstream reports.

        Upstream reports the first CEL runtime error its search runs into and the first "All"
        device that breaks a constraint. So the checks stay off when any selector fails on any
        candidate or an "All" request is constrained: the plain search (and its deadline) decides.
        Called once per search; it starts the caches the checks use.
        """
        self._selectable: dict[int, tuple[list[int], list[_Device]]] = {}  # id(_Request) -> positions, devices
        self._possible: dict[int, list[_Device]] = {}  # id(_Request) -> devices it could take at all
        for ci, claim in enumerate(self.claims):
            for top in claim.requests:
                for req in top.subrequests or [top]:
                    if req.all_mode and any(con.applies(req) for con in self.constraints[ci]):
                        return False
                    try:
                        self._selectable_positions(req)
                    except AllocationError:
                        return False
        return True

    def _bound(self) -> None:
        """Turn the supply checks on (once ``_bounds_safe``); the search state must be empty (nothing taken yet)."""
        # What each request could take at all; later on a path it can only take fewer.
        for ci, claim in enumerate(self.claims):
            for top in claim.requests:
                for req in top.subrequests or [top]:
                    self._possible[id(req)] = self._takeable(ci, req, 0)
        self.bounded = True

    def _restart(self) -> None:
        """Forget everything taken so far (the search starts over)."""
        self.allocating = {}
        self.shares = {}
        self.capacity = {}
        self.counters = {}
        self.results = [[] for _ in self.claims]
        self.selected = {}
        self.constraints = [[_Constraint(con.requests, con.attribute, con.distinct) for con in cons] if cons else _NO_CONSTRAINTS for cons in self.constraints]
        self.deepest = (-1, -1)

    def _selectable_positions(self, req: _Request) -> tuple[list[int], list[_Device]]:
        """Positions (in the list ``_slot`` walks for ``req``) and devices that pass its selectors."""
        cached = self._selectable.get(id(req))
        if cached is None:
            candidates = self.view.candidates if req.admin else self.free
            selectable = self.alloc.selectable
            positions = [pos for pos, dev in enumerate(candidates) if selectable(req, dev)]
            cached = (positions, [candidates[pos] for pos in positions])
            self._selectable[id(req)] = cached
        return cached

    def _takeable(self, ci: int, req: _Request, start: int) -> list[_Device]:
        """Devices from position ``start`` on that ``req`` could take now."""
        if req.all_mode:
            devices = self.all_devices[id(req)]
        else:
            positions, selectable = self._selectable_positions(req)
            devices = selectable[bisect_left(positions, start):]
        return [dev for dev in devices if not self._in_use(ci, req, dev) and self._fit(ci, req, dev, must=False) is not None]

    def _still_possible(self, ci: int, req: _Request) -> list[_Device]:
        """A cheap superset of ``_takeable(ci, req, 0)``: possible at the start, not in use, constraints still met."""
        constraints = [con for con in self.constraints[ci] if con.values and con.applies(req)]
        out = []
        for dev in self._possible[id(req)]:
            if self._in_use(ci, req, dev):
                continue
            if all(con.admits(self._attribute(dev, con.attribute)) for con in constraints):
                out.append(dev)
        return out

    def _over_limit(self, ci: int, ri: int, more: int) -> bool:
        """Whether claim ``ci`` exceeds the result limit whatever the devices, taking ``more`` for request ``ri`` and the fewest after it."""
        fewest = len(self.results[ci]) + more
        for top in self.claims[ci].requests[ri + 1:]:
            fewest += min(self._need(req) for req in top.subrequests or [top])
        return fewest > MAX_RESULTS

    def _enough(self, ci: int, ri: int, req: _Request, need: int, start: int) -> bool:
        """Whether ``need`` more devices for ``req`` from position ``start`` on, and everything after it, may still be found.

        Necessary conditions only, each checked against devices that could still be taken:

        * this request: enough devices, enough distinct values for a distinctAttribute, a large
          enough group of one value for a matchAttribute, the cheapest devices within each
          shared counter;
        * every later request (of this claim and the next ones): enough devices alone;
        * requests that take devices exclusively: enough devices for all of them together;
        * a constraint tying this request to later ones: enough devices (values) for all of them.
        """
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _TimedOut  # these checks can be slow; do not wait for the next checkpoint
        now = self._takeable(ci, req, start)
        if len(now) < need or not self._values_suffice(ci, req, now, need):
            return False
        if any(dev.consumes for dev in now) and not self._counters_suffice(now, need):
            return False
        later: dict[int, list[_Device]] = {}  # id(_Request) -> still possible devices
        exclusive_need = need if self._takes_exclusively(req, now) else 0
        exclusive_devices = {dev.id for dev in now} if exclusive_need else set()
        # A failure is explained with the last request a check involved, where the plain search would fail.
        last = (ci, ri)
        for cj in range(ci, len(self.claims)):
            requests = self.claims[cj].requests
            for rj in range(ri + 1 if cj == ci else 0, len(requests)):
                top = requests[rj]
                fewest: int | None = None
                union: set[DeviceID] = set()
                exclusive = True
                for alt in top.subrequests or [top]:
                    alt_need = self._need(alt)
                    devices = later[id(alt)] = self._still_possible(cj, alt)
                    if len(devices) < alt_need or (alt.all_mode and not alt_need):
                        continue
                    fewest = alt_need if fewest is None else min(fewest, alt_need)
                    exclusive = exclusive and self._takes_exclusively(alt, devices)
                    union.update(dev.id for dev in devices)
                if fewest is None:
                    self.deepest = max(self.deepest, (cj, rj))
                    return False
                if exclusive:
                    exclusive_need += fewest
                    exclusive_devices |= union
                    last = (cj, rj)
        if exclusive_need > len(exclusive_devices):
            self.deepest = max(self.deepest, last)
            return False
        return all(self._tie_suffices(ci, ri, req, need, now, con, later) for con in self.constraints[ci] if con.applies(req))

    def _takes_exclusively(self, req: _Request, devices: list[_Device]) -> bool:
        """Whether every device ``req`` takes from ``devices`` is then taken from everybody else."""
        return not req.admin and not any(self._shared(dev) for dev in devices)

    def _values_suffice(self, ci: int, req: _Request, devices: list[_Device], need: int) -> bool:
        """Whether each constraint on ``req`` leaves ``need`` of ``devices`` (see ``_values_allow``)."""
        return all(self._values_allow(con, devices, need) for con in self.constraints[ci] if con.applies(req))

    def _attribute(self, dev: _Device, name: str) -> frozenset[Any] | None:
        """``_attribute_value``, once per device and attribute in this search: a device keeps its
        attributes only while among the last ``VIEWS_KEPT`` read, and a search over more devices
        than that must not read slices again and again."""
        key = (dev.id, name)
        try:
            return self._attributes[key]
        except KeyError:
            value = self._attributes[key] = _attribute_value(dev, name, self.features.list_attributes)
            return value

    def _values_allow(self, con: _Constraint, devices: list[_Device], need: int) -> bool:
        """Enough distinct values for a distinctAttribute, a large enough group of one value for a matchAttribute."""
        if con.values and not con.distinct:
            return len(devices) >= need  # the fixed value already filtered the devices
        values = [self._attribute(dev, con.attribute) for dev in devices]
        if any(v is None or len(v) != 1 for v in values):
            return True  # list attributes: sets intersect in ways counting does not capture
        if con.distinct:
            return len(set(values)) >= need
        return bool(values) and max(Counter(values).values()) >= need

    def _tie_suffices(
        self, ci: int, ri: int, req: _Request, need: int, now: list[_Device], con: _Constraint, later: dict[int, list[_Device]],
    ) -> bool:
        """Whether ``con`` leaves enough devices for this request and the later requests of the claim it applies to.

        Within one claim a device is taken once, admin access or not, unless it is shared.
        """
        total = need
        devices = {dev.id: dev for dev in now}
        last = ri
        for rj, top in enumerate(self.claims[ci].requests[ri + 1:], ri + 1):
            alternatives = top.subrequests or [top]
            if not any(con.applies(alt) for alt in alternatives):
                continue
            last = rj
            total += min(self._need(alt) if con.applies(alt) else 0 for alt in alternatives)
            for alt in alternatives:
                if not con.applies(alt):
                    continue
                if any(self._shared(dev) for dev in later[id(alt)]):
                    return True  # a shared device may serve two requests
                devices.update((dev.id, dev) for dev in later[id(alt)])
        if total == need:
            return True  # nothing later is tied; _values_suffice covered this request
        if self._values_allow(con, list(devices.values()), total):
            return True
        self.deepest = max(self.deepest, (ci, last))
        return False

    def _counters_suffice(self, takeable: list[_Device], need: int) -> bool:
        """Whether the ``need`` devices consuming least of each counter fit into what is left of it."""
        amounts: dict[tuple[PoolID, tuple[str, str]], list[Fraction]] = {}
        for dev in takeable:
            if self._shared(dev) and (dev.id in self.allocated.shared_devices or self.shares.get(dev.id)):
                continue  # its counters are consumed already
            pool_id = (dev.id[0], dev.id[1])
            per_device: dict[tuple[PoolID, tuple[str, str]], Fraction] = {}
            for set_name, counters in dev.consumes:
                for c, q in counters.items():
                    counter = (pool_id, (set_name, c))
                    per_device[counter] = per_device.get(counter, Fraction(0)) + q.as_fraction()
            for counter, amount in per_device.items():
                amounts.setdefault(counter, []).append(amount)
        for (pool_id, key), consumed in amounts.items():
            # Devices that do not consume this counter take the first places for free.
            cheapest = need - (len(takeable) - len(consumed))
            if cheapest <= 0:
                continue
            left = self.alloc.available_counters(pool_id).get(key, Fraction(0)) - self.counters.get(pool_id, {}).get(key, Fraction(0))
            if sum(sorted(consumed)[:cheapest]) > left:
                return False
        return True

    # --- taking one device ---

    def _shared(self, dev: _Device) -> bool:
        return dev.allow_multiple and self.features.consumable_capacity

    def _in_use(self, ci: int, req: _Request, dev: _Device) -> bool:
        users = self.allocating.get(dev.id)
        if req.admin:
            return users is not None and ci in users
        return dev.id in self.allocated.devices or bool(users)

    def _capacity_for(self, dev: _Device, req: _Request) -> dict[str, Quantity] | bool | None:
        """Consumed capacity for a share (dict), None for an exclusive fit, False if it does not fit."""
        if not self._shared(dev):
            # Capacity requests act as a filter on exclusive devices.
            for key, amount in req.capacity.items():
                if key not in dev.capacity or amount > dev.capacity[key]:
                    return False
            return None
        consumed = _consumption(dev, req)
        if consumed is None:
            return False
        taken = self.allocated.capacity.get(dev.id) or {}
        pending = self.capacity.get(dev.id) or {}
        for key, amount in consumed.items():
            total = amount + taken.get(key, Quantity(0)) + pending.get(key, Quantity(0))
            if total > dev.capacity[key]:
                return False
        return consumed

    def _fit(self, ci: int, req: _Request, dev: _Device, must: bool) -> _Fit | None:
        """What taking ``dev`` for ``req`` would change, or None if it cannot be taken now."""
        # A device that allows multiple allocations is shared, with admin access too (upstream).
        shared = self._shared(dev)
        consumed: dict[str, Quantity] | None = None
        if self.features.consumable_capacity and (shared or req.capacity):
            fit = self._capacity_for(dev, req)
            if fit is False:
                return None
            consumed = fit if isinstance(fit, dict) else None
        # Counters: a shared device that already has a share consumed them once.
        counter_delta: list[tuple[PoolID, tuple[str, str], Fraction]] = _NO_CHANGES
        if dev.consumes and not (shared and (dev.id in self.allocated.shared_devices or self.shares.get(dev.id))):
            if not self.features.partitionable_devices:
                return None
            pool_id = (dev.id[0], dev.id[1])
            available = self.alloc.available_counters(pool_id)
            used = self.counters.get(pool_id) or {}
            counter_delta = []
            for set_name, counters in dev.consumes:
                for c, q in counters.items():
                    key = (set_name, c)
                    amount = q.as_fraction()
                    if available.get(key, Fraction(0)) - used.get(key, Fraction(0)) < amount:
                        return None
                    counter_delta.append((pool_id, key, amount))
        if self.features.device_taints and dev.taints and _untolerated(dev, req):
            return None
        constraints = self.constraints[ci]
        if not constraints:
            return shared, consumed, counter_delta, _NO_CHANGES
        values: list[tuple[_Constraint, Any]] = []
        for con in constraints:
            if not con.applies(req):
                continue
            value = self._attribute(dev, con.attribute)
            if value is None or not con.admits(value):
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].ref}, request {req.name}: cannot add device {'/'.join(dev.id)} "
                        "because a claim constraint would not be satisfied"
                    )
                return None
            # matchAttribute keeps the running intersection (list attributes); scalars stay equal.
            values.append((con, value if con.distinct or not con.values else value & con.values[-1]))
        return shared, consumed, counter_delta, values

    def _take(self, ci: int, req: _Request, dev: _Device, must: bool) -> Callable[[], None] | None:
        """Try to add ``dev`` for ``req``; returns an undo function, or None if it cannot be taken."""
        fit = self._fit(ci, req, dev, must)
        if fit is None:
            return None
        shared, consumed, counter_delta, values = fit
        for pool_id, key, amount in counter_delta:
            used = self.counters.setdefault(pool_id, {})
            used[key] = used.get(key, Fraction(0)) + amount
        for con, value in values:
            con.values.append(value)
        if shared:
            self.shares[dev.id] = self.shares.get(dev.id, 0) + 1
            if consumed:
                pending = self.capacity.setdefault(dev.id, {})
                for cap_key, cap_amount in consumed.items():
                    pending[cap_key] = pending.get(cap_key, Quantity(0)) + cap_amount
        else:
            self.allocating.setdefault(dev.id, set()).add(ci)
        picks = self.results[ci]
        picks.append(_Pick(dev, req, consumed if shared else None))

        def undo() -> None:
            picks.pop()
            if shared:
                self.shares[dev.id] -= 1
                if consumed:
                    pending = self.capacity[dev.id]
                    for cap_key, cap_amount in consumed.items():
                        pending[cap_key] = pending[cap_key] - cap_amount
            else:
                users = self.allocating[dev.id]
                users.discard(ci)
                if not users:
                    del self.allocating[dev.id]
            for pool_id, key, amount in counter_delta:
                self.counters[pool_id][key] -= amount
            for con, _ in values:
                con.values.pop()

        return undo

    def exclusive_picks(self) -> int:
        """Picks that become results without adminAccess and shareID (what ``build`` would write); counted once."""
        if self._exclusive is None:
            count = 0
            for picks in self.results:
                for p in picks:
                    if p.consumed is None and not p.request.admin:
                        count += 1
            self._exclusive = count
        return self._exclusive

    # --- result construction ---

    def build(self, timestamp: str | None, share_id: Callable[[], str]) -> list[dict[str, Any]]:
        out = []
        for ci, claim in enumerate(self.claims):
            picks = self.results[ci]
            results = []
            for p in picks:
                r: dict[str, Any] = {"request": p.request.name, "driver": p.device.driver, "pool": p.device.pool, "device": p.device.name}
                if p.request.admin:
                    r["adminAccess"] = True
                if p.request.tolerations:
                    r["tolerations"] = [dict(t) for t in p.request.tolerations]
                if self.features.binding_conditions and p.device.binding_conditions:
                    r["bindingConditions"] = list(p.device.binding_conditions)
                    if p.device.binding_failure_conditions:
                        r["bindingFailureConditions"] = list(p.device.binding_failure_conditions)
                if p.consumed is not None:
                    r["shareID"] = share_id()
                    if p.consumed:
                        r["consumedCapacity"] = {k: v.canonical() for k, v in p.consumed.items()}
                results.append(r)
            devices: dict[str, Any] = {"results": results}
            config = self._config(ci, claim)
            if config:
                devices["config"] = config
            allocation: dict[str, Any] = {"devices": devices}
            selector = self._node_selector(picks)
            if selector is not None:
                allocation["nodeSelector"] = selector
            if timestamp and self.features.binding_conditions:
                allocation["allocationTimestamp"] = timestamp
            out.append(allocation)
        return out

    def _chosen(self, ci: int, ri: int, top: _Request) -> _Request:
        return top.subrequests[self.selected[(ci, ri)]] if top.subrequests else top

    def _config(self, ci: int, claim: _Claim) -> list[dict[str, Any]]:
        if not claim.has_config:
            return []
        config: list[dict[str, Any]] = []
        by_class: dict[str, list[dict[str, Any]]] = {}
        for ri, top in enumerate(claim.requests):
            req = self._chosen(ci, ri, top)
            entries = by_class.get(req.class_name)
            if entries is not None:
                for e in entries:
                    e["requests"].append(req.name)
                continue
            entries = []
            for c in (req.class_obj.get("spec") or {}).get("config") or []:
                entry = {"source": "FromClass", "requests": [req.name], **{k: v for k, v in c.items() if k != "requests"}}
                entries.append(entry)
                config.append(entry)
            by_class[req.class_name] = entries
        selected_names = {top.name for top in claim.requests}
        selected_names |= {self._chosen(ci, ri, top).name for ri, top in enumerate(claim.requests) if top.subrequests}
        for c in ((claim.obj.get("spec") or {}).get("devices") or {}).get("config") or []:
            names = c.get("requests") or []
            if names and not any(n in selected_names for n in names):
                continue  # names only subrequests that were not chosen
            entry = {"source": "FromClaim", **{k: v for k, v in c.items() if k != "requests"}}
            if names:
                entry["requests"] = list(names)
            config.append(entry)
        return config

    def _node_selector(self, picks: list[_Pick]) -> dict[str, Any] | None:
        local_node = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node_name]}]}]}
        expressions: list[dict[str, Any]] = []
        fields: list[dict[str, Any]] = []
        seen: set[tuple[str, str, str, tuple[str, ...]]] = set()
        for p in picks:
            dev = p.device
            if dev.node_local or (dev.binds_to_node and self.features.binding_conditions):
                return local_node
            if not dev.node_selector:
                continue
            terms = dev.node_selector.get("nodeSelectorTerms") or []
            for term in terms[:1]:  # slices use exactly one term
                for kind, target in (("matchExpressions", expressions), ("matchFields", fields)):
                    for req in term.get(kind) or []:
                        key = (kind, req.get("key", ""), req.get("operator", ""), tuple(sorted(req.get("values") or [])))
                        if key not in seen:
                            seen.add(key)
                            target.append(dict(req))
        if not expressions and not fields:
            return None
        merged: dict[str, Any] = {}
        if expressions:
            merged["matchExpressions"] = expressions
        if fields:
            merged["matchFields"] = fields
        return {"nodeSelectorTerms": [merged]}


# --- convenience entry point ------------------------------------------------------------------------


def allocate_claims(
    claims: Sequence[Mapping[str, Any]],
    node: Mapping[str, Any],
    *,
    classes: Iterable[Mapping[str, Any]] = (),
    slices: Iterable[Mapping[str, Any]] = (),
    allocated_claims: Iterable[Mapping[str, Any]] = (),
    in_flight: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
    taint_rules: Iterable[Mapping[str, Any]] = (),
    gates: Mapping[str, bool] | AllocatorFeatures | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    share_id: Callable[[], str] | None = None,
    allocation_timestamp: str | None = None,
) -> AllocationOutcome:
    """One-shot allocation (builds the index and state; use :class:`Allocator` in hot loops)."""
    features = gates if isinstance(gates, AllocatorFeatures) else AllocatorFeatures.from_gates(gates or {})
    index = ResourceIndex(slices, classes, taint_rules, features)
    state = AllocatedState.from_claims(allocated_claims, in_flight)
    return Allocator(index, state, features, namespace_labels, share_id).allocate(node, claims, allocation_timestamp)


# --- KEP-5517: node allocatable resources ------------------------------------------------------------


def node_allocatable_claim_status(
    claim_name: str,
    claim_allocation: Mapping[str, Any] | None,
    slices: ResourceIndex | Iterable[Mapping[str, Any]],
    containers: Sequence[str],
) -> dict[str, Any] | None:
    """The pod's ``status.nodeAllocatableResourceClaimStatuses`` entry for one allocated claim.

    Per allocated device's ``nodeAllocatableResources``: ``mapping`` gives
    consumedCapacity[capacityKey] (the capacity value for an exclusive device) x capacityMultiplier,
    or deviceMultiplier per device; ``overhead`` gives perPod and perContainer (charged per
    referencing container, see ``kube.pods.claim_status_amounts``). Admin-access results are
    not charged. None when no allocated device declares node allocatable resources.
    """
    if not claim_allocation:
        return None
    lookup = slices.device if isinstance(slices, ResourceIndex) else ResourceIndex(slices).device
    mapping: dict[str, Fraction] = {}
    per_pod: dict[str, Fraction] = {}
    per_container: dict[str, Fraction] = {}
    formats: dict[str, str] = {}
    found = False
    for r in (claim_allocation.get("devices") or {}).get("results") or []:
        if r.get("adminAccess"):
            continue
        dev = lookup((r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
        if dev is None:
            continue
        for resource, spec in (dev.node_allocatable).items():
            found = True
            mapped = spec.get("mapping") or {}
            if mapped.get("capacityKey"):
                key = mapped["capacityKey"]
                consumed = (r.get("consumedCapacity") or {}).get(key)
                base = _quantity(consumed) if consumed is not None else dev.capacity.get(key)
                if base is not None:
                    amount = base.as_fraction() * _quantity(mapped.get("capacityMultiplier", "1")).as_fraction()
                    mapping[resource] = mapping.get(resource, Fraction(0)) + amount
                    formats.setdefault(resource, base.format)
            elif mapped.get("deviceMultiplier") is not None:
                multiplier = _quantity(mapped["deviceMultiplier"])
                mapping[resource] = mapping.get(resource, Fraction(0)) + multiplier.as_fraction()
                formats.setdefault(resource, multiplier.format)
            overhead = spec.get("overhead") or {}
            for key, totals in (("perPod", per_pod), ("perContainer", per_container)):
                if overhead.get(key) is not None:
                    q = _quantity(overhead[key])
                    totals[resource] = totals.get(resource, Fraction(0)) + q.as_fraction()
                    formats.setdefault(resource, q.format)
    if not found:
        return None

    def text(resource: str, value: Fraction) -> str:
        return _from_fraction(value, formats.get(resource, DECIMAL_SI)).canonical()

    entry: dict[str, Any] = {"resourceClaimName": claim_name}
    if containers:
        entry["containers"] = list(containers)
    if mapping:
        entry["mapping"] = [{"name": k, "quantity": text(k, v)} for k, v in sorted(mapping.items())]
    overhead_entries = []
    for resource in sorted(set(per_pod) | set(per_container)):
        item: dict[str, Any] = {"name": resource}
        if resource in per_pod:
            item["perPod"] = text(resource, per_pod[resource])
        if resource in per_container:
            item["perContainer"] = text(resource, per_container[resource])
        overhead_entries.append(item)
    if overhead_entries:
        entry["overhead"] = overhead_entries
    return entry


def node_allocatable_demand(
    claim_allocation: Mapping[str, Any] | None,
    slices: ResourceIndex | Iterable[Mapping[str, Any]],
    containers_referencing: int,
) -> dict[str, Quantity]:
    """Node-allocatable amounts (cpu, memory, ...) a pod is charged for one allocated claim."""
    entry = node_allocatable_claim_status("claim", claim_allocation, slices, [f"c{i}" for i in range(containers_referencing)])
    if entry is None:
        return {}
    return {k: _from_fraction(v) for k, v in claim_status_amounts(entry).items()}


def has_node_allocatable_mapping(claim_allocation: Mapping[str, Any] | None, index: ResourceIndex) -> bool:
    """Whether an allocated device maps capacity into node allocatable (such claims are not shared by pods)."""
    entry = node_allocatable_claim_status("claim", claim_allocation, index, [])
    return bool(entry and entry.get("mapping"))


__all__ = [
    "ADMIN_ACCESS_LABEL",
    "MAX_RESULTS",
    "Allocated",
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "AllocatorFeatures",
    "DeviceID",
    "ResourceIndex",
    "SearchCache",
    "Unschedulable",
    "allocate_claims",
    "has_node_allocatable_mapping",
    "node_allocatable_claim_status",
    "node_allocatable_demand",
]
