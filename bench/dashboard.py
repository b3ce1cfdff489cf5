"""Dashboard benchmark: the page at 1,000 nodes x 10 devices (and many pending pods) in Debian's
headless Chromium.

Starts an API server (embedded SQLite, plain HTTP on loopback) and fills it through the API:
``--nodes`` ResourceSlices of ``--devices`` devices each, claims that hold 40 % of the devices
(reserved, so they stay), a DeviceTaintRule, and ``--pending`` pods that wait (no scheduler runs).
Then ``kubectl dra dashboard`` (a process of its own) serves the page and Chromium loads it:

* load: navigation start to the first map drawn with every device (``window.dra.firstRenderAt``),
  and to the DOM's ``load`` event;
* memory: the page's JS heap and DOM nodes (Chrome DevTools' Performance metrics), and the
  resident memory of every Chromium process;
* scrolling: time to draw the map after jumping to the end;
* a change: one claim allocated through the API until its device shows allocated on the page.

Run ``python -m bench.dashboard [--nodes 1000 --devices 10 --pending 10000]``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.machine import reports_machine
from devtools.browser import chromium
from devtools.ports import free_port
from devtools.server import REPO_ROOT, ServerProcess, migrate, stop_process
from kube.kubeconfig import kubeconfig_text

RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"


async def fill(url: str, nodes: int, devices: int, pending: int) -> None:
    """Objects of the scenario, created through the API with a few concurrent clients."""
    limits = httpx.Limits(max_connections=16)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        gate = asyncio.Semaphore(16)

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                response = await client.post(path, json=body)
                response.raise_for_status()
                return dict(response.json())

        async def put(path: str, body: dict[str, Any]) -> None:
            async with gate:
                (await client.put(path, json=body)).raise_for_status()

        await post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "load"}})
        await post(f"{RESOURCE}/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER}, "spec": {}})
        await asyncio.gather(*(
            post(f"{RESOURCE}/resourceslices", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{n:04}-gpu"},
                "spec": {"driver": DRIVER, "nodeName": f"node-{n:04}", "pool": {"name": f"node-{n:04}", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}, "model": {"string": "LATEST-GPU-MODEL"}},
                                      "capacity": {"memory": {"value": "80Gi"}}} for d in range(devices)]},
            })
            for n in range(nodes)
        ))  # fmt: skip
        holder = await post("/api/v1/namespaces/load/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder"},
                                                               "spec": {"nodeName": "node-0000", "containers": [{"name": "c", "image": "x"}]}})  # fmt: skip
        held = devices * 4 // 10

        async def held_claim(n: int) -> None:
            claim = await post("/apis/resource.k8s.io/v1/namespaces/load/resourceclaims", {
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"c-{n:04}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": held}}]}},
            })  # fmt: skip
            claim["status"] = {
                "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": f"node-{n:04}", "device": f"gpu-{d}"} for d in range(held)]}},
                "reservedFor": [{"resource": "pods", "name": "holder", "uid": holder["metadata"]["uid"]}],
            }  # fmt: skip
            await put(f"/apis/resource.k8s.io/v1/namespaces/load/resourceclaims/c-{n:04}/status", claim)

        await asyncio.gather(*(held_claim(n) for n in range(1, nodes)))
        await post(f"{RESOURCE}/devicetaintrules", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "maintenance"},
                                                    "spec": {"deviceSelector": {"device": "gpu-9"}, "taint": {"key": "maintenance", "effect": "NoSchedule"}}})  # fmt: skip
        await asyncio.gather(*(
            post("/api/v1/namespaces/load/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"wait-{i:05}"},
                                                   "spec": {"containers": [{"name": "c", "image": "x"}]}})
            for i in range(pending)
        ))  # fmt: skip


def chromium_rss_mib() -> float:
    """Resident memory of every Chromium process (from /proc)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"chromium" not in command.split(b"\0", 1)[0]:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def measure(url: str, server: str, devices_total: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto("about:blank")
        out["Chromium RSS with a blank page (MiB)"] = chromium_rss_mib()
        session = page.context.new_cdp_session(page)
        session.send("Performance.enable")
        started = time.monotonic()
        page.goto(url)
        page.wait_for_function(f"window.dra && window.dra.devices.size >= {devices_total} && window.dra.firstRenderAt > 0", timeout=120000)
        out["wall seconds to the full map"] = time.monotonic() - started
        out["first full map (ms after navigation)"] = page.evaluate("window.dra.firstRenderAt")
        out["DOM load event (ms)"] = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        time.sleep(2)
        metrics = {m["name"]: m["value"] for m in session.send("Performance.getMetrics")["metrics"]}
        out["JS heap used (MiB)"] = metrics.get("JSHeapUsedSize", 0) / 2**20
        out["JS heap total (MiB)"] = metrics.get("JSHeapTotalSize", 0) / 2**20
        out["DOM nodes"] = metrics.get("Nodes", 0)
        out["Chromium RSS, all processes (MiB)"] = chromium_rss_mib()
        out["scroll to the end and draw (ms)"] = page.evaluate(
            "new Promise(done => { const map = document.getElementById('map'); const t = performance.now();"
            " map.scrollTop = map.scrollHeight; requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t))); })"
        )
        assert page.query_selector('.row[data-node="node-0999"]') is not None or devices_total < 10000
        with httpx.Client(base_url=server, timeout=30) as client:
            claim = client.post("/apis/resource.k8s.io/v1/namespaces/load/resourceclaims", json={
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "late"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
            }).json()  # fmt: skip
            holder = client.get("/api/v1/namespaces/load/pods/holder").json()
            claim["status"] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-0999", "device": "gpu-8"}]}},
                               "reservedFor": [{"resource": "pods", "name": "holder", "uid": holder["metadata"]["uid"]}]}  # fmt: skip
            client.put("/apis/resource.k8s.io/v1/namespaces/load/resourceclaims/late/status", json=claim).raise_for_status()
            written = time.monotonic()
            page.wait_for_function(f"(window.dra.devices.get('{DRIVER}/node-0999/gpu-8') || [])[4] === 'allocated'", timeout=30000)
            out["a change shown (ms after the write)"] = (time.monotonic() - written) * 1000
        out["pending pods counted"] = float(page.evaluate("window.dra.pending.total"))
        out["pending pods listed"] = float(page.evaluate("window.dra.pending.items.length"))
    return out


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--pending", type=int, default=10000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        database = f"sqlite+aiosqlite:///{Path(tmp) / 'dra.sqlite'}"
        migrate(database)
        with ServerProcess(database, log_path=Path(tmp) / "apiserver.log") as server:
            started = time.monotonic()
            asyncio.run(fill(server.url, args.nodes, args.devices, args.pending))
            print(f"filled {args.nodes} nodes x {args.devices} devices, {args.pending} pending pods in {time.monotonic() - started:.1f}s", flush=True)
            config = Path(tmp) / "kubeconfig"
            config.write_text(kubeconfig_text(server.url, None))
            port = free_port()
            dashboard = subprocess.Popen(
                [sys.executable, "-m", "kubectl_dra", "--kubeconfig", str(config), "dashboard", "--port", str(port)],
                cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise TimeoutError("the dashboard did not start")
                    time.sleep(0.2)
                results = measure(f"http://127.0.0.1:{port}/", server.url, args.nodes * args.devices)
            finally:
                stop_process(dashboard)
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key.ljust(width)}  {value:,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
