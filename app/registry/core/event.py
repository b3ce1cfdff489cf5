"""Event (v1, namespaced): what workers record and ``kubectl describe`` shows."""

from __future__ import annotations

from collections.abc import Callable

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import NAME_DESCRIPTION, dig
from app.registry.core.event_validation import validate_event
from kube.errors import FieldError
from kube.timeutil import human_age


def involved_field(name: str) -> Callable[[Obj], str]:
    """A getter of one field of the event's involvedObject (a field selector, a column)."""
    return lambda o: str(dig(o, "involvedObject", name, default="") or "")


def event_object(event: Obj) -> str:
    kind = str(dig(event, "involvedObject", "kind", default="") or "").lower()
    name = dig(event, "involvedObject", "name", default="") or ""
    return f"{kind}/{name}" if kind else str(name)


def event_source(event: Obj) -> str:
    component = dig(event, "source", "component", default="") or event.get("reportingComponent") or ""
    host = dig(event, "source", "host", default="") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


def first_seen(event: Obj) -> str:
    return human_age(event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp"))


def last_seen(event: Obj) -> str:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    return human_age(stamp)


class EventStrategy(KindStrategy):
    group = ""
    kind = "Event"
    plural = "events"
    singular = "event"
    namespaced = True
    # An Event must name its involved object's namespace: this example is for "default".
    create_example: Obj = {
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "example"},
        "reason": "Example",
        "message": "an example event",
        "type": "Normal",
        "source": {"component": "example"},
    }
    short_names = ("ev",)
    spec_fields = ()
    tracks_generation = False
    allow_create_on_update = True
    field_selectors = {
        "involvedObject.kind": involved_field("kind"),
        "involvedObject.namespace": involved_field("namespace"),
        "involvedObject.name": involved_field("name"),
        "involvedObject.uid": involved_field("uid"),
        "involvedObject.apiVersion": involved_field("apiVersion"),
        "involvedObject.resourceVersion": involved_field("resourceVersion"),
        "involvedObject.fieldPath": involved_field("fieldPath"),
        "reason": lambda o: str(o.get("reason") or ""),
        "reportingComponent": lambda o: str(o.get("reportingComponent") or ""),
        "source": lambda o: str(dig(o, "source", "component", default="") or ""),
        "type": lambda o: str(o.get("type") or ""),
    }
    printer_columns: tuple[PrinterColumn, ...] = (
        PrinterColumn("Last Seen", "string", "Time since the event was last seen", last_seen),
        PrinterColumn("Type", "string", "Type of this event (Normal, Warning)", lambda o: o.get("type", "")),
        PrinterColumn("Reason", "string", "Why the action was taken", lambda o: o.get("reason", "")),
        PrinterColumn("Object", "string", "The object this event is about", event_object),
        PrinterColumn("Subobject", "string", "The subobject this event is about", involved_field("fieldPath"), priority=1),
        PrinterColumn("Source", "string", "The component reporting this event", event_source, priority=1),
        PrinterColumn("Message", "string", "A human-readable description of the status", lambda o: o.get("message", "")),
        PrinterColumn("First Seen", "string", "Time since the event was first seen", first_seen, priority=1),
        PrinterColumn("Count", "string", "The number of times this event has occurred", lambda o: o.get("count", 1), priority=1),
        PrinterColumn("Name", "string", NAME_DESCRIPTION, lambda o: o["metadata"].get("name", ""), "name", priority=1),
    )
    # Upstream validates core/v1 Events with the legacy rules only: no ObjectMeta validation
    # (names, labels, ...) on create or update through /api/v1.
    validates_object_meta = False
    object_meta_kube_finalizers = False

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_event(obj, self.api_version)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_event(new, self.api_version)


STRATEGY: EventStrategy = EventStrategy()
