"""``/healthz`` for worker processes, on the tiny responder of :mod:`kube.httpserve`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kube.httpserve import Request, Response, serve_http

HEALTH_PATHS = ("/healthz", "/livez", "/readyz")


async def serve_health(port: int, ready: Callable[[], bool] = lambda: True, host: str = "127.0.0.1") -> asyncio.Server:
    """Answer GET /healthz (/livez, /readyz) with 200 once ``ready()``, 503 before."""

    async def handle(request: Request) -> Response:
        if request.path not in HEALTH_PATHS:
            return Response(404, b"not found")
        return Response(200, b"ok") if ready() else Response(503, b"not ready")

    return await serve_http(handle, port, host)
