"""The same job with both proposals for sharing one device among many pods, side by side.

Starts the whole stack as real processes (SQLite by default, ``--postgres`` for a throwaway
Postgres) with ``DRAReservedForWorkloads``, ``GenericWorkload`` and ``DRAWorkloadResourceClaims``
on, and one simulated GPU node that takes ``--pods`` pods. Then, once per proposal, N pods that
all use one GPU:

* **KEP-5194** (``reservedFor``): a ResourceClaim whose ``spec.reservedFor`` names the job;
  every pod names the claim.
* **KEP-5729** (``podgroup``): a PodGroup whose ``spec.resourceClaims`` names a
  ResourceClaimTemplate (the controller makes the group's claim); every pod names the group in
  ``spec.schedulingGroup`` and has the same claim entry.

Per proposal it prints the claim's ``status.reservedFor``, the API writes (POST, PUT, PATCH,
DELETE) the server counted from the first create to the last pod Running, per pod and by
resource, and the time until all pods run. Run ``python -m bench.proposals --pods 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench.machine import reports_machine
from bench.scheduler import Worker, database, request_counts
from devtools.server import ServerProcess, migrate
from kube.features import Gate, gates_flag
from kube.objects import Obj

GATES = gates_flag({Gate.DRAReservedForWorkloads: True, Gate.GenericWorkload: True, Gate.DRAWorkloadResourceClaims: True})
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"  # a beta version: off by default, as upstream
RESOURCE = "/apis/resource.k8s.io/v1"
SCHEDULING = "/apis/scheduling.k8s.io/v1beta1"
WRITES = ("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION")
DEVICE_REQUEST = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}


def pod(name: str, claim_entry: Obj, group: str | None = None) -> Obj:
    spec: Obj = {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", **claim_entry}],
    }
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def create_pods(http: httpx.AsyncClient, namespace: str, bodies: list[Obj], concurrency: int = 16) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(body: Obj) -> None:
        async with gate:
            response = await http.post(f"/api/v1/namespaces/{namespace}/pods", json=body)
            response.raise_for_status()

    await asyncio.gather(*(one(b) for b in bodies))


async def all_running(http: httpx.AsyncClient, namespace: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        response = await http.get(f"/api/v1/namespaces/{namespace}/pods", params={"fieldSelector": "status.phase=Running"})
        if len(response.json()["items"]) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{namespace}: not all {count} pods Running in {timeout}s")
        await asyncio.sleep(0.5)


async def run_proposal(http: httpx.AsyncClient, proposal: str, count: int, timeout: float) -> Obj:
    """Create the job of one proposal, wait until it runs, and measure it."""
    namespace = f"job-{proposal.lower()}"
    (await http.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})).raise_for_status()
    before = await request_counts(http)
    started = time.monotonic()
    if proposal == "reservedFor":
        job = {"apiGroup": "batch", "resource": "jobs", "name": "trainer", "uid": "5f0c7a8e-3b1d-4c2a-9e6f-0d4b8a1c2e3f"}
        claim = {"metadata": {"name": "trainer-gpu"}, "spec": {**DEVICE_REQUEST, "reservedFor": job}}
        (await http.post(f"{RESOURCE}/namespaces/{namespace}/resourceclaims", json=claim)).raise_for_status()
        bodies = [pod(f"trainer-{i}", {"resourceClaimName": "trainer-gpu"}) for i in range(count)]
    else:
        template = {"metadata": {"name": "trainer-gpu"}, "spec": {"spec": DEVICE_REQUEST}}
        (await http.post(f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", json=template)).raise_for_status()
        group = {"metadata": {"name": "trainer"}, "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "trainer-gpu"}]}}
        (await http.post(f"{SCHEDULING}/namespaces/{namespace}/podgroups", json=group)).raise_for_status()
        bodies = [pod(f"trainer-{i}", {"resourceClaimTemplateName": "trainer-gpu"}, group="trainer") for i in range(count)]
    await create_pods(http, namespace, bodies)
    created = time.monotonic() - started
    await all_running(http, namespace, count, timeout)
    elapsed = time.monotonic() - started
    after = await request_counts(http)
    writes = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after if k.split(" ", 1)[0] in WRITES}
    writes = {k: v for k, v in writes.items() if v}
    claims = (await http.get(f"{RESOURCE}/namespaces/{namespace}/resourceclaims")).json()["items"]
    return {
        "proposal": proposal,
        "pods": count,
        "claims": len(claims),
        "reservedFor": [c.get("status", {}).get("reservedFor") for c in claims],
        "created_seconds": round(created, 2),
        "running_seconds": round(elapsed, 2),
        "writes": dict(sorted(writes.items())),
        "writes_per_pod": round(sum(writes.values()) / count, 2),
        "claim_writes_per_pod": round(sum(v for k, v in writes.items() if "resourceclaims" in k) / count, 3),
    }


def report(result: Obj) -> None:
    print(f"\n== {result['proposal']}: {result['pods']} pods, {result['claims']} claim(s)")
    print(f"   reservedFor: {orjson.dumps(result['reservedFor']).decode()}")
    print(f"   created in {result['created_seconds']}s, all Running after {result['running_seconds']}s")
    print(f"   API writes per pod: {result['writes_per_pod']} (of them to resourceclaims: {result['claim_writes_per_pod']})")
    for key, value in result["writes"].items():
        print(f"     {key:40s} {int(value)}")


async def measure(url: str, count: int, proposals: list[str], timeout: float) -> list[Obj]:
    async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
        deadline = time.monotonic() + 60
        while len((await http.get(f"{RESOURCE}/resourceslices")).json()["items"]) < 1:
            if time.monotonic() > deadline:
                raise TimeoutError("the simulator published no ResourceSlice")
            await asyncio.sleep(0.2)
        device_class = {"metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
        (await http.post(f"{RESOURCE}/deviceclasses", json=device_class)).raise_for_status()
        return [await run_proposal(http, proposal, count, timeout) for proposal in proposals]


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.proposals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000, help="pods per proposal")
    parser.add_argument("--postgres", action="store_true", help="a throwaway Postgres instead of SQLite")
    parser.add_argument("--proposals", default="reservedFor,podgroup", help="which to run, in order")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds until all pods must run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this directory")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dra-proposals-") as tmp_name:
        tmp = Path(tmp_name)
        logs = args.logs or tmp
        logs.mkdir(parents=True, exist_ok=True)
        with database(not args.postgres, tmp) as url:
            migrate(url)
            server = ServerProcess(url, "--feature-gates", GATES, "--runtime-config", RUNTIME_CONFIG, port=None, log_path=logs / "server.log").start()
            common = ["--server", server.url, "--feature-gates", GATES]
            workers = [
                Worker("controllers", [*common, "--lease-duration", "5"], logs / "controller.log"),
                Worker("schedulers", [*common, "--no-leader-elect"], logs / "scheduler.log"),
                Worker("kubeletsim", [*common, "--nodes", "1", "--profile", "gpu", "--max-pods", str(2 * args.pods + 10)], logs / "sim.log"),
            ]
            try:
                results = asyncio.run(measure(server.url, args.pods, args.proposals.split(","), args.timeout))
            finally:
                for worker in reversed(workers):
                    worker.stop()
                server.stop()
    for result in results:
        report(result)
    if args.json:
        args.json.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
