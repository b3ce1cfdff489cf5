"""The scaffolding every leader-elected worker process shares: gates, logging, signals, health."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from kube.client import KubeClient
from kube.features import FeatureGateError, FeatureGates
from kube.health import serve_health
from kube.heap import keep_heap_frozen
from kube.leaderelection import run_while_leading
from kube.logs import setup_logging

log = logging.getLogger("process")

NewWorker = Callable[[], Callable[[], Coroutine[Any, Any, Any]]]


async def run_leader_elected(client: KubeClient, args: argparse.Namespace, *, lease_name: str, lease_namespace: str, new_worker: NewWorker) -> None:
    """Serve /healthz (``args.health_port``), run a fresh worker per leadership term until
    SIGTERM/SIGINT, then close the client. ``args`` carries the common worker flags
    (identity, lease_duration, no_leader_elect, health_port)."""
    health = await serve_health(args.health_port) if args.health_port else None
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)
    # Informer caches are most of the heap; keep them out of the cycle collector's scans.
    heap = loop.create_task(keep_heap_frozen(), name="gc-freeze")
    try:
        await run_while_leading(
            client, name=lease_name, namespace=lease_namespace, identity=args.identity, lease_duration=args.lease_duration,
            new_worker=new_worker, leader_elect=not args.no_leader_elect,
        )  # fmt: skip
    except asyncio.CancelledError:
        logging.getLogger(lease_name).info("shutting down")
    finally:
        heap.cancel()
        if health is not None:
            health.close()
        await client.close()


def worker_main(args: argparse.Namespace, run: Callable[[FeatureGates], Coroutine[Any, Any, None]]) -> int:
    """Set up logging, parse ``args.feature_gates`` (exit 2 when invalid) and run ``run(gates)``."""
    setup_logging(args.log_level)
    # httpx logs every request at info: far too much for a process doing hundreds per second.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        gates = FeatureGates.parse(args.feature_gates)
    except FeatureGateError as exc:
        log.error("invalid --feature-gates", extra={"error": str(exc)})
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(gates))
    return 0
