"""Fixtures of the tests that run the simulator's controllers in the test's event loop."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from kube.client import KubeClient
from tests.kubeletsim.harness import LEASES, NODES, SLICES


@pytest.fixture
async def prefix(kube_client: KubeClient) -> AsyncIterator[str]:
    """A node name prefix no other test uses; the nodes, Leases and slices named after it go afterwards
    (the server is shared, and other tests count its nodes)."""
    name = f"u{uuid.uuid4().hex[:6]}-"
    yield name
    for collection in (SLICES, LEASES, NODES):
        for obj in (await kube_client.list(collection))["items"]:
            if obj["metadata"]["name"].startswith(name):
                await kube_client.delete(f"{collection}/{obj['metadata']['name']}", missing_ok=True)
