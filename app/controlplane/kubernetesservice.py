"""The ``kubernetes`` Service in ``default`` and its endpoints: how clients inside the cluster find
the API server, kept by kube-apiserver's bootstrap controller (pkg/controlplane/controller/
kubernetesservice) and its endpoint reconciler (pkg/controlplane/reconcilers), as here.

- The Service is created when missing (never updated afterwards, as upstream's loop does): the
  first address of ``--service-cluster-ip-range`` (default 10.0.0.0/24, so 10.0.0.1), port 443
  named ``https`` whose targetPort is the server's own port.
- With ``--endpoint-reconciler-type=lease`` (the default) every server keeps a lease of its
  advertised address, renewed every 10 s and lapsing after 15 s (upstream keeps them in etcd under
  ``/masterleases/``; here in a storage resource no API serves), and the Endpoints
  ``default/kubernetes`` (v1.37 still writes them, labelled to keep the mirroring controller out)
  and the EndpointSlice of the same name list every server whose lease is live. A server that
  stops gives its lease up and takes its address out. ``none`` writes no endpoints.
- The advertised address is ``--advertise-address``, else the listen address, else (when that is
  loopback or unspecified) the address of the host's default route, as upstream chooses it. It
  must be one a client can be sent to (not loopback, link-local or unspecified).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.api.generic import GenericStore
from app.api.options import DeleteOptions, WriteOptions
from app.config import Settings
from app.controlplane.loop import ControlLoop
from app.registry.common import validate_endpoint_ip
from app.registry.core import endpoints, service
from app.registry.discovery import endpointslice
from app.storage.cache import ADDED, DELETED, MODIFIED
from app.storage.dialects import WriteOp
from app.storage.errors import StorageError
from kube.errors import ApiError
from kube.tasks import wait_for

log = logging.getLogger("app.kubernetesservice")
MANAGER = WriteOptions(field_manager="kube-apiserver")
NAME = "kubernetes"
NAMESPACE = "default"
PORT_NAME = "https"
SERVICE_PORT = 443
DEFAULT_SERVICE_RANGE = "10.0.0.0/24"
LEASE, NONE = "lease", "none"
RECONCILERS = (LEASE, NONE)
# Upstream's DefaultEndpointReconcilerInterval and DefaultEndpointReconcilerTTL.
INTERVAL = 10.0
LEASE_TTL = 15.0
# Upstream gives the removal at shutdown twice the interval; here at most this, so that a stop
# never waits long on a database that has gone (the tools stop a server with SIGKILL after 10 s).
LEAVE_SECONDS = 5.0
# Where the servers' address leases are stored: a resource of the storage no API serves.
LEASES = "apiserverleases"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# Routes are looked up towards these (documentation) addresses; nothing is sent to them.
_ROUTE_PROBES = {socket.AF_INET: "203.0.113.1", socket.AF_INET6: "2001:db8::1"}


@dataclass(frozen=True)
class ServiceConfig:
    service_ip: str
    # The address advertised in the endpoints; None: none could be found (no endpoints are written).
    public_ip: str | None
    port: int
    reconciler: str


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def host_address(family: socket.AddressFamily) -> str | None:
    """The address of the host's default route in ``family`` (upstream's ChooseHostInterface), or None."""
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((_ROUTE_PROBES[family], 9))
        except OSError:
            return None
        return str(probe.getsockname()[0])


def advertised_address(advertise: str, listen_host: str) -> str | None:
    """``--advertise-address``, else the listen address unless it is loopback or unspecified,
    else the host's default address of the same family (IPv4 first)."""
    chosen = _ip(advertise) if advertise else None
    if chosen is not None and not chosen.is_unspecified:
        return str(chosen)
    bind = _ip(listen_host)
    if bind is not None and not (bind.is_unspecified or bind.is_loopback):
        return str(bind)
    families = [socket.AF_INET6, socket.AF_INET] if bind is not None and bind.version == 6 else [socket.AF_INET, socket.AF_INET6]
    return next((found for family in families if (found := host_address(family)) is not None), None)


