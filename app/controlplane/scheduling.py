"""The system PriorityClasses exist from the start (upstream's post-start hook
scheduling/bootstrap-system-priority-classes creates the missing ones)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from app.api.generic import GenericStore
from app.api.options import WriteOptions
from app.registry.scheduling import priorityclass
from app.registry.scheduling.priorityclass_validation import system_priority_classes
from kube.errors import ApiError
from kube.tasks import together

log = logging.getLogger("app.scheduling")
SYSTEM_MANAGER = WriteOptions(field_manager="kube-apiserver")
PRIORITY_CLASSES = priorityclass.STRATEGY


async def ensure_system_priority_classes(registry: GenericStore) -> None:
    """Create the system classes that are missing (an existing one is left as it is), together."""
    await together(*(_ensure_priority_class(registry, pc) for pc in system_priority_classes()))


async def _ensure_priority_class(registry: GenericStore, pc: dict[str, Any]) -> None:
    name = pc["metadata"]["name"]
    if registry.storage.cached(PRIORITY_CLASSES.qualified_resource, "", name) is None:
        with contextlib.suppress(ApiError):
            await registry.create(PRIORITY_CLASSES, "", pc, SYSTEM_MANAGER)
            log.info("created PriorityClass", extra={"priorityClass": name, "value": pc["value"]})
