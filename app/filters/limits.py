"""Upstream's request limits as one ASGI middleware, applied in upstream's order:

1. the request deadline: ``--request-timeout`` (a request's ``?timeout=`` may shorten it; an
   invalid one is a 400), after which a request still unanswered gets a 504;
2. the in-flight limits: ``--max-requests-inflight`` read-only and
   ``--max-mutating-requests-inflight`` other requests served at once, a 429 with
   ``Retry-After: 1`` beyond;
3. watches are long-running: no deadline and no in-flight slot (they end at their own
   timeoutSeconds, or after ``--min-request-timeout``), but at most ``--max-watches`` open at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.negotiation import accept_header, status_body
from app.api.requestinfo import READ_ONLY_VERBS, request_verb
from kube.errors import ApiError, bad_request
from kube.query import query_params
from kube.timeutil import parse_go_duration

log = logging.getLogger("app.filters")

PLAIN_TEXT = b"text/plain; charset=utf-8"
TOO_MANY_REQUESTS = b"Too many requests, please try again later.\n"
# What upstream's timeout filter writes: the Status without kind and apiVersion, and no
# Content-Type of its own (Go's sniffing makes it text/plain).
TIMED_OUT = (
    orjson.dumps(
        {"metadata": {}, "status": "Failure", "message": "Timeout: request did not complete within the allotted timeout", "reason": "Timeout", "details": {}, "code": 504}
    )
    + b"\n"
)


class RequestLimits:
    def __init__(self, app: ASGIApp, *, max_read_only: int, max_mutating: int, request_timeout: float, max_watches: int) -> None:
        self.app = app
        self.read_only = Slots(max_read_only)
        self.mutating = Slots(max_mutating)
        self.request_timeout = request_timeout
        self.max_watches = max_watches
        self.watches = 0
        self._deadlines = Deadlines()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verb = request_verb(scope)
        if verb == "watch":
            await self._watch(scope, receive, send)
            return
        try:
            timeout = self._timeout(scope["query_string"])
        except ApiError as exc:
            await send_status(send, exc, accept_header(scope))
            return
        slots = self.read_only if verb in READ_ONLY_VERBS else self.mutating
        if not slots.take():
            await _too_many_requests(send)
            return
        try:
            await self._with_deadline(scope, receive, send, timeout)
        finally:
            slots.used -= 1

    def _timeout(self, query: bytes) -> float:
        """The request's deadline in seconds: ``?timeout=`` when shorter than --request-timeout."""
        if b"timeout=" not in query:
            return self.request_timeout
        value = query_params(query).get("timeout", "")
        if not value:
            return self.request_timeout
        try:
            asked = parse_go_duration(value)
        except ValueError as exc:
            raise bad_request(f"invalid timeout specified in the request URL - {exc}") from None
        return asked if 0 < asked < self.request_timeout else self.request_timeout

    async def _with_deadline(self, scope: Scope, receive: Receive, send: Send, timeout: float) -> None:
        started = False

        async def tracked(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        task = asyncio.current_task()
        assert task is not None
        self._deadlines.watch(task, timeout)
        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not self._deadlines.expired(task):
                raise
            task.uncancel()
            log.info("request timed out after %gs: %s %s", timeout, scope["method"], scope["path"])
            if started:
                # Part of the answer is out: the connection is closed instead (uvicorn closes it
                # when the application returns without finishing the response).
                return
            await send({"type": "http.response.start", "status": 504, "headers": [(b"content-type", PLAIN_TEXT), (b"content-length", str(len(TIMED_OUT)).encode())]})
            await send({"type": "http.response.body", "body": TIMED_OUT})
        finally:
            self._deadlines.forget(task)

    async def _watch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.max_watches and self.watches >= self.max_watches:
            message = f"too many watches are open on this server (the limit is {self.max_watches}), please try again later"
            await send_status(send, ApiError(429, "TooManyRequests", message, {"retryAfterSeconds": 1}), accept_header(scope))
            return
        self.watches += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.watches -= 1


class Slots:
    """In-flight requests of one kind, at most ``limit`` (0: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> bool:
        if self.limit and self.used >= self.limit:
            return False
        self.used += 1
        return True


class Deadlines:
    """Cancels the tasks of requests past their deadline. One sweep every ``GRAIN`` seconds for
    all requests: a timer per request would cost more than a small request itself."""

    GRAIN = 0.05

    def __init__(self) -> None:
        self._deadlines: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def watch(self, task: asyncio.Task[Any], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._deadlines[task] = loop.time() + timeout
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = loop.create_task(self._sweep(), name="request-deadlines")

    def forget(self, task: asyncio.Task[Any]) -> None:
        self._deadlines.pop(task, None)
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        return task in self._expired

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while self._deadlines:
            await asyncio.sleep(self.GRAIN)
            now = loop.time()
            for task, deadline in list(self._deadlines.items()):
                if deadline <= now and task not in self._expired:
                    self._expired.add(task)
                    task.cancel()


async def _too_many_requests(send: Send) -> None:
    """Upstream's answer beyond the in-flight limits: plain text, not a Status."""
    headers = [
        (b"content-type", PLAIN_TEXT),
        (b"x-content-type-options", b"nosniff"),
        (b"retry-after", b"1"),
        (b"content-length", str(len(TOO_MANY_REQUESTS)).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": TOO_MANY_REQUESTS})


async def send_status(send: Send, error: ApiError, accept: str = "") -> None:
    """``error`` as a Status in the media type the Accept header chose, with Retry-After when it
    asks the client to wait."""
    content_type, body = status_body(error, accept)
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    if error.retry_after_seconds:
        headers.append((b"retry-after", str(error.retry_after_seconds).encode()))
    await send({"type": "http.response.start", "status": error.code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