def service_config(settings: Settings) -> ServiceConfig:
    """The Service's and the endpoints' settings from the flags; ValueError names a bad flag as upstream does."""
    if settings.endpoint_reconciler_type not in RECONCILERS:
        raise ValueError(f"--endpoint-reconciler-type {settings.endpoint_reconciler_type!r} is not supported here: use one of {', '.join(RECONCILERS)}")
    ranges = [r.strip() for r in (settings.service_cluster_ip_range or DEFAULT_SERVICE_RANGE).split(",") if r.strip()]
    if not ranges:
        raise ValueError("--service-cluster-ip-range must contain at least one valid cidr")
    if len(ranges) > 2:
        raise ValueError("--service-cluster-ip-range must not contain more than two entries")
    try:
        network = ipaddress.ip_network(ranges[0], strict=False)
    except ValueError:
        raise ValueError("service-cluster-ip-range[0] is not a valid cidr") from None
    if min(network.num_addresses, 1 << 16) < 8:
        raise ValueError("the service cluster IP range must be at least 8 IP addresses")
    if settings.advertise_address and _ip(settings.advertise_address) is None:
        raise ValueError(f"invalid --advertise-address {settings.advertise_address!r}: must be an IP address")
    public_ip = advertised_address(settings.advertise_address, settings.host)
    if settings.endpoint_reconciler_type == LEASE and public_ip is not None:
        problems = validate_endpoint_ip(public_ip, "")
        if problems:
            raise ValueError(f"cannot use public IP {public_ip} with endpoint reconciler: {problems[0].message}")
    return ServiceConfig(str(network[1]), public_ip, settings.port, settings.endpoint_reconciler_type)


def service_object(config: ServiceConfig) -> dict[str, Any]:
    """The Service as upstream creates it, with the defaults its strategy then fills in."""
    family = "IPv6" if ":" in config.service_ip else "IPv4"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"provider": "kubernetes", "component": "apiserver"}},
        "spec": {
            "ports": [{"name": PORT_NAME, "protocol": "TCP", "port": SERVICE_PORT, "targetPort": config.port}],
            "clusterIP": config.service_ip,
            "clusterIPs": [config.service_ip],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": [family],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
        },
    }


def endpoint_slice_for(endpoints_obj: dict[str, Any]) -> dict[str, Any]:
    """The EndpointSlice upstream's endpoints adapter writes for the Endpoints (its first subset)."""
    subsets = endpoints_obj.get("subsets") or []
    slice_obj: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {SERVICE_NAME_LABEL: NAME}},
        "addressType": "IPv4",
    }
    if subsets:
        subset = subsets[0]
        addresses = [a["ip"] for a in subset.get("addresses") or []]
        if addresses and all(":" in ip for ip in addresses):
            slice_obj["addressType"] = "IPv6"
        wanted_v6 = slice_obj["addressType"] == "IPv6"
        slice_obj["endpoints"] = [{"addresses": [ip], "conditions": {"ready": True}} for ip in addresses if (":" in ip) == wanted_v6]
        slice_obj["ports"] = [{"name": p.get("name", ""), "protocol": p.get("protocol", "TCP"), "port": p.get("port")} for p in subset.get("ports") or []]
    return slice_obj


