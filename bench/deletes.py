"""Bulk deletes: a ``deletecollection`` of pods and a deleted namespace's cleanup, with the deletes
one by one (``--delete-collection-workers 1``, upstream's default) and with the server's default
workers, each on a fresh SQLite database, in one run.

    python -m bench.deletes [--pods 2400] [--workers 16] [--json]

Prints the seconds of each and the ratio one-by-one / together; exits 1 when an answer is not 200
or a pod or the namespace is left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.machine import load_average, reports_machine
from bench.serverprocess import ServerProcess
from kube.client import resource_path

CREATING_AT_ONCE = 32


class Leftover(Exception):
    """A delete that did not do all it should have."""


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "deletes"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def _fill(client: httpx.AsyncClient, namespace: str, pods: int) -> None:
    answer = await client.post(resource_path("", "v1", "namespaces"), json={"metadata": {"name": namespace}})
    if answer.status_code != 201:
        raise Leftover(f"namespace {namespace}: {answer.status_code} {answer.text}")
    turns = asyncio.Semaphore(CREATING_AT_ONCE)

    async def create(index: int) -> None:
        async with turns:
            made = await client.post(resource_path("", "v1", "pods", namespace), json=_pod(f"p-{index}"))
            if made.status_code != 201:
                raise Leftover(f"pod p-{index}: {made.status_code} {made.text}")

    await asyncio.gather(*(create(i) for i in range(pods)))


async def _measure(base_url: str, pods: int, timeout: float) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout) as client:
        await _fill(client, "collection", pods)
        started = time.monotonic()
        answer = await client.delete(resource_path("", "v1", "pods", "collection"), params={"labelSelector": "bench=deletes"})
        collection = time.monotonic() - started
        if answer.status_code != 200 or len(answer.json()["items"]) != pods:
            raise Leftover(f"deletecollection: {answer.status_code}, {len(answer.json().get('items') or [])} of {pods} pods deleted")
        left = (await client.get(resource_path("", "v1", "pods", "collection"))).json()["items"]
        if left:
            raise Leftover(f"deletecollection left {len(left)} pods")

        await _fill(client, "doomed", pods)
        started = time.monotonic()
        answer = await client.delete(resource_path("", "v1", "namespaces", name="doomed"))
        if answer.status_code != 200:
            raise Leftover(f"namespace delete: {answer.status_code} {answer.text}")
        while (await client.get(resource_path("", "v1", "namespaces", name="doomed"))).status_code != 404:
            if time.monotonic() - started > timeout:
                raise Leftover(f"namespace doomed still there after {timeout:g} s")
            await asyncio.sleep(0.05)
        return {"deletecollection_s": round(collection, 2), "namespace_s": round(time.monotonic() - started, 2)}


def run(workers: int, pods: int, timeout: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-deletes-") as tmp:
        server = ServerProcess(f"sqlite+aiosqlite:///{tmp}/db.sqlite", Path(tmp) / "server.log", ["--delete-collection-workers", str(workers)])
        server.start()
        try:
            return asyncio.run(_measure(server.base_url, pods, timeout))
        finally:
            server.stop()


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.deletes", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=2400, help="pods deleted each way (default 2400)")
    parser.add_argument("--workers", type=int, default=16, help="the workers compared with one (default 16, the server's default)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one delete may take (default 300)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    try:
        alone, together = run(1, args.pods, args.timeout), run(args.workers, args.pods, args.timeout)
    except Leftover as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    ratios = {key: round(alone[key] / together[key], 2) if together[key] else None for key in alone}
    result = {"pods": args.pods, "workers": args.workers, "one_by_one": alone, "together": together, "ratio": ratios, "load_average": load_average()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.pods} pods on SQLite          one by one   {args.workers} workers   ratio")
    for key, label in (("deletecollection_s", "deletecollection"), ("namespace_s", "namespace gone")):
        print(f"  {label:<28} {alone[key]:>8.2f} s {together[key]:>9.2f} s {ratios[key]:>7}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
