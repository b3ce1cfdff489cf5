"""README.md's tour, run from the README itself against the whole stack, so it cannot rot silently.

A tour step in README.md is a fenced block (``sh`` or ``python``) right after a marker line::

    <!-- tour -->
    <!-- tour {"expect": ["text", ...], "reject": ["text", ...], "retry": 30, "background": true} -->

* ``sh`` blocks run in order with ``bash -eo pipefail`` from the repository root (so
  ``examples/...`` resolves), with ``KUBECONFIG`` pointing at this test's stack; they must
  exit 0. ``python`` blocks run with this interpreter and the same ``KUBECONFIG``.
* ``expect``: every string must appear in the output (stdout and stderr together);
  ``reject``: none may. Runs of spaces and tabs count as one space on both sides, so
  kubectl's column widths do not matter.
* ``retry``: re-run the block (it must then be read-only) until it passes, for at most that
  many seconds, for output that a worker produces a moment later.
* ``background``: start the block (``kubectl get ... -w``) and leave it running; it is
  stopped at the end of the tour and its expectations are checked on everything it printed.

The Configuration section's flag tables are checked against each process's own argument
parser as well: the same flags, their defaults and their environment variables.

The stack is what ``make run`` starts (``devtools.devstack.worker_commands``: controller,
scheduler, kubelet simulator with two ``gpu,nic`` nodes, each as its own identity, the server
over HTTPS with Node,RBAC; ``KUBECONFIG`` is the admin's) on a fresh SQLite database. The
kubectl part skips when no ``kubectl`` is on PATH; the Python part needs only the venv.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.credentials import ClusterCredentials
from devtools.devstack import node_names, worker_commands, write_kubeconfig
from devtools.server import REPO_ROOT, ServerProcess, migrate, stop_process

pytestmark = [pytest.mark.slow]

README = Path(REPO_ROOT) / "README.md"
MARKER = re.compile(r"^<!--\s*tour(?P<options>\s+\{.*\})?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
OPTIONS = {"expect", "reject", "retry", "background"}
LANGUAGES = {"sh", "python"}
# What make run starts (devtools/devstack.py's defaults).
NODES, PROFILE = 2, "gpu,nic"
BLOCK_TIMEOUT = 120.0


@dataclass
class Step:
    line: int
    lang: str
    code: str
    expect: list[str] = field(default_factory=list)
    reject: list[str] = field(default_factory=list)
    retry: float = 0.0
    background: bool = False

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def tour_steps(text: str) -> list[Step]:
    """Every marked block of the README, in order."""
    lines = text.splitlines()
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i].strip())
        i += 1
        if not marker:
            continue
        options: dict[str, Any] = json.loads(marker["options"]) if marker["options"] else {}
        unknown = set(options) - OPTIONS
        assert not unknown, f"README.md:{i}: unknown tour options {sorted(unknown)}"
        while i < len(lines) and not lines[i].strip():
            i += 1
        fence = FENCE.match(lines[i]) if i < len(lines) else None
        assert fence and fence["lang"] in LANGUAGES, f"README.md:{i}: a tour marker must precede a ```sh or ```python block"
        start = i + 1
        end = start
        while end < len(lines) and not FENCE.match(lines[end]):
            end += 1
        assert end < len(lines), f"README.md:{start}: unclosed tour block"
        steps.append(
            Step(
                line=start,
                lang=fence["lang"],
                code="\n".join(lines[start:end]) + "\n",
                expect=list(options.get("expect", [])),
                reject=list(options.get("reject", [])),
                retry=float(options.get("retry", 0)),
                background=bool(options.get("background", False)),
            )
        )
        i = end + 1
    return steps


def squeeze(text: str) -> str:
    return re.sub(r"[ \t]+", " ", text)


def problems(step: Step, output: str) -> list[str]:
    seen = squeeze(output)
    missing = [f"missing {e!r}" for e in step.expect if squeeze(e) not in seen]
    unwanted = [f"unexpected {r!r}" for r in step.reject if squeeze(r) in seen]
    return missing + unwanted


STEPS = tour_steps(README.read_text(encoding="utf-8"))
SH_STEPS = [s for s in STEPS if s.lang == "sh"]
PYTHON_STEPS = [s for s in STEPS if s.lang == "python"]


def test_tour_is_marked() -> None:
    """The README keeps a tour that covers what a newcomer needs (runs without a stack)."""
    text = README.read_text(encoding="utf-8")
    assert "make run" in text and "make test" in text
    assert len(SH_STEPS) >= 8 and PYTHON_STEPS, "the tour markers are gone from README.md"
    code = "".join(s.code for s in SH_STEPS)
    for needed in (
        "kind: ResourceClaim\n",
        "resourceClaimTemplateName:",
        "kubectl get resourceclaims -w",
        "kubectl get pods -o wide",
        "kubectl describe resourceclaim",
        "kubectl describe pod",
    ):
        assert needed in code, f"the tour no longer shows {needed!r}"
    assert any(s.background for s in SH_STEPS), "the watch step must run in the background"
    assert any("nodes are available" in e for s in SH_STEPS for e in s.expect), "the tour must show an unschedulable pod"
    for step in SH_STEPS:
        # The test points KUBECONFIG at its own stack; a tour step must not re-point it.
        assert "KUBECONFIG" not in step.code and "make run" not in step.code, f"{step}: not a kubectl step"
        assert not (step.background and step.retry), f"{step}: background steps are not retried"


# ---- the configuration tables -------------------------------------------------------

# The README's table for each process, found by the command in the line that introduces it.
PROCESSES = {
    "`python -m app serve`": "server",
    "`python -m schedulers`": "scheduler",
    "`python -m controllers`": "controller",
    "`python -m kubeletsim`": "kubeletsim",
}
ROW = re.compile(r"^\| `(?P<flag>--[a-z0-9-]+)` \| (?:`(?P<env>DRA_[A-Z_]+)`)? *\| (?P<default>[^|]*) \|")


def readme_flag_tables(text: str) -> dict[str, list[tuple[str, str | None, str]]]:
    """process -> [(flag, env or None, default cell)] from the Configuration section."""
    tables: dict[str, list[tuple[str, str | None, str]]] = {}
    current: str | None = None
    for line in text.split("## Configuration", 1)[1].split("\n## ", 1)[0].splitlines():
        if line.startswith("**"):
            current = next((process for command, process in PROCESSES.items() if command in line), None)
        elif current and (row := ROW.match(line)):
            tables.setdefault(current, []).append((row["flag"], row["env"], row["default"].strip()))
    return tables


def build_parser(process: str) -> argparse.ArgumentParser:
    """The process's own argument parser, built now (its defaults read the environment then)."""
    if process == "server":
        from app.config import add_server_arguments

        parser = argparse.ArgumentParser()
        add_server_arguments(parser)
        return parser
    module = {"scheduler": "schedulers.app", "controller": "controllers.app", "kubeletsim": "kubeletsim.__main__"}[process]
    built: argparse.ArgumentParser = importlib.import_module(module).build_parser()
    return built


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[0]: a for a in parser._actions if a.option_strings and a.option_strings[0].startswith("--") and a.dest != "help"}


