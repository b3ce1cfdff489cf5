"""DRA driver benchmark: pod starts/s when every claim is prepared by a real driver over gRPC
(``python -m exampledriver``) against the simulator's built-in devices, same nodes, same run.

Starts a throwaway Postgres (fsync on; ``--database-url`` for an existing one, ``--sqlite`` for
the embedded backend), migrates it and starts ``python -m app serve``. Then, ``--rounds`` times:

* **built-in** (the baseline): ``python -m kubeletsim --nodes N --profile gpu``; once every node
  has its ResourceSlice, ``--pods`` pods with one pre-allocated, reserved claim each are bound
  round-robin to the nodes and timed until Running (``bench.simulator``'s pod phase);
* **example driver**: ``python -m kubeletsim --nodes N --profile none`` and one
  ``python -m exampledriver --nodes N`` serving every node; once the driver has registered with
  every node and published its slices, the same pods, whose claims now go through
  NodePrepareResources (CDI spec file, claim ``status.devices``) before the pods run.

Printed per round: pods/s, latency p50/p99 and CPU cores of simulator, driver and server, and the
ratio driver/built-in. Run ``python -m bench.dradriver --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from bench.machine import reports_machine
from bench.simulator import DEVICES_PER_NODE, DRIVER, Bench, Simulator, database, fmt, ratio
from devtools.server import REPO_ROOT, ServerProcess, migrate, stop_process
from exampledriver.driver import DEFAULT_DRIVER
from kube.objects import Obj
from kubeletsim.settings import Settings

RESOURCE = "/apis/resource.k8s.io/v1"


class ExampleDriver:
    """``python -m exampledriver`` serving nodes ``<prefix>0 .. <prefix>N-1`` as a subprocess."""

    def __init__(self, server: str, nodes: int, prefix: str, root: Path, log: Path) -> None:
        command = [
            sys.executable, "-m", "exampledriver", "--server", server, "--nodes", str(nodes), "--node-prefix", prefix,
            "--kubelet-root-dir", str(root), "--num-devices", str(DEVICES_PER_NODE), "--log-level", "warning",
        ]  # fmt: skip
        with open(log, "ab") as out:
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=out)

    def stop(self) -> None:
        stop_process(self.process)


def registrations(log: Path) -> int:
    """How many plugin registrations the simulator logged."""
    return sum(1 for line in log.read_bytes().splitlines() if b'"msg":"registered DRA plugin"' in line)


async def slices_of(bench: Bench, prefix: str, driver: str) -> set[str]:
    """The nodes named ``<prefix>...`` that have a ResourceSlice of ``driver``."""
    answer = (await bench.http.get(f"{RESOURCE}/resourceslices", params={"fieldSelector": f"spec.driver={driver}"})).json()
    return {s["spec"]["nodeName"] for s in answer["items"] if s["spec"]["nodeName"].startswith(prefix)}


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, timeout: float, *processes: subprocess.Popen[bytes]) -> float:
    """Poll ``check`` until it is true (while ``processes`` run); the seconds it took."""
    t0 = time.monotonic()
    while not await check():
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{what}: {process.args!r} exited with {process.returncode}")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what}: not after {timeout}s")
        await asyncio.sleep(0.2)
    return time.monotonic() - t0


async def phase(bench: Bench, args: argparse.Namespace, root: Path, label: str, with_driver: bool) -> Obj:
    """One simulator (and with ``with_driver`` the example driver) and one pod phase with claims."""
    prefix = f"{label}-{bench.tag}-"
    driver = DEFAULT_DRIVER if with_driver else DRIVER
    sim_args = argparse.Namespace(**{**vars(args), "profile": "none" if with_driver else "gpu", "sim_log_level": "info",
                                     "sim_arg": [*args.sim_arg, "--root-dir", str(root)]})  # fmt: skip
    sim_log = bench.logs / f"kubeletsim-{label}.log"
    sim = Simulator(bench.url, args.nodes, prefix, sim_args, sim_log)
    bench.pids["sim"] = sim.process.pid
    plugin: ExampleDriver | None = None
    result: Obj = {"label": label}
    try:
        if with_driver:
            # The simulator wipes slices of drivers that have not registered when it starts: let it register its nodes first.
            await wait_for(lambda: _nodes_exist(bench, prefix, args.nodes), "nodes registered", args.timeout, sim.process)
            plugin = ExampleDriver(bench.url, args.nodes, prefix, root, bench.logs / f"exampledriver-{label}.log")
            bench.pids["driver"] = plugin.process.pid

            async def registered() -> bool:
                return registrations(sim_log) >= args.nodes

            result["register_s"] = await wait_for(registered, "the driver registers with every node", args.timeout, sim.process, plugin.process)

        async def published() -> bool:
            return len(await slices_of(bench, prefix, driver)) == args.nodes

        await wait_for(published, f"slices of {driver} on every node", args.timeout, sim.process)
        pods = min(args.pods, args.nodes * DEVICES_PER_NODE)
        result["pods"] = await bench.pod_starts(label, sim.names, pods, True, plain=False, driver=driver)
    finally:
        if plugin is not None:
            plugin.stop()
            bench.pids.pop("driver", None)
        sim.stop()
        bench.pids.pop("sim", None)
    return result


async def _nodes_exist(bench: Bench, prefix: str, count: int) -> bool:
    items = (await bench.http.get("/api/v1/nodes")).json()["items"]
    return sum(1 for n in items if n["metadata"]["name"].startswith(prefix)) == count


async def run(args: argparse.Namespace, logs: Path) -> Obj:
    root = Path(tempfile.mkdtemp(prefix="dra-drv-", dir="/tmp"))  # unix socket paths are short
    with database(args, logs) as (url, db_pid):
        migrate(url)
        server = ServerProcess(url, port=None, log_path=logs / "server.log").start()
        pids = {"bench": os.getpid(), "server": server.process.pid if server.process else None, "db": db_pid}
        bench = Bench(args, server.url, pids, logs)
        out: Obj = {"backend": "sqlite" if args.sqlite else "postgres", "cpus": os.cpu_count(), "nodes": args.nodes, "rounds": []}
        try:
            for i in range(args.rounds):
                builtin = await phase(bench, args, root, f"b{i}", with_driver=False)
                external = await phase(bench, args, root, f"d{i}", with_driver=True)
                out["rounds"].append({"builtin": builtin, "driver": external})
                show_round(out, i, builtin, external)
        finally:
            await bench.close()
            server.stop()
    return out


def show_round(out: Obj, index: int, builtin: Obj, external: Obj) -> None:
    print(f"\n== round {index + 1}: {out['nodes']} nodes, one claim per pod ({out['backend']}, {out['cpus']} CPUs)")
    if "register_s" in external:
        print(f"the example driver registered with every node in {external['register_s']:.1f}s")
    print(f"{'':<18}{'pods':>6}{'running':>8}{'pods/s':>8}{'ratio':>7}{'p50 ms':>8}{'p99 ms':>8}{'sim cpu':>8}{'drv cpu':>8}{'srv cpu':>8}{'db cpu':>8}")
    base = builtin["pods"]["per_s"]
    for label, result in (("built-in gpu", builtin), ("example driver", external)):
        p, cpu = result["pods"], result["pods"]["cpu"]
        print(f"  {label:<16}{p['pods']:6d}{p['running']:8d}{p['per_s']:8.1f}{fmt(ratio(p['per_s'], base), '.2f'):>7}{p['p50_ms']:8.0f}"
              f"{p['p99_ms']:8.0f}{fmt(cpu.get('sim'), '.2f'):>8}{fmt(cpu.get('driver'), '.2f'):>8}{fmt(cpu.get('server'), '.2f'):>8}"
              f"{fmt(cpu.get('db'), '.2f'):>8}")  # fmt: skip


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dradriver", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100, help="simulated nodes (default 100)")
    parser.add_argument("--pods", type=int, default=800, help="pods per phase, each with one claim (default 800; capped at 8 per node)")
    parser.add_argument("--rounds", type=int, default=1, help="built-in / example driver pairs, alternating (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for registration or a pod phase (default 300)")
    parser.add_argument("--database-url", default=None, help="an existing Postgres (or sqlite) URL instead of a throwaway Postgres")
    parser.add_argument("--sqlite", action="store_true", help="the embedded SQLite backend instead of Postgres")
    parser.add_argument("--workers", type=int, default=64, help="simulator's --workers (default 64)")
    parser.add_argument("--sim-arg", action="append", default=[], help="extra kubeletsim argument (repeatable)")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    # What bench.simulator's simulator process takes besides.
    args.sim_pythonpath, args.lease_interval, args.node_status_interval = "", 10.0, Settings.node_status_interval
    keep = bool(os.environ.get("DRA_BENCH_KEEP_LOGS"))
    with tempfile.TemporaryDirectory(prefix="dra-drv-bench-") as scratch:
        logs = Path(tempfile.mkdtemp(prefix="dra-drv-bench-logs-") if keep else scratch)
        out = asyncio.run(run(args, logs))
        if keep:
            print(f"logs: {logs}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    with contextlib.suppress(ZeroDivisionError):
        ratios = [r["driver"]["pods"]["per_s"] / r["builtin"]["pods"]["per_s"] for r in out["rounds"]]
        print(f"\nexample driver / built-in pod starts/s: {', '.join(f'{x:.2f}' for x in ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
