"""``python -m kubeletsim``: simulate many kubelets with DRA drivers against an API server."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from kube.features import FeatureGates
from kube.process import client_from_args, run_worker, worker_main, worker_parser
from kubeletapi.layout import DEFAULT_ROOT_DIR, SocketPathTooLong, check_socket_path
from kubeletsim.identities import Identities, read_node_tokens
from kubeletsim.plugins.checkpoint import Checkpoint, CorruptCheckpoint
from kubeletsim.plugins.node import PluginSettings
from kubeletsim.profiles import NO_PROFILE, ProfileError, available_profiles, load_profiles
from kubeletsim.settings import Settings, Shard
from kubeletsim.shards import supervise
from kubeletsim.simulator import Simulator

log = logging.getLogger("kubeletsim")


def build_parser() -> argparse.ArgumentParser:
    """The common worker flags (not leader-elected: every simulator runs its own nodes) and the simulator's own."""
    parser = worker_parser(
        "python -m kubeletsim",
        "Simulate many kubelets (Node, heartbeat Lease, ResourceSlices from a device profile, "
        "pod admission with DRA claims, prepare/unprepare, pod lifecycle) in one process. "
        "Real DRA drivers register with node N in <root-dir>/N/plugins_registry.",
        leader_elected=False,
    )
    parser.add_argument("--nodes", type=int, default=10, help="number of simulated nodes (default 10): the whole range, also when sharded")
    parser.add_argument(
        "--shard", default=os.environ.get("DRA_KUBELETSIM_SHARD", ""),
        help="K/N: run only shard K (from 0) of N of the node range, a contiguous part of it; other processes run the "
        "other shards, each with its own nodes, Leases, ResourceSlices and pods (DRA_KUBELETSIM_SHARD)",
    )  # fmt: skip
    parser.add_argument(
        "--shards", type=int, default=int(os.environ.get("DRA_KUBELETSIM_SHARDS", "1")),
        help="run the node range as this many processes, each with --shard K/N and the other flags, and stop them "
        "together; /healthz answers for all (default 1: this process; DRA_KUBELETSIM_SHARDS)",
    )  # fmt: skip
    parser.add_argument(
        "--profile",
        default="gpu",
        help=f"device profile name or YAML path; several separated by commas (shipped: {', '.join(available_profiles())}); "
        f"{NO_PROFILE}: no built-in devices, only those of drivers that register",
    )
    parser.add_argument(
        "--root-dir", type=Path, default=Path(os.environ.get("DRA_KUBELET_ROOT_DIR", str(DEFAULT_ROOT_DIR))),
        help=f"the kubelet's --root-dir: node N's plugins_registry, plugins, pod-resources and DRA checkpoint are under "
        f"<dir>/N (default {DEFAULT_ROOT_DIR}; env DRA_KUBELET_ROOT_DIR)",
    )  # fmt: skip
    parser.add_argument("--node-prefix", default="sim-", help="node names are <prefix>0 .. <prefix>N-1 (default sim-)")
    parser.add_argument(
        "--max-pods",
        type=int,
        default=int(os.environ.get("DRA_MAX_PODS", "110")),
        help="pods one node can run, the nodes' `pods` capacity, as the kubelet's flag (default 110; env DRA_MAX_PODS)",
    )
    parser.add_argument(
        "--binding-delay", type=float, default=2.0,
        help="seconds until the simulated drivers report a device with binding conditions attached (all its binding conditions True; default 2)",
    )
    parser.add_argument(
        "--binding-fail", action="store_true", help="report the binding failure conditions True instead (the scheduler then releases the claim and retries)"
    )
    parser.add_argument("--lease-interval", type=float, default=10.0, help="seconds between node Lease renewals (default 10)")
    parser.add_argument(
        "--node-status-interval", type=float, default=Settings.node_status_interval, help="seconds between node status heartbeats (default 300, as upstream)"
    )
    parser.add_argument("--resync-interval", type=float, default=30.0, help="seconds between full re-checks (default 30)")
    parser.add_argument("--workers", type=int, default=64, help="concurrent reconcilers of each controller: nodes, slices, pods (default 64)")
    parser.add_argument(
        "--heartbeat-concurrency",
        type=int,
        default=0,
        help="Lease renewals (and node status heartbeats) in flight at once (default 0: scaled to the node count)",
    )
    parser.add_argument(
        "--node-token-file", default=os.environ.get("DRA_NODE_TOKEN_FILE", ""),
        help="token file (CSV token,user,...) with a system:node:NAME user per simulated node: each node then writes as "
        "its own kubelet; without it every write uses the simulator's own credentials (DRA_NODE_TOKEN_FILE)",
    )  # fmt: skip
    parser.add_argument(
        "--driver-service-account", default=os.environ.get("DRA_DRIVER_SERVICE_ACCOUNT", ""),
        help="NAMESPACE/NAME of the service account a node's DRA drivers write claim device status as, with a token "
        "bound to the node; empty: as the node itself (DRA_DRIVER_SERVICE_ACCOUNT)",
    )  # fmt: skip
    return parser


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the simulator's own flags, if anything."""
    if args.nodes < 0:
        return "--nodes must not be negative"
    if args.shards < 1:
        return "--shards must be at least 1"
    if args.shards > 1 and args.shard:
        return "--shard and --shards exclude each other: --shards N starts the N shards"
    try:
        shard = Shard.parse(args.shard) if args.shard else Shard()
    except ValueError as exc:
        return str(exc)
    if args.driver_service_account and not args.driver_service_account.partition("/")[2]:
        return "--driver-service-account must be NAMESPACE/NAME"
    if args.max_pods < 1:
        return "--max-pods must be at least 1"
    if args.binding_delay < 0:
        return "--binding-delay must not be negative"
    try:
        load_profiles(args.profile)
    except ProfileError as exc:
        return str(exc)
    plugins = PluginSettings(root=args.root_dir.absolute())
    for name in Settings(nodes=args.nodes, node_prefix=args.node_prefix, shard=shard).node_names:
        dirs = plugins.dirs(name)
        try:
            check_socket_path(dirs.pod_resources_socket)
            # As the kubelet does, refuse to start from a checkpoint that cannot be trusted.
            Checkpoint(dirs.checkpoint).load()
        except (SocketPathTooLong, CorruptCheckpoint) as exc:
            return f"--root-dir: {exc}"
    return None


