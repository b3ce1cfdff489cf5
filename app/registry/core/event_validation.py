"""Event validation, shared by core/v1 and events.k8s.io/v1 (one stored kind, two APIs).

Rules read the core/v1 shape (the stored one); events.k8s.io requests are converted to it first,
so field paths are core's, as upstream reports them from its internal type. Which rules apply
depends on the API the request came through: core/v1 gets the legacy rules only, for backward
compatibility; events.k8s.io/v1 gets them plus the strict ones.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.registry.accessors import as_dict, as_str
from app.registry.base import Obj
from app.registry.objectmeta import FIELD_IMMUTABLE, dns1123_subdomain_problems, qualified_name_problems
from kube.errors import FieldError, invalid, required

CORE_API_VERSION = "v1"

# Legacy core/v1 Event limits (events.k8s.io-style events, i.e. those with eventTime).
EVENT_REPORTING_INSTANCE_LIMIT = 128
EVENT_ACTION_LIMIT = 128
EVENT_REASON_LIMIT = 128
EVENT_NOTE_LIMIT = 1024
EVENT_TYPES = ("Normal", "Warning")


def _text(event: Obj, key: str) -> str:
    value = event.get(key)
    return value if isinstance(value, str) else ""


def validate_event(event: Obj, request_api_version: str = CORE_API_VERSION) -> list[FieldError]:
    """legacyValidateEvent: namespace agreement with involvedObject and, for events with an
    eventTime, the reporting fields. A core/v1 request also gets its namespace checked here (it
    has no ObjectMeta validation) and names the controller by its core/v1 field."""
    errs: list[FieldError] = []
    metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    namespace = metadata.get("namespace") if isinstance(metadata.get("namespace"), str) else ""
    assert isinstance(namespace, str)
    involved = as_dict(event.get("involvedObject"), "involvedObject", errs)
    involved_ns = as_str(involved.get("namespace"), "involvedObject.namespace", errs)
    for key in ("reason", "message", "reportingComponent", "reportingInstance", "action", "type"):
        as_str(event.get(key), key, errs)
    controller_path = "reportingComponent" if request_api_version == CORE_API_VERSION else "reportingController"
    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        elif namespace != involved_ns:
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = _text(event, "reportingComponent")
        if not controller:
            errs.append(required(controller_path))
        errs += [invalid(controller_path, controller, p) for p in qualified_name_problems(controller)]
        for key, limit in (("reportingInstance", EVENT_REPORTING_INSTANCE_LIMIT), ("action", EVENT_ACTION_LIMIT), ("reason", EVENT_REASON_LIMIT)):
            value = _text(event, key)
            if not value:
                errs.append(required(key))
            if len(value) > limit:
                errs.append(invalid(key, "", f"can have at most {limit} characters"))
        if len(_text(event, "message")) > EVENT_NOTE_LIMIT:
            errs.append(invalid("message", "", f"can have at most {EVENT_NOTE_LIMIT} characters"))
    if request_api_version == CORE_API_VERSION:
        errs += [invalid("namespace", namespace, p) for p in dns1123_subdomain_problems(namespace)]
    return errs


def _series_errors(event: Obj) -> list[FieldError]:
    series = event.get("series")
    if not isinstance(series, dict):
        return []
    errs: list[FieldError] = []
    count = series.get("count")
    if not isinstance(count, int) or count < 2:
        errs.append(invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(required("series.lastObservedTime"))
    return errs


def validate_strict_event_create(event: Obj) -> list[FieldError]:
    """What an event created through events.k8s.io/v1 must be besides legacy-valid (ObjectMeta is
    the generic store's): an eventTime, a known type, a series that counts, and none of the
    deprecated core fields."""
    errs = _series_errors(event)
    if not event.get("eventTime"):
        errs.append(required("eventTime"))
    if event.get("type") not in EVENT_TYPES:
        errs.append(invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if event.get(key):
            errs.append(invalid(key, "", "needs to be unset"))
    source = event.get("source")
    if isinstance(source, dict) and (source.get("component") or source.get("host")):
        errs.append(invalid("source", "", "needs to be unset"))
    return errs


def _set(value: Any) -> Any:
    """A value as Go holds it: what JSON leaves out and a zero value are the same."""
    if isinstance(value, dict):
        return {k: _set(v) for k, v in value.items() if _set(v) not in (None, "", 0, False, {}, [])}
    return value


def _micro(value: Any) -> Any:
    """An eventTime as an instant (clients send it with more or less precision than microseconds)."""
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value


# The fields an events.k8s.io update may not change, in upstream's order of reporting (it reports
# a changed reason twice); "eventTime" is compared as an instant.
_IMMUTABLE = (
    "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count", "reason", "type",
    "eventTime", "action", "related", "reportingComponent", "reportingInstance",
)  # fmt: skip


def validate_strict_event_update(new: Obj, old: Obj) -> list[FieldError]:
    """What an update through events.k8s.io/v1 may not change: everything but the series (checked
    when it changes), the metadata and the like."""
    errs: list[FieldError] = []
    if _set(new.get("series")) != _set(old.get("series")):
        errs += _series_errors(new)
    for key in _IMMUTABLE:
        same = _micro(new.get(key)) == _micro(old.get(key)) if key == "eventTime" else _set(new.get(key)) == _set(old.get(key))
        if not same:
            path = "reportingController" if key == "reportingComponent" else key
            errs.append(invalid(path, new.get(key), FIELD_IMMUTABLE))
    return errs
