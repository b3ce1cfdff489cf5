"""``make run``: the whole stack as local processes on the embedded database.

Makes the cluster's credentials on first start (``data/pki``: a CA, the serving certificate, a
client certificate per control plane identity, a token per simulated node), starts the API
server over HTTPS with Node,RBAC (after migrating its database) and every worker that exists
(scheduler, controller, kubelet simulator) each as its own identity, writes an admin
kubeconfig, tells the user how to point kubectl at it, says when the server stops or starts
being ready (its ``/readyz``), and stops everything on Ctrl-C.

With ``--example-driver`` the nodes have no built-in devices (unless ``--profile`` says
otherwise): the example DRA driver runs once per node, as a DaemonSet would run it, as the
service account of ``examples/exampledriver/rbac.yaml`` with a token bound to its node.

With ``--replicas N`` (Postgres only) it starts N API servers on one database, on ports PORT ..
PORT+N-1, and spreads the workers over them; with ``--shards N`` the kubelet simulator runs its
nodes as N processes (``--shard K/N``), shard K talking to replica K mod N.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import yaml

from devtools.credentials import ClusterCredentials
from devtools.grants import apply_grants
from devtools.server import REPO_ROOT, ServerProcess, migrate, stop_all
from kube.client import resource_path
from kube.kubeconfig import kubeconfig_text
from kube.listen import listen_error
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


# Server flags of a cluster made to run DRA drivers, as kube-up, kind and local-up-cluster set them:
# drivers' kubelet plugins run in privileged containers (kube-apiserver refuses them by default).
CLUSTER_SERVER_FLAGS = ("--allow-privileged=true",)

NODE_PREFIX = "sim-"
DEFAULT_PROFILE = "gpu,nic"

# The example driver's manifests (its identity and its DeviceClass), applied as the admin.
EXAMPLE_DRIVER_MANIFESTS = REPO_ROOT / "examples" / "exampledriver"
EXAMPLE_DRIVER_ACCOUNT = ("kube-system", "dra-example-driver")
# make run asks for each node's driver token once (a kubelet would renew a pod's projected token).
EXAMPLE_DRIVER_TOKEN_SECONDS = 7 * 24 * 3600
# kind -> (group, version, plural, namespaced) of what the manifests hold.
MANIFEST_KINDS = {
    "ServiceAccount": ("", "v1", "serviceaccounts", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "DeviceClass": ("resource.k8s.io", "v1", "deviceclasses", False),
    "ResourceClaimTemplate": ("resource.k8s.io", "v1", "resourceclaimtemplates", True),
    "Pod": ("", "v1", "pods", True),
}


class StartFailure(Exception):
    """Why the stack cannot start, in one line for the user (``make run`` prints it and exits 1)."""


def free_port_after(port: int) -> int:
    """The first port after ``port`` that 127.0.0.1 can listen on, to suggest instead."""
    return next((p for p in range(port + 1, min(port + 200, 65536)) if listen_error("127.0.0.1", p) is None), port + 1)


def check_ports(port: int, explain_port: int, replicas: int = 1) -> None:
    """The API servers' and the scheduler's ports must be free, else say which and how to pick another."""
    for replica in range(replicas):
        if problem := listen_error("127.0.0.1", port + replica):
            after = free_port_after(port + replicas - 1)
            raise StartFailure(f"{problem} (another make run?); stop what listens there, or use another port: make run PORT={after}")
    if explain_port and (problem := listen_error("127.0.0.1", explain_port)):
        raise StartFailure(
            f"{problem}, the scheduler's explanation port (another make run?); use another: "
            f"DRA_EXPLAIN_PORT={free_port_after(explain_port)} make run (0: no explanations)"
        )


def last_error(text: str) -> str | None:
    """The last ``error: ...`` line a process printed (the server's and ``app migrate``'s start failures)."""
    lines = [line.strip() for line in text.splitlines() if line.startswith("error: ")]
    return lines[-1].removeprefix("error: ") if lines else None


def migrate_or_fail(database_url: str) -> None:
    try:
        migrate(database_url)
    except subprocess.CalledProcessError as exc:
        output = (exc.stderr or b"").decode(errors="replace") + (exc.stdout or b"").decode(errors="replace")
        said = last_error(output) or (output.strip().splitlines() or [f"exit code {exc.returncode}"])[-1]
        raise StartFailure(f"cannot migrate the database {database_url}: {said}") from None


def start_server_or_fail(server: ServerProcess, log: Path) -> ServerProcess:
    """Start the API server; when it exits at once, its own one-line reason (from its log, written since)."""
    offset = log.stat().st_size if log.exists() else 0
    try:
        return server.start()
    except (RuntimeError, TimeoutError) as exc:
        with open(log, "rb") as f:
            f.seek(offset)
            reason = last_error(f.read().decode(errors="replace"))
        server.stop()
        hint = ""
        if server.credentials is not None and any(not Path(flag).exists() for flag in server.credentials.server_flags() if "/" in flag):
            hint = "; " + incomplete_credentials(server.credentials.directory)
        raise StartFailure(f"the API server did not start: {reason or exc}{hint}") from None


def incomplete_credentials(directory: Path) -> str:
    return f"the credentials in {directory} are incomplete: rm -rf {directory} makes new ones (kubeconfigs made from the old ones stop working)"


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


def worker_commands(
    server: ServerProcess,
    feature_gates: str,
    nodes: int,
    profile: str,
    explain_port: int = 0,
    *,
    replicas: Sequence[ServerProcess] = (),
    shards: int = 1,
) -> list[tuple[str, list[str]]]:
    """The workers that exist in this checkout, each as (name, argv), each as its own identity
    (the simulator's nodes need their tokens in the credentials before the server starts);
    with ``explain_port`` the scheduler serves explanations there (``kubectl dra why``).

    ``replicas``: every API server of the cluster (default: ``server`` alone); the scheduler talks to
    the first, the controller to the second, simulator shard K to replica K mod N. ``shards``: the
    simulator's nodes as this many processes ``kubeletsim-K``."""
    servers = list(replicas) or [server]

    def at(index: int) -> list[str]:
        # The same kubeconfig (credentials) for every replica; --server names the replica.
        return ["--server", servers[index % len(servers)].url] if len(servers) > 1 else []

    gates = ["--feature-gates", feature_gates] if feature_gates else []
    explain = ["--explain-port", str(explain_port)] if explain_port else []
    simulator = ["-m", "kubeletsim", *server.worker_flags("kubeletsim"), "--nodes", str(nodes), "--node-prefix", NODE_PREFIX, "--profile", profile, *gates]
    wanted = [
        ("controller", ["-m", "controllers", *server.worker_flags("controller"), *at(1), *gates]),
        ("scheduler", ["-m", "schedulers", *server.worker_flags("scheduler"), *at(0), *explain, *gates]),
    ]
    if shards > 1:
        wanted += [(f"kubeletsim-{k}", [*simulator, "--shard", f"{k}/{shards}", *at(k)]) for k in range(shards)]
    else:
        wanted.append(("kubeletsim", simulator))
    return [(name, [sys.executable, *argv]) for name, argv in wanted if (REPO_ROOT / argv[1] / "__main__.py").exists()]


def apply_manifest(client: httpx.Client, path: Path) -> None:
    """Create the objects of a manifest (those that exist already are left as they are)."""
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        group, version, plural, namespaced = MANIFEST_KINDS[doc["kind"]]
        namespace = doc["metadata"].get("namespace", "default") if namespaced else None
        response = client.post(resource_path(group, version, plural, namespace), json=doc)
        if response.status_code not in (201, 409):
            raise RuntimeError(f"{path.name}: {doc['kind']} {doc['metadata']['name']}: {response.status_code} {response.text}")


def node_bound_kubeconfig(admin: httpx.Client, server: ServerProcess, account: tuple[str, str], node: str, path: Path, timeout: float = 60.0) -> Path:
    """A kubeconfig at ``path`` for the service account ``account`` (namespace, name) with a token
    bound to ``node`` (once the node exists), as a DaemonSet's pod on that node would get it."""
    credentials = server.credentials
    if credentials is None:
        raise ValueError("a driver's identity needs a server with credentials")
    namespace, name = account
    deadline = time.monotonic() + timeout
    while (found := admin.get(resource_path("", "v1", "nodes", name=node))).status_code == 404 and time.monotonic() < deadline:
        time.sleep(0.2)
    found.raise_for_status()
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": EXAMPLE_DRIVER_TOKEN_SECONDS,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": found.json()["metadata"]["uid"]},
        },
    }
    answer = admin.post(resource_path("", "v1", "serviceaccounts", namespace, name, "token"), json=request)
    answer.raise_for_status()
    text = kubeconfig_text(
        server.url, credentials.ca_cert.read_bytes(), token=answer.json()["status"]["token"], user=f"system:serviceaccount:{namespace}:{name}"
    )
    write_private(path, text.encode())
    return path


