"""ResourceQuota (v1, namespaced, status subresource): limits on what a namespace's objects may use
in total. Its spec is the user's (``hard``, ``scopes``, ``scopeSelector``); its status is the quota
machinery's: the controller copies ``spec.hard`` into ``status.hard`` and counts ``status.used``,
and admission adds each new object's use to ``status.used`` before the object is written (see
``app.admission.resourcequota``)."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, name_column
from app.registry.core.resourcequota_validation import (
    create_warnings,
    validate_resource_quota,
    validate_resource_quota_update,
    validate_status,
)
from kube.errors import FieldError
from kube.quantity import parse_quantity_or_none

REQUEST_DESCRIPTION = "Request represents a minimum amount of cpu/memory that a container may consume."
LIMIT_DESCRIPTION = "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."


def _usage_cells(quota: Obj) -> tuple[str, str]:
    """``name: used/hard`` for each limit of the status, requests and the rest in one cell, limits.* in the other."""
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        used_amount = parse_quantity_or_none(used.get(name))
        hard_amount = parse_quantity_or_none(hard[name])
        cell = f"{name}: {used_amount.canonical() if used_amount is not None else '0'}/{hard_amount.canonical() if hard_amount is not None else '0'}"
        pieces = name.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(cell)
    return ", ".join(requests), ", ".join(limits)


class ResourceQuotaStrategy(KindStrategy):
    group = ""
    kind = "ResourceQuota"
    plural = "resourcequotas"
    singular = "resourcequota"
    namespaced = True
    short_names = ("quota",)
    has_status = True
    tracks_generation = False
    create_example: Obj = {"spec": {"hard": {"pods": "10"}}}
    printer_columns = (
        name_column(),
        PrinterColumn("Request", "string", REQUEST_DESCRIPTION, lambda o: _usage_cells(o)[0]),
        PrinterColumn("Limit", "string", LIMIT_DESCRIPTION, lambda o: _usage_cells(o)[1]),
        age_column(),
    )

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        ctx.warnings.extend(create_warnings(obj))
        return validate_resource_quota(obj)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_resource_quota_update(new, old)


class ResourceQuotaStatusStrategy(StatusStrategy, ResourceQuotaStrategy):
    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_status(new)


STATUS_STRATEGY = ResourceQuotaStatusStrategy()
STRATEGY: ResourceQuotaStrategy = ResourceQuotaStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
