"""ResourceIndex: ResourceSlices, DeviceClasses and DeviceTaintRules indexed per node and pool."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from kube.apitypes import DeviceClass, DeviceTaint, DeviceTaintRule
from kube.dra.devicetaints import rule_selects
from kube.labels import node_selector_matches
from kube.quantity import Quantity
from schedulers.allocator.devices import (
    NO_LIST,
    Device,
    DevicePlacement,
    SharedValues,
    SliceRecord,
    as_quantity,
    device_matches_node,
    last_read,
)
from schedulers.allocator.results import AllocatorFeatures, DeviceID, PoolID


@dataclass
class PoolView:
    """A pool as seen from one node."""

    id: PoolID
    devices: list[Device]  # devices targeting the node, in allocation order
    incomplete: bool = False
    invalid: str | None = None
    has_binding: bool = False


@dataclass
class NodeView:
    pools: list[PoolView]
    candidates: list[Device]  # devices of usable (complete, valid) pools, in allocation order
    # Candidates not allocated exclusively, for one AllocatedState at the pools' change counts
    # (see AllocatedState.free_candidates).
    free: tuple[Any, int, list[Device]] | None = None


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
        self._slices: dict[str, SliceRecord] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.classes_version = 0  # bumped on every class change (SearchCache entries depend on classes)
        self._rules: dict[str, DeviceTaintRule] = {}
        self._devices: dict[str, tuple[SliceRecord, list[Device]]] = {}
        self._by_node: dict[str, list[str]] = {}
        self._other: list[str] = []  # slices without spec.nodeName
        self._by_pool: dict[PoolID, list[str]] = {}
        self._views: dict[str, tuple[Mapping[str, Any], Any, NodeView]] = {}  # node name -> (node, labels, view)
        self._pool_devices: dict[PoolID, tuple[dict[str, Device], dict[str, dict[str, Quantity]], str | None]] = {}
        self._shared = SharedValues()
        self._dirty = True
        for s in slices:
            self.set_slice(s)
        for c in classes:
            self.set_class(c)
        for r in taint_rules:
            self.set_taint_rule(r)

    # --- incremental updates ---

    def set_slice(self, obj: Mapping[str, Any], load: Callable[[], Mapping[str, Any] | None] | None = None) -> None:
        """Add or replace a ResourceSlice. With ``load`` (which returns this version of the object)
        the index keeps only what it indexes by, and reads the devices through ``load`` when it
        prepares them."""
        self._slices[obj["metadata"]["name"]] = SliceRecord(obj, load)
        self._dirty = True

    def remove_slice(self, name: str) -> None:
        """Forget a ResourceSlice."""
        self._slices.pop(name, None)
        self._devices.pop(name, None)
        self._dirty = True

    def set_class(self, obj: Mapping[str, Any]) -> None:
        """Add or replace a DeviceClass."""
        self.classes[obj["metadata"]["name"]] = cast(DeviceClass, obj)
        self.classes_version += 1

    def remove_class(self, name: str) -> None:
        """Forget a DeviceClass."""
        self.classes.pop(name, None)
        self.classes_version += 1

    def set_taint_rule(self, obj: Mapping[str, Any]) -> None:
        """Add or replace a DeviceTaintRule (re-taints every device)."""
        self._rules[obj["metadata"]["name"]] = cast(DeviceTaintRule, obj)
        self._devices.clear()
        self._dirty = True

    def remove_taint_rule(self, name: str) -> None:
        """Forget a DeviceTaintRule."""
        if self._rules.pop(name, None) is not None:
            self._devices.clear()
            self._dirty = True

    # --- derived structures ---

    def _usable(self, record: SliceRecord) -> bool:
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

    def slice_devices(self, name: str) -> list[Device]:
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
        placements: dict[tuple[Any, ...], DevicePlacement] = {}
        for position, dev in enumerate(spec.get("devices") or []):
            taints: list[DeviceTaint] = list(dev.get("taints") or []) if self.features.device_taints else []
            for rule in rules:
                if rule_selects(rule, driver, pool, dev.get("name", "")):
                    taints.append((rule.get("spec") or {}).get("taint") or {})
            devices.append(Device(spec, dev, record, position, taints, shared, placements))
        self._devices[name] = (record, devices)
        last_read[:] = [(record, spec.get("devices") or NO_LIST)]  # CEL views of these devices come next
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

    def _pool_info(self, pool_id: PoolID, names: list[str]) -> tuple[dict[str, Device], dict[str, dict[str, Quantity]], str | None]:
        """All devices and counter sets of the pool at one generation, plus a validation error."""
        cached = self._pool_devices.get(pool_id)
        if cached is not None:
            return cached
        devices: dict[str, Device] = {}
        counters: dict[str, dict[str, Quantity]] = {}
        problem: str | None = None
        for n in names:
            for cs in self._slices[n].shared_counters:
                if cs.get("name") in counters and problem is None:
                    problem = f"duplicate counter set name {cs.get('name')}"
                counters[cs.get("name", "")] = {k: as_quantity(v.get("value", "0")) for k, v in (cs.get("counters") or {}).items()}
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

    def pool_counters(self, pool_id: PoolID) -> tuple[dict[str, Device], dict[str, dict[str, Quantity]]]:
        """Devices and shared counters of the newest complete-or-not generation of a pool."""
        if self._dirty:
            self._rebuild()
        names = self._by_pool.get(pool_id, [])
        _, chosen = self._pool_generation(names)
        devices, counters, _ = self._pool_info(pool_id, chosen)
        return devices, counters

    def device(self, device_id: DeviceID) -> Device | None:
        """Look a device up in the newest generation of its pool."""
        devices, _ = self.pool_counters((device_id[0], device_id[1]))
        return devices.get(device_id[2])

    def node_view(self, node: Mapping[str, Any]) -> NodeView:
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

    def _build_view(self, node: Mapping[str, Any], node_name: str) -> NodeView:
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
                ok = any(device_matches_node(d, node, node_name) for d in self.slice_devices(name))
                # A counter-only slice carries no devices; it is pulled in via the pool instead.
                per_device.add(name)
            elif record.node_selector is not None:
                ok = node_selector_matches(record.node_selector, node)
            else:
                ok = False  # unknown future node selection mode
            if ok:
                relevant.setdefault((record.driver, record.pool), []).append(name)
        pools: list[PoolView] = []
        for pool_id, names in relevant.items():
            gen, chosen = self._pool_generation(names)
            count = self._slices[chosen[0]].count
            pool = PoolView(pool_id, [])
            all_gen, all_chosen = self._pool_generation(self._by_pool.get(pool_id, []))
            if len(chosen) != count:
                if all_gen > gen:
                    continue  # obsolete: a newer generation is being published elsewhere
                pool.incomplete = len(all_chosen) != count
            for name in sorted(chosen):
                for dev in self.slice_devices(name):
                    if name in per_device and not device_matches_node(dev, node, node_name):
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
        return NodeView(pools, candidates)

    def _validate_only(self, names: list[str]) -> str | None:
        """Duplicate-name check for a stale-but-complete generation (kept like upstream)."""
        seen: set[str] = set()
        for n in names:
            for d in self.slice_devices(n):
                if d.name in seen:
                    return f"duplicate device name {d.name}"
                seen.add(d.name)
        return None
