"""Extended resources backed by devices (DRAExtendedResource): which DeviceClass serves a resource
name, the one rule the scheduler (which allocates them) and resource quota (which counts them) share.

A DeviceClass serves two names: its implicit one, ``deviceclass.resource.kubernetes.io/<class>``,
and the extended resource it names in ``spec.extendedResourceName`` (``example.com/gpu``). When two
classes name the same extended resource, the one created last wins, and of two created at the same
time the one whose name sorts first (upstream's extended resource cache).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_dra_extended_resource_name(name: str) -> bool:
    """An extended resource name (domain-prefixed, not kubernetes.io's, not a quota ``requests.``
    name) or a class's implicit name."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _name(klass: Mapping[str, Any]) -> str:
    return str((klass.get("metadata") or {}).get("name", ""))


def resource_classes(classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name -> the name of the class that serves it."""
    mapping: dict[str, str] = {}
    by_name = sorted(classes, key=_name)
    for klass in by_name:
        mapping[DEVICE_CLASS_PREFIX + _name(klass)] = _name(klass)
    # Newest first; sorted() is stable, so equal timestamps keep name order.
    newest_first = sorted(by_name, key=lambda c: str((c.get("metadata") or {}).get("creationTimestamp") or ""), reverse=True)
    explicit: dict[str, str] = {}
    for klass in newest_first:
        resource = (klass.get("spec") or {}).get("extendedResourceName")
        if resource and resource not in explicit:
            explicit[resource] = _name(klass)
    mapping.update(explicit)
    return mapping


def class_resources(classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Class name -> the extended resource it names (classes that name none are left out), whether
    or not another class serves that name too."""
    out: dict[str, str] = {}
    for klass in classes:
        resource = (klass.get("spec") or {}).get("extendedResourceName")
        if resource:
            out[_name(klass)] = str(resource)
    return out
