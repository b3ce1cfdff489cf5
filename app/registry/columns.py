"""Printer-column building blocks shared by the kind modules."""

from __future__ import annotations

from typing import Any

from app.registry.base import PrinterColumn
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
