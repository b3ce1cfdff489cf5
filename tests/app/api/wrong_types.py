"""Bodies with a value of the wrong JSON type, and kube-apiserver's answer to each (400
BadRequest from its decoder, ``transformDecodeError``): one row per kind of Go field (maps,
integers, bools, lists, structs, quantities, int-or-strings, times, bytes, named types, embedded
structs), and the order Go reports them in. The messages are upstream's, recorded from
kube-apiserver v1.37.2; tests/interop/test_wrong_types_upstream.py sends the same rows to it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import yaml

from kube.client import resource_path
from tests.helpers import claim, pod

RESOURCE = "resource.k8s.io"
YAML = "application/yaml"
# The message of a quantity that does not parse.
QUANTITY_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
LABELS_NOT_A_MAP = "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"


def cannot_handle(kind: str, version: str = "v1") -> str:
    """The start of upstream's decode errors for a body of ``kind``."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: '


def slice_(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-a",
            "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "1Gi"}}}],
        },
    }


@dataclass(frozen=True)
class WrongType:
    """A create of ``body`` (``path`` below its group version and namespace) refused with ``message``."""

    case: str
    group: str
    plural: str
    namespaced: bool
    body: dict[str, Any]
    message: str
    content_type: str = "application/json"

    def collection(self, namespace: str) -> str:
        return resource_path(self.group, "v1", self.plural, namespace if self.namespaced else None)

    def send(self, client: httpx.Client, namespace: str) -> httpx.Response:
        content = yaml.safe_dump(self.body).encode() if self.content_type == YAML else orjson.dumps(self.body)
        return client.post(self.collection(namespace), content=content, headers={"Content-Type": self.content_type})

    def stored(self, client: httpx.Client, namespace: str) -> bool:
        """Whether an object of the row's name exists (a refused create stores nothing)."""
        found = client.get(f"{self.collection(namespace)}/{self.body['metadata']['name']}")
        assert found.status_code in (200, 404), found.text
        return found.status_code == 200


