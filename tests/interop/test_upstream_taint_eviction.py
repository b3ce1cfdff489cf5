"""Upstream's device-taint-eviction controller (kube-controller-manager v1.37.2) against this
server: ``tests/e2e/test_taint_eviction.py`` unchanged, with upstream's controller manager in
place of the project's controller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from devtools.server import REPO_ROOT
from tests.e2e.test_taint_eviction import NS, RESOURCE, test_running_pod_is_evicted_by_device_taint_rule  # noqa: F401
from tests.interop.golang import needs_go
from tests.interop.mixed import MixedStack, mixed_stack

pytestmark = [needs_go, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedStack]:
    with mixed_stack(tmp_path_factory.mktemp("upstream-taints"), (("sim-", 1, "gpu"),), upstream_controllers=True) as running:
        for doc in yaml.safe_load_all((Path(REPO_ROOT) / "examples" / "gpu-deviceclass.yaml").read_text()):
            assert running.client.post(f"{RESOURCE}/deviceclasses", json=doc).status_code == 201
        assert running.client.post("/api/v1/namespaces", json={"metadata": {"name": NS}}).status_code == 201
        yield running


@pytest.fixture(scope="module")
def stack(mixed: MixedStack) -> httpx.Client:
    return mixed.client


def test_kube_controller_manager_logged_nothing_this_server_caused(mixed: MixedStack) -> None:
    assert mixed.upstream_findings() == []
