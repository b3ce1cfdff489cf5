"""The whole stack as ``make run`` starts it (HTTPS, Node,RBAC, an identity per process, the
scheduler's explanation port), in a temporary directory, for tests that drive it from outside."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devtools.credentials import ClusterCredentials
from devtools.devstack import CLUSTER_SERVER_FLAGS, node_names, worker_commands
from devtools.grants import apply_grants
from devtools.ports import free_port
from devtools.server import REPO_ROOT, ServerProcess, migrated_sqlite, stop_process
from tests.processes import eventually_while_progressing


@dataclass
class Stack:
    server: ServerProcess
    credentials: ClusterCredentials
    tmp: Path
    explain_port: int
    # The simulator's --root-dir: the nodes' plugins_registry, plugins and pod-resources sockets.
    kubelet_root: Path
    commands: dict[str, list[str]] = field(default_factory=dict)
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def admin_kubeconfig(self) -> Path:
        return self.credentials.kubeconfig("admin")

    def admin(self) -> httpx.Client:
        return httpx.Client(**self.server.httpx_options("admin"), timeout=30.0)  # type: ignore[arg-type]

    def start_worker(self, name: str) -> None:
        with open(self.tmp / f"{name}.log", "ab") as log:
            self.workers[name] = subprocess.Popen(self.commands[name], cwd=REPO_ROOT, stdout=log, stderr=log)

    def stop_worker(self, name: str) -> None:
        stop_process(self.workers.pop(name))

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextlib.contextmanager
def running_stack(tmp: Path, *, nodes: int = 2, profile: str = "gpu", explain: bool = True) -> Iterator[Stack]:
    """The stack, its scheduler leading (explanation URL on its Lease) and its nodes' slices published."""
    database_url = migrated_sqlite(tmp / "dra.sqlite")
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(node_names(nodes))
    server = ServerProcess(database_url, *CLUSTER_SERVER_FLAGS, log_path=tmp / "apiserver.log", credentials=credentials).start()
    # Its own kubelet root, not the checkout's data/kubelet, and short: unix socket paths are limited.
    kubelet_root = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))
    stack = Stack(server, credentials, tmp, free_port() if explain else 0, kubelet_root)
    try:
        with stack.admin() as admin:
            apply_grants(admin)
        for name, command in worker_commands(server, "", nodes, profile, stack.explain_port):
            if name == "kubeletsim":
                command = [*command, "--root-dir", str(kubelet_root)]
            elif name == "scheduler" and explain:
                # Tests grant callers permissions they were just denied; upstream's 10 s is for a cluster.
                command = [*command, "--authorization-webhook-cache-unauthorized-ttl", "1s"]
            stack.commands[name] = command
            stack.start_worker(name)
        with stack.admin() as admin:

            def ready() -> Any:
                lease = admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-scheduler")
                slices = admin.get("/apis/resource.k8s.io/v1/resourceslices").json().get("items") or []
                return lease.status_code == 200 and len({s["spec"].get("nodeName") for s in slices}) >= nodes

            started = [(process, stack.tmp / f"{name}.log") for name, process in stack.workers.items()]
            eventually_while_progressing(ready, "the scheduler leads and every node published its devices", started)
        yield stack
    finally:
        for name in list(stack.workers):
            stack.stop_worker(name)
        server.stop()
        shutil.rmtree(kubelet_root, ignore_errors=True)