class KubernetesService(ControlLoop):
    """Creates the Service when missing and keeps its Endpoints and EndpointSlice listing the live servers."""

    name = "kubernetes-service"

    def __init__(
        self, registry: GenericStore, config: ServiceConfig, *, interval: float = INTERVAL, ttl: float = LEASE_TTL, clock: Callable[[], float] = time.time
    ) -> None:  # fmt: skip
        super().__init__()
        self.registry = registry
        self.config = config
        self.interval = interval
        self.ttl = ttl
        self.clock = clock
        self._stopping = False

    @property
    def _ports(self) -> list[dict[str, Any]]:
        return [{"name": PORT_NAME, "port": self.config.port, "protocol": "TCP"}]

    async def run(self) -> None:
        if self.config.reconciler == LEASE and self.config.public_ip is None:
            log.warning("no address to advertise (no default route and no --advertise-address): the kubernetes Service gets no endpoints")
        first = True
        while True:
            try:
                await self.sync(reconcile_ports=first)
                first = False
            except asyncio.CancelledError:
                raise
            except (ApiError, StorageError) as exc:
                log.warning("could not reconcile the kubernetes Service: %s", exc)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        """Stop, then give up this server's lease and take its address out of the endpoints, as
        upstream's pre-shutdown hook does."""
        await super().stop()
        if self.config.reconciler != LEASE or self.config.public_ip is None or not self.registry.storage.ready:
            return
        self._stopping = True
        try:
            await wait_for(self._leave(), min(2 * self.interval, LEAVE_SECONDS))
        except (TimeoutError, ApiError, StorageError) as exc:
            log.warning("could not remove this server from the kubernetes endpoints: %s", exc)

    async def _leave(self) -> None:
        await self._drop_lease(self.config.public_ip or "")
        await self.reconcile_endpoints(reconcile_ports=True)

    async def sync(self, reconcile_ports: bool = False) -> None:
        await self.ensure_service()
        if self.config.reconciler == LEASE and self.config.public_ip is not None:
            await self._renew_lease()
            await self.reconcile_endpoints(reconcile_ports)

    async def ensure_service(self) -> None:
        strategy = service.STRATEGY
        if self.registry.storage.cached(strategy.qualified_resource, NAMESPACE, NAME) is not None:
            return
        with contextlib.suppress(ApiError):  # made meanwhile by another server, or default is going away
            await self.registry.create(strategy, NAMESPACE, service_object(self.config), MANAGER)
            log.info("created the kubernetes Service", extra={"clusterIP": self.config.service_ip})

    # ---- leases -----------------------------------------------------------------------------

    async def _renew_lease(self) -> None:
        ip = self.config.public_ip or ""
        storage = self.registry.storage
        current = storage.cached(LEASES, "", ip)
        lease = {"apiVersion": "v1", "kind": "APIServerLease", "metadata": {"name": ip}, "expires": self.clock() + self.ttl}
        op = WriteOp(ADDED, LEASES, "", ip, lease) if current is None else WriteOp(MODIFIED, LEASES, "", ip, lease, current.revision)
        with contextlib.suppress(StorageError):  # another process of this address renewed it first
            await storage.write(op)

    async def _drop_lease(self, ip: str) -> None:
        current = self.registry.storage.cached(LEASES, "", ip)
        if current is not None:
            with contextlib.suppress(StorageError):
                await self.registry.storage.write(WriteOp(DELETED, LEASES, "", ip, current.obj, current.revision))

    async def live_addresses(self) -> list[str]:
        """The addresses of the servers whose lease is live, sorted; lapsed leases are removed."""
        live = []
        now = self.clock()
        for stored in self.registry.storage.cached_all(LEASES):
            name = stored.obj["metadata"]["name"]
            if float(stored.obj.get("expires") or 0) > now:
                live.append(name)
            else:
                await self._drop_lease(name)
        return sorted(live)

    # ---- endpoints --------------------------------------------------------------------------

    async def reconcile_endpoints(self, reconcile_ports: bool = False) -> None:
        """Upstream's lease reconciler: the Endpoints list the live servers (their port too when
        ``reconcile_ports``, as at start and stop), then the EndpointSlice follows the Endpoints."""
        ips = await self.live_addresses()
        if not ips and not self._stopping:
            raise ApiError(500, "InternalError", "no API server IP addresses were listed in storage, refusing to erase all endpoints for the kubernetes Service")
        strategy = endpoints.STRATEGY
        stored = self.registry.storage.cached(strategy.qualified_resource, NAMESPACE, NAME)
        if stored is None and self._stopping:
            return
        current: dict[str, Any] = stored.copy() if stored is not None else {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": NAME, "namespace": NAMESPACE}}
        labels = current["metadata"].setdefault("labels", {})
        label_changed = labels.get(SKIP_MIRROR) != "true"
        labels[SKIP_MIRROR] = "true"
        subsets: list[dict[str, Any]] = current.get("subsets") or []
        format_ok = len(subsets) == 1
        addresses = [a.get("ip") for a in (subsets[0].get("addresses") or [])] if format_ok else []
        ips_ok = format_ok and sorted(addresses) == ips
        ports_ok = format_ok and (not reconcile_ports or subsets[0].get("ports") == self._ports)
        if stored is not None and not label_changed and format_ok and ips_ok and ports_ok:
            await self._ensure_slice(current)
            return
        if not format_ok:
            subsets = [{"addresses": [], "ports": self._ports}]
        if not format_ok or not ips_ok:
            subsets[0]["addresses"] = [{"ip": ip} for ip in ips]
        if not ports_ok:
            subsets[0]["ports"] = self._ports
        # Repacked as upstream does: a subset without addresses goes (and no subsets are left out).
        current["subsets"] = [s for s in subsets if s.get("addresses") or s.get("notReadyAddresses")]
        if not current["subsets"]:
            del current["subsets"]
        log.info("resetting the kubernetes endpoints", extra={"addresses": ips})
        if stored is None:
            written = await self.registry.create(strategy, NAMESPACE, current, MANAGER)
        else:
            written = await self.registry.update(strategy, NAMESPACE, NAME, current, MANAGER)
        await self._ensure_slice(orjson.loads(written.raw))

    async def _ensure_slice(self, endpoints_obj: dict[str, Any]) -> None:
        strategy = endpointslice.STRATEGY
        wanted = endpoint_slice_for(endpoints_obj)
        stored = self.registry.storage.cached(strategy.qualified_resource, NAMESPACE, NAME)
        if stored is None:
            with contextlib.suppress(ApiError):
                await self.registry.create(strategy, NAMESPACE, wanted, MANAGER)
            return
        current = stored.obj
        if current.get("addressType") != wanted["addressType"]:
            await self.registry.delete(strategy, NAMESPACE, NAME, DeleteOptions())
            await self.registry.create(strategy, NAMESPACE, wanted, MANAGER)
            return
        if all((current.get(k) or None) == (wanted.get(k) or None) for k in ("endpoints", "ports")) and (
            (current["metadata"].get("labels") or {}) == wanted["metadata"]["labels"]
        ):
            return
        await self.registry.update(strategy, NAMESPACE, NAME, wanted, MANAGER)
