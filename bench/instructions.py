"""The API server's instructions per request, counted by callgrind: figures a loaded machine
cannot move, to tell a change's gain from noise before trusting wall-clock ratios.

The server (``python -m app serve`` of this checkout, or of ``--against``'s) runs under
``valgrind --tool=callgrind`` with collection off; a fixed workload warms it up, collection is
switched on (``callgrind_control``) for the measured requests only, and the total is divided by
them. Only the server process's user-space instructions count: Postgres, the clients and the
kernel (system calls, the loopback's TCP) do not.

Workloads:

* ``scheduler``: what one DRA pod costs the server when upstream's kube-scheduler schedules it
  beside this project's controller (``bench.scheduler --against-upstream``'s upstream-scheduler
  stack), one pod after another over HTTPS with client certificates and Node,RBAC: the pod's
  create, kube-scheduler's unschedulable status patch (strategic merge, protobuf answer), the
  claim's create and the pod's resourceClaimStatuses patch (the controller, JSON), the claim's
  finalizer update, its status update with the allocation and reservedFor, the binding and the
  Scheduled event (kube-scheduler, protobuf both ways), with the watches of the stack open:
  kube-scheduler's on pods and claims (protobuf), the controller's (JSON) and the benchmark's
  pod watch (JSON).
* ``create``, ``update``, ``get``, ``list``: ``bench.api``'s requests (its ResourceClaim; an
  annotation change of one of 64 claims; a GET of one of them; a LIST of 1,000) from 16 clients
  at once over plain HTTP, in JSON or with ``--protobuf`` in protobuf both ways.

Run ``python -m bench.instructions --help``; e.g. ``--workload scheduler --against /path/to/main``.
``--keep DIR`` keeps each measurement's callgrind output (and the server's log) in a directory of
its own under DIR, for ``callgrind_annotate --inclusive=yes DIR/.../callgrind.out.1``.
Needs valgrind and a Postgres (devtools.postgres); each workload takes a minute or two, most of it
the server starting under valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from app import protobuf
from bench.common import claim, claims_path
from devtools.credentials import ClusterCredentials
from devtools.ports import free_port
from devtools.postgres import ThrowawayPostgres
from devtools.server import REPO_ROOT, migrate
from kube import compiled

PROTOBUF = protobuf.CONTENT_TYPE
WORKLOADS = ("scheduler", "create", "update", "get", "list")
CLIENTS = 16
WARM_PODS = 20


class CountedServer:
    """``python -m app serve`` of ``tree`` under callgrind, collecting only between ``on`` and ``off``."""

    def __init__(self, tree: Path, database_url: str, directory: Path, flags: list[str], valgrind: bool = True) -> None:
        self.port = free_port()
        self.out = directory / "callgrind.out"
        command = [sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{self.port}", "--database-url", database_url, *flags]
        if valgrind:
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.out}", *command]
        self._log = open(directory / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, cwd=tree, stdout=self._log, stderr=self._log)
        self.valgrind = valgrind

    def control(self, *args: str) -> None:
        if self.valgrind:
            subprocess.run(["callgrind_control", *args, str(self.process.pid)], check=True, capture_output=True)

    def instructions(self) -> int:
        """The instructions collected (the dump the last ``off`` wrote)."""
        total = 0
        for dump in self.out.parent.glob(self.out.name + "*"):
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    total = max(total, int(line.split()[1]))
        return total

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def wait_ready(client: httpx.Client, server: CountedServer) -> None:
    deadline = time.monotonic() + 600  # a server under valgrind starts in a minute or two
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited ({server.process.returncode}); see {server.out.parent / 'server.log'}")
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError("server not ready")


def checked(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.request.url}: {response.status_code} {response.content[:300]!r}")
    return response


def scheduler_workload(tree: Path, database_url: str, directory: Path, pods: int, valgrind: bool) -> int:
    """Instructions of ``pods`` DRA pods, as the upstream-scheduler stack makes them (module docstring)."""
    credentials = ClusterCredentials.ensure(directory / "pki")
    server = CountedServer(tree, database_url, directory, credentials.server_flags(), valgrind)
    url = f"https://127.0.0.1:{server.port}"
    credentials.write_kubeconfigs(url)
    options: dict[str, Any] = credentials.httpx_options("admin")
    stop = threading.Event()
    try:
        client = httpx.Client(base_url=url, timeout=600, **options)
        wait_ready(client, server)
        for path, body in (
            ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}}),
            ("/api/v1/namespaces/w/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
            ("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0"}}),
            ("/apis/resource.k8s.io/v1/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "test-class"}}),
        ):
            response = client.post(path, json=body)
            if response.status_code not in (201, 409):  # a controller of the server may have made the account
                checked(response)

        def watch(path: str, accept: str) -> None:
            with (
                httpx.Client(base_url=url, timeout=None, **options) as watcher,
                watcher.stream("GET", path, params={"watch": "true", "resourceVersion": "0"}, headers={"Accept": accept}) as stream,
            ):
                for _ in stream.iter_raw():
                    if stop.is_set():
                        return

        watches = [
            ("/api/v1/pods", PROTOBUF), ("/apis/resource.k8s.io/v1/resourceclaims", PROTOBUF), ("/api/v1/pods", "application/json"),
            ("/apis/resource.k8s.io/v1/resourceclaims", "application/json"), ("/api/v1/namespaces/w/pods", "application/json"),
        ]  # fmt: skip
        for path, accept in watches:
            threading.Thread(target=watch, args=(path, accept), daemon=True).start()
        time.sleep(3)
        for i in range(WARM_PODS):
            one_pod(client, i)
        time.sleep(2)
        server.control("-i", "on")
        for i in range(WARM_PODS, WARM_PODS + pods):
            one_pod(client, i)
        time.sleep(2)  # the last writes' watch events
        server.control("-i", "off")
        server.control("-d")
        return server.instructions()
    finally:
        stop.set()
        server.stop()


def one_pod(client: httpx.Client, i: int) -> None:
    """One DRA pod's requests, in the order the upstream-scheduler stack makes them."""
    in_protobuf = {"Content-Type": PROTOBUF, "Accept": PROTOBUF}
    spec = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}], "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "tpl"}]}
    pod = checked(client.post("/api/v1/namespaces/w/pods", json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}"}, "spec": spec})).json()
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "waiting for resource claim", "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    checked(client.patch(f"/api/v1/namespaces/w/pods/{name}/status", content=orjson.dumps({"status": {"conditions": [unschedulable]}}),
                         headers={"Content-Type": "application/strategic-merge-patch+json", "Accept": PROTOBUF}))  # fmt: skip
    owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}
    body = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-dev", "annotations": {"resource.kubernetes.io/pod-claim-name": "dev"}, "ownerReferences": [owner]},
        "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}},
    }  # fmt: skip
    made = checked(client.post("/apis/resource.k8s.io/v1/namespaces/w/resourceclaims", json=body)).json()
    path = f"/apis/resource.k8s.io/v1/namespaces/w/resourceclaims/{made['metadata']['name']}"
    statuses = {"status": {"resourceClaimStatuses": [{"name": "dev", "resourceClaimName": made["metadata"]["name"]}]}}
    checked(client.patch(f"/api/v1/namespaces/w/pods/{name}/status", content=orjson.dumps(statuses), headers={"Content-Type": "application/merge-patch+json"}))
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    made = protobuf.decode_object(checked(client.put(path, content=protobuf.encode_object(made), headers=in_protobuf)).content)
    made["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "req-0", "driver": "test-driver.cdi.k8s.io", "pool": "node-0", "device": f"instance-{i}"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": name, "uid": uid}],
    }
    checked(client.put(path + "/status", content=protobuf.encode_object(made), headers=in_protobuf))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "w", "uid": uid}, "target": {"kind": "Node", "name": "node-0"}}
    checked(client.post(f"/api/v1/namespaces/w/pods/{name}/binding", content=protobuf.encode_object(binding), headers=in_protobuf))
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": f"{name}.{i:016x}", "namespace": "w"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-bench",
        "action": "Binding", "reason": "Scheduled", "regarding": {"kind": "Pod", "namespace": "w", "name": name, "uid": uid, "apiVersion": "v1"},
        "note": f"Successfully assigned w/{name} to node-0", "type": "Normal",
    }  # fmt: skip
    checked(client.post("/apis/events.k8s.io/v1/namespaces/w/events", content=protobuf.encode_object(event), headers=in_protobuf))


