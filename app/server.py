"""The FastAPI application: Kubernetes paths, content negotiation, errors as Status."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from app import metrics
from app.api import bodies, discovery, openapi, tables
from app.api.generic import GenericStore, WriteResult, event_line
from app.api.namespaces import NamespaceLifecycle, ensure_system_namespaces
from app.api.options import DeleteOptions, ListOptions, WriteOptions, query_params
from app.config import Settings
from app.registry import lookup
from app.registry.base import KindStrategy
from app.storage.cache import StoredObject, WatchCache
from app.storage.db import check_schema, create_engine
from app.storage.errors import RevisionCompacted
from app.storage.storage import Storage
from app.storage.store import Store
from kube import errors
from kube.errors import ApiError
from kube.features import FeatureGates
from kube.heap import keep_heap_frozen

log = logging.getLogger("app.server")

JSON = "application/json"
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


def _plain(item: StoredObject | dict[str, Any]) -> dict[str, Any]:
    """The object of a stored item or an already decoded one."""
    return item.obj if isinstance(item, StoredObject) else item


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None, media_type: str = JSON) -> Response:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return Response(raw, status_code=status, media_type=media_type, headers=headers)


def status_response(exc: ApiError, headers: dict[str, str] | None = None) -> Response:
    return json_response(exc.status(), exc.code, headers)


def warning_headers(warnings: list[str]) -> dict[str, str]:
    if not warnings:
        return {}
    # Starlette joins repeated headers poorly; one header with comma-separated warn-values is valid HTTP.
    # A quoted string with control and non-ASCII characters escaped (as Go's strconv.Quote does):
    # header values may hold neither.
    return {"Warning": ", ".join(f"299 - {json.dumps(w)}" for w in warnings)}


# Request ids only need to be unique in this server's log: a random per-process prefix and a
# counter cost far less per request than a uuid4.
_REQUEST_ID_PREFIX = uuid.uuid4().hex[:8]
_request_counter = itertools.count(1)


class ObserveMiddleware:
    """Request ids, metrics, and a Status body for unexpected errors (pure ASGI: no per-request task)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"{_REQUEST_ID_PREFIX}{next(_request_counter):08x}"
        for key, value in scope.get("headers", ()):
            if key == b"x-request-id":
                request_id = value.decode("latin-1")[:64]
        started = time.perf_counter()
        code = 500
        response_started = False

        async def send_wrapper(message: MutableMapping[str, Any]) -> None:
            nonlocal code, response_started
            if message["type"] == "http.response.start":
                code = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id.encode())]
                await send(message)
                response_started = True
                return
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            log.exception("internal error", extra={"request_id": request_id, "path": scope.get("path"), "method": scope.get("method")})
            if not response_started:
                response = status_response(errors.internal_error(f"request {request_id} failed; see the server log"))
                await response(scope, receive, send_wrapper)
        finally:
            metrics.observe_request(scope, code, time.perf_counter() - started)


@dataclass
class ResourcePath:
    strategy: KindStrategy
    namespace: str | None  # None: cluster-scoped, or all namespaces for a namespaced kind
    name: str | None
    subresource: str


def parse_resource_path(group: str, version: str, segments: list[str]) -> ResourcePath | None:
    """Resolve ``[namespaces/NS/]PLURAL[/NAME[/SUB]]`` against the registry."""
    if len(segments) >= 3 and segments[0] == "namespaces":
        strategy = lookup(group, version, segments[2])
        if strategy is not None and strategy.namespaced:
            if len(segments) > 5:
                return None
            name = segments[3] if len(segments) >= 4 else None
            sub = segments[4] if len(segments) == 5 else ""
            return ResourcePath(strategy, segments[1], name, sub)
    if not segments or len(segments) > 3:
        return None
    strategy = lookup(group, version, segments[0])
    if strategy is None:
        return None
    name = segments[1] if len(segments) >= 2 else None
    sub = segments[2] if len(segments) == 3 else ""
    if strategy.namespaced and name is not None:
        return None
    return ResourcePath(strategy, None, name, sub)


