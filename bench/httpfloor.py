"""The HTTP layer's floor: uvicorn + httptools (what ``python -m app serve`` runs) against
granian (a Rust HTTP server with an ASGI interface), the same application under both, one run.

For each server, in alternating rounds (uvicorn, granian, uvicorn, granian, ...):

* **minimal**: a bare ASGI app, ``GET`` answers a fixed ~1 KB JSON body, ``POST`` echoes the
  request body with a 201: the cost of the HTTP server itself;
* **api GET** / **api create**: the real application (``app.server.create_app``, plain HTTP on
  loopback, embedded SQLite unless ``--database-url``): a GET of one ResourceClaim (served from
  the watch cache) and a create of bench.api's ResourceClaim (~1.1 KB JSON).

Each phase runs ``--clients`` closed-loop keep-alive connections (bench.api's raw client) for
``--duration`` seconds. Reported per server and phase: requests/s, the server process tree's CPU
microseconds per request (from /proc; a busy machine distorts it far less than requests/s) and
the granian/uvicorn ratio of both. uvicorn runs as production does: ``python -m app serve``
(uvloop, the guarded httptools protocol); granian with one worker, one runtime thread, uvloop.

``--tls-check`` (on by default) also serves ``scope_app`` under granian over HTTPS with client
certificate verification and prints what the application sees with a certificate of the cluster's
CA, a foreign certificate and none: ``python -m app serve`` needs the presented certificate in the
scope (client certificate authentication), a 401 for a foreign one, and clients without one
(bearer tokens) let through.

Run ``python -m bench.httpfloor --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import itertools
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.common import GROUP, claim_bytes
from bench.cpu import _proc_table, _tree_cpu
from bench.machine import load_average, reports_machine
from bench.transport import RawHTTP, close_all
from devtools.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "floor"
SERVERS = ("uvicorn", "granian")
# Environment of a granian worker: the serve flags for the real application's factory.
ARGS_ENV = "BENCH_HTTPFLOOR_SERVE_ARGS"

_BODY = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"padding": "x" * 960}})
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_BODY)).encode())]


async def minimal_app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """The floor: no routing, no JSON work; GET a fixed body, POST echoes its body."""
    if scope["type"] == "lifespan":
        while True:
            if (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["method"] == "POST":
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _BODY})


async def scope_app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Answers with the names of its scope's keys and extensions (what a server hands an application)."""
    if scope["type"] == "lifespan":
        await minimal_app(scope, receive, send)
        return
    body = orjson.dumps({"keys": sorted(k for k in scope if k != "state"), "extensions": sorted(scope.get("extensions") or {})})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def tls_check(tmp: Path) -> dict[str, str]:
    """granian over HTTPS with client certificate verification: what each kind of client gets."""
    import ssl

    from kube.pki import Authority, cert_pem, key_pem

    def write(name: str, cert: Any, key: Any) -> tuple[str, str]:
        (tmp / f"{name}.crt").write_bytes(cert_pem(cert))
        (tmp / f"{name}.key").write_bytes(key_pem(key))
        return str(tmp / f"{name}.crt"), str(tmp / f"{name}.key")

    authority = Authority.create("floor-ca")
    (tmp / "ca.crt").write_bytes(cert_pem(authority.cert))
    serving = write("serving", *authority.serving(["127.0.0.1", "localhost"]))
    clients = {"cluster CA certificate": write("alice", *authority.client("alice")), "foreign certificate": write("mallory", *Authority.create("other").client("mallory")), "no certificate": None}
    port = free_port()
    command = [
        sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "--ssl-certificate", serving[0], "--ssl-keyfile", serving[1], "--ssl-ca", str(tmp / "ca.crt"), "--ssl-client-verify",
        "--ssl-protocol-min", "tls1.2", "bench.httpfloor:scope_app",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    outcome: dict[str, str] = {}
    try:
        for name, pair in clients.items():
            context = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
            if pair is not None:
                context.load_cert_chain(*pair)
            deadline = time.monotonic() + 30
            while True:
                try:
                    response = httpx.get(f"https://127.0.0.1:{port}/", verify=context, timeout=5)
                    outcome[name] = f"HTTP {response.status_code} {response.text}"
                    break
                except httpx.ConnectError as exc:
                    if "refused" in str(exc).lower() and time.monotonic() < deadline:
                        time.sleep(0.1)
                        continue
                    outcome[name] = f"refused in the handshake: {exc}"
                    break
                except httpx.HTTPError as exc:
                    outcome[name] = f"refused in the handshake: {exc}"
                    break
    finally:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
    return outcome


def api_app() -> Any:
    """The real application for granian's ``--factory``: the serve flags come from ``ARGS_ENV``."""
    from app.__main__ import application

    return application(shlex.split(os.environ[ARGS_ENV]))


class Server:
    """One server process (its whole tree's CPU is counted) on a free loopback port."""

    def __init__(self, kind: str, app: str, database_url: str, log: Path) -> None:
        self.kind, self.app, self.port = kind, app, free_port()
        serve = ["--listen", f"127.0.0.1:{self.port}", "--insecure-serving", "--database-url", database_url, "--log-level", "warning"]
        env = dict(os.environ)
        if kind == "uvicorn" and app == "api":
            command = ["-m", "app", "serve", *serve]
        elif kind == "uvicorn":
            command = ["-m", "uvicorn", "bench.httpfloor:minimal_app", "--port", str(self.port), "--http", "httptools", "--loop", "uvloop", "--no-access-log", "--log-level", "warning"]
        else:
            target = ["--factory", "bench.httpfloor:api_app"] if app == "api" else ["bench.httpfloor:minimal_app"]
            command = [
                "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                "--runtime-threads", "1", "--loop", "uvloop", "--no-ws", "--log-level", "warning", *target,
            ]  # fmt: skip
            env[ARGS_ENV] = shlex.join(serve)
        self._log = open(log, "ab")  # noqa: SIM115 - open for the server's lifetime
        self.process = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{kind} exited with {self.process.returncode}; see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{kind} not ready after 60 s; see {log}")

    def cpu(self) -> float:
        return _tree_cpu(self.process.pid, _proc_table()) or 0.0

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log.close()


async def load(server: Server, clients: int, duration: float, request: Callable[[RawHTTP, int], Awaitable[int]]) -> dict[str, float]:
    """``clients`` closed-loop connections for ``duration`` s: requests/s and server µs CPU per request."""
    conns = [RawHTTP("127.0.0.1", server.port, {}) for _ in range(clients)]
    counter = itertools.count()
    done = errors = 0
    stop = 0.0

    async def worker(conn: RawHTTP) -> None:
        nonlocal done, errors
        while time.perf_counter() < stop:
            status = await request(conn, next(counter))
            if 200 <= status < 300:
                done += 1
            else:
                errors += 1

    # A short warm-up opens the connections and fills the caches.
    stop = time.perf_counter() + 0.5
    await asyncio.gather(*(worker(c) for c in conns))
    done = errors = 0
    cpu0, t0 = server.cpu(), time.perf_counter()
    stop = t0 + duration
    await asyncio.gather(*(worker(c) for c in conns))
    wall, cpu = time.perf_counter() - t0, server.cpu() - cpu0
    await close_all(list(conns))
    return {"rps": done / wall, "cpu_us": cpu * 1e6 / max(1, done), "errors": errors, "cores": cpu / wall}


async def measure(kind: str, app: str, args: argparse.Namespace, tmp: Path, tag: str) -> dict[str, dict[str, float]]:
    server = Server(kind, app, args.database_url, tmp / f"{kind}-{app}.log")
    try:
        if app == "minimal":

            async def get(conn: RawHTTP, _i: int) -> int:
                return (await conn.request("GET", "/"))[0]

            async def echo(conn: RawHTTP, i: int) -> int:
                return (await conn.request("POST", "/", claim_bytes(f"c-{i}", NAMESPACE, i)))[0]

            return {"minimal GET": await load(server, args.clients, args.duration, get), "minimal POST": await load(server, args.clients, args.duration, echo)}
        path = f"{GROUP}/namespaces/{NAMESPACE}/resourceclaims"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as setup:
            await setup.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            target = f"{tag}-target"
            await setup.post(path, content=claim_bytes(target, NAMESPACE, 0), headers={"content-type": "application/json"})

        async def read(conn: RawHTTP, _i: int) -> int:
            return (await conn.request("GET", f"{path}/{target}"))[0]

        async def create(conn: RawHTTP, i: int) -> int:
            return (await conn.request("POST", path, claim_bytes(f"{tag}-{i}", NAMESPACE, i)))[0]

        return {"api GET": await load(server, args.clients, args.duration, read), "api create": await load(server, args.clients, args.duration, create)}
    finally:
        server.stop()


def show(results: dict[str, dict[str, list[dict[str, float]]]]) -> None:
    print(f"\n{'phase':<14}{'server':<9}{'req/s':>9}{'µs CPU/req':>12}{'cores':>7}{'errors':>8}   granian ÷ uvicorn")
    for phase, by_server in results.items():
        medians: dict[str, tuple[float, float]] = {}
        for kind, rounds in by_server.items():
            rps = statistics.median(r["rps"] for r in rounds)
            cpu = statistics.median(r["cpu_us"] for r in rounds)
            medians[kind] = (rps, cpu)
            cores = statistics.median(r["cores"] for r in rounds)
            errors = sum(r["errors"] for r in rounds)
            ratio = ""
            if kind != "uvicorn" and "uvicorn" in medians:
                base_rps, base_cpu = medians["uvicorn"]
                ratio = f"   req/s x{rps / base_rps:.2f}, CPU/req x{cpu / base_cpu:.2f}"
            print(f"{phase:<14}{kind:<9}{rps:>9,.0f}{cpu:>12,.0f}{cores:>7.2f}{errors:>8.0f}{ratio}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="httpfloor-") as name:
        tmp = Path(name)
        if not args.database_url:
            args.database_url = f"sqlite+aiosqlite:///{tmp / 'floor.sqlite'}"
        for r in range(args.rounds):
            for kind in args.servers:
                for app in args.apps:
                    print(f"round {r + 1}: {kind} {app} ...", flush=True)
                    for phase, figures in (await measure(kind, app, args, tmp, f"r{r}{kind[0]}")).items():
                        results.setdefault(phase, {}).setdefault(kind, []).append(figures)
        tls = tls_check(tmp) if args.tls_check and "granian" in args.servers else {}
    show(results)
    for name, seen in tls.items():
        print(f"granian TLS, {name}: {seen}")
    return {"tls": tls, "clients": args.clients, "duration": args.duration, "rounds": args.rounds, "load_average": load_average(), "results": results}


@reports_machine
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.httpfloor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated: uvicorn,granian")
    parser.add_argument("--apps", default="minimal,api", help="comma-separated: minimal,api")
    parser.add_argument("--clients", type=int, default=16, help="keep-alive connections per phase")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per server (medians are printed)")
    parser.add_argument("--database-url", default="", help="database of the real application (default: a throwaway SQLite file)")
    parser.add_argument("--no-tls-check", dest="tls_check", action="store_false", help="skip the client certificate check")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    args.apps = [a for a in args.apps.split(",") if a]
    if unknown := set(args.servers) - set(SERVERS):
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    if "granian" in args.servers and importlib.util.find_spec("granian") is None:
        parser.error("granian is not installed: .venv/bin/pip install -e '.[bench]'")
    figures = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
