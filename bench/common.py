"""What the API benchmark's modules share: constants, the ResourceClaim documents it writes,
statistics and the figures of a phase."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
GROUP = "/apis/resource.k8s.io/v1"
NS_CRUD = "bench"
NS_LIST = "bench-list"
NS_WATCH = "bench-watch"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAX_OPS_PER_PHASE = 5_000_000
REQUEST_TIMEOUT = 30.0
ERROR_PAUSE = 0.01

now = time.perf_counter


# ----------------------------------------------------------------------------- documents


def claim(name: str, namespace: str, seq: int) -> dict[str, Any]:
    """A realistic ResourceClaim: two device requests with CEL selectors, a constraint and a config."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "dra-bench", "app.kubernetes.io/component": "trainer"},
            "annotations": {"bench.example.com/seq": str(seq)},
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 2,
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"'
                                        ' && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi"))'
                                        " >= 0"
                                    }
                                }
                            ],
                        },
                    },
                    {
                        "name": "nic",
                        "exactly": {
                            "deviceClassName": "nic.example.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.driver == "nic.example.com"'
                                        ' && device.attributes["nic.example.com"].rdma == true'
                                    }
                                }
                            ],
                        },
                    },
                ],
                "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.example.com",
                            "parameters": {
                                "apiVersion": "gpu.example.com/v1",
                                "kind": "GpuConfig",
                                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
                            },
                        },
                    }
                ],
            }
        },
    }


def claim_bytes(name: str, namespace: str, seq: int) -> bytes:
    """JSON body of :func:`claim`."""
    return orjson.dumps(claim(name, namespace, seq))


def claims_path(namespace: str, name: str | None = None) -> str:
    """API path of the claims collection (or one claim) in a namespace."""
    base = f"{GROUP}/namespaces/{namespace}/resourceclaims"
    return f"{base}/{name}" if name else base


# ----------------------------------------------------------------------------- statistics


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of unsorted values; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100.0 * len(s) + 0.5) - 1))
    return s[k]


def ms(v: float | None) -> float | None:
    """Seconds to milliseconds, rounded; None stays None."""
    return None if v is None else round(v * 1000.0, 3)


@dataclass
class PhaseResult:
    """Figures of one measured phase."""

    phase: str
    side: str  # "server" or "raw"
    clients: int
    ok: int
    elapsed_s: float
    rate: float
    p50_ms: float | None
    p99_ms: float | None
    conflicts: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    cpu_cores: dict[str, float | None] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)




def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _merged(results: list[PhaseResult], phase: str) -> PhaseResult:
    """One side's rounds as one phase: requests and time summed, rates and CPU over the whole."""
    elapsed = sum(r.elapsed_s for r in results)
    ok = sum(r.ok for r in results)
    cpu: dict[str, float | None] = {}
    for key in results[0].cpu_cores:
        busy = [r.cpu_cores.get(key) for r in results]
        cpu[key] = None if any(b is None for b in busy) or not elapsed else round(sum(b * r.elapsed_s for b, r in zip(busy, results, strict=True) if b is not None) / elapsed, 3)
    errors: dict[str, int] = {}
    for r in results:
        for k, v in r.errors.items():
            errors[k] = errors.get(k, 0) + v
    return dataclasses.replace(
        results[0],
        phase=phase,
        ok=ok,
        elapsed_s=round(elapsed, 3),
        rate=round(ok / elapsed, 1) if elapsed else 0.0,
        p50_ms=max((r.p50_ms for r in results if r.p50_ms is not None), default=None),
        p99_ms=max((r.p99_ms for r in results if r.p99_ms is not None), default=None),
        conflicts=sum(r.conflicts for r in results),
        errors=errors,
        cpu_cores=cpu,
    )