def api_workload(tree: Path, database_url: str, directory: Path, workload: str, requests: int, in_protobuf: bool, valgrind: bool) -> int:
    """Instructions of ``requests`` of bench.api's ``workload`` requests from 16 clients at once."""
    server = CountedServer(tree, database_url, directory, ["--insecure-serving"], valgrind)
    headers = {"Content-Type": PROTOBUF, "Accept": PROTOBUF} if in_protobuf else {"Content-Type": "application/json"}

    def body(obj: dict[str, Any]) -> bytes:
        return protobuf.encode_object(obj) if in_protobuf else orjson.dumps(obj)

    def read(response: httpx.Response) -> dict[str, Any]:
        return protobuf.decode_object(response.content) if in_protobuf else response.json()  # type: ignore[no-any-return]

    async def run() -> int:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=600, limits=httpx.Limits(max_connections=CLIENTS)) as client:
            with httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as probe:
                await asyncio.to_thread(wait_ready, probe, server)
            checked(await client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}}))
            current: dict[str, dict[str, Any]] = {}

            async def create(i: int) -> None:
                checked(await client.post(claims_path("b"), content=body(claim(f"c-{i}", "b", i)), headers=headers))

            async def request(i: int) -> None:
                name = f"c-{100_000 + i % 64}"
                if workload == "create":
                    await create(i)
                elif workload == "update":
                    obj = current.get(name) or (await client.get(claims_path("b", name))).json()
                    obj = {**obj, "metadata": {**obj["metadata"], "annotations": {"seq": str(i)}}}
                    current[name] = read(checked(await client.put(claims_path("b", name), content=body(obj), headers=headers)))
                else:
                    path = claims_path("b", name) if workload == "get" else claims_path("b")
                    checked(await client.get(path, headers={"Accept": PROTOBUF} if in_protobuf else {}))

            async def clients(first: int, last: int) -> None:
                async def one(k: int) -> None:  # one client's share; a claim is updated by one client only
                    for i in range(first + k, last, CLIENTS):
                        await request(i)

                await asyncio.gather(*(one(k) for k in range(CLIENTS)))

            stored = 1000 if workload == "list" else 64
            for start in range(0, stored, CLIENTS):
                await asyncio.gather(*(create(100_000 + i) for i in range(start, min(stored, start + CLIENTS))))
            await clients(0, 64)  # warm
            await asyncio.sleep(1)
            server.control("-i", "on")
            await clients(64, 64 + requests)
            server.control("-i", "off")
            server.control("-d")
            return server.instructions()

    try:
        return asyncio.run(run())
    finally:
        server.stop()