def example_driver_commands(server: ServerProcess, nodes: list[str], timeout: float = 60.0) -> list[tuple[str, list[str]]]:
    """``python -m exampledriver`` for each node (as (name, argv)), each with a kubeconfig of the
    driver's service account whose token is bound to that node, once the nodes exist."""
    credentials = server.credentials
    if credentials is None:
        raise ValueError("the example driver's identity needs a server with credentials")
    commands = []
    with httpx.Client(**server.httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
        apply_manifest(admin, EXAMPLE_DRIVER_MANIFESTS / "rbac.yaml")
        apply_manifest(admin, EXAMPLE_DRIVER_MANIFESTS / "deviceclass.yaml")
        for node in nodes:
            kubeconfig = node_bound_kubeconfig(admin, server, EXAMPLE_DRIVER_ACCOUNT, node, credentials.directory / f"exampledriver-{node}.kubeconfig", timeout)
            commands.append((f"exampledriver-{node}", [sys.executable, "-m", "exampledriver", "--kubeconfig", str(kubeconfig), "--node-name", node]))
    return commands


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


def start_servers(args: argparse.Namespace, logs: Path) -> tuple[list[ServerProcess], Path]:
    """The API servers (``args.replicas`` of them, on ports ``args.port`` on) on their database and
    credentials, and the admin's kubeconfig (for the first); StartFailure says why not."""
    replicas = getattr(args, "replicas", 1)
    if replicas < 1:
        raise StartFailure("--replicas must be at least 1")
    if replicas > 1 and not args.database_url.startswith(("postgresql:", "postgresql+", "postgres:")):
        raise StartFailure(
            f"{replicas} API server replicas need Postgres, SQLite is single-server: make run REPLICAS={replicas} "
            "DATABASE_URL=postgresql://USER@HOST/DB (a throwaway one: python -m devtools.postgres)"
        )
    check_ports(args.port, args.explain_port, replicas)
    migrate_or_fail(args.database_url)
    logs.mkdir(parents=True, exist_ok=True)
    flags = [*CLUSTER_SERVER_FLAGS]
    flags += ["--feature-gates", args.feature_gates] if args.feature_gates else []
    flags += ["--runtime-config", args.runtime_config] if args.runtime_config else []
    pki = args.data_dir / "pki"
    # One log (and audit log) per replica; the first keeps the names of a single server's.
    names = ["apiserver", *(f"apiserver-{i}" for i in range(1, replicas))]
    audits = ["audit", *(f"audit-{i}" for i in range(1, replicas))]
    try:
        credentials = ClusterCredentials.ensure(pki)
        credentials.ensure_node_tokens(node_names(args.nodes))
        servers = [
            ServerProcess(
                args.database_url, *flags, "--audit-log-path", str(logs / f"{audit}.log"), port=args.port + i,
                log_path=logs / f"{name}.log", credentials=credentials,
            )
            for i, (name, audit) in enumerate(zip(names, audits, strict=True))
        ]  # fmt: skip
        credentials.write_kubeconfigs(servers[0].url)
    except FileNotFoundError as exc:
        raise StartFailure(f"{exc.filename} is missing; {incomplete_credentials(pki)}") from None
    started: list[ServerProcess] = []
    try:
        for server, name in zip(servers, names, strict=True):
            started.append(start_server_or_fail(server, logs / f"{name}.log"))
    except StartFailure:
        for server in started:
            server.stop()
        raise
    # Each start wrote the kubeconfigs for its own URL; the processes' kubeconfigs name the first.
    credentials.write_kubeconfigs(servers[0].url)
    with httpx.Client(**servers[0].httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
        apply_grants(admin)
    return servers, write_kubeconfig(servers[0], args.kubeconfig)


def start_server(args: argparse.Namespace, logs: Path) -> tuple[ServerProcess, Path]:
    """The API server on its database and credentials, and the admin's kubeconfig; StartFailure says why not."""
    servers, kubeconfig = start_servers(args, logs)
    return servers[0], kubeconfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.devstack", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("DRA_PORT", "6443")))
    parser.add_argument("--database-url", default=os.environ.get("DRA_DATABASE_URL", "sqlite:///./data/dra.sqlite"))
    parser.add_argument("--feature-gates", default=os.environ.get("DRA_FEATURE_GATES", ""))
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument(
        "--replicas", type=int, default=int(os.environ.get("DRA_REPLICAS", "1")),
        help="API servers on the one database, on ports PORT.. (Postgres only; DRA_REPLICAS; default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--shards", type=int, default=int(os.environ.get("DRA_KUBELETSIM_SHARDS", "1")),
        help="kubelet simulator processes sharing the nodes, spread over the replicas (DRA_KUBELETSIM_SHARDS; default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", help=f"kubelet simulator device profiles (default: {DEFAULT_PROFILE}; none with --example-driver)"
    )
    parser.add_argument(
        "--example-driver", action="store_true", help="run the example DRA driver (python -m exampledriver) on every node, as its own identity"
    )
    parser.add_argument(
        "--explain-port", type=int, default=int(os.environ.get("DRA_EXPLAIN_PORT", str(EXPLAIN_PORT))),
        help=f"the scheduler's explanation port, for kubectl dra (DRA_EXPLAIN_PORT; default {EXPLAIN_PORT}; 0: off)",
    )  # fmt: skip
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / "data", help="credentials (pki/) and logs (logs/) go here (default: data)")
    parser.add_argument(
        "--runtime-config", default=os.environ.get("DRA_RUNTIME_CONFIG", ""),
        help="API versions the server serves besides the defaults, kube-apiserver's syntax (e.g. resource.k8s.io/v1alpha3=true)",
    )  # fmt: skip
    parser.add_argument(
        "--kubeconfig", type=Path, default=REPO_ROOT / ".kube-dra" / "config", help="where the cluster admin's kubeconfig goes (default: .kube-dra/config)"
    )
    args = parser.parse_args(argv)
    profile = args.profile or ("none" if args.example_driver else DEFAULT_PROFILE)

    logs = args.data_dir / "logs"
    try:
        if args.shards < 1:
            raise StartFailure("--shards must be at least 1")
        servers, kubeconfig = start_servers(args, logs)
    except StartFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = servers[0]
    workers: list[subprocess.Popen[bytes]] = []

    # A shard's command names its shard; the variable that says how many is make run's.
    env = {k: v for k, v in os.environ.items() if k != "DRA_KUBELETSIM_SHARDS"}

    def start(commands: list[tuple[str, list[str]]]) -> None:
        for name, command in commands:
            log_file = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the worker
            workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log_file, stderr=log_file, env=env))

    commands = worker_commands(server, args.feature_gates, args.nodes, profile, args.explain_port, replicas=servers, shards=args.shards)
    start(commands)
    drivers = ""
    if args.example_driver:
        start(example_driver_commands(server, node_names(args.nodes)))
        drivers = f"""The example DRA driver serves every node (logs exampledriver-sim-N.log); try it:

    kubectl apply -f {EXAMPLE_DRIVER_MANIFESTS.relative_to(REPO_ROOT)}/pod.yaml

"""
    print(
        f"""
The DRA control plane is running at {", ".join(s.url for s in servers)} (database: {args.database_url}).
Workers: {", ".join(n for n, _ in commands) or "none yet"}; logs in {logs} (audit.log: one line per request).
Credentials in {args.data_dir / "pki"}; the kubeconfig below is the cluster admin's.

Point kubectl at it:

    export KUBECONFIG={kubeconfig}
    kubectl api-resources --api-group=resource.k8s.io
    kubectl apply -f examples/

See devices, claims and why pods wait with kubectl dra: kubectl runs the plugin kubectl-dra
from PATH, so put the venv's bin on it first (else: unknown command "dra"):

    export PATH="{sysconfig.get_path('scripts')}:$PATH"
    kubectl dra devices
    kubectl dra why pod/NAME
    kubectl dra dashboard

{drivers}Press Ctrl-C to stop.
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
            for i, replica in enumerate(servers):
                if replica.process is not None and replica.process.poll() is not None:
                    print(f"the API server exited; see {logs / ('apiserver.log' if i == 0 else f'apiserver-{i}.log')}", file=sys.stderr)
                    return 1
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + READY_CHECK_SECONDS
                states = [(replica, readiness(replica)) for replica in servers]
                failing_now = [f"{replica.url}: {state}" if len(servers) > 1 else state for replica, state in states if state]
                now = "; ".join(failing_now) or None
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
        stop_all(servers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
