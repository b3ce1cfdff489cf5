"""``kubectl dra dashboard``: the page, its live feed and explanations, served on this machine.

Like ``kubectl proxy`` it runs as the user, with the kubeconfig's credentials: every read is an
ordinary list/watch of the API server (and explanations a request to the scheduler) that the
server authenticates and authorizes as that user. It listens on loopback by default and
answers only requests whose Host is a loopback name (no DNS rebinding), and it only reads.

Routes: ``/`` the page and ``/static/*`` its files (plain JS and CSS, nothing fetched from
elsewhere), ``/api/events`` the view model as Server-Sent Events (a snapshot, then patches),
``/api/device?id=driver/pool/device`` one device's details, ``/api/explain/NS/NAME`` the
scheduler's explanation of a pod, ``/api/whatif?pod=...|from=NS/NAME&max=N`` how many copies of a
pod fit (:mod:`kubectl_dra.dashboard.whatif`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kube.errors import ApiError
from kube.tasks import wait_for
from kubectl_dra.dashboard.model import MAX_LISTED, PROBE_SECONDS, DashboardModel
from kubectl_dra.session import CommandError, Session, fetch_explanation

STATIC = Path(__file__).parent / "static"
HEARTBEAT_SECONDS = 10.0
ACCEPT_HOSTS = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$")


def _status(code: int, reason: str, message: str) -> JSONResponse:
    return JSONResponse(ApiError(code, reason, message).status(), status_code=code)


def build_app(model: DashboardModel, session: Session | None = None, accept_hosts: re.Pattern[str] = ACCEPT_HOSTS) -> ASGIApp:
    """The dashboard's web application around a running ``model``."""

    async def index(_request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = (STATIC / name).resolve()
        if path.parent != STATIC.resolve() or not path.is_file():
            return _status(404, "NotFound", f"no file {name}")
        return FileResponse(path)

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            async with model.subscribe() as queue:
                while True:
                    try:
                        message = await wait_for(queue.get(), HEARTBEAT_SECONDS)
                    except TimeoutError:
                        yield b": heartbeat\n\n"
                        continue
                    if message["type"] == "resync":
                        message = {"type": "snapshot", "data": {**model.view, "version": model.version}}
                    yield b"event: " + message["type"].encode() + b"\ndata: " + orjson.dumps(message["data"]) + b"\n\n"
                    if await request.is_disconnected():
                        return

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def device(request: Request) -> Response:
        found = model.device(request.query_params.get("id", ""))
        if found is None:
            return _status(404, "NotFound", f"no device {request.query_params.get('id', '')!r}")
        return JSONResponse(found)

    async def explain(request: Request) -> Response:
        if session is None:
            return _status(503, "ServiceUnavailable", "explanations need the scheduler")
        try:
            return JSONResponse(
                await fetch_explanation(session, model.client, request.path_params["namespace"], request.path_params["name"])
            )
        except ApiError as exc:
            return JSONResponse(exc.status(), status_code=exc.code)
        except CommandError as exc:
            return _status(503, "ServiceUnavailable", str(exc))
        except (httpx.TransportError, OSError) as exc:
            return _status(503, "ServiceUnavailable", f"cannot reach the API server: {exc or type(exc).__name__}")

    async def whatif(request: Request) -> Response:
        from kubectl_dra.dashboard.whatif import whatif as answer  # the "What if" panel

        return await answer(request, model.client, session)

    routes = [
        Route("/", index), Route("/static/{name}", static), Route("/api/events", events), Route("/api/device", device),
        Route("/api/explain/{namespace}/{name}", explain), Route("/api/whatif", whatif),
    ]  # fmt: skip

    app = Starlette(routes=routes)

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        """Loopback host names only (no DNS rebinding), and reads only."""
        if scope["type"] == "http":
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            refusal = None
            if not accept_hosts.match(host):
                refusal = _status(403, "Forbidden", "this dashboard answers requests for loopback host names only")
            elif scope.get("method") not in ("GET", "HEAD"):
                refusal = _status(405, "MethodNotAllowed", "the dashboard only reads")
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def listen(address: str, port: int) -> socket.socket:
    """The dashboard's listening socket, bound before anything starts (a port in use fails at once)."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        sock = socket.socket(infos[0][0], socket.SOCK_STREAM)
    except OSError as exc:
        raise CommandError(f"listen tcp {address}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(infos[0][4])
    except OSError as exc:
        sock.close()
        raise CommandError(f"listen tcp {address}:{port}: bind: {(exc.strerror or str(exc)).lower()}") from None
    return sock


async def serve(session: Session, address: str, port: int, list_limit: int = MAX_LISTED) -> None:
    """Run the dashboard until interrupted."""
    sock = listen(address, port)
    # The page shows what is wrong with the API server; the terminal need not repeat every retry.
    logging.getLogger("informer").setLevel(logging.ERROR)
    client = session.client()
    model = DashboardModel(client, max_listed=list_limit)
    await model.start()
    # Ctrl-C ends the pages' event streams after a second: uvicorn would wait for them forever.
    config = uvicorn.Config(build_app(model, session), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    host, bound = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    try:
        user = await wait_for(model.whoami(), PROBE_SECONDS)
    except (ApiError, httpx.TransportError, OSError, TimeoutError):
        user = ""  # the page says what is wrong
    who = f"as {user}" if user else f"as the user of context {session.context.name}"
    print(f"Serving the dashboard on http://{where}:{bound}/ {who} (Ctrl-C stops it)", file=sys.stderr, flush=True)
    try:
        await server.serve(sockets=[sock])
    finally:
        await model.stop()
        with contextlib.suppress(Exception):
            await client.close()
