"""``python -m kubeletsim``: simulate many kubelets with DRA drivers against an API server."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from kube.client import KubeClient
from kube.features import FeatureGates
from kube.process import run_worker, worker_main, worker_parser
from kube.transport import LeanTransport
from kubeletsim.profiles import ProfileError, available_profiles, load_profiles
from kubeletsim.settings import Settings
from kubeletsim.simulator import Simulator

log = logging.getLogger("kubeletsim")


def build_parser() -> argparse.ArgumentParser:
    """The common worker flags (not leader-elected: every simulator runs its own nodes) and the simulator's own."""
    parser = worker_parser(
        "python -m kubeletsim",
        "Simulate many kubelets (Node, heartbeat Lease, ResourceSlices from a device profile, "
        "pod admission with DRA claims, prepare/unprepare, pod lifecycle) in one process.",
        leader_elected=False,
    )
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
    parser.add_argument("--lease-interval", type=float, default=10.0, help="seconds between node Lease renewals (default 10)")
    parser.add_argument("--node-status-interval", type=float, default=60.0, help="seconds between node status heartbeats (default 60)")
    parser.add_argument("--resync-interval", type=float, default=30.0, help="seconds between full re-checks (default 30)")
    parser.add_argument("--workers", type=int, default=64, help="concurrent reconcilers of each controller: nodes, slices, pods (default 64)")
    parser.add_argument(
        "--heartbeat-concurrency",
        type=int,
        default=0,
        help="Lease renewals (and node status heartbeats) in flight at once (default 0: scaled to the node count)",
    )
    return parser


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the simulator's own flags, if anything."""
    if args.nodes < 0:
        return "--nodes must not be negative"
    if args.max_pods < 1:
        return "--max-pods must be at least 1"
    try:
        load_profiles(args.profile)
    except ProfileError as exc:
        return str(exc)
    return None


async def run(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run the simulator until SIGINT/SIGTERM."""
    profile = load_profiles(args.profile)
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
    client = KubeClient(args.server, user_agent="kubeletsim/0.1", qps=args.qps or None, transport=transport)
    simulator = Simulator(client, profile, settings, gates)
    log.info(
        "starting",
        extra={
            "server": args.server,
            "nodes": args.nodes,
            "profile": profile.name,
            "drivers": list(profile.driver_names),
            "prefix": args.node_prefix,
            "maxPods": args.max_pods,
            "declaredFeatures": simulator.node_controller.declared_features,
        },
    )
    # /healthz answers on every interface, so that a probe from outside the simulator's host reaches it.
    await run_worker(client, args, simulator.run, name="kubeletsim", ready=simulator.ready.is_set, health_host="0.0.0.0")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = build_parser().parse_args(argv)
    return worker_main(args, lambda gates: run(args, gates), check=lambda: check(args))


if __name__ == "__main__":
    sys.exit(main())
