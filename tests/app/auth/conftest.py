"""Fixtures of the authentication and authorization tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.authcluster import AuthCluster
from tests.helpers import new_namespace


@pytest.fixture
def admin(auth_cluster: AuthCluster) -> Iterator[httpx.Client]:
    with auth_cluster.admin() as client:
        yield client


@pytest.fixture
def namespace(admin: httpx.Client) -> str:
    return new_namespace(admin)
