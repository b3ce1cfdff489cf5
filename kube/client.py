"""An async HTTP client for the API server, used by every worker (scheduler, controller, kubelet simulator).

Workers talk to the server over HTTP only. Every non-2xx answer becomes an ``ApiError`` built
from the returned ``Status``; connection problems surface as ``httpx.TransportError`` so callers
(informers, leader election) can back off and retry.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import orjson

from kube.errors import ApiError
from kube.kubeconfig import Connection
from kube.objects import Obj
from kube.timeutil import now_rfc3339
from kube.transport import LeanTransport

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    # JSON is valid YAML, so an apply body can be sent as JSON bytes.
    "apply": "application/apply-patch+yaml",
}


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone): the caller must re-list."""


def resource_path(
    group: str,
    version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The URL path of a collection or object: core group ``""`` lives under /api/v1, others under /apis/G/V."""
    parts = ["/api", version] if group == "" else ["/apis", group, version]
    if namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


class _RateLimiter:
    """A token bucket (burst = max(1, qps)), so a busy worker cannot flood the server."""

    def __init__(self, qps: float) -> None:
        self.qps = qps
        self.burst = max(1.0, qps)
        self.tokens = self.burst
        self.last = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
            self.last = now
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.tokens = 1
                self.last = time.monotonic()
            self.tokens -= 1


# As client-go: a request the server answered 429 or 5xx with a Retry-After header is sent again
# after that many seconds, at most this many times, before its error reaches the caller.
MAX_RETRIES = 10


def retry_after_seconds(status: int, headers: list[tuple[bytes, bytes]]) -> int | None:
    """The wait a 429/5xx answer asks for in its Retry-After header (whole seconds), or None."""
    if status != 429 and status < 500:
        return None
    for name, value in headers:
        if name.lower() == b"retry-after":
            try:
                seconds = int(value)
            except ValueError:
                return None  # an HTTP date, which client-go does not honour either
            return seconds if seconds >= 0 else None
    return None


def _error_from_response(status: int, content: bytes) -> ApiError:
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError.from_status(body, status)
    text = content.decode(errors="replace")[:500]
    return ApiError(status, "", text or f"HTTP {status}")


class KubeClient:
    """A small async Kubernetes REST client (JSON over HTTP/1.1 keep-alive, through an httpx transport)."""

    def __init__(
        self,
        server: str,
        *,
        user_agent: str,
        qps: float | None = None,
        timeout: float = 30,
        transport: httpx.AsyncBaseTransport | None = None,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_retries: int = MAX_RETRIES,
    ) -> None:
        self.server = server.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.user_agent = user_agent
        self._limiter = _RateLimiter(qps) if qps else None
        # Requests go straight to the transport: httpx.AsyncClient's URL merging, auth and redirect
        # layers cost more CPU than the request itself, and workers are CPU-bound on requests.
        self._transport: httpx.AsyncBaseTransport = transport or LeanTransport(ssl_context=ssl_context)
        self._owns_transport = True
        self._base = httpx.URL(self.server)
        self._base_path = self._base.raw_path.decode().rstrip("/")  # a server URL may carry a path prefix
        headers = [(b"Host", self._base.netloc), (b"User-Agent", user_agent.encode()), (b"Accept", b"application/json")]
        if token:
            headers.append((b"Authorization", b"Bearer " + token.encode()))
        self._set_headers(headers)
        self._timeouts = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        # Through LeanTransport: requests whose answer is read whole skip httpx's
        # URL/Request/Response objects, which cost more CPU than a small request itself.
        self._lean = self._transport if isinstance(self._transport, LeanTransport) and self._transport.serves(self._base.scheme) else None
        self._lean_key = (self._base.host, self._base.port or (443 if self._base.scheme == "https" else 80))

    @classmethod
    def from_connection(cls, connection: Connection, *, user_agent: str, qps: float | None = None, timeout: float = 30, max_idle_per_host: int | None = None) -> KubeClient:
        """A client for a kubeconfig's server and user (``kube.kubeconfig.load_kubeconfig``)."""
        transport = None
        if max_idle_per_host is not None:
            transport = LeanTransport(max_idle_per_host=max_idle_per_host, ssl_context=connection.ssl_context())
        return cls(
            connection.server, user_agent=user_agent, qps=qps, timeout=timeout, transport=transport,
            token=connection.token, ssl_context=connection.ssl_context() if transport is None else None,
        )  # fmt: skip

    def set_token(self, token: str) -> None:
        """Send ``token`` as the bearer token from the next request on (a rotated, short-lived token)."""
        self._set_headers([*(header for header in self._headers if header[0] != b"Authorization"), (b"Authorization", b"Bearer " + token.encode())])

    def _set_headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        """The headers of every request, and their bytes as the lean path writes them."""
        self._headers = headers
        self._lean_headers = b"".join(name + b": " + value + b"\r\n" for name, value in headers)

    def _sharing(self, *, token: str | None = None, user_agent: str = "") -> KubeClient:
        """A client on this client's connections and rate limit; closing it leaves them to this client."""
        other = KubeClient(self.server, user_agent=user_agent or self.user_agent, timeout=self.timeout, transport=self._transport, token=token)
        other._limiter = self._limiter
        other._owns_transport = False
        other.max_retries = self.max_retries
        return other

    def as_user(self, token: str, user_agent: str = "") -> KubeClient:
        """A client acting as another user (named by a bearer token) on this client's connections;
        closing it leaves them to this client."""
        return self._sharing(token=token, user_agent=user_agent)

    def impersonating(
        self, name: str, *, uid: str = "", groups: tuple[str, ...] = (), extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ) -> KubeClient:
        """A client whose requests act as another user (``Impersonate-*`` headers) with this client's
        credentials, on its connections; closing it leaves them to this client. The server decides
        whether this client may act as that user for each request (impersonation)."""
        other = self._sharing()
        headers = [(b"Impersonate-User", name.encode())]
        if uid:
            headers.append((b"Impersonate-Uid", uid.encode()))
        headers += [(b"Impersonate-Group", group.encode()) for group in groups]
        headers += [(b"Impersonate-Extra-" + quote(key, safe="").encode(), value.encode()) for key, values in extra for value in values]
        other._set_headers([*self._headers, *headers])
        return other

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._owns_transport:
            await self._transport.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        content: bytes | None = None,
        content_type: str = "application/json",
        read_timeout: float | None = -1.0,
    ) -> httpx.Response:
        """Send one request; the response body is not read yet (the caller reads or streams it)."""
        if self._limiter is not None:
            await self._limiter.acquire()
        target = self._base_path + path
        if params:
            target += "?" + urlencode(params)
        headers = self._headers
        if content is not None:
            headers = [*headers, (b"Content-Type", content_type.encode()), (b"Content-Length", str(len(content)).encode())]
        timeouts = self._timeouts if read_timeout == -1.0 else {**self._timeouts, "read": read_timeout}
        request = httpx.Request(
            method, self._base.copy_with(raw_path=target.encode()), headers=headers, content=content, extensions={"timeout": timeouts}
        )
        return await self._transport.handle_async_request(request)

    def _lean_head(self, method: str, path: str, params: dict[str, str] | None, content: bytes | None, content_type: str) -> bytes:
        """Request line and headers, serialised for LeanTransport."""
        target = self._base_path + path
        if params:
            target += "?" + urlencode(params)
        head = method.encode() + b" " + target.encode() + b" HTTP/1.1\r\n" + self._lean_headers
        if content is not None or method in ("POST", "PUT", "PATCH"):
            head += b"Content-Type: " + content_type.encode() + b"\r\nContent-Length: " + str(len(content or b"")).encode() + b"\r\n"
        return head + b"\r\n"

    async def _exchange_whole(
        self, method: str, path: str, params: dict[str, str] | None, content: bytes | None, content_type: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send one request and read its whole answer: status, headers, body."""
        if self._lean is not None:
            if self._limiter is not None:
                await self._limiter.acquire()
            head = self._lean_head(method, path, params, content, content_type)
            return await self._lean.fetch(self._lean_key, head, content or b"", self._timeouts)
        response = await self._send(method, path, params, content, content_type)
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response.status_code, response.headers.raw, response.content

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj | None:
        content = orjson.dumps(body) if body is not None else None
        attempt = 0
        while True:
            status, headers, data = await self._exchange_whole(method, path, params, content, content_type)
            if status < 400:
                break
            wait = retry_after_seconds(status, headers)
            if wait is None or attempt >= self.max_retries:
                raise _error_from_response(status, data)
            attempt += 1
            await asyncio.sleep(wait)
        if not data:
            return None
        result = orjson.loads(data)
        return result if isinstance(result, dict) else {"items": result}

    async def _expect(self, method: str, path: str, **kwargs: Any) -> Obj:
        result = await self._request(method, path, **kwargs)
        return result if result is not None else {}

    async def get(self, path: str) -> Obj:
        """GET one object (or any JSON document)."""
        return await self._expect("GET", path)

    async def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the server serves this resource (its discovery document lists it): versions
        off by --runtime-config and kinds off by a feature gate are not."""
        try:
            listing = await self.get(f"/apis/{group}/{version}" if group else f"/api/{version}")
        except ApiError:
            return False
        return any(r.get("name") == plural for r in listing.get("resources") or [])

    async def list(
        self,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        limit: int = 0,
    ) -> Obj:
        """LIST a collection; with ``limit`` the pages are followed and merged into one list."""
        result: Obj = {}
        items: list[Obj] = []
        async for page in self.pages(path, label_selector=label_selector, field_selector=field_selector, resource_version=resource_version, limit=limit):
            items.extend(page.get("items") or [])
            if not result:
                result = page
            result["metadata"] = page.get("metadata") or {}
        result["items"] = items
        return result

    async def pages(
        self,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
        limit: int = 0,
    ) -> AsyncIterator[Obj]:
        """LIST a collection page by page (one page without ``limit``), so a caller that keeps a
        compact form of the items never holds the whole list decoded. The last page's metadata
        carries the list's resourceVersion; ``continue`` and ``remainingItemCount`` are dropped."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version:
            params["resourceVersion"] = resource_version
        if limit:
            params["limit"] = str(limit)
        while True:
            page = await self._expect("GET", path, params=params)
            meta = page.get("metadata") or {}
            following = meta.get("continue") if limit else None
            page["metadata"] = {k: v for k, v in meta.items() if k not in ("continue", "remainingItemCount")}
            yield page
            if not following:
                return
            # Pages after the first are served from the first page's snapshot; resourceVersion must not be sent.
            params = {k: v for k, v in params.items() if k != "resourceVersion"}
            params["continue"] = following

    async def create(self, path: str, obj: Obj, *, field_manager: str = "") -> Obj:
        """POST a new object to a collection."""
        params = {"fieldManager": field_manager} if field_manager else None
        return await self._expect("POST", path, params=params, body=obj)

    async def update(self, path: str, obj: Obj) -> Obj:
        """PUT a whole object; its metadata.resourceVersion (when set) is the precondition."""
        return await self._expect("PUT", path, body=obj)

    async def patch(
        self,
        path: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        field_manager: str = "",
        force: bool = False,
    ) -> Obj:
        """PATCH with ``merge``, ``strategic``, ``json`` (a list of operations) or ``apply``."""
        if patch_type not in PATCH_CONTENT_TYPES:
            raise ValueError(f"unknown patch type {patch_type!r}")
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        return await self._expect("PATCH", path, params=params, body=patch, content_type=PATCH_CONTENT_TYPES[patch_type])

    async def delete(
        self,
        path: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
        propagation_policy: str | None = None,
        missing_ok: bool = False,
    ) -> Obj | None:
        """DELETE an object; returns the object (or Status), or None on 404 when ``missing_ok``."""
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        try:
            return await self._request("DELETE", path, body=options)
        except ApiError as exc:
            if exc.code == 404 and missing_ok:
                return None
            raise

    async def post_raw(self, path: str, obj: Obj) -> Obj:
        """POST to a subresource such as pods/binding; the answer may be a Status."""
        return await self._expect("POST", path, body=obj)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:
        """Yield watch events (``{"type", "object"}``) until the server ends the stream.

        Raises ``WatchExpired`` when the resourceVersion is too old (410), ``ApiError`` on other
        ERROR events or failed requests.
        """
        params = {"watch": "true", "resourceVersion": resource_version}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        # The stream is idle between events: no read timeout, the server ends it at timeoutSeconds.
        chunks: AsyncIterator[bytes]
        if self._lean is not None:
            if self._limiter is not None:
                await self._limiter.acquire()
            head = self._lean_head("GET", path, params, None, "")
            # The connection's own chunks: no httpx Response and its three nested body iterators per event.
            status, body = await self._lean.open(self._lean_key, head, {**self._timeouts, "read": None})
            chunks, close = aiter(body), body.aclose
        else:
            response = await self._send("GET", path, params, read_timeout=None)
            status, chunks, close = response.status_code, response.aiter_bytes(), response.aclose
        try:
            if status >= 400:
                error = _error_from_response(status, b"".join([chunk async for chunk in chunks]))
                if error.code == 410:
                    raise WatchExpired(error.message)
                raise error
            async for line in _lines(chunks):
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    error = ApiError.from_status(event.get("object") or {})
                    if error.code == 410:
                        raise WatchExpired(error.message)
                    raise error
                yield event
        finally:
            await close()


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Non-empty lines of a streamed body, as bytes (orjson parses bytes without decoding to str)."""
    pending = b""
    async for chunk in chunks:
        if pending:
            chunk = pending + chunk
        *lines, pending = chunk.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


async def record_event(
    client: KubeClient,
    involved: Obj,
    reason: str,
    message: str,
    type_: str = "Normal",
    component: str = "",
) -> Obj:
    """Create a core/v1 Event about ``involved`` (named ``<object>.<hex nanoseconds>`` as upstream does)."""
    meta = involved.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = now_rfc3339()
    event: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'unknown')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": {
            "kind": involved.get("kind", ""),
            "apiVersion": involved.get("apiVersion", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "source": {"component": component} if component else {},
        "reportingComponent": component,
        "reportingInstance": "",
    }
    if meta.get("namespace"):
        event["involvedObject"]["namespace"] = meta["namespace"]
    return await client.create(resource_path("", "v1", "events", namespace), event)
