"""Device profiles: what DRA drivers a simulated node runs and which ResourceSlices they publish.

Shared by the kubelet simulator (which publishes them) and the scheduler's what-if questions
(``kubectl dra fit --add-nodes N --profile P``: nodes that would publish them).

A profile is a YAML file (``kubeletsim/profiles/<name>.yaml``, or any path) of this shape::

    description: one line for --help
    drivers:
    - name: gpu.example.com          # the DRA driver name
      counterSets:                   # optional (DRAPartitionableDevices): published in their own slices
      - repeat: {i: 8}
        name: "gpu-{i}-counters"
        counters: {memory: {value: 80Gi}}
      devices:
      - repeat: {i: 8}               # one device per value (several variables: the cartesian product)
        name: "gpu-{i}"
        attributes: {index: {int: "{i}"}, uuid: {string: "gpu-{uuid(i)}"}}
        capacity: {memory: {value: 80Gi}}
        nodeAllocatableResources:    # optional (DRANodeAllocatableResources): what using the device
          memory: {overhead: {perPod: 128Mi}}   # charges against the node's allocatable

Every string (keys included) may contain ``{expr}`` templates. An expression uses the repeat
variables, ``node``, ``driver``, integer and string literals, ``+ - * // %`` and ``uuid(...)``, a
UUID that is stable for (node, driver, arguments), so a restarted simulator publishes the same
devices. Rendered values are strings, except that ``int`` attributes become integers and ``bool``
attributes booleans.
"""

from __future__ import annotations

import ast
import copy
import itertools
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kube.objects import Obj

# The shipped profiles are data of the simulator (the source tree is installed editable, and the
# image keeps it in /app).
PROFILE_DIR = Path(__file__).resolve().parents[2] / "kubeletsim" / "profiles"
# The profile of nodes without built-in devices: only drivers that register bring devices.
NO_PROFILE = "none"

# Upstream limits (resource.k8s.io/v1 ResourceSliceMaxDevices and friends).
MAX_DEVICES_PER_SLICE = 128
MAX_ADVANCED_DEVICES_PER_SLICE = 64
MAX_COUNTER_SETS_PER_SLICE = 8

# Fixed namespace so uuid(...) gives the same answer in every run and on every machine.
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "kubeletsim.dra.example.dev")
_TEMPLATE_RE = re.compile(r"\{([^{}]+)\}")
_LIST_ATTRIBUTE_TYPES = ("ints", "bools", "strings", "versions")


class ProfileError(ValueError):
    """A profile that cannot be found or does not have the expected shape."""


@dataclass(frozen=True)
class DriverProfile:
    """One simulated DRA driver: its name and the (unrendered) device and counter-set templates."""

    name: str
    devices: tuple[Obj, ...]
    counter_sets: tuple[Obj, ...] = ()


@dataclass(frozen=True)
class Profile:
    """A named set of simulated drivers."""

    name: str
    description: str
    drivers: tuple[DriverProfile, ...]

    @property
    def driver_names(self) -> tuple[str, ...]:
        """The names of the drivers this profile simulates."""
        return tuple(d.name for d in self.drivers)


def available_profiles() -> list[str]:
    """Names of the profiles shipped in ``kubeletsim/profiles``."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name (``gpu``) or any profile file by path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ProfileError(f"unknown profile {name_or_path!r}; shipped profiles: {', '.join(available_profiles())}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    return parse_profile(path.stem, data)


def load_profiles(names: str) -> Profile:
    """Load a comma-separated list of profiles (``gpu,nic``) as one profile whose nodes run all drivers
    (``none``: no built-in drivers at all)."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if wanted == [NO_PROFILE]:
        return Profile(NO_PROFILE, "no built-in devices", ())
    if NO_PROFILE in wanted:
        raise ProfileError(f"profile {NO_PROFILE!r} cannot be combined with others")
    parts = [load_profile(n) for n in wanted]
    if not parts:
        raise ProfileError("no profile given")
    if len(parts) == 1:
        return parts[0]
    drivers: list[DriverProfile] = []
    for part in parts:
        for driver in part.drivers:
            if any(d.name == driver.name for d in drivers):
                raise ProfileError(f"driver {driver.name!r} appears in more than one of the profiles {names!r}")
            drivers.append(driver)
    return Profile("+".join(p.name for p in parts), "; ".join(p.description for p in parts), tuple(drivers))


