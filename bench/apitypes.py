"""What the typed dicts of ``kube/apitypes.pyi`` cost at run time: memory, reads, import.

Measured in one run, typed against plain:

* memory: ResourceClaims decoded from JSON and kept, as plain dicts and cast to ``ResourceClaim``
  (tracemalloc's bytes per claim);
* reads: the fields the allocator reads of a claim, by a function that reads a plain dict and by
  the same function reading it through ``cast(ResourceClaim, ...)`` (the boundary's one call; CPU
  ns per claim, best of ``--repeat`` interleaved rounds);
* import: ``import kube.apitypes`` in a fresh interpreter that has imported ``kube``, against
  importing ``kube.objects`` there (a small module of the same package; CPU ms, best of ``--repeat``).

Run ``python -m bench.apitypes --help``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, cast

import orjson

from bench.machine import reports_machine
from kube.apitypes import ResourceClaim

CLAIM = orjson.dumps(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "bench", "uid": "0f0c8f4e-5b0e-4d37-9a55-2a1f9c8d2e10", "resourceVersion": "42"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": f"gpu-{i}",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "a100"'}}],
                            "allocationMode": "ExactCount",
                            "count": 2,
                        },
                    }
                    for i in range(2)
                ],
                "constraints": [{"requests": ["gpu-0", "gpu-1"], "matchAttribute": "gpu.example.com/numa"}],
            }
        },
    }
)


def read_plain(claim: dict[str, Any]) -> int:
    total = 0
    meta = claim.get("metadata") or {}
    total += len(meta.get("uid") or "") + len(meta.get("resourceVersion") or "")
    for request in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        exactly = request.get("exactly") or {}
        total += exactly.get("count", 1) + len(exactly.get("deviceClassName") or "") + len(exactly.get("selectors") or [])
        total += bool(exactly.get("adminAccess"))
    return total


def read_typed(obj: dict[str, Any]) -> int:
    claim = cast(ResourceClaim, obj)
    total = 0
    meta = claim.get("metadata") or {}
    total += len(meta.get("uid") or "") + len(meta.get("resourceVersion") or "")
    for request in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        exactly = request.get("exactly") or {}
        total += exactly.get("count", 1) + len(exactly.get("deviceClassName") or "") + len(exactly.get("selectors") or [])
        total += bool(exactly.get("adminAccess"))
    return total


def bytes_per_claim(decode: Callable[[bytes], Any], count: int) -> float:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [decode(CLAIM) for _ in range(count)]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / count


def ns_per_read(read: Callable[[dict[str, Any]], int], claims: list[dict[str, Any]]) -> float:
    start = time.process_time_ns()
    for claim in claims:
        read(claim)
    return (time.process_time_ns() - start) / len(claims)


IMPORT = "import sys, time, kube; t = time.process_time(); import {module}; sys.stdout.write(str(time.process_time() - t))"


def ms_to_import(module: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        answer = subprocess.run([sys.executable, "-c", IMPORT.format(module=module)], check=True, capture_output=True, text=True)
        best = min(best, float(answer.stdout) * 1000)
    return best


@reports_machine
def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.apitypes", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=20000, help="claims decoded and read per round (default 20000)")
    parser.add_argument("--repeat", type=int, default=7, help="rounds, best one counts (default 7)")
    args = parser.parse_args()

    plain_bytes = bytes_per_claim(orjson.loads, args.claims)
    typed_bytes = bytes_per_claim(lambda raw: cast(ResourceClaim, orjson.loads(raw)), args.claims)
    claims = [orjson.loads(CLAIM) for _ in range(args.claims)]
    assert read_plain(claims[0]) == read_typed(claims[0])
    # Interleaved so that a change of the machine's load falls on both alike.
    plain_ns = typed_ns = float("inf")
    for _ in range(args.repeat):
        plain_ns = min(plain_ns, ns_per_read(read_plain, claims))
        typed_ns = min(typed_ns, ns_per_read(read_typed, claims))
    bare_ms = ms_to_import("kube.objects", args.repeat)
    import_ms = ms_to_import("kube.apitypes", args.repeat)

    print(f"{'':<34}{'plain':>12}{'typed':>12}{'typed/plain':>13}")
    print(f"{'memory (bytes per kept claim)':<34}{plain_bytes:>12.0f}{typed_bytes:>12.0f}{typed_bytes / plain_bytes:>13.3f}")
    print(f"{'reads (ns per claim)':<34}{plain_ns:>12.0f}{typed_ns:>12.0f}{typed_ns / plain_ns:>13.3f}")
    print(f"{'import (kube.objects | apitypes), ms':<34}{bare_ms:>12.2f}{import_ms:>12.2f}{import_ms / bare_ms:>13.3f}")


if __name__ == "__main__":
    main()
