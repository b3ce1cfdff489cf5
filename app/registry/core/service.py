"""Service (v1, namespaced), served as storage: the scheduler's default topology spreading selects
pods by the services that select them."""

from __future__ import annotations

from typing import Any

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import age_column, dig, format_labels, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.core.v1.ServiceSpec"
# The widest load balancer address list `kubectl get` prints before cutting it short.
LOAD_BALANCER_WIDTH = 16


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _cluster_ip(obj: Obj) -> str:
    ips = _strings(dig(obj, "spec", "clusterIPs"))
    return ips[0] if ips else "<none>"


def _load_balancer(obj: Obj) -> str:
    ingress = dig(obj, "status", "loadBalancer", "ingress", default=None)
    found = {str(i.get("ip") or i.get("hostname")) for i in ingress if isinstance(i, dict) and (i.get("ip") or i.get("hostname"))} if isinstance(ingress, list) else set()
    text = ",".join(sorted(found))
    return text[: LOAD_BALANCER_WIDTH - 3] + "..." if len(text) > LOAD_BALANCER_WIDTH else text


def external_ip(obj: Obj) -> str:
    """The addresses a service is reached at from outside, by its type, as upstream prints them."""
    kind = dig(obj, "spec", "type", default="")
    external = _strings(dig(obj, "spec", "externalIPs"))
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        balancer = _load_balancer(obj)
        if external:
            return ",".join(([*balancer.split(",")] if balancer else []) + external)
        return balancer or "<pending>"
    if kind == "ExternalName":
        return str(dig(obj, "spec", "externalName", default="") or "")
    return "<unknown>"


def ports(obj: Obj) -> str:
    pieces = []
    for port in dig(obj, "spec", "ports", default=None) or []:
        if not isinstance(port, dict):
            continue
        node_port = port.get("nodePort") or 0
        protocol = port.get("protocol") or ""
        pieces.append(f"{port.get('port', 0)}:{node_port}/{protocol}" if isinstance(node_port, int) and node_port > 0 else f"{port.get('port', 0)}/{protocol}")
    return ",".join(pieces) or "<none>"


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="", kind="Service", plural="services", namespaced=True, short_names=("svc",), categories=("all",), status=True,
        # Service names are DNS labels (upstream's RelaxedServiceNameValidation, on by default).
        name_rule="label",
        create_example={"spec": {"ports": [{"port": 80}]}},
        printer_columns=(
            name_column(),
            PrinterColumn("Type", "string", "", lambda o: str(dig(o, "spec", "type", default="") or ""), doc=(SPEC, "type")),
            PrinterColumn("Cluster-IP", "string", "", _cluster_ip, doc=(SPEC, "clusterIP")),
            PrinterColumn("External-IP", "string", "", external_ip, doc=(SPEC, "externalIPs")),
            PrinterColumn("Port(s)", "string", "", ports, doc=(SPEC, "ports")),
            age_column(),
            PrinterColumn("Selector", "string", "", lambda o: format_labels(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector")),
        ),
    )
)  # fmt: skip
