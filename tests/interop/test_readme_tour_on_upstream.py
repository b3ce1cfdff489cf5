"""The README's tours (kubectl, then Python), as tests/e2e/test_readme_tour.py runs them against
this project's stack, against upstream's kube-apiserver v1.37.2 instead, with this project's
workers: the same commands give the same answers on a real control plane."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools import upstream
from devtools.server import REPO_ROOT, stop_process
from tests.e2e.test_readme_tour import (
    NODES,
    PROFILE,
    PYTHON_STEPS,
    README,
    SH_STEPS,
    Background,
    check,
    problems,
    run_python,
    run_sh,
    stop_background,
)
from tests.interop.upstream import needs_upstream, upstream_binaries

pytestmark = needs_upstream

# The tour's own section (steps 1 to 8); later sections show this server's own messages.
TOUR_END = next(i for i, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1) if line.startswith("## The same tour in Python"))
TOUR_STEPS = [step for step in SH_STEPS if step.line < TOUR_END]


@pytest.fixture(scope="module")
def tour_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    upstream_binaries()
    directory = tmp_path_factory.mktemp("upstream-tour")
    nodes = [f"sim-{i}" for i in range(NODES)]
    workers: list[subprocess.Popen[bytes]] = []
    with upstream.UpstreamControlPlane(directory, nodes=nodes) as plane, upstream.start_companion_controllers(plane):
        try:
            for name, command in upstream.worker_commands(plane, profile=PROFILE):
                with open(directory / f"{name}.log", "ab") as log:
                    workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
            home = directory / "home"
            home.mkdir()
            env = {
                **os.environ,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # the venv's kubectl first
                "HOME": str(home),
                "KUBECONFIG": str(plane.kubeconfig("admin")),
                "KUBECACHEDIR": str(directory / "kubecache"),
                "LANG": "C.UTF-8",
            }
            with httpx.Client(**plane.httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
                deadline = time.monotonic() + 60
                while len(admin.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]) < 2 * NODES:
                    assert time.monotonic() < deadline, f"the kubelet simulator published no slices; logs in {directory}"
                    time.sleep(0.2)
            yield env, directory
        finally:
            for worker in workers:
                stop_process(worker)


def test_the_kubectl_tour_runs_on_upstream(tour_env: tuple[dict[str, str], Path]) -> None:
    env, directory = tour_env
    if shutil.which("kubectl", path=env["PATH"]) is None:
        pytest.skip("kubectl is not on PATH")
    running: list[Background] = []
    try:
        for step in TOUR_STEPS:
            if step.stop:
                for background in running:
                    stop_background(background)
            if step.background:
                out = directory / f"background-{step.line}.out"
                with open(out, "w") as sink:
                    proc = subprocess.Popen(
                        ["bash", "-c", step.code], cwd=REPO_ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True, start_new_session=True
                    )
                running.append(Background(step, proc, out))
                time.sleep(1.0)  # let the watch list before the next step changes anything
                continue
            check(step, lambda step=step: run_sh(step, env))
        time.sleep(1.0)
    finally:
        for background in running:
            if background.proc.poll() is None:
                os.killpg(background.proc.pid, signal.SIGTERM)
            background.proc.wait(10)
    for background in running:
        output = background.out.read_text()
        found = problems(background.step, output)
        assert not found, f"{background.step}: {'; '.join(found)}\n--- output\n{output}"


def test_the_python_tour_runs_on_upstream(tour_env: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """It expects the kubectl tour's DeviceClass (applied here if that tour did not run)."""
    env, _directory = tour_env
    if shutil.which("kubectl", path=env["PATH"]) is None:
        pytest.skip("kubectl is not on PATH")
    subprocess.run(["kubectl", "apply", "-f", "examples/gpu-deviceclass.yaml"], cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    for step in PYTHON_STEPS:
        check(step, lambda step=step: run_python(step, env, tmp_path))