def _with(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """``body`` with ``value`` at ``path`` (keys and list indexes)."""
    changed = copy.deepcopy(body)
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return changed


EXACTLY = ("spec", "devices", "requests", 0, "exactly")
CONTAINER = ("spec", "containers", 0)
CLAIM = cannot_handle("ResourceClaim")
SLICE = cannot_handle("ResourceSlice")
POD = cannot_handle("Pod")


def _claim(case: str, path: tuple[str | int, ...], value: Any, message: str) -> WrongType:
    return WrongType(case, RESOURCE, "resourceclaims", True, _with(claim("wrong", device_class="gpu"), path, value), CLAIM + message)


def _slice(case: str, path: tuple[str | int, ...], value: Any, message: str) -> WrongType:
    return WrongType(case, RESOURCE, "resourceslices", False, _with(slice_("wrong-types"), path, value), SLICE + message)


def _pod(case: str, path: tuple[str | int, ...], value: Any, message: str) -> WrongType:
    return WrongType(case, "", "pods", True, _with(pod("wrong"), path, value), POD + message)


def _unrecognized(case: str, body: dict[str, Any], field: str, value: str, content_type: str = "application/json") -> WrongType:
    """A claim whose apiVersion or kind is no string: the error shows the first 30 bytes of the
    body, in hex unless it starts as a JSON object."""
    sent = yaml.safe_dump(body).encode() if content_type == YAML else orjson.dumps(body)
    start = sent[:30].decode() if sent.startswith(b"{") else sent[:30].hex()
    message = (
        "the object provided is unrecognized (must be of type ResourceClaim): couldn't get version/kind; json parse error: "
        f"json: cannot unmarshal {value} into Go struct field .{field} of type string ({start} ...)"
    )
    return WrongType(case, RESOURCE, "resourceclaims", True, body, message, content_type)


def _go(value: str, field: str, go_type: str) -> str:
    return f"json: cannot unmarshal {value} into Go struct field {field} of type {go_type}"


ROWS: list[WrongType] = [
    # maps
    _claim("map[string]string from a string", ("metadata", "labels"), "x", LABELS_NOT_A_MAP),
    _claim("a map's string value from a number", ("metadata", "labels"), {"a": 1}, _go("number", "ObjectMeta.metadata.labels", "string")),
    _claim(
        "map of quantities from a string", (*EXACTLY, "capacity"), {"requests": "x"},
        _go("string", "CapacityRequirements.spec.devices.requests.exactly.capacity.requests", "map[v1.QualifiedName]resource.Quantity"),
    ),
    _pod("named map type (v1.ResourceList) from a string", (*CONTAINER, "resources"), {"limits": "x"}, _go("string", "ResourceRequirements.spec.containers.resources.limits", "v1.ResourceList")),
    _slice("a map's struct value from a string", ("spec", "devices", 0, "capacity"), {"memory": "1Gi"}, _go("string", "Device.spec.devices.capacity", "v1.DeviceCapacity")),
    # integers
    _claim("int64 from a string", (*EXACTLY, "count"), "2", _go("string", "ExactDeviceRequest.spec.devices.requests.exactly.count", "int64")),
    _claim("int64 from a fraction", (*EXACTLY, "count"), 1.5, _go("number 1.5", "ExactDeviceRequest.spec.devices.requests.exactly.count", "int64")),
    _claim("int64 from a bool", (*EXACTLY, "count"), True, _go("bool", "ExactDeviceRequest.spec.devices.requests.exactly.count", "int64")),
    _claim("metadata's int64 from a string", ("metadata", "generation"), "1", _go("string", "ObjectMeta.metadata.generation", "int64")),
    _claim(
        "int64 in a list's struct from a string", (*EXACTLY, "tolerations"), [{"key": "a", "tolerationSeconds": "5"}],
        _go("string", "DeviceToleration.spec.devices.requests.exactly.tolerations.tolerationSeconds", "int64"),
    ),
    _slice("int64 in a struct from a string", ("spec", "pool", "generation"), "1", _go("string", "ResourcePool.spec.pool.generation", "int64")),
    _slice("int64 in a map's struct from a string", ("spec", "devices", 0, "attributes"), {"a": {"int": "5"}}, _go("string", "DeviceAttribute.spec.devices.attributes.int", "int64")),
    _pod("int32 from a string", (*CONTAINER, "ports"), [{"containerPort": "80"}], _go("string", "ContainerPort.spec.containers.ports.containerPort", "int32")),
    # bools
    _claim("bool (a pointer) from a string", (*EXACTLY, "adminAccess"), "true", _go("string", "ExactDeviceRequest.spec.devices.requests.exactly.adminAccess", "bool")),
    _slice("bool from a string", ("spec", "allNodes"), "true", _go("string", "ResourceSliceSpec.spec.allNodes", "bool")),
    WrongType(
        "top-level bool from a string", "", "serviceaccounts", True,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wrong"}, "automountServiceAccountToken": "yes"},
        cannot_handle("ServiceAccount") + _go("string", "ServiceAccount.automountServiceAccountToken", "bool"),
    ),
    # strings of a named type
    _claim("named string type from a number", (*EXACTLY, "allocationMode"), 5, _go("number", "ExactDeviceRequest.spec.devices.requests.exactly.allocationMode", "v1.DeviceAllocationMode")),
    # lists
    _claim("list of structs from an object", ("spec", "devices", "requests"), {"a": 1}, _go("object", "DeviceClaim.spec.devices.requests", "[]v1.DeviceRequest")),
    _claim("list of structs from a string", ("spec", "devices", "requests"), "x", _go("string", "DeviceClaim.spec.devices.requests", "[]v1.DeviceRequest")),
    _claim("a list's string from a number", ("metadata", "finalizers"), [1], _go("number", "ObjectMeta.metadata.finalizers", "string")),
    _pod("list of strings from a string", (*CONTAINER, "command"), "ls", _go("string", "Container.spec.containers.command", "[]string")),
    # structs
    _claim("struct from a list", ("spec", "devices"), [], _go("array", "ResourceClaimSpec.spec.devices", "v1.DeviceClaim")),
    _claim("struct (a pointer) from a number", EXACTLY, 3, _go("number", "DeviceRequest.spec.devices.requests.exactly", "v1.ExactDeviceRequest")),
    _pod(
        "embedded struct's field from a string", ("spec", "volumes"), [{"name": "v", "hostPath": "x"}],
        _go("string", "Volume.spec.volumes.VolumeSource.hostPath", "v1.HostPathVolumeSource"),
    ),
    # quantities
    _slice("quantity that does not parse", ("spec", "devices", 0, "capacity", "memory", "value"), "abc", QUANTITY_FORMAT),
    _slice("quantity from a bool", ("spec", "devices", 0, "capacity", "memory", "value"), True, QUANTITY_FORMAT),
    _claim("quantity in a map from a bool", (*EXACTLY, "capacity"), {"requests": {"memory": True}}, QUANTITY_FORMAT),
    # int-or-strings
    _pod(
        "int-or-string from a bool", (*CONTAINER, "livenessProbe"), {"httpGet": {"port": True}},
        _go("bool", "HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.port", "int32"),
    ),
    _pod(
        "int-or-string from a fraction", (*CONTAINER, "livenessProbe"), {"httpGet": {"port": 1.5}},
        _go("number 1.5", "HTTPGetAction.spec.containers.livenessProbe.ProbeHandler.httpGet.port", "int32"),
    ),
    # times, bytes
    _claim("time from a number", ("metadata", "creationTimestamp"), 5, _go("number", "ObjectMeta.metadata.creationTimestamp", "string")),
    _claim(
        "time that does not parse", ("metadata", "creationTimestamp"), "yesterday",
        'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"',
    ),
    _claim("time out of range", ("metadata", "creationTimestamp"), "2026-02-30T00:00:00Z", 'parsing time "2026-02-30T00:00:00Z": day out of range'),
    WrongType(
        "lease's time from a number", "coordination.k8s.io", "leases", True,
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "wrong"}, "spec": {"renewTime": 3}},
        cannot_handle("Lease") + _go("number", "LeaseSpec.spec.renewTime", "string"),
    ),
    WrongType(
        "bytes from a number", "", "secrets", True, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrong"}, "data": {"a": 5}},
        cannot_handle("Secret") + _go("number", "Secret.data", "[]uint8"),
    ),
    WrongType(
        "bytes that are not base64", "", "secrets", True, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrong"}, "data": {"a": "!!!"}},
        cannot_handle("Secret") + "illegal base64 data at input byte 0",
    ),
    # which error: the first in the document, unless a type's own decoder fails later (it stops decoding)
    WrongType(
        "the first of two type errors", RESOURCE, "resourceclaims", True,
        _with(_with(claim("wrong", device_class="gpu"), ("metadata", "labels"), "x"), (*EXACTLY, "count"), "2"), CLAIM + LABELS_NOT_A_MAP,
    ),
    WrongType(
        "a later quantity over an earlier type error", RESOURCE, "resourceclaims", True,
        _with(_with(claim("wrong", device_class="gpu"), ("metadata", "labels"), "x"), (*EXACTLY, "capacity"), {"requests": {"memory": "zz"}}), CLAIM + QUANTITY_FORMAT,
    ),
    _pod("past an unknown field", CONTAINER, {"name": "c", "image": "i", "count": "x", "tty": "x"}, _go("string", "Container.spec.containers.tty", "bool")),
    # apiVersion and kind are read first, each into a string (the error shows the body's start)
    _unrecognized("kind from a number", _with(claim("wrong", device_class="gpu"), ("kind",), 5), "kind", "number"),
    _unrecognized("apiVersion from a bool", _with(claim("wrong", device_class="gpu"), ("apiVersion",), True), "apiVersion", "bool"),
    _unrecognized("kind in another case", {"Kind": ["ResourceClaim"], **claim("wrong", device_class="gpu")}, "kind", "array"),
    _unrecognized("kind from a number in YAML", _with(claim("wrong", device_class="gpu"), ("kind",), 5), "kind", "number", YAML),
    # YAML bodies are decoded as the JSON they convert to
    WrongType("a YAML body", "", "pods", True, _with(pod("wrong"), ("metadata", "labels"), "x"), POD + LABELS_NOT_A_MAP, YAML),
]
