"""Upstream's kube-scheduler v1.37.2, default configuration (protobuf, leader election on this
server's Leases, events through events.k8s.io), scheduling against this server in place of the
project's scheduler, with the project's controller and kubelet simulators.

The examples' tests of ``tests/e2e/test_examples.py`` run here unchanged: every example reaches
the same outcome under upstream's scheduler as under this project's. Last, kube-scheduler's log
holds no error or warning that kube-apiserver would not have caused.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_examples import (  # noqa: F401  (the examples' tests, collected here too)
    CLASSES,
    apply,
    test_admin_access,
    test_extended_resource,
    test_match_attribute,
    test_partitionable_gpu,
    test_pod_with_claim_template,
    test_prioritized_list,
    test_shared_claim,
)
from tests.interop.golang import needs_go
from tests.interop.mixed import MixedStack, mixed_stack

pytestmark = [needs_go, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedStack]:
    nodes = (("sim-", 2, "gpu,nic"), ("part-", 2, "gpu-partitionable"))
    with mixed_stack(tmp_path_factory.mktemp("upstream-scheduler"), nodes, upstream_scheduler=True) as running:
        for name in CLASSES:
            apply(running.client, name)
        yield running


@pytest.fixture(scope="module")
def stack(mixed: MixedStack) -> httpx.Client:
    return mixed.client


def test_kube_scheduler_logged_nothing_this_server_caused(mixed: MixedStack) -> None:
    """Runs last in this file: every error or warning kube-scheduler logged while the examples ran."""
    assert mixed.upstream_findings() == []
