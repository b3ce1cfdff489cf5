"""The ``kubernetes`` Service in ``default`` and its Endpoints and EndpointSlice, as kube-apiserver
keeps them: over HTTP on the shared server, and with several servers' leases in process (on
both storage backends)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.api.generic import GenericStore
from app.api.options import DeleteOptions
from app.config import Settings
from app.controlplane import kubernetesservice
from app.controlplane.kubernetesservice import KubernetesService, ServiceConfig, advertised_address, service_config
from app.registry.core import endpoints, service
from app.registry.discovery import endpointslice
from app.server import ApiServer
from app.storage.db import run_migrations
from devtools.server import ServerProcess
from tests.conftest import Databases

HOST = advertised_address("", "127.0.0.1")


@pytest.mark.skipif(HOST is None, reason="the host has no default route to advertise")
def test_the_servers_service_and_endpoints(api: httpx.Client, server: ServerProcess) -> None:
    svc = api.get("/api/v1/namespaces/default/services/kubernetes").json()
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert svc["spec"] == {
        "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": server.port}],
        "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "type": "ClusterIP", "sessionAffinity": "None",
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
    }  # fmt: skip
    assert svc["status"] == {"loadBalancer": {}}
    answer = api.get("/api/v1/namespaces/default/endpoints/kubernetes")
    # v1 Endpoints are deprecated: every request for them is told what replaces them.
    assert answer.headers["warning"] == '299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"'
    legacy = answer.json()
    assert legacy["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert legacy["subsets"] == [{"addresses": [{"ip": HOST}], "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]}]
    answer = api.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", params={"labelSelector": "kubernetes.io/service-name=kubernetes"})
    assert "warning" not in answer.headers
    slices = answer.json()
    ((found),) = slices["items"]
    assert (found["metadata"]["name"], found["metadata"]["generation"], found["addressType"]) == ("kubernetes", 1, "IPv4")
    assert found["endpoints"] == [{"addresses": [HOST], "conditions": {"ready": True}}]
    assert found["ports"] == [{"name": "https", "protocol": "TCP", "port": server.port}]
    table = api.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert table["rows"][0]["cells"][:4] == ["kubernetes", "IPv4", str(server.port), HOST]


# ---- several servers, in process --------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def database_url(databases: Databases) -> str:
    url = databases.new()
    run_migrations(url)
    return url


@pytest.fixture(scope="module")
async def registry(database_url: str) -> AsyncIterator[GenericStore]:
    """A started server's store whose own loop writes no endpoints: the tests play the servers."""
    server = ApiServer(Settings(database_url=database_url, endpoint_reconciler_type="none"))
    await server.start()
    try:
        yield server.registry
    finally:
        await server.stop()


async def _clean(registry: GenericStore) -> None:
    for strategy in (endpoints.STRATEGY, endpointslice.STRATEGY):
        if registry.storage.cached(strategy.qualified_resource, "default", "kubernetes") is not None:
            await registry.delete(strategy, "default", "kubernetes", DeleteOptions())
    for stored in registry.storage.cached_all(kubernetesservice.LEASES):
        ip = stored.obj["metadata"]["name"]
        await KubernetesService(registry, ServiceConfig("10.0.0.1", ip, 6443, "lease"))._drop_lease(ip)


def _servers(registry: GenericStore, clock: Clock, *ips: str, port: int = 6443) -> list[KubernetesService]:
    return [KubernetesService(registry, ServiceConfig("10.0.0.1", ip, port, "lease"), clock=clock) for ip in ips]


def _addresses(registry: GenericStore) -> tuple[Any, Any]:
    legacy = registry.storage.cached(endpoints.STRATEGY.qualified_resource, "default", "kubernetes")
    sliced = registry.storage.cached(endpointslice.STRATEGY.qualified_resource, "default", "kubernetes")
    assert legacy is not None and sliced is not None
    ips = [a["ip"] for s in legacy.obj.get("subsets") or [] for a in s["addresses"]]
    return ips, [a for e in sliced.obj.get("endpoints") or [] for a in e["addresses"]]


