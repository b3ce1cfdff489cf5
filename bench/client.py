"""Worker HTTP client cost: CPU the client process spends per request, per transport.

Workers (scheduler, controller, kubelet simulator) are CPU-bound on request overhead, so what
counts is client CPU per request, not latency. Starts a server on SQLite, then for each
transport runs the same mix sequentially through ``KubeClient`` (GET of one object, PUT of its
status, POST of an Event) and reports client CPU µs per request (``time.process_time``, which
includes the kernel's loopback work done in the sender) and requests/s. The **baseline** is
plain ``httpx.AsyncClient`` with its default transport, measured in the same run; the ratios say
what KubeClient's direct transport calls and ``kube/transport.LeanTransport`` save.

``python -m bench.client [--requests 3000]``
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson

from bench.machine import reports_machine
from devtools.server import ServerProcess, migrate
from kube.client import KubeClient, resource_path
from kube.objects import Obj


async def _mix(get: Callable[[str], Awaitable[Obj]], put: Callable[[str, Obj], Awaitable[Obj]], post: Callable[[str, Obj], Awaitable[Obj]], requests: int) -> tuple[float, float]:
    """Run GET + PUT status + POST event rounds; (client CPU µs per request, requests/s)."""
    ns_path = resource_path("", "v1", "namespaces", name="default")
    events = resource_path("", "v1", "events", "default")
    await get(ns_path)  # connect and warm up
    rounds = max(1, requests // 3)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(rounds):
        ns = await get(ns_path)
        await put(f"{ns_path}/status", ns)
        await post(events, event(i))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / (rounds * 3) * 1e6, rounds * 3 / wall


def event(i: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "bench-"}, "reason": "Bench", "message": f"round {i}",
            "involvedObject": {"kind": "Namespace", "apiVersion": "v1", "name": "default"}, "type": "Normal"}


async def plain_httpx(url: str, requests: int) -> tuple[float, float]:
    """The baseline: httpx.AsyncClient with its default transport (how workers used to talk)."""
    async with httpx.AsyncClient(base_url=url, headers={"Accept": "application/json"}) as http:

        async def call(method: str, path: str, body: Obj | None = None) -> Obj:
            content = orjson.dumps(body) if body is not None else None
            headers = {"Content-Type": "application/json"} if content is not None else None
            response = await http.request(method, path, content=content, headers=headers)
            response.raise_for_status()
            result: Obj = orjson.loads(response.content)
            return result

        return await _mix(lambda p: call("GET", p), lambda p, b: call("PUT", p, b), lambda p, b: call("POST", p, b), requests)


async def kube_client(url: str, transport: httpx.AsyncBaseTransport | None, requests: int) -> tuple[float, float]:
    async with KubeClient(url, user_agent="bench-client/1", transport=transport) as client:
        return await _mix(client.get, client.update, client.create, requests)


async def run(url: str, requests: int) -> None:
    candidates: list[tuple[str, Callable[[], Awaitable[tuple[float, float]]]]] = [
        ("httpx.AsyncClient (baseline)", lambda: plain_httpx(url, requests)),
        ("KubeClient + httpcore", lambda: kube_client(url, httpx.AsyncHTTPTransport(), requests)),
        ("KubeClient + LeanTransport", lambda: kube_client(url, None, requests)),
    ]
    rows: list[tuple[str, float, float]] = []
    for name, measure in candidates:
        best = min([await measure() for _ in range(3)], key=lambda r: r[0])
        rows.append((name, *best))
    base_cpu = rows[0][1]
    print(f"{'client':30s} {'client CPU/req':>15s} {'req/s':>8s} {'CPU vs baseline':>16s}")
    for name, cpu, rate in rows:
        print(f"{name:30s} {cpu:12.0f} µs {rate:8.0f} {cpu / base_cpu:15.2f}x")


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="requests per measurement (best of three)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'client.sqlite'}"
        migrate(url)
        with ServerProcess(url, log_path=Path(tmp) / "server.log") as server:
            asyncio.run(run(server.url, args.requests))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
