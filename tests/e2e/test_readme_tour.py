"""README.md's tour and example sections, run from the README itself against the whole stack, so they cannot rot silently.

A tour step in README.md is a fenced block (``sh`` or ``python``) right after a marker line,
and the ``console`` block after it (before the next marker) is its whole output::

    <!-- tour -->
    <!-- tour {"retry": 30, "background": true} -->

* ``sh`` blocks run in order with ``bash -eo pipefail`` from the repository root (so
  ``examples/...`` resolves), with ``KUBECONFIG`` pointing at this test's stack and the venv's
  ``bin`` on ``PATH`` (``kubectl dra``); they must exit 0. ``python`` blocks run with this
  interpreter and the same ``KUBECONFIG``.
* The output (stdout and stderr together) must equal the console block, line by line, after
  both are normalised: ages (``6s``, ``2m3s``), timestamps, durations (``0.002s``), UIDs,
  resource versions and generated name suffixes (``gpu-pod-gpu-n4spl``) become placeholders,
  runs of spaces count as one (kubectl's column widths follow the values) and trailing
  spaces go. A ``...`` line in the console block stands for any number of lines (the README
  trims long ``describe`` output that way).
* ``retry``: re-run the block (it must then be read-only) until it passes, for at most that
  many seconds, for output that a worker produces a moment later.
* ``background``: start the block (``kubectl get ... -w``, a second simulator) and leave it
  running; it is stopped at the end of the tour, or before the first later step marked
  ``stop`` ("stop the simulator, then ..."), and what it printed is compared with repeated
  lines counted once (a watch prints one line per update, and how many updates a claim gets
  depends on timing). A background block without a console block must print nothing.

``DRA_TOUR_RECORD=DIR`` writes each step's real output to ``DIR/<line>.out`` and does not
compare, to capture the README's outputs from a run.

The Configuration section's flag tables are checked against each process's own argument
parser as well: the same flags, their defaults and their environment variables.

The stack is what ``make run`` starts (``devtools.devstack.worker_commands``: controller,
scheduler serving explanations, kubelet simulator with two ``gpu,nic`` nodes, each as its own
identity, the server over HTTPS with Node,RBAC; ``KUBECONFIG`` is the admin's) on a fresh
SQLite database. The kubectl part skips when no ``kubectl`` is on PATH; the Python part needs
only the venv.
"""

from __future__ import annotations

import argparse
import difflib
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.credentials import ClusterCredentials
from devtools.devstack import node_names, worker_commands, write_kubeconfig
from devtools.ports import free_port
from devtools.server import REPO_ROOT, ServerProcess, migrated_sqlite, stop_process

pytestmark = [pytest.mark.slow]

README = Path(REPO_ROOT) / "README.md"
MARKER = re.compile(r"^<!--\s*tour(?P<options>\s+\{.*\})?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
OPTIONS = {"retry", "background", "stop"}
LANGUAGES = {"sh", "python"}
# What make run starts (devtools/devstack.py's defaults).
NODES, PROFILE = 2, "gpu,nic"
BLOCK_TIMEOUT = 120.0
ELISION = "..."


@dataclass
class Step:
    line: int
    lang: str
    code: str
    output: str | None = None
    retry: float = 0.0
    background: bool = False
    stop: bool = False

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def _block(lines: list[str], start: int) -> int:
    """The index of the fence closing the block whose body starts at ``start``."""
    end = start
    while end < len(lines) and not FENCE.match(lines[end]):
        end += 1
    assert end < len(lines), f"README.md:{start}: unclosed block"
    return end


def tour_steps(text: str) -> list[Step]:
    """Every marked block of the README, in order, each with the console block that follows it."""
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
        end = _block(lines, start)
        step = Step(
            line=start,
            lang=fence["lang"],
            code="\n".join(lines[start:end]) + "\n",
            retry=float(options.get("retry", 0)),
            background=bool(options.get("background", False)),
            stop=bool(options.get("stop", False)),
        )
        i = end + 1
        # Its output: the next console block, unless another marker or code block comes first.
        j = i
        while j < len(lines) and not MARKER.match(lines[j].strip()) and not (FENCE.match(lines[j]) and lines[j].strip() != "```"):
            j += 1
        if j < len(lines) and lines[j].strip() == "```console":
            out_end = _block(lines, j + 1)
            step.output = "\n".join(lines[j + 1 : out_end]) + "\n"
            i = out_end + 1
        steps.append(step)
    return steps


# What differs from run to run, and what it becomes on both sides of a comparison.
VOLATILE = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uid>"),
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"), "<time>"),
    (re.compile(r"\b[A-Z][a-z]{2}, \d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}"), "<time>"),
    (re.compile(r"(?i)(resource ?version\"?:\s*\"?)\d+"), r"\1<rv>"),
    (re.compile(r"\b(containerd://|sha256:)[0-9a-f]{64}\b"), r"\1<id>"),
    (re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?|under 1)(?:ms|µs)(?![\w.])|(?<![\w.])\d+\.\d+s(?![\w.])"), "<duration>"),
    (re.compile(r"(?<![\w./:-])(?:\d+[dhms]){1,3}(?![\w./:-])"), "<age>"),
    # generateName's suffixes: five of the consonants and digits the API server picks from.
    (re.compile(r"(?<=-)[bcdfghjklmnpqrstvwxz2456789]{5}\b"), "xxxxx"),
]


