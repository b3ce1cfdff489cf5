"""``python -m app``: run the API server, or migrate its database."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from app.config import DEFAULT_DATABASE_URL, Settings, add_server_arguments, env, settings_from_args
from kube import compiled
from kube.features import FeatureGateError, FeatureGates
from kube.logs import setup_logging

log = logging.getLogger("app")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Kubernetes-compatible API server for resource.k8s.io/v1 (Dynamic Resource Allocation).",
    )
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve the Kubernetes API (the default command)")
    add_server_arguments(serve)
    migrate = sub.add_parser("migrate", help="create or upgrade the database schema (Alembic)")
    migrate.add_argument("--database-url", default=env("DRA_DATABASE_URL", DEFAULT_DATABASE_URL), help="database to migrate (DRA_DATABASE_URL)")
    migrate.add_argument("--revision", default="head", help="target Alembic revision (default: head)")
    serve_help = serve.format_help()
    parser.epilog = "serve (the default command) options:" + serve_help[serve_help.index("\noptions:") + len("\noptions:"):]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv.insert(0, "serve")
    args = parser.parse_args(argv)
    if args.command == "migrate":
        from app.storage.db import run_migrations

        setup_logging("info")
        try:
            run_migrations(args.database_url, args.revision)
        except Exception as exc:
            print(f"error: {_database_problem(args.database_url, exc)}", file=sys.stderr)
            return 3
        print(f"database schema is up to date ({args.revision})")
        return 0
    settings = settings_from_args(args)
    setup_logging(settings.log_level)
    try:
        FeatureGates.parse(settings.feature_gates)
    except FeatureGateError as exc:
        print(f"error: invalid --feature-gates: {exc}", file=sys.stderr)
        return 2
    from app.registry.runtimeconfig import RuntimeConfigError, enabled_kinds

    try:
        enabled_kinds(settings.runtime_config, FeatureGates.parse(settings.feature_gates))
    except RuntimeConfigError as exc:
        print(f"error: invalid --runtime-config: {exc}", file=sys.stderr)
        return 2
    from app.storage.cache import parse_watch_cache_sizes

    try:
        parse_watch_cache_sizes(settings.watch_cache_sizes)
    except ValueError as exc:
        print(f"error: invalid --watch-cache-sizes: {exc}", file=sys.stderr)
        return 2
    return serve_forever(settings)


def serve_forever(settings: Settings) -> int:
    import asyncio
    import contextlib
    from collections.abc import Iterator

    import uvicorn

    from app.filters.connections import IDLE_TIMEOUT
    from app.server import create_app_and_server
    from app.storage.db import DatabaseUnusable, SchemaOutOfDate, check_schema, create_engine, prepare_database
    from kube.listen import listen_error

    if problem := listen_error(settings.host, settings.port):
        print(f"error: {problem}", file=sys.stderr)
        return 1
    if problem := _missing_file(settings):
        print(f"error: {problem}", file=sys.stderr)
        return 2

    async def preflight() -> None:
        engine = create_engine(settings.database_url)
        try:
            await check_schema(engine, settings.database_url)
        finally:
            await engine.dispose()

    try:
        prepare_database(settings.database_url)
        asyncio.run(preflight())
    except (SchemaOutOfDate, DatabaseUnusable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    from app.tls import InsecureServingError, PeerCertificateProtocol, server_context

    try:
        ssl_context = server_context(settings)
        app, api_server = create_app_and_server(settings)
    except (InsecureServingError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        loop="uvloop",
        http=PeerCertificateProtocol,
        timeout_keep_alive=int(IDLE_TIMEOUT),
        # Clients talk to us directly; trusting X-Forwarded-* would only cost time per request.
        proxy_headers=False,
        lifespan="on",
    )
    config.load()
    # Our own context: uvicorn's cannot request client certificates without checking them.
    config.ssl = ssl_context
    class WatchEndingServer(uvicorn.Server):
        """Ends the open watches as it starts to shut down, and drops connections left idle: uvicorn
        waits for every response to finish and every connection to close before the application
        stops, and a watch never finishes, nor does a TLS close whose client does not answer its
        close_notify (the process sat out its caller's grace period and was killed, its database
        not closed). Requests in flight still finish."""

        async def shutdown(self, sockets: Any = None) -> None:
            api_server.storage.end_watches()
            dropping = asyncio.get_running_loop().create_task(self._drop_idle_connections())
            try:
                await super().shutdown(sockets)
            finally:
                dropping.cancel()

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises the signal it stopped on once shut down (exit 143 for SIGTERM);
            # kube-apiserver, shut down by its first SIGTERM or SIGINT, exits 0.
            with super().capture_signals():
                yield
                self._captured_signals.clear()

        async def _drop_idle_connections(self) -> None:
            while True:
                await asyncio.sleep(1.0)  # a client that answers closes its side well within this
                for connection in list(self.server_state.connections):
                    cycle = getattr(connection, "cycle", None)
                    if cycle is None or cycle.response_complete:
                        connection.transport.abort()

    server = WatchEndingServer(config)
    if stale := compiled.stale_build_warning():
        log.warning(stale)
    log.info("serving the Kubernetes API", extra={"listen": settings.listen, "https": ssl_context is not None, "database": _redact(settings.database_url)})
    server.run()
    return 0


# The flags naming files the server reads at start, by their Settings field.
FILE_FLAGS = {
    "tls_cert_file": "--tls-cert-file",
    "tls_private_key_file": "--tls-private-key-file",
    "client_ca_file": "--client-ca-file",
    "token_auth_file": "--token-auth-file",
    "service_account_signing_key_file": "--service-account-signing-key-file",
    "service_account_key_files": "--service-account-key-file",
}


def _missing_file(settings: Settings) -> str | None:
    """The first file a flag names that does not exist, said with its flag (ssl names no file when one is missing)."""
    import os

    for field, flag in FILE_FLAGS.items():
        value = getattr(settings, field)
        for path in value if isinstance(value, tuple) else (value,):
            if path and not os.path.exists(path):
                return f"{flag} {path}: no such file"
    return None


def application(argv: list[str]) -> Any:
    """The ASGI application ``serve`` runs for the serve flags ``argv``, its database made ready,
    for another ASGI server (``python -m bench.httpfloor`` runs it under granian)."""
    from app.server import create_app
    from app.storage.db import prepare_database

    parser = argparse.ArgumentParser(prog="python -m app serve")
    add_server_arguments(parser)
    settings = settings_from_args(parser.parse_args(argv))
    setup_logging(settings.log_level)
    prepare_database(settings.database_url)
    return create_app(settings)


def _database_problem(url: str, exc: Exception) -> str:
    """What its dialect says is wrong with the database at ``url``, given what using it raised."""
    from sqlalchemy.engine import make_url

    from app.storage.db import normalise_database_url
    from app.storage.dialects import dialect_for

    try:
        parsed = make_url(normalise_database_url(url))
        return dialect_for(parsed.get_backend_name()).explain(parsed, exc)
    except Exception:
        return f"the database {_redact(url)} cannot be used: {exc}"


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable>"


if __name__ == "__main__":
    raise SystemExit(main())
