"""Upstream's control plane, built from the Go module proxy and started on loopback: etcd v3.7.3,
kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2, for the interop tests and
benchmarks and for running this project's workers against a real kube-apiserver.

``python -m devtools.upstream build`` (``make upstream``) builds the binaries into
``.gobin/upstream-v1.37.2/`` once; a stamp file names what they were built from, so a second run
is a no-op. ``python -m devtools.upstream control-plane`` starts etcd and kube-apiserver with a
cluster's credentials and prints how to point kubectl and the workers at them; with ``--workers``
it runs the workers too, next to the two kube-controller-manager controllers they need.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from devtools import gobuild
from devtools.credentials import ClusterCredentials
from devtools.devstack import apply_manifest
from devtools.grants import apply_grants
from devtools.ports import free_port
from devtools.server import stop_process
from kube.client import resource_path
from kube.kubeconfig import kubeconfig_text
from kube.pki import write_private

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.7.3"
UPSTREAM_MODULE = gobuild.INTEROP / "upstream"
ETCD_MODULE = gobuild.INTEROP / "etcd"
BIN_DIR = gobuild.GO_BIN_DIR / f"upstream-{KUBERNETES_VERSION}"
STAMP = BIN_DIR / ".stamp.json"
# The simulator's roles, which upstream's bootstrap policy has no counterpart of.
SIMULATOR_RBAC = gobuild.REPO / "examples" / "kubeletsim" / "rbac.yaml"
# The scheduler's what-if role (impersonating the asker to have the pod checked), likewise.
SCHEDULER_RBAC = gobuild.REPO / "examples" / "scheduler" / "rbac.yaml"
# name -> (module, package) of each binary.
BINARIES: dict[str, tuple[Path, str]] = {
    "kube-apiserver": (UPSTREAM_MODULE, "k8s.io/kubernetes/cmd/kube-apiserver"),
    "kube-scheduler": (UPSTREAM_MODULE, "k8s.io/kubernetes/cmd/kube-scheduler"),
    "kube-controller-manager": (UPSTREAM_MODULE, "k8s.io/kubernetes/cmd/kube-controller-manager"),
    "etcd": (ETCD_MODULE, "."),
}
# As upstream's release builds (hack/lib/golang.sh): static, no debug symbols, trimmed paths, and
# the tags that leave test-only and gRPC tracing code out.
BUILD_TAGS = "selinux,notest,grpcnotrace"


def _version_ldflags() -> str:
    """-X flags that make ``--version`` and /version report the release, as upstream's build stamps them."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    values = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    flags = [f"-X k8s.io/{package}.{key}={value}" for package in ("component-base/version", "client-go/pkg/version") for key, value in values.items()]
    return " ".join(["-s", "-w", *flags])


def _wanted_stamp() -> dict[str, str]:
    """What the binaries are built from: the versions and a digest of each module's go.mod/go.sum
    and main (which also covers the Go toolchain's version)."""
    return {
        "kubernetes": KUBERNETES_VERSION,
        "etcd": ETCD_VERSION,
        "upstream-module": gobuild.module_digest(UPSTREAM_MODULE),
        "etcd-module": gobuild.module_digest(ETCD_MODULE),
    }


