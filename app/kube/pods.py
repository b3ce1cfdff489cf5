"""Pod facts computed the same way by the server and the workers."""

from __future__ import annotations

from typing import Any

from app.kube.quantity import parse_quantity_or_none

Obj = dict[str, Any]


def _quantity_equal(a: Any, b: Any) -> bool:
    qa, qb = parse_quantity_or_none(a), parse_quantity_or_none(b)
    return qa is not None and qb is not None and qa == qb


def qos_class(pod: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, from cpu/memory requests and limits (upstream's GetPodQOS)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return "BestEffort"
    containers = [c for key in ("initContainers", "containers") if isinstance(spec.get(key), list) for c in spec[key] if isinstance(c, dict)]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources")
        resources = resources if isinstance(resources, dict) else {}
        raw_requests = resources.get("requests")
        raw_limits = resources.get("limits")
        requests = {k: v for k, v in raw_requests.items() if k in ("cpu", "memory")} if isinstance(raw_requests, dict) else {}
        limits = {k: v for k, v in raw_limits.items() if k in ("cpu", "memory")} if isinstance(raw_limits, dict) else {}
        if requests or limits:
            any_set = True
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
        for name, value in requests.items():
            if name not in limits or not _quantity_equal(value, limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
