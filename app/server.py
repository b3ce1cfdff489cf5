"""The application: the API server's parts assembled, the non-resource routes (version, discovery,
OpenAPI) on FastAPI, resource paths on the lean router of ``app.api.routing``, and around both the
health paths (``app.health``), upstream's request limits (``app.filters``) and the request ids,
metrics and Status for unexpected errors."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app import metrics
from app.admission.resourcequota import QuotaAdmission
from app.api import discovery, negotiation, openapi
from app.api.generic import GenericStore
from app.api.negotiation import accept_header, json_response, status_body, status_response
from app.api.routing import METHODS, ResourceRouter, path_not_found, split_api_path
from app.api.schemas import merged_extra_properties
from app.auth.system import AuthFilter, AuthSystem
from app.config import Settings
from app.controlplane.authentication import ensure_authentication_configmap
from app.controlplane.kubernetesservice import KubernetesService, service_config
from app.controlplane.namespaces import NamespaceLifecycle, ensure_system_namespaces
from app.controlplane.policystatus import PolicyTypeChecking
from app.controlplane.rbac import ClusterRoleAggregation, ensure_bootstrap_policy
from app.controlplane.scheduling import ensure_system_priority_classes
from app.filters.limits import RequestLimits
from app.filters.observe import ObserveMiddleware
from app.health import HealthEndpoints, storage_checks
from app.registry import KINDS, SHARED_STORAGE, serve
from app.registry.runtimeconfig import enabled_kinds
from app.storage.cache import WatchCache, parse_watch_cache_sizes
from app.storage.db import check_schema, create_engine
from app.storage.storage import Storage
from app.storage.store import Store
from kube.errors import ApiError
from kube.features import FeatureGates
from kube.heap import SERVER_THRESHOLDS, keep_heap_frozen
from kube.tasks import cancel_and_wait, together

log = logging.getLogger("app.server")

VERSION_INFO = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "36",
    "gitVersion": "v1.37.0-dra.py",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-21T00:00:00Z",
    "goVersion": "python",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class ApiServer:
    """Everything one server process holds: storage, registry, background loops."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gates = FeatureGates.parse(settings.feature_gates)
        # Which kinds in which versions this server serves (RuntimeConfigError for a bad flag).
        serve(enabled_kinds(settings.runtime_config, self.gates))
        self.engine = create_engine(settings.database_url)
        cache = WatchCache(settings.default_watch_cache_size, parse_watch_cache_sizes(settings.watch_cache_sizes), settings.watch_cache_history_bytes)
        for kind in KINDS:
            cache.register_fields(kind.qualified_resource, kind.field_selectors)
        store = Store(
            self.engine,
            cache,
            poll_interval=settings.poll_interval,
            compaction_interval=settings.compaction_interval,
            compaction_window=settings.compaction_window,
            compaction_min_retain=settings.compaction_min_retain,
            # A write whose commit lost its connection is answered before its request's deadline.
            outcome_timeout=settings.request_timeout * 0.9,
        )
        self.storage = Storage(store, bookmark_interval=settings.bookmark_interval)
        self.auth = AuthSystem(settings, self.storage, self.gates)
        self.registry = GenericStore(
            self.storage, self.gates, settings.min_request_timeout, self.auth.tokens, settings.delete_collection_workers, settings.allow_privileged
        )
        self.quota = QuotaAdmission(self.registry) if "ResourceQuota" in self.auth.admission_plugins else None
        if self.quota is not None:
            self.registry.write_admission.append(self.quota.admit)
        self.namespaces = NamespaceLifecycle(self.registry)
        self.aggregation = ClusterRoleAggregation(self.registry)
        self.policy_status = PolicyTypeChecking(self.registry)
        # ValueError for a bad --service-cluster-ip-range, --advertise-address or reconciler type.
        self.kubernetes_service = KubernetesService(self.registry, service_config(settings))
        self.started = time.time()
        self._heap_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await check_schema(self.engine, self.settings.database_url)
        await self.storage.start()
        started, commits = time.monotonic(), self.storage.commits
        # What every cluster has from the start, in place before the server reports ready. The
        # namespaced objects need their namespaces stored first; the rest go at once, so a first
        # start takes two group commits instead of one per object (each slow on a busy machine).
        await ensure_system_namespaces(self.registry)
        self.auth.start()
        await together(
            ensure_bootstrap_policy(self.registry),
            ensure_system_priority_classes(self.registry),
            ensure_authentication_configmap(self.registry, self.settings.client_ca_file),
        )
        log.info("bootstrap objects in place", extra={"commits": self.storage.commits - commits, "seconds": round(time.monotonic() - started, 3)})
        self.namespaces.start()
        self.aggregation.start()
        self.policy_status.start()
        self.kubernetes_service.start()
        metrics.bind_storage(self.storage)
        gc.set_threshold(*SERVER_THRESHOLDS)  # requests' short-lived containers: see kube.heap
        # The watch cache is the bulk of the heap; keep it out of the cycle collector's scans.
        self._heap_task = asyncio.get_running_loop().create_task(keep_heap_frozen(), name="gc-freeze")

    async def stop(self) -> None:
        await cancel_and_wait(self._heap_task)
        await self.kubernetes_service.stop()
        await self.namespaces.stop()
        await self.aggregation.stop()
        await self.policy_status.stop()
        if self.quota is not None:
            await self.quota.stop()
        await self.storage.stop()
        self.auth.close()
        await self.engine.dispose()


