"""Event (core/v1): upstream's legacy rules, the only ones it applies to v1 Events."""

from __future__ import annotations

from app.registry.accessors import as_dict, as_str
from app.registry.base import Obj
from app.registry.objectmeta import dns1123_subdomain_problems, qualified_name_problems
from kube.errors import FieldError, invalid, required

# Legacy core/v1 Event limits (events.k8s.io-style events, i.e. those with eventTime).
EVENT_REPORTING_INSTANCE_LIMIT = 128
EVENT_ACTION_LIMIT = 128
EVENT_REASON_LIMIT = 128
EVENT_NOTE_LIMIT = 1024


def validate_event(event: Obj) -> list[FieldError]:
    """legacyValidateEvent: namespace agreement with involvedObject and, for events with an
    eventTime, the reporting fields; the event's namespace is a DNS subdomain."""
    errs: list[FieldError] = []
    metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    namespace = metadata.get("namespace") if isinstance(metadata.get("namespace"), str) else ""
    assert isinstance(namespace, str)
    involved = as_dict(event.get("involvedObject"), "involvedObject", errs)
    involved_ns = as_str(involved.get("namespace"), "involvedObject.namespace", errs)
    for key in ("reason", "message", "reportingComponent", "reportingInstance", "action", "type"):
        as_str(event.get(key), key, errs)
    if not event.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        elif namespace != involved_ns:
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = event.get("reportingComponent") if isinstance(event.get("reportingComponent"), str) else ""
        assert isinstance(controller, str)
        # core/v1 serializes ReportingController as reportingComponent; upstream's error path
        # keeps the Go-side name.
        if not controller:
            errs.append(required("reportingController"))
        errs += [invalid("reportingController", controller, p) for p in qualified_name_problems(controller)]
        for key, limit in (("reportingInstance", EVENT_REPORTING_INSTANCE_LIMIT), ("action", EVENT_ACTION_LIMIT), ("reason", EVENT_REASON_LIMIT)):
            value = event.get(key) if isinstance(event.get(key), str) else ""
            assert isinstance(value, str)
            if not value:
                errs.append(required(key))
            if len(value) > limit:
                errs.append(invalid(key, "", f"can have at most {limit} characters"))
        message = event.get("message") if isinstance(event.get("message"), str) else ""
        assert isinstance(message, str)
        if len(message) > EVENT_NOTE_LIMIT:
            errs.append(invalid("message", "", f"can have at most {EVENT_NOTE_LIMIT} characters"))
    errs += [invalid("namespace", namespace, p) for p in dns1123_subdomain_problems(namespace)]
    return errs
