"""The scheduler-process tests' stack: one server of their own, the claim controller and a
scheduler, per xdist worker (session scope).

test_scheduler.py and the test_scheduler_*.py files that use its fixtures (binding, extended
resources, preemption) were each starting the same three processes; their tests create their own
nodes, slices, class and namespace and check node counts against the live count (see
test_scheduler.py), so they share one. Files that need other flags define their own ``cluster``
or server (test_scheduler_identity.py, test_scheduler_proposals.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from devtools.server import ServerProcess
from tests.processes import Worker
from tests.schedulers.test_scheduler import start_scheduler


@pytest.fixture(scope="session")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """A server of its own (so no other directory's nodes or leases interfere) and the claim controller."""
    server = start_server("--bookmark-interval", "1")
    logs = tmp_path_factory.mktemp("sched")
    controller = Worker("controllers", ["--server", server.url, "--lease-duration", "2"], logs / "controller.log").start()
    yield server, logs
    controller.stop()


@pytest.fixture(scope="session")
def client(cluster: tuple[ServerProcess, Path]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster[0].url, timeout=30.0) as c:
        yield c


@pytest.fixture(scope="session")
def scheduler(cluster: tuple[ServerProcess, Path]) -> Iterator[Worker]:
    proc = start_scheduler(cluster, "--no-leader-elect")
    yield proc
    proc.stop()


@pytest.fixture
def ns(client: httpx.Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    assert client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).status_code == 201
    return name