def parse_profile(name: str, data: Any) -> Profile:
    """Check the shape of a loaded profile document and wrap it."""
    if not isinstance(data, dict) or not isinstance(data.get("drivers"), list) or not data["drivers"]:
        raise ProfileError(f"profile {name!r}: expected a mapping with a non-empty `drivers` list")
    drivers: list[DriverProfile] = []
    for i, raw in enumerate(data["drivers"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise ProfileError(f"profile {name!r}: drivers[{i}] needs a `name`")
        devices = raw.get("devices") or []
        counter_sets = raw.get("counterSets") or []
        for kind, groups in (("devices", devices), ("counterSets", counter_sets)):
            if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("name"), str) for g in groups):
                raise ProfileError(f"profile {name!r}: drivers[{i}].{kind} must be a list of mappings with a `name`")
        drivers.append(DriverProfile(raw["name"], tuple(devices), tuple(counter_sets)))
    profile = Profile(name, str(data.get("description") or ""), tuple(drivers))
    # Render once for a made-up node so template mistakes fail at load time, not on the server.
    for driver in profile.drivers:
        for kind, items in (("device", render_devices(driver, "check")), ("counter set", render_counter_sets(driver, "check"))):
            names = [item["name"] for item in items]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ProfileError(f"profile {name!r}: driver {driver.name}: duplicate {kind} names {duplicates}")
    return profile


# ---- templates ---------------------------------------------------------------------------------


def _evaluate(node: ast.AST, env: Mapping[str, Any], uuid_of: Any) -> Any:
    """Evaluate the tiny arithmetic language of templates (no attribute access, no other calls)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, env, uuid_of)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ProfileError(f"unknown template variable {node.id!r} (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, env, uuid_of)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, env, uuid_of), _evaluate(node.right, env, uuid_of)
        ops: dict[type, Any] = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b,
            ast.Mod: lambda a, b: a % b,
        }
        op = ops.get(type(node.op))
        if op is not None:
            return op(left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "uuid" and not node.keywords:
        return uuid_of(*(_evaluate(a, env, uuid_of) for a in node.args))
    raise ProfileError(f"unsupported template expression: {ast.unparse(node)}")


def render_string(text: str, env: Mapping[str, Any]) -> str:
    """Replace every ``{expr}`` in ``text``."""

    def uuid_of(*args: Any) -> str:
        key = "/".join([str(env.get("node", "")), str(env.get("driver", "")), *(str(a) for a in args)])
        return str(uuid.uuid5(_UUID_NAMESPACE, key))

    def substitute(match: re.Match[str]) -> str:
        try:
            tree = ast.parse(match.group(1).strip(), mode="eval")
        except SyntaxError as exc:
            raise ProfileError(f"bad template {match.group(0)!r}: {exc.msg}") from exc
        return str(_evaluate(tree, env, uuid_of))

    return _TEMPLATE_RE.sub(substitute, text)


def _render(value: Any, env: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return render_string(value, env)
    if isinstance(value, dict):
        return {render_string(str(k), env): _render(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, env) for v in value]
    return copy.deepcopy(value)


def _expand(groups: Iterable[Obj], base_env: Mapping[str, Any]) -> list[tuple[Obj, dict[str, Any]]]:
    """Each template group once per combination of its ``repeat`` variables."""
    out: list[tuple[Obj, dict[str, Any]]] = []
    for group in groups:
        repeat = group.get("repeat") or {}
        if not isinstance(repeat, dict) or not all(isinstance(n, int) and n >= 0 for n in repeat.values()):
            raise ProfileError(f"`repeat` must map variable names to counts, got {repeat!r}")
        names = list(repeat)
        template = {k: v for k, v in group.items() if k != "repeat"}
        for values in itertools.product(*(range(repeat[n]) for n in names)):
            out.append((template, {**base_env, **dict(zip(names, values, strict=True))}))
    return out


def _typed_attribute(attr: Any) -> Any:
    """Attribute values come out of templates as strings; int/bool attributes need their JSON type."""
    if not isinstance(attr, dict):
        return attr
    attr = dict(attr)
    if isinstance(attr.get("int"), str):
        attr["int"] = int(attr["int"])
    if isinstance(attr.get("bool"), str):
        attr["bool"] = attr["bool"].lower() == "true"
    if isinstance(attr.get("version"), int | float):
        attr["version"] = str(attr["version"])
    return attr


def _quantities(entries: Any) -> Any:
    """Quantities may be written as YAML numbers; the API wants strings."""
    if not isinstance(entries, dict):
        return entries
    out = {}
    for key, entry in entries.items():
        if isinstance(entry, dict) and isinstance(entry.get("value"), int | float):
            entry = {**entry, "value": str(entry["value"])}
        out[key] = entry
    return out


def _node_allocatable(entries: Any) -> Any:
    """Multipliers and overheads may be written as YAML numbers; the API wants quantity strings."""
    if not isinstance(entries, dict):
        return entries
    out: Obj = {}
    for resource, entry in entries.items():
        if isinstance(entry, dict):
            entry = {
                part: {k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for k, v in fields.items()}
                if isinstance(fields, dict)
                else fields
                for part, fields in entry.items()
            }
        out[resource] = entry
    return out


def without_device_field(profile: Profile, field: str) -> Profile:
    """``profile`` with ``field`` left out of every device, e.g. a gated field whose gate is off
    (the server would drop it, and the published slices would then never match the profile)."""
    drivers = tuple(
        DriverProfile(d.name, tuple({k: v for k, v in dev.items() if k != field} for dev in d.devices), d.counter_sets)
        for d in profile.drivers
    )
    return Profile(profile.name, profile.description, drivers)


def render_devices(driver: DriverProfile, node: str) -> list[Obj]:
    """The driver's devices on ``node``, in API shape (resource.k8s.io/v1 Device)."""
    devices: list[Obj] = []
    for template, env in _expand(driver.devices, {"node": node, "driver": driver.name}):
        device = _render(template, env)
        if "attributes" in device:
            device["attributes"] = {k: _typed_attribute(v) for k, v in (device["attributes"] or {}).items()}
        if "capacity" in device:
            device["capacity"] = _quantities(device["capacity"])
        if "nodeAllocatableResources" in device:
            device["nodeAllocatableResources"] = _node_allocatable(device["nodeAllocatableResources"])
        for consumption in device.get("consumesCounters") or []:
            if isinstance(consumption, dict):
                consumption["counters"] = _quantities(consumption.get("counters"))
        devices.append(device)
    return devices


