"""Fixtures of the tests that run the simulator's controllers in the test's event loop."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from devtools.server import ServerProcess
from kube.client import KubeClient
from tests.kubeletsim.harness import LEASES, NODES, SLICES


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[KubeClient]:
    async with KubeClient(server.url, user_agent="test-kubeletsim-controllers") as kube:
        yield kube


@pytest.fixture
async def prefix(client: KubeClient) -> AsyncIterator[str]:
    """A node name prefix no other test uses; the nodes, Leases and slices named after it go afterwards
    (the server is shared, and other tests count its nodes)."""
    name = f"u{uuid.uuid4().hex[:6]}-"
    yield name
    for collection in (SLICES, LEASES, NODES):
        for obj in (await client.list(collection))["items"]:
            if obj["metadata"]["name"].startswith(name):
                await client.delete(f"{collection}/{obj['metadata']['name']}", missing_ok=True)
