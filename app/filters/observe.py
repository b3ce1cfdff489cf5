"""The outermost layer of every HTTP request: its request id (the client's ``X-Request-Id``, or
one of this server's), its metrics, and a Status for an error nothing else answered.

Compiled with mypyc (kube/compiled.py): the request's task is resumed through this frame each
time it wakes, and its response messages all pass through ``send_wrapper``."""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import MutableMapping
from typing import Any

from app import metrics
from app.api.negotiation import status_response
from kube import errors

log = logging.getLogger("app.server")

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