class ApiServer:
    """Everything one server process holds: storage, registry, background loops."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gates = FeatureGates.parse(settings.feature_gates)
        self.engine = create_engine(settings.database_url)
        store = Store(
            self.engine,
            WatchCache(settings.watch_cache_size),
            poll_interval=settings.poll_interval,
            compaction_interval=settings.compaction_interval,
            compaction_window=settings.compaction_window,
            compaction_min_retain=settings.compaction_min_retain,
        )
        self.storage = Storage(store, bookmark_interval=settings.bookmark_interval)
        self.registry = GenericStore(self.storage, self.gates, settings.min_request_timeout)
        self.namespaces = NamespaceLifecycle(self.registry)
        self.started = time.time()
        self._heap_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await check_schema(self.engine, self.settings.database_url)
        await self.storage.start()
        await ensure_system_namespaces(self.registry)
        self.namespaces.start()
        metrics.bind_storage(self.storage)
        # The watch cache is the bulk of the heap; keep it out of the cycle collector's scans.
        self._heap_task = asyncio.get_running_loop().create_task(keep_heap_frozen(), name="gc-freeze")

    async def stop(self) -> None:
        if self._heap_task is not None:
            self._heap_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heap_task
        await self.namespaces.stop()
        await self.storage.stop()
        await self.engine.dispose()


def create_app(settings: Settings) -> Any:
    """The ASGI application: resource paths on a lean path, everything else through FastAPI."""
    app = create_fastapi_app(settings)
    return ObserveMiddleware(ResourcePaths(app))


class ResourcePaths:
    """Routes Kubernetes resource paths straight to the registry handlers."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        is_verb = scope["type"] == "http" and scope["method"] in ("GET", "POST", "PUT", "PATCH", "DELETE")
        if is_verb and await self.app.state.resource_endpoint(scope, receive, send):
            return
        await self.app(scope, receive, send)


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
    registry = server.registry
    limit = settings.max_body_bytes

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> Response:
        return status_response(exc)

    # ---- health, version, metrics --------------------------------------------------

    @app.get("/healthz")
    @app.get("/livez")
    async def _healthz() -> Response:
        return Response(b"ok", media_type="text/plain")

    @app.get("/readyz")
    async def _readyz() -> Response:
        if not server.storage.ready:
            return Response(b"storage not ready", status_code=503, media_type="text/plain")
        return Response(b"ok", media_type="text/plain")

    @app.get("/metrics")
    async def _metrics() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/version")
    async def _version() -> Response:
        return json_response(VERSION_INFO)

    @app.get("/featuregates")
    async def _featuregates() -> Response:
        return json_response({"featureGates": server.gates.describe()})

    # ---- discovery and OpenAPI -----------------------------------------------------

    @app.get("/api")
    async def _api(request: Request) -> Response:
        if discovery.wants_aggregated(request.headers.get("accept", "")):
            return json_response(discovery.aggregated_discovery(legacy=True), media_type=discovery.AGGREGATED_DISCOVERY_CONTENT_TYPE)
        return json_response(discovery.api_versions())

    @app.get("/apis")
    async def _apis(request: Request) -> Response:
        if discovery.wants_aggregated(request.headers.get("accept", "")):
            return json_response(discovery.aggregated_discovery(legacy=False), media_type=discovery.AGGREGATED_DISCOVERY_CONTENT_TYPE)
        return json_response(discovery.api_group_list())

    @app.get("/api/v1")
    async def _api_v1() -> Response:
        return json_response(discovery.api_resource_list("", "v1"))

    @app.get("/apis/{group}")
    async def _api_group(group: str) -> Response:
        body = discovery.api_group(group)
        if body is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(body)

    @app.get("/apis/{group}/{version}")
    async def _api_group_version(group: str, version: str) -> Response:
        body = discovery.api_resource_list(group, version)
        if body is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(body)

    @app.get("/openapi/v2")
    async def _openapi_v2(request: Request) -> Response:
        accept = request.headers.get("accept", "")
        if "protobuf" in accept and "json" not in accept:
            # We do not speak protobuf; kubectl tolerates a 404 here once v3 is served.
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
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
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        raw = openapi.openapi_v3_bytes(group, version)
        if raw is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(raw, headers={"Cache-Control": "public, immutable"})

    # ---- resources -------------------------------------------------------------------

    async def resource(scope: Scope, receive: Receive, group: str, version: str, rest: str) -> Response:
        segments = [s for s in rest.split("/") if s]
        target = parse_resource_path(group, version, segments)
        if target is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        method = scope["method"]
        try:
            return await dispatch(scope, receive, target, method)
        except RevisionCompacted as exc:
            if target.name is None and method == "GET":
                # Watches report this as an ERROR event on a 200 stream; plain lists as 410.
                return status_response(errors.gone(str(exc)))
            raise

    async def dispatch(scope: Scope, receive: Receive, target: ResourcePath, method: str) -> Response:
        strategy = target.strategy
        # Plain dicts: Starlette's multi-dict and header lookups cost more than the rest of a GET.
        params = query_params(scope["query_string"])
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def request_body() -> bytes:
            return await bodies.read_body(receive, headers.get("content-length"), limit)
        accept = headers.get("accept", "")
        sub = target.subresource
        if sub and sub not in strategy.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = target.namespace or ""
        if target.name is None:
            if method == "GET":
                opts = ListOptions.parse(params)
                if opts.watch:
                    return await watch_response(strategy, target.namespace, opts, accept)
                items, meta = await registry.list_objects(strategy, target.namespace, opts)
                return list_response(strategy, items, meta, accept, opts.include_object)
            if method == "POST":
                if target.namespace is None and strategy.namespaced:
                    raise errors.method_not_allowed()
                wopts = WriteOptions.parse(params, headers.get("user-agent", ""))
                body = bodies.decode_object(await request_body(), headers.get("content-type"), strategy.kind)
                result = await registry.create(strategy, ns, body, wopts)
                return object_response(strategy, result, accept, 201)
            if method == "DELETE":
                if "deletecollection" not in strategy.verbs:
                    raise errors.method_not_allowed()
                raw = await request_body()
                dopts = DeleteOptions.parse(params, bodies.decode_delete_options(raw, headers.get("content-type")))
                opts = ListOptions.parse(params)
                deleted, meta = await registry.delete_collection(strategy, target.namespace, opts, dopts)
                return list_response(strategy, deleted, meta, accept, opts.include_object)
            raise errors.method_not_allowed()
        name = target.name
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            wopts = WriteOptions.parse(params, headers.get("user-agent", ""))
            body = bodies.decode_object(await request_body(), headers.get("content-type"), "Binding")
            await registry.bind(strategy, ns, name, body, wopts)
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)
        if sub == "finalize":
            if method != "PUT":
                raise errors.method_not_allowed()
            wopts = WriteOptions.parse(params, headers.get("user-agent", ""))
            body = bodies.decode_object(await request_body(), headers.get("content-type"), strategy.kind)
            result = await registry.finalize_namespace(strategy, name, body, wopts)
            return object_response(strategy, result, accept, 200)
        if method == "GET":
            stored = await registry.get(strategy, ns, name, params.get("resourceVersion", ""))
            wanted = tables.conversion(accept)
            if wanted is None:
                return json_response(stored.raw)
            # Converted after the read, as upstream: a missing object is a 404 before any 406.
            return json_response(tables.convert_object(strategy, stored.obj, wanted, params.get("includeObject", "Metadata") or "Metadata"))
        if method == "PUT":
            wopts = WriteOptions.parse(params, headers.get("user-agent", ""))
            body = bodies.decode_object(await request_body(), headers.get("content-type"), strategy.kind)
            result = await registry.update(strategy, ns, name, body, wopts, sub)
            return object_response(strategy, result, accept, 201 if result.created else 200)
        if method == "PATCH":
            wopts = WriteOptions.parse(params, headers.get("user-agent", ""))
            raw = await request_body()
            patch, patch_type = bodies.decode_patch(raw, headers.get("content-type"), strategy.kind)
            if patch_type == "apply" and not params.get("fieldManager"):
                raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
            if patch_type != "apply" and params.get("force"):
                raise errors.bad_request("PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch")
            result = await registry.patch(strategy, ns, name, patch, patch_type, wopts, sub)
            return object_response(strategy, result, accept, 201 if result.created else 200)
        if method == "DELETE":
            if sub:
                raise errors.method_not_allowed()
            raw = await request_body()
            dopts = DeleteOptions.parse(params, bodies.decode_delete_options(raw, headers.get("content-type")))
            outcome = await registry.delete(strategy, ns, name, dopts)
            if outcome.deleted_now and not strategy.return_deleted_object:
                return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": outcome.details})
            obj = outcome.obj
            wanted = tables.conversion(accept)
            if obj is not None and wanted is not None and wanted.kind != tables.TABLE:
                obj = tables.convert_object(strategy, _plain(obj), wanted)
            raw_obj = obj.raw if isinstance(obj, StoredObject) else orjson.dumps(obj)
            # Upstream answers 202 only for a pending deletion that asked for cascading with the
            # deprecated orphanDependents=false (always doing so would break old clients).
            accepted = not outcome.deleted_now and dopts.orphan_dependents is False
            return json_response(raw_obj, 202 if accepted else 200)
        raise errors.method_not_allowed()

    def object_response(strategy: KindStrategy, result: WriteResult, accept: str, code: int) -> Response:
        headers = warning_headers(result.warnings)
        wanted = tables.conversion(accept)
        if wanted is None:
            return json_response(result.raw, code, headers)
        # Upstream converts after the write, so a list conversion fails with the write done.
        return json_response(tables.convert_object(strategy, _plain(result.obj), wanted), code, headers)

    def list_bytes(strategy: KindStrategy, items: list[Any], meta: dict[str, Any]) -> bytes:
        raws = [i.raw if isinstance(i, StoredObject) else orjson.dumps(i) for i in items]
        head = orjson.dumps({"kind": strategy.list_kind, "apiVersion": strategy.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(raws) + b"]}"

    def list_response(strategy: KindStrategy, items: Sequence[StoredObject | dict[str, Any]], meta: dict[str, Any], accept: str, include_object: str) -> Response:
        wanted = tables.conversion(accept)
        if wanted is None:
            return json_response(list_bytes(strategy, list(items), meta))
        refused = tables.not_acceptable_for_list(strategy, wanted)
        if refused is not None:
            raise refused
        objs = [_plain(i) for i in items]
        if wanted.kind == tables.TABLE:
            return json_response(tables.table_for(strategy, objs, meta, include_object))
        return json_response(tables.partial_list(objs, meta, wanted.version))

    async def watch_response(strategy: KindStrategy, namespace: str | None, opts: ListOptions, accept: str) -> Response:
        wanted = tables.conversion(accept)
        if wanted is not None and (refused := tables.not_acceptable_for_object(strategy, wanted)) is not None:
            raise refused  # each event carries one object
        as_table = wanted is not None and wanted.kind == tables.TABLE
        try:
            events = await registry.watch(strategy, namespace, opts)
        except RevisionCompacted as exc:
            error = errors.gone(str(exc)).status()

            async def expired() -> AsyncIterator[bytes]:
                yield orjson.dumps({"type": "ERROR", "object": error}) + b"\n"

            return StreamingResponse(expired(), media_type=JSON)

        async def stream() -> AsyncIterator[bytes]:
            metrics.WATCHERS.inc()
            try:
                async for batch in events:
                    lines: list[bytes] = []
                    for kind, item in batch:
                        if as_table and kind == "BOOKMARK":
                            lines.append(event_line(kind, tables.table_bookmark(item["metadata"]["resourceVersion"])))  # type: ignore[index]
                        elif wanted is not None:
                            lines.append(event_line(kind, tables.convert_object(strategy, _plain(item), wanted, opts.include_object)))
                        else:
                            lines.append(event_line(kind, item))
                    yield b"".join(lines)
            finally:
                metrics.WATCHERS.dec()

        return StreamingResponse(stream(), media_type=JSON, headers={"Cache-Control": "no-cache, private"})

    async def resource_endpoint(scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve a resource path directly (the hot path skips FastAPI's router and
        dependency solving); False when the path is not a resource path."""
        parts = scope["path"].split("/", 5)
        # ["", "api", "v1", rest...] or ["", "apis", group, version, rest...]
        if len(parts) >= 4 and parts[1] == "api" and parts[2] == "v1" and parts[3]:
            group, version, rest = "", "v1", "/".join(parts[3:])
        elif len(parts) >= 5 and parts[1] == "apis" and parts[4]:
            group, version, rest = parts[2], parts[3], "/".join(parts[4:])
        else:
            return False
        try:
            response = await resource(scope, receive, group, version, rest)
        except ApiError as exc:
            response = status_response(exc)
        await response(scope, receive, send)
        return True

    app.state.resource_endpoint = resource_endpoint
    return app