def built() -> bool:
    """Whether the binaries are built, from what this checkout pins."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp == _wanted_stamp() and all((BIN_DIR / name).exists() for name in BINARIES))


def build(force: bool = False) -> Path:
    """The directory of the built binaries, building them first when the stamp says they are stale.

    Raises GoMissing without Go, CalledProcessError (with Go's output) when a build fails."""
    go = gobuild.go_binary()
    if go is None:
        raise gobuild.GoMissing("no Go toolchain (go) on this machine")
    if not force and built():
        return BIN_DIR
    gobuild.GO_BIN_DIR.mkdir(exist_ok=True)
    with (gobuild.GO_BIN_DIR / ".upstream.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building them right now
        if not force and built():
            return BIN_DIR
        partial = BIN_DIR.with_name(BIN_DIR.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        # GOTOOLCHAIN=local: never fetch another toolchain behind the user's back.
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        for module in (UPSTREAM_MODULE, ETCD_MODULE):
            packages = [package for _name, (mod, package) in BINARIES.items() if mod == module]
            ldflags = _version_ldflags() if module == UPSTREAM_MODULE else "-s -w"
            command = [go, "build", "-trimpath", "-tags", BUILD_TAGS, "-ldflags", ldflags, "-o", str(partial) + "/", *packages]
            subprocess.run(command, cwd=module, env=env, check=True, capture_output=True, text=True)
        (partial / STAMP.name).write_text(json.dumps(_wanted_stamp(), indent=1) + "\n")
        shutil.rmtree(BIN_DIR, ignore_errors=True)
        partial.rename(BIN_DIR)
    return BIN_DIR


def upstream_binary(name: str) -> Path:
    """The path of upstream's ``name`` (kube-apiserver, kube-scheduler, kube-controller-manager, etcd), built if needed."""
    if name not in BINARIES:
        raise KeyError(f"no upstream binary {name!r}; known: {', '.join(BINARIES)}")
    return build() / name


class _Process:
    """A started binary with its output in a log file, stopped by ``stop()``."""

    def __init__(self, name: str, command: list[str], log_path: Path) -> None:
        self.name = name
        self.command = command
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:  # the child keeps its own descriptor
            self.process: subprocess.Popen[bytes] = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def wait_healthy(self, url: str, timeout: float, verify: ssl.SSLContext | bool) -> None:
        """Until ``url`` answers 200 (or the process exits, or ``timeout`` passes: then an error with the log's end)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.process.returncode}; log {self.log_path}:\n{self.log_tail()}")
            try:
                if httpx.get(url, timeout=2.0, verify=verify).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not healthy at {url} after {timeout:.0f}s; log {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.process)

    def __enter__(self) -> _Process:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _insecure_loopback() -> ssl.SSLContext:
    """For a component's health port, which serves a self-signed certificate made at its start."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def start_etcd(directory: Path, timeout: float = 60.0, fsync: bool = False) -> tuple[_Process, str]:
    """etcd serving clients on a free loopback port (plain HTTP: loopback only), its data under
    ``directory``; returns the process and its client URL once it is healthy. Without ``fsync``
    (tests) its writes are not synced to disk; benchmarks sync, as the Postgres they compare with does."""
    client_url = f"http://127.0.0.1:{free_port()}"
    peer_url = f"http://127.0.0.1:{free_port()}"
    command = [
        str(upstream_binary("etcd")), "--name", "default", "--data-dir", str(directory / "etcd-data"),
        "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"default={peer_url}",
    ]  # fmt: skip
    if not fsync:
        command.append("--unsafe-no-fsync")  # a throwaway cluster: losing the last writes on a crash is fine, slow disks are not
    process = _Process("etcd", command, directory / "etcd.log")
    try:
        process.wait_healthy(f"{client_url}/health", timeout, verify=False)
    except BaseException:
        process.stop()
        raise
    return process, client_url


class UpstreamControlPlane:
    """etcd and kube-apiserver on loopback, as a cluster's API server: TLS with a serving
    certificate from the cluster's CA, client certificates and bearer tokens (the token file:
    the kubelet simulator and one ``system:node:NAME`` per node), service account tokens,
    ``--authorization-mode=Node,RBAC`` and NodeRestriction; the credentials and a kubeconfig per
    identity (``devtools.credentials``, plus ``node-NAME.kubeconfig`` per node) under
    ``directory/pki``, logs in ``directory``.

    With ``workers`` (the default) it also installs what this project's workers need that
    upstream's bootstrap policy lacks: the simulator's and its drivers' roles
    (``examples/kubeletsim/rbac.yaml``), the scheduler's what-if role (``examples/scheduler/rbac.yaml``)
    and the development admin's grant (``devtools.grants``), and the ServiceAccount ``default/default`` that upstream's
    service account controller would make (pods need it)."""

    def __init__(
        self, directory: str | Path, *, nodes: list[str] | tuple[str, ...] = (), feature_gates: str = "", extra_args: list[str] | tuple[str, ...] = (),
        workers: bool = True, port: int = 0, etcd_fsync: bool = False,
    ) -> None:  # fmt: skip
        self.directory = Path(directory)
        self.nodes = list(nodes)
        self.feature_gates = feature_gates
        self.extra_args = list(extra_args)
        self.workers = workers
        self.etcd_fsync = etcd_fsync
        self.port = port or free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.credentials = ClusterCredentials(self.directory / "pki")
        self.etcd: _Process | None = None
        self.apiserver: _Process | None = None

    def apiserver_flags(self, etcd_url: str) -> list[str]:
        flags = [
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--cert-dir", str(self.directory / "apiserver-certs"),
            "--service-cluster-ip-range", "10.96.0.0/16",
            # The `kubernetes` Service's endpoints may not be a loopback address; nothing here needs them.
            "--endpoint-reconciler-type", "none",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            *self.credentials.server_flags(),
        ]  # fmt: skip
        if self.feature_gates:
            flags += ["--feature-gates", self.feature_gates]
        return [*flags, *self.extra_args]

    def start(self, timeout: float = 120.0) -> UpstreamControlPlane:
        self.directory.mkdir(parents=True, exist_ok=True)
        binary = upstream_binary("kube-apiserver")  # build (once) before anything starts
        self.credentials = ClusterCredentials.ensure(self.directory / "pki")
        self.credentials.ensure_node_tokens(self.nodes)  # before the server reads the token file
        try:
            self.etcd, etcd_url = start_etcd(self.directory, timeout, fsync=self.etcd_fsync)
            self.apiserver = _Process("kube-apiserver", [str(binary), *self.apiserver_flags(etcd_url)], self.directory / "kube-apiserver.log")
            options = self.credentials.httpx_options("admin")
            self.apiserver.wait_healthy(f"{self.url}/readyz", timeout, verify=options["verify"])  # type: ignore[arg-type]
            self.write_kubeconfigs()
            if self.workers:
                self.install_worker_objects()
        except BaseException:
            self.stop()
            raise
        return self

    def write_kubeconfigs(self) -> None:
        """admin, scheduler, controller (``controller-manager`` too) and kubeletsim, and one per node (its token)."""
        self.credentials.write_kubeconfigs(self.url)
        write_private(self.kubeconfig("controller-manager"), self.kubeconfig("controller").read_bytes())
        ca = self.credentials.ca_cert.read_bytes()
        for node in self.nodes:
            user = f"system:node:{node}"
            write_private(self.node_kubeconfig(node), kubeconfig_text(self.url, ca, token=self.credentials.token(user), user=user).encode())

    def kubeconfig(self, identity: str) -> Path:
        return self.credentials.kubeconfig(identity)

    def node_kubeconfig(self, node: str) -> Path:
        return self.credentials.directory / f"node-{node}.kubeconfig"

    def httpx_options(self, identity: str = "admin") -> dict[str, object]:
        """Options for an httpx client of this API server acting as ``identity`` (base_url included)."""
        return {"base_url": self.url, **self.credentials.httpx_options(identity)}

    def install_worker_objects(self) -> None:
        """What this project's workers need and upstream's bootstrap policy does not make (see the class)."""
        with httpx.Client(**self.httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
            apply_manifest(admin, SIMULATOR_RBAC)
            apply_manifest(admin, SCHEDULER_RBAC)
            apply_grants(admin)
            # Made by upstream's service account controller when it runs; pods need it.
            account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "default"}}
            answer = admin.post(resource_path("", "v1", "serviceaccounts", "default"), json=account)
            if answer.status_code not in (201, 409):
                raise RuntimeError(f"creating the ServiceAccount default/default: {answer.status_code} {answer.text}")

    def stop(self) -> None:
        for process in (self.apiserver, self.etcd):
            if process is not None:
                process.stop()
        self.apiserver = self.etcd = None

    def __enter__(self) -> UpstreamControlPlane:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _component(name: str, kubeconfig: str | Path, args: list[str], log_path: Path | None, timeout: float) -> _Process:
    port = free_port()
    log = log_path or Path(kubeconfig).with_name(f"{name}.log")
    # Delegated authentication and authorization of its own port against the same server, as a
    # cluster's manifests set them (without them it logs that both are off).
    delegated = ["--authentication-kubeconfig", str(kubeconfig), "--authorization-kubeconfig", str(kubeconfig)]
    command = [str(upstream_binary(name)), "--kubeconfig", str(kubeconfig), *delegated, "--bind-address", "127.0.0.1", "--secure-port", str(port), *args]
    process = _Process(name, command, log)
    try:
        process.wait_healthy(f"https://127.0.0.1:{port}/healthz", timeout, verify=_insecure_loopback())
    except BaseException:
        process.stop()
        raise
    return process


def start_kube_scheduler(kubeconfig: str | Path, *, extra_args: list[str] | tuple[str, ...] = (), log_path: Path | None = None, timeout: float = 60.0) -> _Process:
    """Upstream's kube-scheduler against the API server ``kubeconfig`` names, in its default
    configuration (leader election on, protobuf), once its /healthz answers; a context manager
    that stops it."""
    return _component("kube-scheduler", kubeconfig, list(extra_args), log_path, timeout)


def start_kube_controller_manager(
    kubeconfig: str | Path, *, controllers: list[str] | tuple[str, ...] = ("*",), extra_args: list[str] | tuple[str, ...] = (),
    log_path: Path | None = None, timeout: float = 60.0,
) -> _Process:  # fmt: skip
    """Upstream's kube-controller-manager running ``controllers`` (its ``--controllers`` names;
    ``*`` is its default set) against the API server ``kubeconfig`` names, otherwise in its default
    configuration, once its /healthz answers; a context manager that stops it."""
    return _component("kube-controller-manager", kubeconfig, ["--controllers", ",".join(controllers), *extra_args], log_path, timeout)


# What a node's life needs from kube-controller-manager that this project's controller does not do:
# the node lifecycle controller lifts the not-ready taint that kube-apiserver's TaintNodesByCondition
# admission puts on every new Node (and marks silent nodes NotReady); the service account
# controller makes each namespace's default ServiceAccount, which pods need.
COMPANION_CONTROLLERS = ("node-lifecycle-controller", "serviceaccount-controller")


def start_companion_controllers(plane: UpstreamControlPlane, timeout: float = 60.0) -> _Process:
    """Upstream's kube-controller-manager running only ``COMPANION_CONTROLLERS`` next to this
    project's controller (which leads a Lease of its own, ``dra-controller``), each controller as
    its service account, as upstream deploys it."""
    return start_kube_controller_manager(
        plane.kubeconfig("controller-manager"), controllers=COMPANION_CONTROLLERS, extra_args=["--use-service-account-credentials"],
        log_path=plane.directory / "kube-controller-manager.log", timeout=timeout,
    )  # fmt: skip


def worker_commands(
    plane: UpstreamControlPlane, *, node_prefix: str = "sim-", profile: str = "gpu,nic", feature_gates: str = ""
) -> list[tuple[str, list[str]]]:  # fmt: skip
    """This project's controller, scheduler and kubelet simulator (its nodes: ``plane.nodes``, which
    must be ``node_prefix`` + index) against ``plane``, each as (name, argv) with the identity
    upstream's bootstrap policy expects, the controllers as their service accounts."""
    gates = ["--feature-gates", feature_gates] if feature_gates else []
    credentials = plane.credentials
    python = sys.executable
    return [
        ("controller", [python, "-m", "controllers", *credentials.worker_flags("controller"), "--use-service-account-credentials", *gates]),
        ("scheduler", [python, "-m", "schedulers", *credentials.worker_flags("scheduler"), *gates]),
        ("kubeletsim", [python, "-m", "kubeletsim", *credentials.worker_flags("kubeletsim"), "--nodes", str(len(plane.nodes)),
                        "--node-prefix", node_prefix, "--profile", profile, *gates]),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """``python -m devtools.upstream``: build upstream's binaries, or start a control plane of them."""
    parser = argparse.ArgumentParser(prog="python -m devtools.upstream", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help=f"build etcd {ETCD_VERSION} and kube-* {KUBERNETES_VERSION} into {BIN_DIR.relative_to(gobuild.REPO)}/")
    build_parser.add_argument("--force", action="store_true", help="rebuild even when the stamp says they are up to date")
    plane_parser = commands.add_parser("control-plane", help="start etcd and kube-apiserver (and with --workers this project's workers) until Ctrl-C")
    plane_parser.add_argument("--dir", default="data-upstream", help="credentials, etcd's data and logs (kept; default data-upstream)")
    plane_parser.add_argument("--port", type=int, default=0, help="kube-apiserver's port on 127.0.0.1 (default: a free one)")
    plane_parser.add_argument("--nodes", type=int, default=2, help="simulated nodes that get a token (and a kubeconfig): <prefix>0 .. <prefix>N-1")
    plane_parser.add_argument("--node-prefix", default="sim-")
    plane_parser.add_argument("--feature-gates", default="", help="for kube-apiserver and the workers, upstream syntax")
    plane_parser.add_argument("--profile", default="gpu,nic", help="the simulated nodes' device profile (with --workers)")
    plane_parser.add_argument("--workers", action="store_true", help="also run this project's controller, scheduler and kubelet simulator")
    args = parser.parse_args(argv)
    if args.command == "control-plane":
        return _serve_control_plane(args)
    if args.command == "build":
        started = time.monotonic()
        try:
            directory = build(force=args.force)
        except gobuild.GoMissing as exc:
            print(f"{exc}: install Go 1.26 to build upstream's binaries")
            return 2
        except subprocess.CalledProcessError as exc:
            print(f"go build failed:\n{exc.stdout}{exc.stderr}")
            return 1
        sizes = ", ".join(f"{name} {(directory / name).stat().st_size / 1e6:.0f} MB" for name in BINARIES)
        print(f"upstream binaries in {directory} ({sizes}); {time.monotonic() - started:.0f} s")
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _serve_control_plane(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # a SIGTERM stops what was started, as Ctrl-C does
    directory = Path(args.dir).resolve()
    nodes = [f"{args.node_prefix}{i}" for i in range(args.nodes)]
    print(f"building (once) and starting etcd {ETCD_VERSION} and kube-apiserver {KUBERNETES_VERSION}; logs in {directory}", flush=True)
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(UpstreamControlPlane(directory, nodes=nodes, feature_gates=args.feature_gates, port=args.port))
        print(f"kube-apiserver {KUBERNETES_VERSION} serving at {plane.url}")
        print(f"  export KUBECONFIG={plane.kubeconfig('admin')}")
        commands = worker_commands(plane, node_prefix=args.node_prefix, profile=args.profile, feature_gates=args.feature_gates)
        workers: list[subprocess.Popen[bytes]] = []
        if args.workers:
            stack.enter_context(start_companion_controllers(plane))
            print(f"running upstream's kube-controller-manager with {', '.join(COMPANION_CONTROLLERS)} only")
            for name, command in commands:
                with open(directory / f"{name}.log", "ab") as log:
                    workers.append(subprocess.Popen(command, cwd=gobuild.REPO, stdout=log, stderr=log))
                stack.callback(stop_process, workers[-1])
            print(f"running this project's {', '.join(name for name, _ in commands)} (logs in {directory})")
        else:
            print("this project's workers, each as the identity upstream's RBAC expects:")
            for _name, command in commands:
                print("  " + " ".join(["python", *command[1:]]))
        print("Ctrl-C stops everything", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(worker.poll() is None for worker in workers) and plane.apiserver is not None and plane.apiserver.process.poll() is None:
                time.sleep(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