async def run(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run the simulator until SIGINT/SIGTERM."""
    profile = load_profiles(args.profile)
    settings = Settings(
        nodes=args.nodes,
        node_prefix=args.node_prefix,
        shard=Shard.parse(args.shard) if args.shard else Shard(),
        lease_interval=args.lease_interval,
        node_status_interval=args.node_status_interval,
        resync_interval=args.resync_interval,
        workers=args.workers,
        heartbeat_concurrency=args.heartbeat_concurrency,
        max_pods=args.max_pods,
        binding_delay=args.binding_delay,
        binding_fail=args.binding_fail,
        plugins=PluginSettings(root=args.root_dir.absolute()),
    )
    # Keep a connection per request that may be in flight, so a busy simulator does not reconnect.
    client = client_from_args(args, user_agent="kubeletsim/0.1", max_idle_per_host=settings.connections())
    node_tokens = read_node_tokens(args.node_token_file) if args.node_token_file else {}
    namespace, _, account = args.driver_service_account.partition("/")
    identities = Identities(client, node_tokens, (namespace, account) if account else None)
    simulator = Simulator(client, profile, settings, gates, identities)
    log.info(
        "starting",
        extra={
            "server": client.server,
            "nodeIdentities": len(node_tokens),
            "nodes": len(settings.node_numbers),
            "shard": str(settings.shard),
            "firstNode": settings.node_names[0] if settings.node_names else None,
            "profile": profile.name,
            "drivers": list(profile.driver_names),
            "rootDir": str(settings.plugins.root),
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
    given = sys.argv[1:] if argv is None else argv
    if args.shard and not any(a == "--shards" or a.startswith("--shards=") for a in given):
        args.shards = 1  # one shard named (flag or DRA_KUBELETSIM_SHARD): DRA_KUBELETSIM_SHARDS is its parent's
    if args.shards > 1 and not args.shard:
        return worker_main(args, lambda _gates: _supervise(given, args), check=lambda: check(args))
    return worker_main(args, lambda gates: run(args, gates), check=lambda: check(args))


async def _supervise(argv: list[str], args: argparse.Namespace) -> None:
    code = await supervise(argv, args.shards, args.health_port)
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    sys.exit(main())