def test_configuration_tables_match_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every flag of every process is in the README with its default and environment variable, and nothing else is."""
    for name in [n for n in os.environ if n.startswith("DRA_")]:
        monkeypatch.delenv(name)
    tables = readme_flag_tables(README.read_text(encoding="utf-8"))
    assert set(tables) == set(PROCESSES.values()), "a process's flag table is missing from README.md"
    for process, rows in tables.items():
        actions = options(build_parser(process))
        assert len(rows) == len({flag for flag, _, _ in rows}), f"{process}: a flag has two rows"
        assert {flag for flag, _, _ in rows} == set(actions), f"{process}: README.md and the flags differ"
        for flag, env, default in rows:
            action = actions[flag]
            cell = re.fullmatch(r"`([^`]*)`", default)
            if isinstance(action.default, bool) or action.default in ("", None, []):
                pass  # described in words (off, none, v1.37 defaults, host_pid_random)
            elif isinstance(action.default, int | float):
                assert cell and float(cell[1]) == float(action.default), f"{process} {flag}: README says {default}, the default is {action.default}"
            else:
                assert cell and cell[1] == str(action.default), f"{process} {flag}: README says {default}, the default is {action.default}"
            # The variable in the table sets the default; without one, the conventional name must not.
            variable = env or "DRA_" + flag.removeprefix("--").upper().replace("-", "_")
            value = "7" if isinstance(action.default, int | float) and not isinstance(action.default, bool) else "from-env"
            monkeypatch.setenv(variable, value)
            changed = options(build_parser(process))[flag].default
            monkeypatch.delenv(variable)
            if env:
                # A repeatable flag (action="append") takes the variable as its one entry.
                assert str(changed) in (value, "7.0") or changed == [value], f"{process} {flag}: {env} does not set it"
            else:
                assert changed == action.default, f"{process} {flag}: {variable} sets it, but README.md names no variable"


# ---- the stack ---------------------------------------------------------------------


@dataclass
class Stack:
    server: ServerProcess
    env: dict[str, str]
    logs: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("tour")
    database_url = f"sqlite+aiosqlite:///{tmp / 'dra.sqlite'}"
    migrate(database_url)
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(node_names(NODES))
    server = ServerProcess(database_url, log_path=tmp / "apiserver.log", credentials=credentials).start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in worker_commands(server, "", NODES, PROFILE):
            with open(tmp / f"{name}.log", "ab") as log:
                workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
        home = tmp / "home"
        home.mkdir()
        env = {
            **os.environ,
            "HOME": str(home),
            "KUBECONFIG": str(write_kubeconfig(server, tmp / "kubeconfig")),
            "KUBECACHEDIR": str(tmp / "kubecache"),
            "LANG": "C.UTF-8",
        }
        with httpx.Client(**server.httpx_options(), timeout=30.0) as client:  # type: ignore[arg-type]
            deadline = time.monotonic() + 60
            while len(client.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]) < 2 * NODES:
                assert time.monotonic() < deadline, f"the kubelet simulator published no slices; logs in {tmp}"
                time.sleep(0.2)
        yield Stack(server, env, tmp)
    finally:
        for worker in workers:
            stop_process(worker)
        server.stop()


# ---- running steps -----------------------------------------------------------------------


def run_sh(step: Step, env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step.code],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    return proc.returncode, proc.stdout


def run_python(step: Step, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-c", step.code],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    return proc.returncode, proc.stdout


def check(step: Step, run: Any) -> None:
    """Run a step (again, while it has retry time left) until it exits 0 with the expected output."""
    deadline = time.monotonic() + step.retry
    while True:
        code, output = run()
        found = problems(step, output) + ([f"exit code {code}"] if code else [])
        if not found:
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"{step}: {'; '.join(found)}\n--- code\n{step.code}--- output\n{output}")
        time.sleep(0.5)


@dataclass
class Background:
    step: Step
    proc: subprocess.Popen[str]
    out: Path


def test_kubectl_tour(stack: Stack) -> None:
    if shutil.which("kubectl", path=stack.env.get("PATH")) is None:
        pytest.skip("kubectl is not on PATH")
    running: list[Background] = []
    try:
        for step in SH_STEPS:
            if step.background:
                out = stack.logs / f"background-{step.line}.out"
                with open(out, "w") as sink:
                    proc = subprocess.Popen(
                        ["bash", "-c", step.code],
                        cwd=REPO_ROOT,
                        env=stack.env,
                        stdout=sink,
                        stderr=subprocess.STDOUT,
                        text=True,
                        start_new_session=True,
                    )
                running.append(Background(step, proc, out))
                time.sleep(1.0)  # let the watch list before the next step changes anything
                continue
            check(step, lambda step=step: run_sh(step, stack.env))
        time.sleep(1.0)
    finally:
        for background in running:
            if background.proc.poll() is None:
                os.killpg(background.proc.pid, signal.SIGTERM)
            try:
                background.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(background.proc.pid, signal.SIGKILL)
                background.proc.wait()
    for background in running:
        output = background.out.read_text()
        found = problems(background.step, output)
        assert not found, f"{background.step}: {'; '.join(found)}\n--- output\n{output}"


def test_python_tour(stack: Stack, tmp_path: Path) -> None:
    """The Python tour, which expects the DeviceClass of the kubectl tour's step 2 (created here if absent)."""
    device_class = yaml.safe_load((Path(REPO_ROOT) / "examples" / "gpu-deviceclass.yaml").read_text())
    with httpx.Client(**stack.server.httpx_options(), timeout=30.0) as client:  # type: ignore[arg-type]
        response = client.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class)
    assert response.status_code in (201, 409), response.text
    for step in PYTHON_STEPS:
        check(step, lambda step=step: run_python(step, stack.env, tmp_path))