def normalise(text: str) -> list[str]:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    lines = [re.sub(r"[ \t]+", " ", line).rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line, a ``...`` line of ``expected`` standing for any number of lines."""
    pattern = "".join("(?:[^\n]*\n)*?" if line == ELISION else re.escape(line) + "\n" for line in expected)
    return re.fullmatch(pattern, "".join(line + "\n" for line in actual)) is not None


def once(lines: list[str]) -> list[str]:
    """Lines with consecutive repeats counted once."""
    return [line for i, line in enumerate(lines) if i == 0 or line != lines[i - 1]]


def problems(step: Step, output: str) -> list[str]:
    """What keeps ``output`` from being the step's console block (nothing to compare: nothing wrong)."""
    if (step.output is None and not step.background) or os.environ.get("DRA_TOUR_RECORD"):
        return []
    expected, actual = normalise(step.output or ""), normalise(output)
    if step.background:
        expected, actual = once(expected), once(actual)
    if matches(expected, actual):
        return []
    diff = "\n".join(difflib.unified_diff(expected, actual, "README.md", "output", lineterm=""))
    return [f"the output is not README's console block (normalised):\n{diff}"]


def record(step: Step, output: str) -> None:
    if directory := os.environ.get("DRA_TOUR_RECORD"):
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / f"{step.line}.out").write_text(output)


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
    assert any("nodes are available" in (s.output or "") for s in SH_STEPS), "the tour must show an unschedulable pod"
    for step in STEPS:
        # The test points KUBECONFIG at its own stack; a tour step may read it, not re-point it.
        assert not re.search(r"KUBECONFIG=|export KUBECONFIG", step.code) and "make run" not in step.code, f"{step}: not a kubectl step"
        assert not (step.background and step.retry), f"{step}: background steps are not retried"
        assert step.output is not None or step.background, f"{step}: README shows no output (a console block after it)"


def test_output_comparison() -> None:
    """What the comparison forgives (the volatile parts, column widths, ``...``) and what it does not."""
    step = Step(1, "sh", "", output="NAME              STATE     AGE\ngpu-pod-gpu-n4spl pending   2s\n...\ndone\n")
    assert problems(step, "NAME STATE AGE\ngpu-pod-gpu-x7q2b  pending  1m3s\nmore\nlines\ndone\n") == []
    assert problems(step, "NAME STATE AGE\ngpu-pod-gpu-x7q2b pending 1m3s\ndone\nextra\n"), "a line more at the end"
    assert problems(step, "NAME STATE AGE\ngpu-pod-gpu-x7q2b allocated,reserved 1s\ndone\n"), "another state"
    uid = "UID: 0a574711-0a18-4f18-948a-a5f7fa527eb0 at 2026-11-22T01:38:43Z, rv 12, in 0.002s"
    assert normalise(uid) == ["UID: <uid> at <time>, rv 12, in <duration>"]
    # kubectl dra's durations: "examined in 3ms" and, on a fast answer, "examined in under 1ms".
    assert normalise("4 examined in 3ms") == normalise("4 examined in under 1ms") == ["4 examined in <duration>"]
    assert normalise('resourceVersion: "123"\n  Resource Version:  83') == ['resourceVersion: "<rv>"', " Resource Version: <rv>"]
    watch = Step(1, "sh", "", output="a\nb\nb\n", background=True)
    assert problems(watch, "a\nb\nb\nb\n") == []


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
    database_url = migrated_sqlite(tmp / "dra.sqlite")
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(node_names(NODES))
    server = ServerProcess(database_url, log_path=tmp / "apiserver.log", credentials=credentials).start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in worker_commands(server, "", NODES, PROFILE, explain_port=free_port()):
            with open(tmp / f"{name}.log", "ab") as log:
                workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
        home = tmp / "home"
        home.mkdir()
        (Path(REPO_ROOT) / "data" / "logs").mkdir(parents=True, exist_ok=True)  # make run's log folder, where README sends logs
        env = {
            **os.environ,
            "HOME": str(home),
            "KUBECONFIG": str(write_kubeconfig(server, tmp / "kubeconfig")),
            "KUBECACHEDIR": str(tmp / "kubecache"),
            "LANG": "C.UTF-8",
            # kubectl finds the kubectl-dra plugin there (make's venv; README: "once .venv/bin is on PATH").
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
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
            record(step, output)
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"{step}: {'; '.join(found)}\n--- code\n{step.code}--- output\n{output}")
        time.sleep(0.5)


@dataclass
class Background:
    step: Step
    proc: subprocess.Popen[str]
    out: Path


def stop_background(background: Background) -> None:
    if background.proc.poll() is None:
        os.killpg(background.proc.pid, signal.SIGTERM)
    try:
        background.proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(background.proc.pid, signal.SIGKILL)
        background.proc.wait()


def test_kubectl_tour(stack: Stack) -> None:
    if shutil.which("kubectl", path=stack.env.get("PATH")) is None:
        pytest.skip("kubectl is not on PATH")
    running: list[Background] = []
    try:
        for step in SH_STEPS:
            if step.stop:
                for background in running:
                    stop_background(background)
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
            stop_background(background)
    for background in running:
        output = background.out.read_text()
        record(background.step, output)
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
