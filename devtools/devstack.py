"""``make run``: the whole stack as local processes on the embedded database.

Starts the API server (after migrating its database) and every worker that exists
(scheduler, controller, kubelet simulator), writes a kubeconfig, tells the user how
to point kubectl at it, says when the server stops or starts being ready (its ``/readyz``),
and stops everything on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from devtools.server import REPO_ROOT, ServerProcess, migrate

READY_CHECK_SECONDS = 2.0

KUBECONFIG_TEMPLATE = """apiVersion: v1
kind: Config
clusters:
- name: dra
  cluster:
    server: {url}
contexts:
- name: dra
  context:
    cluster: dra
    user: dra
    namespace: default
current-context: dra
users:
- name: dra
  user: {{}}
"""


def write_kubeconfig(url: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KUBECONFIG_TEMPLATE.format(url=url))
    return path


def worker_commands(url: str, feature_gates: str, nodes: int, profile: str) -> list[tuple[str, list[str]]]:
    """The workers that exist in this checkout, each as (name, argv)."""
    gates = ["--feature-gates", feature_gates] if feature_gates else []
    wanted = [
        ("controller", ["-m", "controllers", "--server", url, *gates]),
        ("scheduler", ["-m", "schedulers", "--server", url, *gates]),
        ("kubeletsim", ["-m", "kubeletsim", "--server", url, "--nodes", str(nodes), "--profile", profile, *gates]),
    ]
    return [(name, [sys.executable, *argv]) for name, argv in wanted if (REPO_ROOT / argv[1] / "__main__.py").exists()]


def readiness(url: str) -> str | None:
    """None while the server at ``url`` is ready, else what its verbose ``/readyz`` says fails."""
    try:
        response = httpx.get(f"{url}/readyz", params={"verbose": "1"}, timeout=5)
    except httpx.HTTPError as exc:
        return f"no answer from {url}/readyz: {exc}"
    if response.status_code == 200:
        return None
    return ", ".join(line[3:] for line in response.text.splitlines() if line.startswith("[-]")) or response.text.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.devstack", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("DRA_PORT", "6443")))
    parser.add_argument("--database-url", default=os.environ.get("DRA_DATABASE_URL", "sqlite:///./data/dra.sqlite"))
    parser.add_argument("--feature-gates", default=os.environ.get("DRA_FEATURE_GATES", ""))
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--profile", default="gpu,nic", help="kubelet simulator device profiles (default: gpu,nic)")
    args = parser.parse_args(argv)

    migrate(args.database_url)
    logs = REPO_ROOT / "data" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    flags = ["--feature-gates", args.feature_gates] if args.feature_gates else []
    server = ServerProcess(args.database_url, *flags, port=args.port, log_path=logs / "apiserver.log").start()
    kubeconfig = write_kubeconfig(server.url, REPO_ROOT / ".kube-dra" / "config")
    workers: list[subprocess.Popen[bytes]] = []
    for name, command in worker_commands(server.url, args.feature_gates, args.nodes, args.profile):
        log_file = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the worker
        workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log_file, stderr=log_file))
    print(
        f"""
The DRA control plane is running at {server.url} (database: {args.database_url}).
Workers: {", ".join(n for n, _ in worker_commands(server.url, "", 0, "")) or "none yet"}; logs in {logs}.

Point kubectl at it:

    export KUBECONFIG={kubeconfig}
    kubectl api-resources --api-group=resource.k8s.io
    kubectl apply -f examples/

Press Ctrl-C to stop.
""",
        flush=True,
    )
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failing: str | None = None
    next_check = time.monotonic() + READY_CHECK_SECONDS
    try:
        while not stopping:
            if server.process is not None and server.process.poll() is not None:
                print(f"the API server exited; see {logs / 'apiserver.log'}", file=sys.stderr)
                return 1
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + READY_CHECK_SECONDS
                now = readiness(server.url)
                if now != failing:
                    print(f"the API server is not ready: {now}" if now else "the API server is ready again", file=sys.stderr, flush=True)
                    failing = now
            time.sleep(0.5)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(10)
            except subprocess.TimeoutExpired:
                worker.kill()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
