"""The observing scheduler (``python -m schedulers --observe``): the scheduler's caches, cycle,
explanations and what-if answers for a cluster whose pods another scheduler places.

It watches the cluster through any kube-apiserver v1.34+ with a read-only identity and never
writes: no binding, no claim status, no Lease, no events. It places nothing, so it needs no leader
election, and any number may run. What it answers about a pending pod is what this project's
scheduling cycle (the same plugins in upstream's order, the same allocator) decides against the
state it watches: the nodes the pod fits on now, and why each other node does not.

* :class:`Observer` holds the caches (:class:`~schedulers.cache.SchedulerCache`, following the
  pods of every scheduler name it is given) and a :class:`~schedulers.cycle.SchedulingCycle`. Its
  queue is filled by the cache's informer handlers as the scheduler's is, and never popped.
* :func:`preflight` checks, before anything is watched, that the server is v1.34 or later, serves
  ``resource.k8s.io/v1``, and that the identity may list and watch every kind the caches need;
  whatever is missing is one :class:`ObserveError` naming each permission.
* :func:`serving_tls` makes the explanation port's TLS when no certificate is given: a certificate
  of an authority made at start, and the cluster's client CA (the ConfigMap
  ``kube-system/extension-apiserver-authentication``, as upstream's delegated authentication
  reads it), so that kubectl's client certificates name their users here as they do to the API server.
* :func:`record_in_kubeconfig` writes the URL and that authority into the kubeconfig's current
  context as the extension ``dra.example.com/scheduler`` (:data:`kube.dra.explanations.KUBECONFIG_EXTENSION`),
  where ``kubectl dra`` finds it.

Callers are checked as the scheduler checks them (:mod:`kube.delegation`): a bearer token by a
SelfSubjectReview made with that token, and every permission by a SubjectAccessReview. Those
reviews are the only requests besides get, list and watch the observer makes: the API server
stores nothing for them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from kube.client import KubeClient, WatchExpired, resource_path
from kube.dra.explanations import KUBECONFIG_EXTENSION
from kube.errors import ApiError
from kube.informer import Informer
from kube.pki import Authority, cert_pem, key_pem, write_private
from kube.tasks import wait_for
from schedulers.allocator import AllocatorFeatures
from schedulers.cache import Key, SchedulerCache
from schedulers.cycle import DEFAULT_FILTER_TIMEOUT, DEFAULT_NODES_TO_FIND, SchedulingCycle
from schedulers.queue import SchedulingQueue

log = logging.getLogger("observer")

MINIMUM_MINOR = 34  # resource.k8s.io/v1 is served from Kubernetes v1.34 on
RBAC_HINT = "kubectl apply -f examples/observer/rbac.yaml"
AUTHENTICATION_CONFIGMAP = resource_path("", "v1", "configmaps", "kube-system", "extension-apiserver-authentication")


class ObserveError(Exception):
    """Why the observer cannot watch this cluster (printed as is; exit code 1)."""


class Observer:
    """The caches and the cycle of a scheduler that places nothing; see the module docstring.

    The explanation and what-if endpoints read ``cache`` and ``cycle`` as they read a scheduler's.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        followed: Sequence[str] = ("default-scheduler",),
        features: AllocatorFeatures | None = None,
        nodes_to_find: int = DEFAULT_NODES_TO_FIND,
        filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT,
    ) -> None:
        names = list(dict.fromkeys(followed)) or ["default-scheduler"]
        self.client = client
        self.queue: SchedulingQueue[Key, Key] = SchedulingQueue()
        self.cache = SchedulerCache(client, self.queue, scheduler_name=names[0], features=features)
        self.cache.followed = frozenset(names)
        self.cycle = SchedulingCycle(self.cache, nodes_to_find=nodes_to_find, filter_timeout=filter_timeout)

    async def run(self) -> None:
        """Watch until cancelled (after :func:`preflight`)."""
        await self.cache.check_served()
        informers = self.cache.informers
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                await informer.wait_synced()
            log.info(
                "caches synced; observing",
                extra={"schedulers": sorted(self.cache.followed), "pods": len(self.cache.pods.keys()), "nodes": len(self.cache.nodes.keys())},
            )
            while True:
                # Nothing pops the queue: keep it from holding pods that are gone or placed.
                await asyncio.sleep(30)
                self.queue.flush()
        finally:
            for informer in informers:
                await informer.stop()


def _version(info: dict[str, Any]) -> tuple[int, int] | None:
    try:
        return int(str(info.get("major", "")).rstrip("+")), int(str(info.get("minor", "")).rstrip("+"))
    except ValueError:
        return None


async def _may_list_and_watch(client: KubeClient, informer: Informer) -> list[str]:
    """The API server's refusals of listing and watching what ``informer`` watches (none: allowed)."""
    try:
        listed = await client.get(informer.path + "?limit=1")
    except ApiError as exc:
        if exc.code == 403:
            return [exc.message]
        if exc.code == 404:
            return [f"the server does not serve {informer.path} (enable the API, or its feature gate, on the cluster)"]
        raise
    version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
    try:
        async for _ in client.watch(informer.path, resource_version=version, timeout_seconds=1, allow_bookmarks=False):
            break
    except WatchExpired:
        pass
    except ApiError as exc:
        if exc.code == 403:
            return [exc.message]
        raise
    return []


