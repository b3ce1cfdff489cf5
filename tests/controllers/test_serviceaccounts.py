"""The service account controller: every active namespace has its ``default`` ServiceAccount,
made again when deleted; a namespace going away gets none. Run in this event loop against a
server of its own (it writes into every namespace it sees)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial

import pytest

from controllers.namespaced import namespace_informer
from controllers.serviceaccounts import ServiceAccountsController
from devtools.server import ServerProcess
from kube.client import KubeClient
from kube.informer import run_with_informers
from tests.processes import eventually_async, get_or_none, in_background

NAMESPACES = "/api/v1/namespaces"


@pytest.fixture(scope="module")
def own_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    return start_server()


@pytest.fixture
async def client(own_server: ServerProcess) -> AsyncIterator[KubeClient]:
    async with KubeClient(own_server.url, user_agent="tests") as client:
        yield client


async def test_every_active_namespace_gets_its_default_account_and_keeps_it(client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="service-account-controller")  # its log lines are written too
    namespaces = namespace_informer(client)
    controller = ServiceAccountsController(client, namespaces)
    informers = [namespaces, *controller.informers]
    async with in_background(run_with_informers(informers, controller.process()), synced=informers):
        for system in ("default", "kube-system", "kube-public", "kube-node-lease"):
            await eventually_async(partial(get_or_none, client, f"{NAMESPACES}/{system}/serviceaccounts/default"), what=f"{system}'s account")
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        account = await eventually_async(lambda: get_or_none(client, f"{NAMESPACES}/team-a/serviceaccounts/default"), what="team-a's account")
        assert set(account) == {"kind", "apiVersion", "metadata"}
        await client.delete(f"{NAMESPACES}/team-a/serviceaccounts/default")

        async def made_again() -> bool:
            again = await get_or_none(client, f"{NAMESPACES}/team-a/serviceaccounts/default")
            return again is not None and again["metadata"]["uid"] != account["metadata"]["uid"]

        await eventually_async(made_again, what="the account made again")

        # A namespace being deleted (held by a finalizer of its own) gets no account back.
        held = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going"}, "spec": {"finalizers": ["example.com/hold"]}}
        await client.create(NAMESPACES, held)
        await eventually_async(lambda: get_or_none(client, f"{NAMESPACES}/going/serviceaccounts/default"), what="going's account")
        await client.delete(f"{NAMESPACES}/going")
        await eventually_async(lambda: _gone(client, f"{NAMESPACES}/going/serviceaccounts/default"), what="the namespace emptied")
        await asyncio.sleep(1.0)
        assert await get_or_none(client, f"{NAMESPACES}/going/serviceaccounts/default") is None
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def _gone(client: KubeClient, path: str) -> bool:
    return await get_or_none(client, path) is None
