"""Prepared devices: what allocation reads of each published device, prepared once per slice version.

Equal values among devices are kept once, a device's attributes are read back from its slice while
recently used, and CEL results are cached per device.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any, cast

from kube import apitypes as api
from kube.apitypes import CounterSet, NodeSelector, ResourceSlice, ResourceSliceSpec
from kube.cel import CELRuntimeError, CompiledSelector, DeviceView
from kube.labels import node_selector_matches
from kube.quantity import Quantity
from schedulers.allocator.results import DeviceID


def as_quantity(value: Any) -> Quantity:
    return value if isinstance(value, Quantity) else Quantity.parse(value)


# A device's attributes are not kept: they are read from its slice (the informer's compact copy)
# when a CEL view or a constraint needs them. Decoded attributes and CEL views (``DeviceView``,
# several times the device's JSON) are kept for the devices read last, process-wide; CEL results
# stay cached per device, so a view is rebuilt only for a new expression.
VIEWS_KEPT = 1024
SHARED_KEPT = 4096  # distinct device values (capacities, counters, taints...) shared across slices
_viewed: deque[Device] = deque()
# The devices of the slice read last (record, its devices): a search reads one slice's devices in a row.
last_read: list[tuple[SliceRecord, Sequence[Mapping[str, Any]]]] = []

# Shared by every device without the field; like everything prepared, never modified.
NO_LIST: list[Any] = []
_NO_MAP: dict[str, Any] = {}
_UNSET = object()


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a JSON value (types kept apart: 1, 1.0 and true differ)."""
    if isinstance(value, dict):
        return ("d", tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("l", tuple(_freeze(v) for v in value))
    return (type(value).__name__, value)


class SharedValues:
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
                capacity[key] = as_quantity(cap.get("value", "0"))
                if cap.get("requestPolicy"):
                    policies[key] = cap["requestPolicy"]
            prepared = self._capacities[id(raw)] = (raw, capacity or _NO_MAP, policies or _NO_MAP)
        return prepared[1], prepared[2]


def _consumes(raw: list[Mapping[str, Any]]) -> list[tuple[str, dict[str, Quantity]]]:
    return [(c.get("counterSet", ""), {k: as_quantity(v.get("value", "0")) for k, v in (c.get("counters") or {}).items()}) for c in raw]


class DevicePlacement:
    """What a device shares with others of its slice (one instance per distinct combination): its
    slice, the node selection it was published with and the one its allocation carries, and the
    fields allocation reads rarely."""

    __slots__ = (
        "all_nodes", "binding_failure_conditions", "binds_to_node", "node_allocatable", "node_local", "node_name", "node_selector",
        "policies", "raw_capacity", "record",
    )  # fmt: skip

    def __init__(self, record: SliceRecord, spec: ResourceSliceSpec, dev: api.Device, shared: SharedValues) -> None:
        self.record = record
        self.raw_capacity: Mapping[str, Any] = shared.value(dev.get("capacity")) or _NO_MAP
        self.policies = shared.capacity(self.raw_capacity)[1]
        self.node_allocatable: Mapping[str, Any] = shared.value(dev.get("nodeAllocatableResources")) or _NO_MAP
        self.binding_failure_conditions: list[str] = shared.value(list(dev.get("bindingFailureConditions") or [])) or NO_LIST
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


class Device:
    """One published device, prepared once per slice version; caches CEL results.

    Keeps what the search reads on every device (equal values of a slice's devices shared, absent
    fields one empty list or map) and a ``DevicePlacement`` shared with the slice's like devices; the
    attributes are read from the slice when needed (see ``VIEWS_KEPT``).
    """

    __slots__ = (
        "allow_multiple", "attrs", "binding_conditions", "capacity", "cel", "cel_expression", "cel_result", "consumes", "id", "name",
        "placement", "position", "taints", "view",
    )  # fmt: skip

    def __init__(
        self, spec: ResourceSliceSpec, dev: api.Device, record: SliceRecord, position: int, taints: list[api.DeviceTaint],
        shared: SharedValues | None = None, placements: dict[tuple[Any, ...], DevicePlacement] | None = None,
    ) -> None:  # fmt: skip
        shared = shared or SharedValues()
        name = dev.get("name", "")
        self.name: str = sys.intern(name) if type(name) is str else name
        self.id: DeviceID = (record.driver, record.pool, self.name)
        placement = DevicePlacement(record, spec, dev, shared)
        if placements is not None:
            placement = placements.setdefault(placement.key(), placement)
        self.placement = placement
        self.position = position
        self.capacity = shared.capacity(placement.raw_capacity)[0]
        self.allow_multiple = bool(dev.get("allowMultipleAllocations"))
        self.consumes: list[tuple[str, dict[str, Quantity]]] = shared.derived(dev.get("consumesCounters"), _consumes) or NO_LIST
        self.taints = shared.value(taints) or NO_LIST
        self.binding_conditions: list[str] = shared.value(list(dev.get("bindingConditions") or [])) or NO_LIST
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
            if last_read and last_read[0][0] is record:
                devices = last_read[0][1]
            else:
                devices = record.spec().get("devices") or NO_LIST
                last_read[:] = [(record, devices)]
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


def device_matches_node(dev: Device, node: Mapping[str, Any], node_name: str) -> bool:
    """Per-device node selection: whether the device is reachable from ``node``."""
    if dev.node_name:
        return dev.node_name == node_name
    if dev.all_nodes:
        return True
    if dev.node_selector is not None:
        return node_selector_matches(dev.node_selector, node)
    return False


class SliceRecord:
    """What the index keeps of one ResourceSlice: the fields pools and node views are built from,
    and the object itself, or a loader when the caller keeps it compactly (read only to prepare
    the devices, once per slice version)."""

    __slots__ = ("all_nodes", "count", "driver", "generation", "load", "node_name", "node_selector", "obj", "per_device", "pool", "shared_counters")

    def __init__(self, obj: Mapping[str, Any], load: Callable[[], Mapping[str, Any] | None] | None) -> None:
        # The informer's JSON, typed from here on (kube/apitypes.pyi).
        spec = cast(ResourceSlice, obj).get("spec") or {}
        pool = spec.get("pool") or {}
        self.driver: str = spec.get("driver", "")
        self.pool: str = pool.get("name", "")
        self.generation = int(pool.get("generation", 0))
        self.count = int(pool.get("resourceSliceCount", 0))
        self.node_name: str = spec.get("nodeName") or ""
        self.all_nodes = bool(spec.get("allNodes"))
        self.node_selector: NodeSelector | None = spec.get("nodeSelector")
        self.per_device = bool(spec.get("perDeviceNodeSelection"))
        self.shared_counters: list[CounterSet] = spec.get("sharedCounters") or []
        self.obj = obj if load is None else None
        self.load = load

    def spec(self) -> ResourceSliceSpec:
        obj = self.obj if self.obj is not None else self.load() if self.load is not None else None
        return cast(ResourceSlice, obj or {}).get("spec") or {}