def measure(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dra-bench-instructions-") as scratch, ThrowawayPostgres(database="dra_instructions") as postgres:
        migrate(postgres.url)
        directory = Path(scratch)
        if args.keep:
            # callgrind_annotate reads the output afterwards: a fresh directory per measurement.
            keep = Path(args.keep).resolve()
            keep.mkdir(parents=True, exist_ok=True)
            directory = Path(tempfile.mkdtemp(prefix=f"{args.workload}{'-protobuf' if args.protobuf else ''}-", dir=keep))
        if args.workload == "scheduler":
            count = args.requests or 20
            total = scheduler_workload(tree, postgres.url, directory, count, not args.no_valgrind)
        else:
            count = args.requests or {"list": 24, "get": 400}.get(args.workload, 200)
            total = api_workload(tree, postgres.url, directory, args.workload, count, args.protobuf, not args.no_valgrind)
    unit = "pod" if args.workload == "scheduler" else "request"
    result = {"tree": str(tree), "workload": args.workload, "protobuf": args.protobuf, "count": count, "instructions": total, f"per_{unit}": total // count}
    if args.keep:
        result["kept"] = str(directory)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=WORKLOADS, default="scheduler")
    parser.add_argument("--protobuf", action="store_true", help="create/update/get/list: bodies and answers in protobuf")
    parser.add_argument("--requests", type=int, default=0, help="measured pods or requests (default 20 pods; 200 creates or updates, 400 GETs, 24 LISTs)")
    parser.add_argument("--against", default="", help="another checkout (e.g. main's, its modules compiled): measured first, then this one, and the ratio")
    parser.add_argument("--rounds", type=int, default=1, help="measure each checkout this many times, alternating")
    parser.add_argument("--no-valgrind", action="store_true", help="run the workload without counting (a check that it works)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--keep", default="", help="keep each measurement's callgrind output and server log in a new directory under this one (for callgrind_annotate)")
    args = parser.parse_args(argv)
    if not args.no_valgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian's valgrind package)")
    trees = [Path(args.against).resolve(), REPO_ROOT] if args.against else [REPO_ROOT]
    for tree in trees:
        # A half-rebuilt checkout runs as Python and would make a ratio of two different things.
        if stale := compiled.stale_build_warning(tree):
            print(f"warning: {tree}: {stale}", file=sys.stderr, flush=True)
    results: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for tree in trees:
            result = measure(tree, args)
            print(json.dumps(result), flush=True)
            results.append(result)
    key = "per_pod" if args.workload == "scheduler" else "per_request"
    if args.against:
        mine = [r[key] for r in results if r["tree"] == str(REPO_ROOT)]
        theirs = [r[key] for r in results if r["tree"] != str(REPO_ROOT)]
        print(f"{args.workload}{' (protobuf)' if args.protobuf else ''}: this / --against = {min(mine) / min(theirs):.3f} (fewest instructions of each)")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
