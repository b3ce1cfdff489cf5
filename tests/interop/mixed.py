"""A stack of this project's server with upstream's kube-scheduler and/or kube-controller-manager
in place of the project's scheduler and controller (the project's kubelet simulators either way),
for the end-to-end tests to run unchanged against upstream's components."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from devtools.credentials import ClusterCredentials
from devtools.server import ServerProcess, migrate
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
# The controllers of kube-controller-manager that do what the project's controller does.
DRA_CONTROLLERS = (
    "resourceclaim-controller", "device-taint-eviction-controller", "garbage-collector-controller", "namespace-controller", "resourcequota-controller",
)  # fmt: skip

# What upstream's components log whatever server they talk to (they log it against kube-apiserver
# too, tests/interop/test_upstream_control_plane.py): not findings about this server.
NOT_ABOUT_THE_SERVER = (
    re.compile(r"The manifest file is empty, ignoring"),  # started without --config: its defaults
    re.compile(r"Unable to record event \(will not retry!\)\" err=\"broadcaster already stopped"),  # at its own stop
    # Optimistic concurrency: two writers of one object (the scheduler and the claim controller
    # both write a claim); the loser retries, against kube-apiserver as here.
    re.compile(r"the object has been modified; please apply your changes to the latest version and try again"),
    # No request-header authentication is configured (kube-apiserver without
    # --requestheader-client-ca-file publishes no such key either, and its components log the same).
    re.compile(r"missing content for CA bundle .*requestheader-client-ca-file"),
    # A claim the test deleted while the claim controller still reconciled it from its cache.
    re.compile(r'"Work item failed" err="resourceclaims\.resource\.k8s\.io \\"[^"\\]+\\" not found"'),
)


@dataclass
class MixedStack:
    client: httpx.Client
    logs: Path
    upstream_logs: list[Path] = field(default_factory=list)

    def upstream_findings(self) -> list[str]:
        """Every error and warning line an upstream component logged, but those about itself."""
        lines = []
        for log in self.upstream_logs:
            for line in log.read_text(errors="replace").splitlines():
                if line[:1] in ("E", "W") and not any(p.search(line) for p in NOT_ABOUT_THE_SERVER):
                    lines.append(f"{log.name}: {line}")
        return lines


@contextlib.contextmanager
def mixed_stack(
    logs: Path,
    nodes: tuple[tuple[str, int, str], ...],
    *,
    upstream_scheduler: bool = False,
    upstream_controllers: bool = False,
    controllers: bool = True,
    controller_args: tuple[str, ...] = (),
) -> Iterator[MixedStack]:
    """Server over HTTPS with Node,RBAC on SQLite; simulators (prefix, count, profile); the
    scheduler and controller of this project or upstream's (no controller at all without
    ``controllers``: nothing releases claims that no pod reserved)."""
    from devtools.upstream import start_kube_controller_manager, start_kube_scheduler

    database_url = f"sqlite+aiosqlite:///{logs / 'dra.sqlite'}"
    migrate(database_url)
    credentials = ClusterCredentials.ensure(logs / "pki")
    credentials.ensure_node_tokens([f"{prefix}{i}" for prefix, count, _ in nodes for i in range(count)])
    server = ServerProcess(database_url, "--bookmark-interval", "1", log_path=logs / "apiserver.log", credentials=credentials).start()
    workers: list[Worker] = []
    upstream: list[Any] = []
    stack = MixedStack(httpx.Client(**server.httpx_options(), timeout=30.0), logs)  # type: ignore[arg-type]
    try:
        if controllers and not upstream_controllers:
            workers.append(Worker("controllers", [*server.worker_flags("controller"), "--lease-duration", "2", *controller_args], logs / "controller.log"))
        if not upstream_scheduler:
            workers.append(Worker("schedulers", [*server.worker_flags("scheduler"), "--no-leader-elect"], logs / "scheduler.log"))
        for prefix, count, profile in nodes:
            args = [*server.worker_flags("kubeletsim"), "--nodes", str(count), "--profile", profile, "--node-prefix", prefix]
            workers.append(Worker("kubeletsim", args, logs / f"{prefix}sim.log"))
        for worker in workers:
            worker.start()
        if upstream_scheduler:
            stack.upstream_logs.append(logs / "kube-scheduler.log")
            upstream.append(start_kube_scheduler(credentials.kubeconfig("scheduler"), log_path=stack.upstream_logs[-1]))
        if upstream_controllers:
            stack.upstream_logs.append(logs / "kube-controller-manager.log")
            # Each controller as its service account, as upstream deploys it (the bootstrap policy binds
            # the controller roles to those accounts only).
            kcm_args = ["--use-service-account-credentials"]
            kcm = start_kube_controller_manager(credentials.kubeconfig("controller"), controllers=DRA_CONTROLLERS, extra_args=kcm_args, log_path=stack.upstream_logs[-1])
            upstream.append(kcm)
        total = sum(count for _, count, _ in nodes)
        eventually(lambda: len(stack.client.get(f"{RESOURCE}/resourceslices").json()["items"]) >= total, "simulators publish slices")
        for lease in (["kube-scheduler"] if upstream_scheduler else []) + (["kube-controller-manager"] if upstream_controllers else []):
            path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease}"
            eventually(lambda path=path: stack.client.get(path).status_code == 200, f"{lease} holds its lease on this server", timeout=60)  # type: ignore[misc]  # mypy types no lambda with a default argument (here: binding the loop variable)
        yield stack
    finally:
        for process in upstream:
            process.stop()
        for worker in reversed(workers):
            worker.stop()
        stack.client.close()
        server.stop()
