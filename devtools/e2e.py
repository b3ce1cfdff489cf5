"""Upstream's own e2e tests for DRA (k8s.io/kubernetes v1.37.2, ``test/e2e/dra``) run unchanged
against ``make run``'s stack, and against upstream's control plane as the reference.

``python -m devtools.e2e build`` builds the test binary from ``interop/e2e`` (a Go module of this
project: a test main and upstream's DRA package, nothing of upstream committed) and Ginkgo's CLI,
through the Go module proxy, into ``.gobin/``. ``python -m devtools.e2e run`` (``make e2e``)
starts each stack in turn, runs every DRA spec that needs no real kubelet with the framework's
default flags but ``--provider=skeleton``, and prints one line per spec and stack.

Two spec sets, each on a stack started for it:

- ``default``: the ``[Conformance]`` CRUD tests, the ``control plane`` specs and the ResourceSlice
  controller's, with the default feature gates;
- ``offbydefault``: the ``Feature:OffByDefault`` specs that need no kubelet (the
  ResourcePoolStatusRequest API of ``resource.k8s.io/v1alpha3`` and its views), with their gates and
  that API version turned on. The device compatibility group specs carry no kubelet label but wait
  for their driver's registration with a real kubelet, so they are left out (they fail on
  upstream's control plane with the simulator's nodes too).

The stacks: ``project`` is ``make run``'s (``devtools.devstack``: this project's API server on
SQLite, controller, scheduler and kubelet simulator with two nodes); ``upstream`` is etcd,
kube-apiserver, kube-scheduler and kube-controller-manager (all its default controllers) with this
project's kubelet simulator as the only source of nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from devtools import gobuild
from devtools.credentials import ClusterCredentials
from devtools.devstack import node_names
from devtools.ports import free_port
from devtools.server import REPO_ROOT, stop_process
from devtools.upstream import (
    BUILD_TAGS,
    KUBERNETES_VERSION,
    UpstreamControlPlane,
    start_kube_controller_manager,
    start_kube_scheduler,
    worker_commands,
)
from kube.features import Gate, gates_flag

E2E_MODULE = gobuild.INTEROP / "e2e"
BIN_DIR = gobuild.GO_BIN_DIR / f"e2e-{KUBERNETES_VERSION}"
STAMP = BIN_DIR / ".stamp.json"
NODES = 2  # make run's


@dataclass(frozen=True)
class SpecSet:
    """Which specs, with which feature gates and API versions on the stack under test."""

    name: str
    label_filter: str
    feature_gates: str = ""
    runtime_config: str = ""


# "DRA" specs that need a real kubelet carry Feature:DynamicResourceAllocation; the others run with
# the simulator's nodes (the suite runs their kubelet plugin inside e2e.test).
SPEC_SETS = {
    "default": SpecSet("default", f"DRA && !Feature:{Gate.DynamicResourceAllocation} && !Feature:OffByDefault"),
    "offbydefault": SpecSet(
        "offbydefault",
        f"DRA && !Feature:{Gate.DynamicResourceAllocation} && Feature:OffByDefault && !FeatureGate:{Gate.DRADeviceCompatibilityGroups}",
        feature_gates=gates_flag({Gate.DRAResourcePoolStatus: True, Gate.DRAPartitionableDevicesType: True}),
        runtime_config="resource.k8s.io/v1alpha3=true",
    ),
}
STACKS = ("project", "upstream")


# --- building -------------------------------------------------------------------------------


def _wanted_stamp() -> dict[str, str]:
    return {"kubernetes": KUBERNETES_VERSION, "module": gobuild.module_digest(E2E_MODULE)}


def built() -> bool:
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return False
    return bool(stamp == _wanted_stamp() and (BIN_DIR / "e2e.test").exists() and (BIN_DIR / "ginkgo").exists())


def build(force: bool = False) -> Path:
    """The directory holding ``e2e.test`` and ``ginkgo``, built when the module changed.

    Built with the flags of upstream's binaries (devtools.upstream), so the packages both link come
    from Go's build cache once. Raises GoMissing without Go, CalledProcessError when a build fails."""
    go = gobuild.go_binary()
    if go is None:
        raise gobuild.GoMissing("no Go toolchain (go) on this machine")
    if not force and built():
        return BIN_DIR
    gobuild.GO_BIN_DIR.mkdir(exist_ok=True)
    with (gobuild.GO_BIN_DIR / ".e2e.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and built():
            return BIN_DIR
        partial = BIN_DIR.with_name(BIN_DIR.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        common = ["-trimpath", "-tags", BUILD_TAGS, "-ldflags", "-s -w"]
        subprocess.run([go, "test", "-c", *common, "-o", str(partial / "e2e.test"), "."], cwd=E2E_MODULE, env=env, check=True, capture_output=True, text=True)
        # Ginkgo's CLI at the version the suite pins (the module's `tool`): it runs specs in parallel.
        subprocess.run([go, "build", *common, "-o", str(partial / "ginkgo"), "github.com/onsi/ginkgo/v2/ginkgo"], cwd=E2E_MODULE, env=env, check=True, capture_output=True, text=True)
        (partial / STAMP.name).write_text(json.dumps(_wanted_stamp(), indent=1) + "\n")
        shutil.rmtree(BIN_DIR, ignore_errors=True)
        partial.rename(BIN_DIR)
    return BIN_DIR


# --- the stacks -----------------------------------------------------------------------------


def _admin(kubeconfig: Path) -> httpx.Client:
    from kube.kubeconfig import load_kubeconfig

    connection = load_kubeconfig(kubeconfig)
    headers = {"Authorization": f"Bearer {connection.token}"} if connection.token else {}
    return httpx.Client(base_url=connection.server, verify=connection.ssl_context() or True, headers=headers, timeout=30.0)


def _wait_nodes_ready(kubeconfig: Path, count: int, timeout: float, alive: list[subprocess.Popen[bytes]]) -> None:
    """Until ``count`` nodes are Ready and untainted (the suite picks ready, schedulable nodes)."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    with _admin(kubeconfig) as admin:
        while time.monotonic() < deadline:
            for process in alive:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args!r} exited with {process.returncode} before its nodes were ready")
            with contextlib.suppress(httpx.HTTPError):
                answer = admin.get("/api/v1/nodes")
                if answer.status_code == 200:
                    ready = [
                        node["metadata"]["name"]
                        for node in answer.json()["items"]
                        if not (node.get("spec") or {}).get("taints")
                        and any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])
                    ]
                    if len(ready) >= count:
                        return
                    last = f"ready and untainted: {ready}"
                else:
                    last = f"{answer.status_code} {answer.text[:200]}"
            time.sleep(0.5)
    raise RuntimeError(f"{count} ready nodes not there after {timeout:.0f} s ({last})")


@dataclass
class Stack:
    name: str
    kubeconfig: Path
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


@contextlib.contextmanager
def project_stack(directory: Path, spec_set: SpecSet, timeout: float = 180.0) -> Iterator[Stack]:
    """``make run``'s stack (devtools.devstack) on a fresh SQLite database in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    kubeconfig = directory / "kubeconfig"
    command = [
        sys.executable, "-m", "devtools.devstack", "--port", str(free_port()), "--explain-port", "0",
        "--database-url", f"sqlite:///{directory / 'dra.sqlite'}", "--data-dir", str(directory), "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip
    if spec_set.feature_gates:
        command += ["--feature-gates", spec_set.feature_gates]
    if spec_set.runtime_config:
        command += ["--runtime-config", spec_set.runtime_config]
    with open(directory / "devstack.log", "ab") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log, start_new_session=True)
    stack = Stack("project", kubeconfig, directory / "logs", [process])
    try:
        deadline = time.monotonic() + timeout
        while not kubeconfig.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"make run's stack did not start; see {directory / 'devstack.log'}")
            time.sleep(0.2)
        _wait_nodes_ready(kubeconfig, NODES, max(deadline - time.monotonic(), 10.0), [process])
        yield stack
    finally:
        # devstack stops its workers and server on SIGTERM, as on Ctrl-C.
        stop_process(process)


@contextlib.contextmanager
def upstream_stack(directory: Path, spec_set: SpecSet, timeout: float = 180.0) -> Iterator[Stack]:
    """etcd, kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2, and this project's
    kubelet simulator with make run's nodes as the only node source."""
    nodes = node_names(NODES)
    # The suite's driver pods are privileged, as a cluster made for DRA drivers allows (kind, local-up-cluster).
    extra = ["--allow-privileged=true", *(["--runtime-config", spec_set.runtime_config] if spec_set.runtime_config else [])]
    gates = ["--feature-gates", spec_set.feature_gates] if spec_set.feature_gates else []
    with contextlib.ExitStack() as stack:
        plane = stack.enter_context(UpstreamControlPlane(directory, nodes=nodes, feature_gates=spec_set.feature_gates, extra_args=extra))
        credentials: ClusterCredentials = plane.credentials
        stack.enter_context(start_kube_scheduler(plane.kubeconfig("scheduler"), extra_args=gates, log_path=directory / "kube-scheduler.log"))
        kcm_args = [
            "--use-service-account-credentials", "--root-ca-file", str(credentials.ca_cert),
            "--service-account-private-key-file", str(credentials.service_account_key), *gates,
        ]  # fmt: skip
        stack.enter_context(
            start_kube_controller_manager(plane.kubeconfig("controller-manager"), extra_args=kcm_args, log_path=directory / "kube-controller-manager.log")
        )
        processes = []
        for name, command in worker_commands(plane, feature_gates=spec_set.feature_gates):
            if name != "kubeletsim":
                continue
            with open(directory / f"{name}.log", "ab") as log:
                processes.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
            stack.callback(stop_process, processes[-1])
        admin = plane.kubeconfig("admin")
        _wait_nodes_ready(admin, NODES, timeout, processes)
        yield Stack("upstream", admin, directory, processes)


# --- running the suite ----------------------------------------------------------------------


@dataclass(frozen=True)
class SpecResult:
    name: str
    state: str  # passed, failed, skipped, panicked, timedout, interrupted, aborted
    seconds: float
    failure: str = ""


def _spec_name(report: dict[str, Any]) -> str:
    texts = [str(t) for t in report.get("ContainerHierarchyTexts") or []] + [str(report.get("LeafNodeText") or "")]
    return " ".join(t for t in texts if t)


def read_report(path: Path) -> list[SpecResult]:
    """The specs of a Ginkgo JSON report (``--json-report``), suite nodes left out."""
    results = []
    for suite in json.loads(path.read_text()):
        for spec in suite.get("SpecReports") or []:
            failure = (spec.get("Failure") or {}).get("Message") or ""
            if spec.get("LeafNodeType") != "It" or (spec.get("State") == "skipped" and not failure):
                continue  # a suite node, or a spec the label filter left out
            results.append(SpecResult(_spec_name(spec), str(spec.get("State")), float(spec.get("RunTime") or 0) / 1e9, failure.strip()))
    return sorted(results, key=lambda r: r.name)


def run_suite(binaries: Path, stack: Stack, spec_set: SpecSet, report_dir: Path, procs: int, focus: str = "", timeout: str = "50m") -> list[SpecResult]:
    """Run the spec set with Ginkgo's CLI, ``procs`` specs at a time; the framework's default flags
    but ``--provider=skeleton`` (so it waits for each namespace's ``default`` ServiceAccount)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    command = [
        str(binaries / "ginkgo"), f"--procs={procs}", "--no-color", f"--timeout={timeout}", "--poll-progress-after=120s", *(["--output-interceptor-mode=none"] if os.environ.get("E2E_NO_INTERCEPT") else []),
        f"--label-filter={spec_set.label_filter}", f"--output-dir={report_dir}", "--json-report=report.json",
        *([f"--focus={focus}"] if focus else []),
        str(binaries / "e2e.test"), "--",
        "--provider=skeleton", f"--kubeconfig={stack.kubeconfig}", f"--report-dir={report_dir}",
    ]  # fmt: skip
    with open(report_dir / "ginkgo.log", "wb") as log:
        subprocess.run(command, cwd=report_dir, stdout=log, stderr=subprocess.STDOUT, check=False)
    report = report_dir / "report.json"
    if not report.exists():
        raise RuntimeError(f"the suite wrote no report; see {report_dir / 'ginkgo.log'}")
    return read_report(report)


STACK_STARTERS = {"project": project_stack, "upstream": upstream_stack}


def _short(message: str, width: int = 160) -> str:
    line = re.sub(r"\s+", " ", message).strip()
    return line if len(line) <= width else line[: width - 3] + "..."


def print_table(results: dict[tuple[str, str], list[SpecResult]], stream: TextIO = sys.stdout) -> None:
    """One line per spec: its result on each stack that ran it, the failure's first words below."""
    stacks = sorted({stack for _set, stack in results}, key=STACKS.index)
    for set_name in SPEC_SETS:
        by_spec: dict[str, dict[str, SpecResult]] = {}
        for (s, stack), specs in results.items():
            if s == set_name:
                for spec in specs:
                    by_spec.setdefault(spec.name, {})[stack] = spec
        if not by_spec:
            continue
        print(f"\n== {set_name}: {len(by_spec)} specs ==", file=stream)
        print("  ".join(f"{stack:>10}" for stack in stacks) + "  spec", file=stream)
        for name in sorted(by_spec):
            row = by_spec[name]
            cells = [f"{(row[s].state + f' {row[s].seconds:.0f}s') if s in row else '-':>10}" for s in stacks]
            print("  ".join(cells) + "  " + name, file=stream)
            for s in stacks:
                if s in row and row[s].state not in ("passed", "skipped"):
                    print(f"{'':>12}{s}: {_short(row[s].failure)}", file=stream)
        for s in stacks:
            states = [row[s].state for row in by_spec.values() if s in row]
            print(f"  {s}: {states.count('passed')} of {len(states)} passed, {states.count('skipped')} skipped", file=stream)


def main(argv: list[str] | None = None) -> int:
    """``python -m devtools.e2e``: build upstream's DRA e2e suite, or run it against the stacks."""
    parser = argparse.ArgumentParser(prog="python -m devtools.e2e", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help=f"build e2e.test ({KUBERNETES_VERSION}'s test/e2e/dra) and ginkgo into .gobin/")
    build_parser.add_argument("--force", action="store_true")
    run_parser = commands.add_parser("run", help="run the specs on the stacks, one line per spec")
    run_parser.add_argument("--stack", choices=[*STACKS, "both"], default="both")
    run_parser.add_argument("--set", choices=[*SPEC_SETS, "all"], default="all", dest="spec_set")
    run_parser.add_argument("--procs", type=int, default=4, help="specs run at a time (Ginkgo's --procs; default 4)")
    run_parser.add_argument("--focus", default="", help="only specs whose name matches this regular expression")
    run_parser.add_argument("--dir", type=Path, default=None, help="logs and reports (default: a new temporary directory, kept)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        binaries = build(force=getattr(args, "force", False))
    except gobuild.GoMissing as exc:
        print(f"{exc}: install Go 1.26 to build upstream's e2e suite", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"go build failed:\n{exc.stdout}{exc.stderr}", file=sys.stderr)
        return 1
    if args.command == "build":
        print(f"e2e.test and ginkgo in {binaries}; {time.monotonic() - started:.0f} s")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    base = args.dir or Path(tempfile.mkdtemp(prefix="dra-e2e-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"upstream's DRA e2e suite ({KUBERNETES_VERSION}); logs and reports in {base}", flush=True)
    stacks = STACKS if args.stack == "both" else (args.stack,)
    sets = list(SPEC_SETS) if args.spec_set == "all" else [args.spec_set]
    results: dict[tuple[str, str], list[SpecResult]] = {}
    for set_name in sets:
        spec_set = SPEC_SETS[set_name]
        for stack_name in stacks:
            directory = base / f"{set_name}-{stack_name}"
            begun = time.monotonic()
            print(f"-- {set_name} specs on the {stack_name} stack", flush=True)
            try:
                with STACK_STARTERS[stack_name](directory, spec_set) as stack:
                    results[(set_name, stack_name)] = run_suite(binaries, stack, spec_set, directory / "report", args.procs, args.focus)
            except RuntimeError as exc:
                print(f"   the {stack_name} stack failed: {exc}", flush=True)
                results[(set_name, stack_name)] = []
                continue
            specs = results[(set_name, stack_name)]
            passed = sum(spec.state == "passed" for spec in specs)
            print(f"   {passed} of {len(specs)} passed in {time.monotonic() - begun:.0f} s", flush=True)
    print_table(results)
    print(f"\n{time.monotonic() - started:.0f} s in all; logs and reports in {base}")
    failed = any(not specs or any(spec.state not in ("passed", "skipped") for spec in specs) for specs in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