def render_counter_sets(driver: DriverProfile, node: str) -> list[Obj]:
    """The driver's shared counter sets on ``node`` (resource.k8s.io/v1 CounterSet)."""
    sets: list[Obj] = []
    for template, env in _expand(driver.counter_sets, {"node": node, "driver": driver.name}):
        counter_set = _render(template, env)
        counter_set["counters"] = _quantities(counter_set.get("counters"))
        sets.append(counter_set)
    return sets


# ---- slices ------------------------------------------------------------------------------------


def _is_advanced(device: Obj) -> bool:
    """Devices that lower the per-slice limit to 64 (taints, counters, list-typed attributes)."""
    if device.get("taints") or device.get("consumesCounters"):
        return True
    attributes = device.get("attributes") or {}
    return any(isinstance(a, dict) and any(t in a for t in _LIST_ATTRIBUTE_TYPES) for a in attributes.values())


def _chunks(items: list[Obj], size: int) -> list[list[Obj]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def slice_name(node: str, driver: str, index: int) -> str:
    """Deterministic slice names, so a restarted simulator finds (and does not duplicate) its slices."""
    return f"{node}-{driver}-{index}"


def build_pool_slices(driver: DriverProfile, node: str, *, generation: int = 1, node_uid: str | None = None) -> list[Obj]:
    """The ResourceSlices of one pool (one driver on one node): counter-set slices first, then device slices."""
    counter_sets = render_counter_sets(driver, node)
    devices = render_devices(driver, node)
    specs: list[Obj] = [{"sharedCounters": chunk} for chunk in _chunks(counter_sets, MAX_COUNTER_SETS_PER_SLICE)]
    limit = MAX_ADVANCED_DEVICES_PER_SLICE if any(_is_advanced(d) for d in devices) else MAX_DEVICES_PER_SLICE
    specs += [{"devices": chunk} for chunk in _chunks(devices, limit)]
    if not specs:
        # An empty pool is still published, so consumers can tell "no devices" from "driver not running".
        specs = [{"devices": []}]
    slices: list[Obj] = []
    for index, content in enumerate(specs):
        metadata: Obj = {"name": slice_name(node, driver.name, index)}
        if node_uid:
            # Upstream's kubelet plugins make the Node the owner, so slices go when the node goes.
            metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}]
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": metadata,
                "spec": {
                    "driver": driver.name,
                    "pool": {"name": node, "generation": generation, "resourceSliceCount": len(specs)},
                    "nodeName": node,
                    **content,
                },
            }
        )
    return slices


def build_slices(profile: Profile, node: str, *, generation: int = 1, node_uid: str | None = None) -> list[Obj]:
    """Every ResourceSlice a node with ``profile`` publishes (one pool per driver, named after the node)."""
    return [s for d in profile.drivers for s in build_pool_slices(d, node, generation=generation, node_uid=node_uid)]


def device_names(profile: Profile, node: str) -> dict[str, set[str]]:
    """Driver name -> the device names the node publishes for it."""
    return {d.name: {dev["name"] for dev in render_devices(d, node)} for d in profile.drivers}
