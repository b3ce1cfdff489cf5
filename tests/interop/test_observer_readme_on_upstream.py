"""README's "On your own cluster" transcript, run: upstream's control plane with two simulated GPU
nodes and the observer started as the README starts it (``bench.observer.observed_cluster``),
the README's manifests applied, kube-scheduler's ``FailedScheduling`` for ``train-big`` awaited,
then each ``kubectl dra`` command of the transcript run with the kubeconfig the observer recorded
itself in, its output compared with the README's (``...`` lines stand for any lines)."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.observer import ObservedCluster, observed_cluster
from devtools.server import REPO_ROOT
from kube.client import resource_path
from tests.e2e.test_readme_tour import README, matches, normalise
from tests.interop.upstream import needs_upstream, upstream_binaries
from tests.processes import eventually

pytestmark = [*needs_upstream, pytest.mark.slow]
MARKER = "<!-- observer-transcript -->"
MANIFESTS = ("gpu-deviceclass.yaml", "why-pods-wait/waiting-for-gpus.yaml", "pod-with-claim-template.yaml")


def transcript() -> list[tuple[str, str]]:
    """(command, expected output) of each ``$ kubectl dra`` line of the README's marked console block."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(MARKER) :].split("```console\n", 1)[1].split("\n```", 1)[0]
    steps: list[tuple[str, str]] = []
    for part in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
        command, _, output = part.partition("\n")
        steps.append((command, output))
    return steps


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObservedCluster]:
    upstream_binaries()
    with observed_cluster(tmp_path_factory.mktemp("observer-readme"), (2, 0)) as running:
        yield running


def create(cluster: ObservedCluster, document: dict[str, Any]) -> None:
    plural = {"DeviceClass": "deviceclasses", "ResourceClaimTemplate": "resourceclaimtemplates", "Pod": "pods"}[document["kind"]]
    group, _, version = document["apiVersion"].rpartition("/")
    namespace = None if plural == "deviceclasses" else document["metadata"].get("namespace", "default")
    answer = cluster.admin.post(resource_path(group, version, plural, namespace), json=document)
    assert answer.status_code == 201, answer.text


def test_the_transcript_is_there() -> None:
    commands = [command.split()[:3] for command, _ in transcript()]
    assert commands == [["kubectl", "dra", "why"], ["kubectl", "dra", "fit"], ["kubectl", "dra", "drain-plan"]]


def test_the_readme_transcript_on_upstream(cluster: ObservedCluster) -> None:
    # train-big last: kube-scheduler would place it first on an empty node if its claim came first.
    documents = [d for m in MANIFESTS for d in yaml.safe_load_all((REPO_ROOT / "examples" / m).read_text()) if d]
    big = next(d for d in documents if d["metadata"]["name"] == "train-big")
    for document in documents:
        if document is not big:
            create(cluster, document)

    def pods() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in cluster.admin.get(resource_path("", "v1", "pods", "default")).json()["items"]}

    eventually(lambda: all(pods()[n]["spec"].get("nodeName") for n in ("train-0", "train-1", "train-2", "gpu-pod")), "kube-scheduler places four pods", timeout=120)
    create(cluster, big)

    def pending() -> bool:
        condition: dict[str, Any] = next((c for c in pods()["train-big"].get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
        return condition.get("reason") == "Unschedulable"

    eventually(pending, "kube-scheduler leaves train-big pending", timeout=60)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command, expected in transcript():
        # The observer's caches follow kube-scheduler's writes within moments: a few tries.
        deadline = time.monotonic() + 30
        while True:
            run = subprocess.run(command, shell=True, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60, check=False)
            actual = normalise(run.stdout + run.stderr)
            if matches(normalise(expected), actual) or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        diff = "\n".join(difflib.unified_diff(normalise(expected), actual, "README.md", "output", lineterm=""))
        assert matches(normalise(expected), actual), f"$ {command}: the output is not README's (normalised):\n{diff}"
