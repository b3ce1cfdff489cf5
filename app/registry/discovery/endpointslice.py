"""EndpointSlice (discovery.k8s.io/v1, namespaced): a Service's endpoints, in pieces. The server
writes ``default/kubernetes`` (its own address, ``app.controlplane.kubernetesservice``); nothing
here writes slices for other Services (no endpointslice controller runs)."""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.discovery.endpointslice_validation import (
    default_endpoint_slice,
    drop_deprecated_topology,
    endpoint_slice_warnings,
    validate_endpoint_slice,
)
from kube.errors import FieldError

DEFINITION = "io.k8s.api.discovery.v1.EndpointSlice"
# The ports or addresses `kubectl get` shows before it says how many more there are.
SHOWN = 3


def _with_more(items: list[str]) -> str:
    if len(items) > SHOWN:
        return f"{','.join(items[:SHOWN])} + {len(items) - SHOWN} more..."
    return ",".join(items) or "<unset>"


def format_ports(obj: Obj) -> str:
    ports = [p for p in obj.get("ports") or [] if isinstance(p, dict)]
    return _with_more([str(p["port"]) if p.get("port") is not None else (str(p["name"]) if p.get("name") is not None else "*") for p in ports])


def format_addresses(obj: Obj) -> str:
    endpoints = [e for e in obj.get("endpoints") or [] if isinstance(e, dict)]
    return _with_more([str(a) for e in endpoints for a in e.get("addresses") or []])


class EndpointSliceStrategy(KindStrategy):
    group = "discovery.k8s.io"
    kind = "EndpointSlice"
    plural = "endpointslices"
    singular = "endpointslice"
    namespaced = True
    spec_fields = ("addressType", "endpoints", "ports")
    create_example: Obj = {"addressType": "IPv4", "endpoints": [{"addresses": ["192.0.2.10"]}], "ports": [{"port": 80}]}
    printer_columns = (
        name_column(),
        PrinterColumn("AddressType", "string", "", lambda o: str(o.get("addressType") or ""), doc=(DEFINITION, "addressType")),
        PrinterColumn("Ports", "string", "", format_ports, doc=(DEFINITION, "ports")),
        PrinterColumn("Endpoints", "string", "", format_addresses, doc=(DEFINITION, "endpoints")),
        age_column(),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        drop_deprecated_topology(obj, None)

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        drop_deprecated_topology(new, old)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_endpoint_slice(obj)

    def spec_changed(self, new: Obj, old: Obj) -> bool:
        """Upstream moves the generation when anything but metadata changes, or the labels do."""

        def content(obj: Obj) -> dict[str, Any]:
            return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}

        labels = ((new.get("metadata") or {}).get("labels") or {}) != ((old.get("metadata") or {}).get("labels") or {})
        return labels or content(new) != content(old)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_endpoint_slice(obj, None)
        ctx.warnings.extend(endpoint_slice_warnings(obj, creating=True))
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_endpoint_slice(new, old)
        ctx.warnings.extend(endpoint_slice_warnings(new, creating=False))
        return errs


STRATEGY: EndpointSliceStrategy = EndpointSliceStrategy()