async def test_endpoints_list_every_live_server(registry: GenericStore) -> None:
    await _clean(registry)
    clock = Clock()
    first, second = _servers(registry, clock, "192.0.2.11", "192.0.2.10")
    await first.sync(reconcile_ports=True)
    assert _addresses(registry) == (["192.0.2.11"], ["192.0.2.11"])
    await second.sync(reconcile_ports=True)
    assert _addresses(registry) == (["192.0.2.10", "192.0.2.11"], ["192.0.2.10", "192.0.2.11"])
    # A server that stops renewing lapses; the next reconcile of another takes it out.
    clock.now += kubernetesservice.LEASE_TTL + 1
    await first.sync()
    assert _addresses(registry) == (["192.0.2.11"], ["192.0.2.11"])


async def test_a_stopping_server_takes_its_address_out(registry: GenericStore) -> None:
    await _clean(registry)
    clock = Clock()
    first, second = _servers(registry, clock, "192.0.2.20", "192.0.2.21")
    for one in (first, second):
        await one.sync(reconcile_ports=True)
    await first.stop()
    assert _addresses(registry) == (["192.0.2.21"], ["192.0.2.21"])
    await second.stop()
    # The last one leaves the endpoints empty, as upstream's shutdown does.
    assert _addresses(registry) == ([], [])
    legacy = registry.storage.cached(endpoints.STRATEGY.qualified_resource, "default", "kubernetes")
    assert legacy is not None and "subsets" not in legacy.obj


async def test_what_was_deleted_or_changed_comes_back(registry: GenericStore) -> None:
    await _clean(registry)
    clock = Clock()
    (one,) = _servers(registry, clock, "192.0.2.30", port=7443)
    await one.sync(reconcile_ports=True)
    await registry.delete(service.STRATEGY, "default", "kubernetes", DeleteOptions())
    await registry.delete(endpointslice.STRATEGY, "default", "kubernetes", DeleteOptions())
    await one.sync()
    stored = registry.storage.cached(service.STRATEGY.qualified_resource, "default", "kubernetes")
    assert stored is not None and stored.obj["spec"]["ports"][0]["targetPort"] == 7443
    assert _addresses(registry) == (["192.0.2.30"], ["192.0.2.30"])
    # Ports are put back at start (a restart on another port), as upstream reconciles them then.
    (restarted,) = _servers(registry, clock, "192.0.2.30", port=8443)
    await restarted.sync(reconcile_ports=True)
    sliced = registry.storage.cached(endpointslice.STRATEGY.qualified_resource, "default", "kubernetes")
    assert sliced is not None and sliced.obj["ports"] == [{"name": "https", "protocol": "TCP", "port": 8443}]


def test_flags() -> None:
    assert service_config(Settings(listen="192.0.2.5:6443")) == ServiceConfig("10.0.0.1", "192.0.2.5", 6443, "lease")
    assert service_config(Settings(listen="192.0.2.5:6443", service_cluster_ip_range="10.96.0.0/12")).service_ip == "10.96.0.1"
    assert service_config(Settings(advertise_address="192.0.2.9")).public_ip == "192.0.2.9"
    refusals = {
        "10.0.0.0/30": "the service cluster IP range must be at least 8 IP addresses",
        "ten": "service-cluster-ip-range[0] is not a valid cidr",
        "10.0.0.0/24,fd00::/108,10.1.0.0/24": "--service-cluster-ip-range must not contain more than two entries",
    }
    for value, message in refusals.items():
        with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("]", r"\]") + "$"):
            service_config(Settings(listen="192.0.2.5:6443", service_cluster_ip_range=value))
    with pytest.raises(ValueError, match=r"^cannot use public IP 127.0.0.1 with endpoint reconciler: Invalid value: \"127.0.0.1\": may not be in the loopback"):
        service_config(Settings(advertise_address="127.0.0.1"))
    assert service_config(Settings(advertise_address="127.0.0.1", endpoint_reconciler_type="none")).public_ip == "127.0.0.1"
    with pytest.raises(ValueError, match="endpoint-reconciler-type"):
        service_config(Settings(endpoint_reconciler_type="master-count"))


def test_the_advertised_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubernetesservice, "host_address", lambda family: {socket.AF_INET: "192.0.2.2", socket.AF_INET6: "2001:db8::2"}[family])
    assert advertised_address("", "127.0.0.1") == "192.0.2.2"
    assert advertised_address("", "0.0.0.0") == "192.0.2.2"
    assert advertised_address("", "::") == "2001:db8::2"
    assert advertised_address("", "192.0.2.7") == "192.0.2.7"
    assert advertised_address("192.0.2.8", "127.0.0.1") == "192.0.2.8"
    assert advertised_address("0.0.0.0", "127.0.0.1") == "192.0.2.2"
