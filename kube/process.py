"""The scaffolding every worker process shares: common flags, logging, gates, signals, health, heap freezing.

``worker_parser`` declares the flags every worker has; ``worker_main`` sets up logging and
parses the gates; ``run_worker`` runs one worker until SIGTERM/SIGINT, and
``run_leader_elected`` runs one per leadership term.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from kube.client import KubeClient
from kube.features import FeatureGateError, FeatureGates
from kube.health import serve_health
from kube.heap import keep_heap_frozen
from kube.kubeconfig import Connection, load_kubeconfig
from kube.leaderelection import run_while_leading
from kube.logs import setup_logging

log = logging.getLogger("process")

NewWorker = Callable[[], Callable[[], Coroutine[Any, Any, Any]]]

LOG_LEVELS = ("debug", "info", "warning", "error")
# Old spellings still accepted so that existing command lines keep working, but not shown in --help.
HIDDEN_ALIASES = frozenset({"--healthz-port"})


class _HelpFormatter(argparse.HelpFormatter):
    """Leaves the hidden aliases out of --help."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [o for o in action.option_strings if o not in HIDDEN_ALIASES]
        if shown != action.option_strings:
            action = copy.copy(action)
            action.option_strings = shown
        return super()._format_action_invocation(action)


DEFAULT_SERVER = "http://127.0.0.1:6443"


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig (server, CA, credentials) and --server (overrides the kubeconfig's server)."""
    parser.add_argument(
        "--kubeconfig", default=os.environ.get("DRA_KUBECONFIG", ""),
        help="kubeconfig with the server, its CA and this worker's credentials (DRA_KUBECONFIG)",
    )  # fmt: skip
    parser.add_argument(
        "--server", default=os.environ.get("DRA_SERVER", ""),
        help=f"API server URL; overrides the kubeconfig's (DRA_SERVER; default without a kubeconfig: {DEFAULT_SERVER})",
    )  # fmt: skip


def connection_from_args(args: argparse.Namespace) -> Connection:
    """The server and credentials the connection flags name."""
    if args.kubeconfig:
        connection = load_kubeconfig(args.kubeconfig)
        if args.server:
            connection = dataclasses.replace(connection, server=args.server)
        return connection
    return Connection(args.server or DEFAULT_SERVER)


def client_from_args(args: argparse.Namespace, *, user_agent: str, max_idle_per_host: int | None = None) -> KubeClient:
    """The worker's client, as the connection flags and --qps say."""
    return KubeClient.from_connection(connection_from_args(args), user_agent=user_agent, qps=args.qps or None, max_idle_per_host=max_idle_per_host)


def worker_parser(prog: str, description: str, *, leader_elected: bool) -> argparse.ArgumentParser:
    """A parser with the flags every worker has (with their environment variables), and the
    leader election flags when ``leader_elected``; the worker adds its own."""
    parser = argparse.ArgumentParser(prog=prog, description=description, formatter_class=_HelpFormatter)
    add_connection_arguments(parser)
    parser.add_argument("--feature-gates", default=os.environ.get("DRA_FEATURE_GATES", ""), help="Gate=true|false,... (DRA_FEATURE_GATES)")
    parser.add_argument("--log-level", default=os.environ.get("DRA_LOG_LEVEL", "info"), choices=LOG_LEVELS, help="debug, info, warning, error (DRA_LOG_LEVEL)")
    parser.add_argument(
        "--health-port", "--healthz-port", dest="health_port", type=int, default=int(os.environ.get("DRA_HEALTH_PORT", "0")),
        help="serve /healthz here; 0: off (DRA_HEALTH_PORT)",
    )  # fmt: skip
    parser.add_argument("--qps", type=float, default=0.0, help="client-side rate limit for API requests; 0: none")
    if leader_elected:
        parser.add_argument("--identity", default="", help="leader election identity (default: host_pid_random)")
        parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds a standby waits before taking over")
        parser.add_argument("--no-leader-elect", action="store_true", help="run without leader election")
    return parser


async def run_worker(
    client: KubeClient,
    args: argparse.Namespace,
    work: Callable[[], Coroutine[Any, Any, Any]],
    *,
    name: str,
    ready: Callable[[], bool] = lambda: True,
    health_host: str = "127.0.0.1",
) -> None:
    """Serve /healthz on ``args.health_port`` (200 once ``ready()``), keep the heap frozen and run
    ``work()`` until it ends or SIGTERM/SIGINT arrives; then close the client."""
    health = await serve_health(args.health_port, ready, host=health_host) if args.health_port else None
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        with contextlib.suppress(NotImplementedError):  # no signal handlers on this platform
            loop.add_signal_handler(sig, main_task.cancel)
    # Informer caches are most of the heap; keep them out of the cycle collector's scans.
    heap = loop.create_task(keep_heap_frozen(), name="gc-freeze")
    try:
        await work()
    except asyncio.CancelledError:
        logging.getLogger(name).info("shutting down")
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(sig)
        heap.cancel()
        if health is not None:
            health.close()
        await client.close()


async def run_leader_elected(
    client: KubeClient, args: argparse.Namespace, *, lease_name: str, lease_namespace: str, new_worker: NewWorker, annotations: dict[str, str] | None = None
) -> None:
    """``run_worker`` with a fresh worker per leadership term of the Lease ``lease_namespace/lease_name``
    (which carries ``annotations`` while this process leads).
    ``args`` carries the common worker flags (identity, lease_duration, no_leader_elect, health_port)."""

    async def lead() -> None:
        await run_while_leading(
            client, name=lease_name, namespace=lease_namespace, identity=args.identity, lease_duration=args.lease_duration,
            new_worker=new_worker, leader_elect=not args.no_leader_elect, annotations=annotations,
        )  # fmt: skip

    await run_worker(client, args, lead, name=lease_name)


def worker_main(args: argparse.Namespace, run: Callable[[FeatureGates], Coroutine[Any, Any, None]], check: Callable[[], str | None] = lambda: None) -> int:
    """Set up logging, check the flags (``check()`` says what is wrong, if anything) and parse
    ``args.feature_gates`` (exit 2 when either fails), then run ``run(gates)``."""
    setup_logging(args.log_level)
    # httpx logs every request at info: far too much for a process doing hundreds per second.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    problem = check()
    if problem:
        log.error(problem)
        return 2
    try:
        gates = FeatureGates.parse(args.feature_gates)
    except FeatureGateError as exc:
        log.error("invalid --feature-gates", extra={"error": str(exc)})
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(gates))
    return 0