async def preflight(client: KubeClient, cache: SchedulerCache, timeout: float = 30.0) -> None:
    """Check that the server is new enough, serves DRA's v1 API, and lets this identity list and
    watch every kind ``cache`` watches; raises :class:`ObserveError` saying all that is missing."""
    try:
        info = await wait_for(client.get("/version"), timeout)
    except (ApiError, OSError, TimeoutError, httpx.TransportError) as exc:
        raise ObserveError(f"cannot reach the API server at {client.server}: {exc or type(exc).__name__}") from None
    version = _version(info)
    git_version = info.get("gitVersion") or f"{info.get('major')}.{info.get('minor')}"
    if version is not None and version < (1, MINIMUM_MINOR):
        raise ObserveError(
            f"the cluster runs Kubernetes {git_version}; the observer needs v1.{MINIMUM_MINOR} or later "
            f"(Dynamic Resource Allocation's resource.k8s.io/v1 API)"
        )
    if not await client.serves("resource.k8s.io", "v1", "resourceslices"):
        raise ObserveError(
            f"the cluster ({git_version}) does not serve resource.k8s.io/v1: the observer needs Dynamic Resource "
            "Allocation's v1 API (Kubernetes v1.34 or later, with the resource.k8s.io/v1 API group enabled)"
        )
    await cache.check_served()
    refusals = await wait_for(asyncio.gather(*(_may_list_and_watch(client, informer) for informer in cache.informers)), timeout)
    missing = list(dict.fromkeys(message for found in refusals for message in found))
    if missing:
        raise ObserveError(
            "the observer cannot read what it watches (it needs get, list and watch on each):\n  "
            + "\n  ".join(missing)
            + f"\ngrant them, for instance: {RBAC_HINT}"
        )


async def client_ca(client: KubeClient) -> bytes | None:
    """The CA of the cluster's client certificates, as kube-apiserver publishes it (None when this
    identity may not read it, or there is none: callers then need bearer tokens)."""
    try:
        configmap = await client.get(AUTHENTICATION_CONFIGMAP)
    except ApiError as exc:
        log.warning("cannot read the cluster's client CA; callers need bearer tokens", extra={"error": exc.message})
        return None
    ca = (configmap.get("data") or {}).get("client-ca-file")
    return ca.encode() if ca else None


def serving_tls(hosts: list[str], client_ca_pem: bytes | None) -> tuple[ssl.SSLContext, bytes]:
    """A TLS context serving a certificate for ``hosts`` from an authority made now, and that
    authority's certificate (for clients to trust); clients may present a certificate of ``client_ca_pem``."""
    authority = Authority.create("dra-observer-ca")
    cert, key = authority.serving(hosts)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # ssl loads a certificate chain from files only: a private directory holds them briefly.
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp) / "serving.crt", Path(tmp) / "serving.key"
        cert_path.write_bytes(cert_pem(cert))
        write_private(key_path, key_pem(key))
        context.load_cert_chain(cert_path, key_path)
    if client_ca_pem:
        context.load_verify_locations(cadata=client_ca_pem.decode())
        context.verify_mode = ssl.CERT_OPTIONAL
    return context, cert_pem(authority.cert)


def record_in_kubeconfig(path: str | Path, url: str, ca_pem: bytes | None, context: str = "") -> str:
    """Write ``url`` (and the CA of its certificate) into the kubeconfig at ``path``, on its current
    (or the named) context, as the extension kubectl dra reads; returns the context's name."""
    path = Path(path)
    config = yaml.safe_load(path.read_text()) or {}
    name = context or str(config.get("current-context") or "")
    entry = next((c for c in config.get("contexts") or [] if isinstance(c, dict) and c.get("name") == name), None)
    if entry is None or not isinstance(entry.get("context"), dict):
        raise ObserveError(f"{path}: no context named {name!r} to record the observer in")
    extension: dict[str, Any] = {"url": url}
    if ca_pem is not None:
        extension["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    extensions = [e for e in entry["context"].get("extensions") or [] if isinstance(e, dict) and e.get("name") != KUBECONFIG_EXTENSION]
    entry["context"]["extensions"] = [*extensions, {"name": KUBECONFIG_EXTENSION, "extension": extension}]
    text = yaml.safe_dump(config, sort_keys=False)
    temporary = path.with_name(f".{path.name}.observer")
    write_private(temporary, text.encode())
    with contextlib.suppress(OSError):
        temporary.chmod(path.stat().st_mode & 0o777)
    temporary.replace(path)
    return name


__all__ = ["ObserveError", "Observer", "client_ca", "preflight", "record_in_kubeconfig", "serving_tls"]
