"""``make run``: the whole stack as local processes on the embedded database.

Makes the cluster's credentials on first start (``data/pki``: a CA, the serving certificate, a
client certificate per control plane identity, a token per simulated node), starts the API
server over HTTPS with Node,RBAC (after migrating its database) and every worker that exists
(scheduler, controller, kubelet simulator) each as its own identity, writes an admin
kubeconfig, tells the user how to point kubectl at it, says when the server stops or starts
being ready (its ``/readyz``), and stops everything on Ctrl-C.
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

from devtools.credentials import ClusterCredentials
from devtools.server import REPO_ROOT, ServerProcess, migrate
from kube.pki import write_private

READY_CHECK_SECONDS = 2.0
EXPLAIN_PORT = 10260

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


NODE_PREFIX = "sim-"


def write_kubeconfig(server: ServerProcess, path: Path) -> Path:
    """A kubeconfig for ``server`` as its admin (no user for a server without credentials)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if server.credentials is not None:
        write_private(path, server.credentials.kubeconfig("admin").read_bytes())
    else:
        path.write_text(KUBECONFIG_TEMPLATE.format(url=server.url))
    return path


def node_names(nodes: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(nodes)]


def worker_commands(server: ServerProcess, feature_gates: str, nodes: int, profile: str, explain_port: int = 0) -> list[tuple[str, list[str]]]:
    """The workers that exist in this checkout, each as (name, argv), each as its own identity
    (the simulator's nodes need their tokens in the credentials before the server starts);
    with ``explain_port`` the scheduler serves explanations there (``kubectl dra why``)."""
    gates = ["--feature-gates", feature_gates] if feature_gates else []
    explain = ["--explain-port", str(explain_port)] if explain_port else []
    wanted = [
        ("controller", ["-m", "controllers", *server.worker_flags("controller"), *gates]),
        ("scheduler", ["-m", "schedulers", *server.worker_flags("scheduler"), *explain, *gates]),
        ("kubeletsim", ["-m", "kubeletsim", *server.worker_flags("kubeletsim"), "--nodes", str(nodes), "--node-prefix", NODE_PREFIX, "--profile", profile, *gates]),
    ]
    return [(name, [sys.executable, *argv]) for name, argv in wanted if (REPO_ROOT / argv[1] / "__main__.py").exists()]


def readiness(server: ServerProcess) -> str | None:
    """None while ``server`` is ready, else what its verbose ``/readyz`` says fails."""
    try:
        with httpx.Client(**server.httpx_options(), timeout=5) as client:  # type: ignore[arg-type]
            response = client.get("/readyz", params={"verbose": "1"})
    except httpx.HTTPError as exc:
        return f"no answer from {server.url}/readyz: {exc}"
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
    parser.add_argument(
        "--explain-port", type=int, default=int(os.environ.get("DRA_EXPLAIN_PORT", str(EXPLAIN_PORT))),
        help=f"the scheduler's explanation port, for kubectl dra (DRA_EXPLAIN_PORT; default {EXPLAIN_PORT}; 0: off)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    migrate(args.database_url)
    logs = REPO_ROOT / "data" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    flags = ["--feature-gates", args.feature_gates] if args.feature_gates else []
    credentials = ClusterCredentials.ensure(REPO_ROOT / "data" / "pki")
    credentials.ensure_node_tokens(node_names(args.nodes))
    flags += ["--audit-log-path", str(logs / "audit.log")]
    server = ServerProcess(args.database_url, *flags, port=args.port, log_path=logs / "apiserver.log", credentials=credentials).start()
    kubeconfig = write_kubeconfig(server, REPO_ROOT / ".kube-dra" / "config")
    workers: list[subprocess.Popen[bytes]] = []
    for name, command in worker_commands(server, args.feature_gates, args.nodes, args.profile, args.explain_port):
        log_file = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the worker
        workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log_file, stderr=log_file))
    print(
        f"""
The DRA control plane is running at {server.url} (database: {args.database_url}).
Workers: {", ".join(n for n, _ in worker_commands(server, "", 0, "")) or "none yet"}; logs in {logs} (audit.log: one line per request).
Credentials in {credentials.directory}; the kubeconfig below is the cluster admin's.

Point kubectl at it:

    export KUBECONFIG={kubeconfig}
    kubectl api-resources --api-group=resource.k8s.io
    kubectl apply -f examples/

See devices, claims and why pods wait (kubectl dra is in .venv/bin):

    kubectl dra devices
    kubectl dra why pod/NAME
    kubectl dra dashboard

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
                now = readiness(server)
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
