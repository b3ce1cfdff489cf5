"""In-process fixtures for the API machinery: the server's generic store on its real storage
(both backends), without an HTTP server in between."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from app.api.generic import GenericStore
from app.api.options import WriteOptions
from app.config import Settings
from app.registry import NAMESPACE_KIND
from app.server import ApiServer
from app.storage.db import run_migrations
from tests.conftest import Databases

WRITER = WriteOptions(field_manager="test")


@pytest.fixture(scope="module")
def store_database_url(databases: Databases) -> str:
    url = databases.new()
    run_migrations(url)
    return url


@pytest.fixture(scope="module")
async def store(store_database_url: str) -> AsyncIterator[GenericStore]:
    """The generic store of a started ApiServer (storage, system namespaces, namespace lifecycle)."""
    server = ApiServer(Settings(database_url=store_database_url))
    await server.start()
    try:
        yield server.registry
    finally:
        await server.stop()


async def new_namespace(store: GenericStore, finalizers: list[str] | None = None) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    metadata = {"name": name, "finalizers": finalizers} if finalizers else {"name": name}
    await store.create(NAMESPACE_KIND, "", {"metadata": metadata}, WRITER)
    return name


@pytest.fixture
async def store_ns(store: GenericStore) -> str:
    """A fresh namespace of the in-process store (``ns`` is the HTTP tests' namespace)."""
    return await new_namespace(store)