def stored_kinds_shape() -> tuple[list[str], dict[str, dict[str, dict[str, Any]]]]:
    """The kinds this server stores, as ``group/version/Kind`` (core: ``v1/Kind``), and the fields
    it serves beyond their Go types by OpenAPI definition name: what ``kube/apitypes.pyi`` types
    (``devtools/apitypes.py``)."""
    kinds = KINDS + SHARED_STORAGE
    return [f"{k.api_version}/{k.kind}" for k in kinds], merged_extra_properties(kinds)


def create_app(settings: Settings) -> Any:
    """The ASGI application: resource paths on a lean path, everything else through FastAPI."""
    return create_app_and_server(settings)[0]


def create_app_and_server(settings: Settings) -> tuple[Any, ApiServer]:
    """:func:`create_app`, and the server it serves (whose watches the process ends when it stops)."""
    app = create_fastapi_app(settings)
    server: ApiServer = app.state.server
    negotiation.STREAM_WRITE_TIMEOUT = settings.stream_write_timeout
    limited = RequestLimits(
        ResourcePaths(ResourceRouter(server.registry, settings.max_body_bytes), app),
        max_read_only=settings.max_requests_inflight,
        max_mutating=settings.max_mutating_requests_inflight,
        request_timeout=settings.request_timeout,
        max_watches=settings.max_watches,
    )
    checks = storage_checks(server.storage, settings.etcd_healthcheck_timeout, settings.etcd_readycheck_timeout)
    # Health probes are authenticated and authorized as every other path (upstream's order): anonymous
    # probes pass by the bootstrap binding of system:public-info-viewer.
    return ObserveMiddleware(AuthFilter(HealthEndpoints(limited, checks), server.auth, negotiated_status)), server


def negotiated_status(exc: ApiError, scope: Any) -> tuple[str, bytes]:
    """A refusal of the authentication filter, in the media type the request asks for."""
    return status_body(exc, accept_header(scope))


class ResourcePaths:
    """Sends Kubernetes resource paths straight to the resource router, the rest to FastAPI."""

    def __init__(self, router: ResourceRouter, app: FastAPI) -> None:
        self.router = router
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine itself: the one chosen is returned to the caller to await, so that each
        # resumption of the request's task passes one frame fewer.
        if scope["type"] == "http" and scope["method"] in METHODS:
            api_path = split_api_path(scope["path"])
            if api_path is not None:
                return self.router.answer(scope, receive, send, api_path)
        return self.app(scope, receive, send)


def create_fastapi_app(settings: Settings) -> FastAPI:
    server = ApiServer(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await server.start()
        try:
            yield
        finally:
            await server.stop()

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None, title="dra-apiserver")
    app.state.server = server

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return status_response(exc, accept=request.headers.get("accept", ""))

    # ---- version, metrics ---------------------------------------------------------

    @app.get("/metrics")
    async def _metrics() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/version")
    @app.get("/version/")  # upstream serves both, no redirect
    async def _version() -> Response:
        return json_response(VERSION_INFO)

    @app.get("/featuregates")
    async def _featuregates() -> Response:
        return json_response({"featureGates": server.gates.describe()})

    # ---- discovery and OpenAPI -----------------------------------------------------

    @app.get("/api")
    async def _api(request: Request) -> Response:
        if negotiation.wants_aggregated_discovery(request.headers.get("accept", "")):
            return json_response(discovery.aggregated_discovery(legacy=True), media_type=discovery.AGGREGATED_DISCOVERY_CONTENT_TYPE)
        return json_response(discovery.api_versions())

    @app.get("/apis")
    async def _apis(request: Request) -> Response:
        if negotiation.wants_aggregated_discovery(request.headers.get("accept", "")):
            return json_response(discovery.aggregated_discovery(legacy=False), media_type=discovery.AGGREGATED_DISCOVERY_CONTENT_TYPE)
        return json_response(discovery.api_group_list())

    @app.get("/api/v1")
    async def _api_v1() -> Response:
        return json_response(discovery.api_resource_list("", "v1"))

    @app.get("/apis/{group}")
    async def _api_group(group: str) -> Response:
        body = discovery.api_group(group)
        if body is None:
            raise path_not_found()
        return json_response(body)

    @app.get("/apis/{group}/{version}")
    async def _api_group_version(group: str, version: str) -> Response:
        body = discovery.api_resource_list(group, version)
        if body is None:
            raise path_not_found()
        return json_response(body)

    @app.get("/openapi/v2")
    async def _openapi_v2(request: Request) -> Response:
        if negotiation.wants_protobuf_only(request.headers.get("accept", "")):
            # We do not speak protobuf; kubectl tolerates a 404 here once v3 is served.
            raise path_not_found()
        return json_response(openapi.openapi_v2_bytes())

    @app.get("/openapi/v3")
    async def _openapi_v3_index() -> Response:
        return json_response(openapi.openapi_v3_index())

    @app.get("/openapi/v3/{path:path}")
    async def _openapi_v3(path: str) -> Response:
        parts = path.strip("/").split("/")
        if parts[:1] == ["api"] and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[:1] == ["apis"] and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            raise path_not_found()
        raw = openapi.openapi_v3_bytes(group, version)
        if raw is None:
            raise path_not_found()
        return json_response(raw, headers={"Cache-Control": "public, immutable"})

    return app
