"""Event (events.k8s.io/v1, namespaced): core/v1 Event in the newer events API.

Upstream stores both as one resource, so the objects are the same: an event written through either
API is read through both. This version renames some fields (``involvedObject`` is ``regarding``,
``message`` is ``note``, ...) and validates new writes strictly; everything else is core Event's.
"""

from __future__ import annotations

from collections.abc import Callable

from app.registry.base import Obj, PrinterColumn, RequestContext
from app.registry.core.event import EventStrategy, involved_field
from app.registry.core.event_validation import validate_event, validate_strict_event_create, validate_strict_event_update
from kube.errors import FieldError

GROUP = "events.k8s.io"
# (core/v1 name, events.k8s.io/v1 name) of the fields the two versions name differently.
RENAMED = (
    ("involvedObject", "regarding"),
    ("source", "deprecatedSource"),
    ("message", "note"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
)
_TO_CORE = {new: old for old, new in RENAMED}
_FROM_CORE = dict(RENAMED)


def _renamed(obj: Obj, names: dict[str, str]) -> Obj:
    return {names.get(key, key): value for key, value in obj.items()}


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event's fields as core/v1 names them (a shallow copy)."""
    return _renamed(event, _TO_CORE)


def _on_core(cell: Callable[[Obj], object]) -> Callable[[Obj], object]:
    return lambda event: cell(to_core(event))


class EventsEventStrategy(EventStrategy):
    group = GROUP
    storage_group = ""
    storage_version = "v1"
    create_example: Obj = {
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "example"},
        "reason": "Example",
        "action": "Example",
        "note": "an example event",
        "type": "Normal",
        "reportingController": "example.com/example",
        "reportingInstance": "example",
    }
    # Selectors name this version's fields; they are read from the stored (core/v1) object.
    field_selectors = {
        **{f"regarding.{name}": involved_field(name) for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reason": EventStrategy.field_selectors["reason"],
        "reportingController": EventStrategy.field_selectors["reportingComponent"],
        "type": EventStrategy.field_selectors["type"],
    }
    # The same table as core/v1's, read from this version's fields.
    printer_columns = tuple(
        PrinterColumn(c.name, c.type, c.description, _on_core(c.cell), c.format, c.priority) for c in EventStrategy.printer_columns
    )
    # Unlike core/v1, events.k8s.io validates ObjectMeta, kube finalizer names included.
    validates_object_meta = True
    object_meta_kube_finalizers = True

    def convert_fields(self, obj: Obj, from_api_version: str, to_api_version: str) -> Obj:
        if to_api_version != self.api_version:
            return _renamed(obj, _TO_CORE)
        converted = _renamed(obj, _FROM_CORE)
        # This version always has an eventTime, null for a legacy event (as Go encodes a zero one).
        converted.setdefault("eventTime", None)
        return converted

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        core = to_core(obj)
        return validate_event(core, self.api_version) + validate_strict_event_create(core)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        core = to_core(new)
        return validate_event(core, self.api_version) + validate_strict_event_update(core, to_core(old))


STRATEGY: EventsEventStrategy = EventsEventStrategy()
