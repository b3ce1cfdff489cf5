"""The controller process gives every namespace its ``default`` ServiceAccount and its
``kube-root-ca.crt`` (the CA that signs the server's certificate), on a server with Node,RBAC:
with --use-service-account-credentials as upstream's accounts of those controllers, without it as
the process itself."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from devtools.server import ServerProcess
from tests.authcluster import AuthCluster, start_auth_cluster
from tests.helpers import new_namespace
from tests.processes import Worker, eventually


@pytest.fixture(scope="module")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> AuthCluster:
    return start_auth_cluster(start_server, tmp_path_factory.mktemp("namespace-objects"), nodes=())


def _controller(cluster: AuthCluster, log: Path, *flags: str) -> Worker:
    return Worker("controllers", [*cluster.server.worker_flags("controller"), "--lease-duration", "2", *flags], log).start()


def _published(admin: httpx.Client, ns: str) -> tuple[dict[str, object], str] | None:
    account = admin.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default")
    ca = admin.get(f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt")
    if account.status_code != 200 or ca.status_code != 200:
        return None
    return account.json(), str(ca.json()["data"]["ca.crt"])


def _creators(audit_log: Path, ns: str) -> dict[str, set[str]]:
    """resource -> the users whose creates in ``ns`` succeeded."""
    found: dict[str, set[str]] = {}
    for line in audit_log.read_bytes().splitlines():
        event = orjson.loads(line)
        ref = event.get("objectRef") or {}
        if event["verb"] == "create" and ref.get("namespace") == ns and event["responseStatus"]["code"] == 201:
            found.setdefault(ref.get("resource", ""), set()).add(event["user"]["username"])
    return found


@pytest.fixture
def admin(cluster: AuthCluster) -> Iterator[httpx.Client]:
    with cluster.admin() as client:
        yield client


@pytest.mark.parametrize(
    ("flags", "writers"),
    [
        (("--use-service-account-credentials",), ("system:serviceaccount:kube-system:service-account-controller", "system:serviceaccount:kube-system:root-ca-cert-publisher")),
        ((), ("system:kube-controller-manager", "system:kube-controller-manager")),
    ],
    ids=["service-account-credentials", "own-credentials"],
)
def test_a_new_namespace_gets_its_account_and_the_servers_ca(
    cluster: AuthCluster, admin: httpx.Client, tmp_path: Path, flags: tuple[str, ...], writers: tuple[str, str]
) -> None:  # fmt: skip
    ns = new_namespace(admin)
    controller = _controller(cluster, tmp_path / "controller.log", *flags)
    try:
        found = eventually(lambda: _published(admin, ns), what=f"{ns}'s account and CA", timeout=30)
    finally:
        controller.stop()
    _account, ca = found
    assert ca == cluster.credentials.ca_cert.read_text()
    # The published CA is the one a pod verifies the server by.
    with httpx.Client(base_url=cluster.server.url, verify=ssl.create_default_context(cadata=ca), timeout=10) as pod_view:
        assert pod_view.get("/version").status_code == 200
    creators = _creators(cluster.audit_log, ns)
    assert (creators["serviceaccounts"], creators["configmaps"]) == ({writers[0]}, {writers[1]})
