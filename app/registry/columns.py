"""Printer-column building blocks shared by the kind modules."""

from __future__ import annotations

from typing import Any

from app.registry.base import PrinterColumn
from kube.errors import ApiError
from kube.labels import selector_from_label_selector_object
from kube.timeutil import human_age

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be updated."
)
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is not guaranteed to be set in happens-before order across separate operations. Clients may not "
    "set this value. It is represented in RFC3339 form and is in UTC."
)


def name_column() -> PrinterColumn:
    return PrinterColumn("Name", "string", NAME_DESCRIPTION, lambda o: o["metadata"].get("name", ""), "name")


def age_column() -> PrinterColumn:
    return PrinterColumn(
        "Age", "string", AGE_DESCRIPTION, lambda o: human_age(o["metadata"].get("creationTimestamp"))
    )


def dig(obj: Any, *path: str, default: Any = None) -> Any:
    """``obj[path[0]][path[1]]...`` or ``default`` where a step is missing."""
    for step in path:
        if not isinstance(obj, dict) or step not in obj:
            return default
        obj = obj[step]
    return obj


def or_none(value: Any, none: str = "<none>") -> str:
    """A text cell that shows ``none`` when empty, as upstream's printers do."""
    return str(value) if value not in (None, "") else none


def format_labels(labels: Any) -> str:
    """upstream's labels.FormatLabels: ``k=v`` pairs sorted by key, or ``<none>``."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: Any) -> str:
    """upstream's metav1.FormatLabelSelector: the selector in label selector syntax, ``<none>``
    when it selects everything or nothing, ``<error>`` when it is malformed."""
    if selector is not None and not isinstance(selector, dict):
        return "<error>"
    try:
        text = str(selector_from_label_selector_object(selector))
    except ApiError:
        return "<error>"
    return text or "<none>"


def template_containers(obj: Any, *template: str) -> tuple[str, str]:
    """The names and the images of the containers of a pod template (a workload's
    ``spec.template`` unless ``template`` says where), comma-joined."""
    containers = dig(obj, *(template or ("spec", "template")), "spec", "containers", default=None)
    containers = [c for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []
    return ",".join(str(c.get("name") or "") for c in containers), ",".join(str(c.get("image") or "") for c in containers)


# The short names of the volume access modes, in the order upstream prints them.
_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))


def access_modes(modes: Any) -> str:
    """Volume access modes as upstream's GetAccessModesAsString prints them (``RWO,ROX``)."""
    given = set(modes) if isinstance(modes, list) and all(isinstance(m, str) for m in modes) else set()
    return ",".join(short for mode, short in _ACCESS_MODES if mode in given)


def replicas_columns(spec: str, status: str, selector: PrinterColumn) -> tuple[PrinterColumn, ...]:
    """The columns of a replicated workload (ReplicationController, ReplicaSet): desired, current
    and ready replicas, then wide its containers, images and ``selector``."""
    return (
        name_column(),
        PrinterColumn("Desired", "integer", "", lambda o: int(dig(o, "spec", "replicas", default=0) or 0), doc=(spec, "replicas")),
        PrinterColumn("Current", "integer", "", lambda o: int(dig(o, "status", "replicas", default=0) or 0), doc=(status, "replicas")),
        PrinterColumn("Ready", "integer", "", lambda o: int(dig(o, "status", "readyReplicas", default=0) or 0), doc=(status, "readyReplicas")),
        age_column(),
        *container_columns(),
        selector,
    )


def container_columns() -> tuple[PrinterColumn, ...]:
    """The wide columns of a workload's pod template: its containers' names and images."""
    return (
        PrinterColumn("Containers", "string", "Names of each container in the template.", lambda o: template_containers(o)[0], priority=1),
        PrinterColumn("Images", "string", "Images referenced by each container in the template.", lambda o: template_containers(o)[1], priority=1),
    )
