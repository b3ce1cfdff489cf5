"""``python -m kubeletsim``: simulate many kubelets with DRA drivers against an API server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from kube.client import KubeClient
from kube.features import FeatureGateError, FeatureGates
from kube.health import serve_health
from kube.logs import setup_logging
from kube.transport import LeanTransport
from kubeletsim.profiles import ProfileError, available_profiles, load_profiles
from kubeletsim.simulator import Settings, Simulator

log = logging.getLogger("kubeletsim")


def build_parser() -> argparse.ArgumentParser:
    """The command line; defaults for the server and gates come from DRA_SERVER and DRA_FEATURE_GATES."""
    parser = argparse.ArgumentParser(
        prog="python -m kubeletsim",
        description="Simulate many kubelets (Node, heartbeat Lease, ResourceSlices from a device profile, "
        "pod admission with DRA claims, prepare/unprepare, pod lifecycle) in one process.",
    )
    parser.add_argument("--server", default=os.environ.get("DRA_SERVER", "http://127.0.0.1:6443"), help="API server URL (env DRA_SERVER)")
    parser.add_argument("--nodes", type=int, default=10, help="number of simulated nodes (default 10)")
    parser.add_argument(
        "--profile",
        default="gpu",
        help=f"device profile name or YAML path; several separated by commas (shipped: {', '.join(available_profiles())})",
    )
    parser.add_argument("--node-prefix", default="sim-", help="node names are <prefix>0 .. <prefix>N-1 (default sim-)")
    parser.add_argument(
        "--max-pods",
        type=int,
        default=int(os.environ.get("DRA_MAX_PODS", "110")),
        help="pods one node can run, the nodes' `pods` capacity, as the kubelet's flag (default 110; env DRA_MAX_PODS)",
    )
    parser.add_argument(
        "--feature-gates",
        default=os.environ.get("DRA_FEATURE_GATES", ""),
        help="feature gates in upstream syntax, e.g. DRAReservedForWorkloads=true (env DRA_FEATURE_GATES)",
    )
    parser.add_argument("--lease-interval", type=float, default=10.0, help="seconds between node Lease renewals (default 10)")
    parser.add_argument("--node-status-interval", type=float, default=60.0, help="seconds between node status heartbeats (default 60)")
    parser.add_argument("--resync-interval", type=float, default=30.0, help="seconds between full re-checks (default 30)")
    parser.add_argument("--workers", type=int, default=64, help="concurrent pod/node reconcilers (default 64)")
    parser.add_argument(
        "--heartbeat-concurrency",
        type=int,
        default=0,
        help="Lease renewals (and node status heartbeats) in flight at once (default 0: scaled to the node count)",
    )
    parser.add_argument("--qps", type=float, default=0.0, help="client-side request rate limit (0 = none)")
    parser.add_argument("--healthz-port", type=int, default=0, help="serve GET /healthz on this port (0 = off)")
    parser.add_argument("--log-level", default=os.environ.get("DRA_LOG_LEVEL", "info"), choices=["debug", "info", "warning", "error"])
    return parser


async def run(args: argparse.Namespace) -> None:
    """Run the simulator until SIGINT/SIGTERM."""
    profile = load_profiles(args.profile)
    gates = FeatureGates.parse(args.feature_gates)
    settings = Settings(
        nodes=args.nodes,
        node_prefix=args.node_prefix,
        lease_interval=args.lease_interval,
        node_status_interval=args.node_status_interval,
        resync_interval=args.resync_interval,
        workers=args.workers,
        heartbeat_concurrency=args.heartbeat_concurrency,
        max_pods=args.max_pods,
    )
    # Keep a connection per request that may be in flight, so a busy simulator does not reconnect.
    transport = LeanTransport(max_idle_per_host=settings.connections())
    async with KubeClient(args.server, user_agent="kubeletsim/0.1", qps=args.qps or None, transport=transport) as client:
        simulator = Simulator(client, profile, settings, gates)
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, lambda: main.cancel() if main else None)
        healthz = await serve_health(args.healthz_port, simulator.ready.is_set, host="0.0.0.0") if args.healthz_port else None
        log.info(
            "starting",
            extra={
                "server": args.server,
                "nodes": args.nodes,
                "profile": profile.name,
                "drivers": list(profile.driver_names),
                "prefix": args.node_prefix,
                "maxPods": args.max_pods,
                "declaredFeatures": simulator.declared_features,
            },
        )
        try:
            await simulator.run()
        except asyncio.CancelledError:
            log.info("stopping")
        finally:
            if healthz is not None:
                healthz.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    # httpx logs every request at INFO; at simulator rates that drowns everything else.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.nodes < 0:
        log.error("--nodes must not be negative")
        return 2
    if args.max_pods < 1:
        log.error("--max-pods must be at least 1")
        return 2
    try:
        load_profiles(args.profile)
        FeatureGates.parse(args.feature_gates)
    except (ProfileError, FeatureGateError) as exc:
        log.error(str(exc))
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
