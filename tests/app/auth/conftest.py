"""Fixtures of the authentication and authorization tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.authcluster import AuthCluster


@pytest.fixture
def admin(auth_cluster: AuthCluster) -> Iterator[httpx.Client]:
    with auth_cluster.admin() as client:
        yield client


@pytest.fixture
def namespace(admin: httpx.Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    response = admin.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert response.status_code == 201, response.text
    return name
