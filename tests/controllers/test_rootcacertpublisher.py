"""The root CA publisher: every namespace has the ConfigMap ``kube-root-ca.crt`` with the cluster
CA and upstream's description, put back when deleted or changed. Run in this event loop against a
server of its own (it writes into every namespace it sees)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from controllers.namespaced import namespace_informer
from controllers.rootcacertpublisher import DESCRIPTION, RootCACertPublisher, root_ca
from devtools.server import ServerProcess
from kube.client import KubeClient
from kube.informer import run_with_informers
from kube.kubeconfig import Connection
from tests.processes import eventually_async, get_or_none, in_background

NAMESPACES = "/api/v1/namespaces"
CA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"
WANTED = {"ca.crt": CA}
# Upstream's annotation, word for word.
UPSTREAM_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP "
    "or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)


@pytest.fixture(scope="module")
def own_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    return start_server()


@pytest.fixture
async def client(own_server: ServerProcess) -> AsyncIterator[KubeClient]:
    async with KubeClient(own_server.url, user_agent="tests") as client:
        yield client


def test_the_ca_is_the_flags_else_the_kubeconfigs(tmp_path: Path) -> None:
    given = tmp_path / "ca.crt"
    given.write_text(CA)
    trusted = Connection("https://192.0.2.1:6443", ca_data=b"trusted")
    assert root_ca(str(given), trusted) == CA
    assert root_ca("", trusted) == "trusted"
    assert root_ca("", Connection("http://127.0.0.1:6443")) == ""


async def test_every_namespace_has_the_ca_and_it_is_put_back(client: KubeClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="root-ca-cert-publisher")  # its log lines are written too
    assert DESCRIPTION == UPSTREAM_DESCRIPTION
    namespaces = namespace_informer(client)
    publisher = RootCACertPublisher(client, namespaces, CA)
    informers = [namespaces, *publisher.informers]
    path = f"{NAMESPACES}/team-b/configmaps/kube-root-ca.crt"

    async def published(check: Callable[[dict[str, Any]], bool] = lambda _cm: True) -> dict[str, Any] | None:
        found = await get_or_none(client, path)
        return found if found is not None and found.get("data") == WANTED and check(found) else None

    async with in_background(run_with_informers(informers, publisher.process()), synced=informers):
        await eventually_async(lambda: get_or_none(client, f"{NAMESPACES}/kube-system/configmaps/kube-root-ca.crt"), what="kube-system's CA")
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
        first = await eventually_async(published, what="team-b's CA")
        assert first["metadata"]["annotations"] == {"kubernetes.io/description": UPSTREAM_DESCRIPTION}

        changed = {**first, "data": {"ca.crt": "not a CA", "extra": "x"}, "metadata": {**first["metadata"], "annotations": {"mine": "yes"}}}
        await client.update(path, changed)

        def repaired(cm: dict[str, Any]) -> bool:
            return bool(cm["metadata"]["annotations"] == {"mine": "yes", "kubernetes.io/description": UPSTREAM_DESCRIPTION})

        await eventually_async(lambda: published(repaired), what="the CA put back")
        await client.delete(path)
        again = await eventually_async(lambda: published(lambda cm: cm["metadata"]["uid"] != first["metadata"]["uid"]), what="the CA made again")
        assert again["metadata"]["annotations"] == {"kubernetes.io/description": UPSTREAM_DESCRIPTION}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
