"""The scheduler process: flags, logging, health endpoint, leader election, the scheduler."""

from __future__ import annotations

import argparse
import logging
import os

from kube.features import FeatureGates
from kube.process import add_connection_arguments, client_from_args, run_leader_elected, worker_main
from schedulers.allocator import AllocatorFeatures
from schedulers.binder import DEFAULT_BINDING_TIMEOUT
from schedulers.cycle import DEFAULT_FILTER_TIMEOUT, DEFAULT_NODES_TO_FIND
from schedulers.scheduler import Scheduler

log = logging.getLogger("schedulers")

LEASE_NAME = "dra-scheduler"
LEASE_NAMESPACE = "kube-system"


def build_parser() -> argparse.ArgumentParser:
    """Flags, each with an environment variable of the same meaning where one is common."""
    parser = argparse.ArgumentParser(prog="python -m schedulers", description="DRA-aware pod scheduler")
    add_connection_arguments(parser)
    parser.add_argument("--scheduler-name", default="default-scheduler", help="schedule pods with this spec.schedulerName")
    parser.add_argument("--feature-gates", default=os.environ.get("DRA_FEATURE_GATES", ""), help="Gate=true|false,... (DRA_FEATURE_GATES)")
    parser.add_argument("--log-level", default=os.environ.get("DRA_LOG_LEVEL", "info"), help="debug, info, warning, error (DRA_LOG_LEVEL)")
    parser.add_argument("--health-port", type=int, default=int(os.environ.get("DRA_HEALTH_PORT", "0")), help="serve /healthz here; 0: off")
    parser.add_argument("--identity", default="", help="leader election identity (default: host_pid_random)")
    parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds a standby waits before taking over")
    parser.add_argument("--no-leader-elect", action="store_true", help="run without leader election")
    parser.add_argument(
        "--nodes-to-find", type=int, default=DEFAULT_NODES_TO_FIND,
        help="stop filtering after this many feasible nodes (upstream's minimum for percentageOfNodesToScore)",
    )
    parser.add_argument("--qps", type=float, default=0, help="client-side rate limit for API requests; 0: none")
    parser.add_argument(
        "--filter-timeout", type=float, default=DEFAULT_FILTER_TIMEOUT,
        help="seconds one node's device search may take before the node counts as unschedulable "
        "(with the DRASchedulerFilterTimeout gate, on by default); 0: no limit",
    )
    parser.add_argument(
        "--binding-timeout", type=float, default=DEFAULT_BINDING_TIMEOUT,
        help="seconds a pod waits before binding for its devices' binding conditions (DRADeviceBindingConditions) before it is tried again",
    )
    return parser


async def run(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run until SIGTERM/SIGINT."""
    client = client_from_args(args, user_agent="dra-scheduler/0.1")
    features = AllocatorFeatures.from_gates(gates)

    def new_scheduler() -> Scheduler:
        filter_timeout = args.filter_timeout if args.filter_timeout > 0 and gates.enabled("DRASchedulerFilterTimeout") else None
        return Scheduler(
            client,
            scheduler_name=args.scheduler_name,
            features=features,
            nodes_to_find=args.nodes_to_find,
            filter_timeout=filter_timeout,
            binding_timeout=max(args.binding_timeout, 1.0),  # upstream's minimum
        )

    await run_leader_elected(
        client, args, lease_name=LEASE_NAME, lease_namespace=LEASE_NAMESPACE, new_worker=lambda: new_scheduler().run
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m schedulers``."""
    args = build_parser().parse_args(argv)
    return worker_main(args, lambda gates: run(args, gates))
