"""Endpoints (v1, namespaced; deprecated since v1.33 for discovery.k8s.io/v1 EndpointSlice): the
addresses behind a Service. kube-apiserver still writes ``default/kubernetes`` (the server's own
endpoints, ``app.controlplane.kubernetesservice``) beside its EndpointSlice."""

from __future__ import annotations

from app.registry.base import Deprecation, KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.core.endpoints_validation import default_endpoints, endpoints_warnings, validate_endpoints
from kube.errors import FieldError

# The addresses `kubectl get` shows before it says how many more there are.
SHOWN = 3


def _host_port(ip: str, port: object) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def format_endpoints(obj: Obj) -> str:
    """ip:port of every ready address and port, as upstream's printer writes them."""
    subsets = [s for s in obj.get("subsets") or [] if isinstance(s, dict)]
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [str((a or {}).get("ip", "")) for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        # A headless service's endpoints may have no ports: their addresses alone.
        pairs = [(ip, None) for ip in addresses] if not ports else [(ip, (p or {}).get("port", 0)) for p in ports for ip in addresses]
        count += len(pairs)
        shown += [ip if port is None else _host_port(ip, port) for ip, port in pairs[: max(0, SHOWN - len(shown))]]
    text = ",".join(shown)
    return f"{text} + {count - SHOWN} more..." if count > SHOWN else text


class EndpointsStrategy(KindStrategy):
    kind = "Endpoints"
    plural = "endpoints"
    singular = "endpoints"
    namespaced = True
    short_names = ("ep",)
    deprecation = Deprecation((1, 33), replacement="discovery.k8s.io/v1 EndpointSlice")
    tracks_generation = False
    allow_create_on_update = True
    spec_fields = ("subsets",)
    create_example: Obj = {"subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 80}]}]}
    printer_columns = (
        name_column(),
        PrinterColumn("Endpoints", "string", "", format_endpoints, doc=("io.k8s.api.core.v1.Endpoints", "subsets")),
        age_column(),
    )

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_endpoints(obj)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        ctx.warnings.extend(endpoints_warnings(obj))
        return validate_endpoints(obj, None)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        ctx.warnings.extend(endpoints_warnings(new))
        return validate_endpoints(new, old)


STRATEGY: EndpointsStrategy = EndpointsStrategy()
