"""The scheduler process: flags, logging, health endpoint, leader election, the scheduler."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from kube.delegation import DelegatedAuth
from kube.dra.explanations import SCHEDULER_LEASE_NAME, SCHEDULER_LEASE_NAMESPACE
from kube.features import FeatureGates, Gate
from kube.httpserve import is_loopback, serve_http, server_tls_context
from kube.process import client_from_args, connection_from_args, run_leader_elected, run_worker, worker_main, worker_parser
from kube.timeutil import duration_seconds
from schedulers.allocator import AllocatorFeatures
from schedulers.cycle import DEFAULT_FILTER_TIMEOUT, DEFAULT_NODES_TO_FIND
from schedulers.explain import ExplainLimits
from schedulers.explainserver import EXPLAIN_URL_ANNOTATION, ExplainServer
from schedulers.observer import ObserveError, Observer, client_ca, preflight, record_in_kubeconfig, serving_tls
from schedulers.plugins.dynamicresources_binding import DEFAULT_BINDING_TIMEOUT
from schedulers.scheduler import Scheduler

log = logging.getLogger("schedulers")

LEASE_NAME = SCHEDULER_LEASE_NAME
LEASE_NAMESPACE = SCHEDULER_LEASE_NAMESPACE
OBSERVER_PORT = 10260  # the explanation port of an observer started without --explain-port


def build_parser() -> argparse.ArgumentParser:
    """The common worker flags (kube.process) and the scheduler's own."""
    parser = worker_parser("python -m schedulers", "DRA-aware pod scheduler", leader_elected=True)
    parser.add_argument("--scheduler-name", default="default-scheduler", help="schedule pods with this spec.schedulerName")
    parser.add_argument(
        "--nodes-to-find", type=int, default=DEFAULT_NODES_TO_FIND,
        help="stop filtering after this many feasible nodes (upstream's minimum for percentageOfNodesToScore)",
    )
    parser.add_argument(
        "--filter-timeout", type=float, default=DEFAULT_FILTER_TIMEOUT,
        help="seconds one node's device search may take before the node counts as unschedulable "
        f"(with the {Gate.DRASchedulerFilterTimeout} gate, on by default); 0: no limit",
    )
    parser.add_argument(
        "--binding-timeout", type=float, default=DEFAULT_BINDING_TIMEOUT,
        help=f"seconds a pod waits before binding for its devices' binding conditions ({Gate.DRADeviceBindingConditions}) before it is tried again",
    )
    explain = parser.add_argument_group("explanations", "why pods wait, served to `kubectl dra` and the dashboard")
    explain.add_argument(
        "--explain-port", type=int, default=int(os.environ.get("DRA_EXPLAIN_PORT", "0")),
        help="serve explanations of pending pods here, for callers the API server authenticates and authorizes; 0: off (DRA_EXPLAIN_PORT)",
    )  # fmt: skip
    explain.add_argument("--explain-address", default="127.0.0.1", help="address to serve explanations on")
    explain.add_argument("--tls-cert-file", default="", help="serving certificate of the explanation port (without it: plain HTTP, loopback only)")
    explain.add_argument("--tls-private-key-file", default="", help="its private key")
    explain.add_argument("--client-ca-file", default="", help="CA whose client certificates name callers (the API server's --client-ca-file)")
    explain.add_argument("--explain-url", default="", help="URL written on the Lease for clients (default: from address and port)")
    explain.add_argument("--explain-seconds", type=float, default=ExplainLimits.seconds, help="time one explanation may take")
    explain.add_argument(
        "--authentication-token-webhook-cache-ttl", type=duration_seconds, default="10s", metavar="DURATION",
        help="how long callers' tokens, as the API server answered for them, are remembered (Go duration, default 10s)",
    )  # fmt: skip
    explain.add_argument(
        "--authorization-webhook-cache-authorized-ttl", type=duration_seconds, default="10s", metavar="DURATION",
        help="how long a caller's allowed request (SubjectAccessReview) is remembered (default 10s)",
    )  # fmt: skip
    explain.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl", type=duration_seconds, default="10s", metavar="DURATION",
        help="how long a caller's denied request is remembered (default 10s)",
    )  # fmt: skip
    observe = parser.add_argument_group(
        "observing", "explain and plan on a cluster another scheduler (kube-scheduler) places pods for: read-only, no leader election"
    )
    observe.add_argument("--observe", action="store_true", help="watch and explain only: never bind, write a claim, a Lease or an event")
    observe.add_argument(
        "--follow", action="append", default=[], metavar="SCHEDULER_NAME",
        help="explain the pods of this spec.schedulerName (repeatable; default: --scheduler-name)",
    )  # fmt: skip
    observe.add_argument("--as", dest="as_user", default="", metavar="USER", help="act as this user (impersonation), e.g. the read-only system:serviceaccount:kube-system:dra-observer")
    observe.add_argument("--as-group", action="append", default=[], metavar="GROUP", help="with --as: act with this group too (repeatable)")
    observe.add_argument(
        "--record-in-kubeconfig", action="store_true",
        help="write the explanation URL (and its certificate's CA) into --kubeconfig's current context, where kubectl dra finds it",
    )  # fmt: skip
    return parser


def check_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with the explanation flags, if anything."""
    if not args.observe and (args.follow or args.record_in_kubeconfig or args.as_user or args.as_group):
        return "--follow, --as, --as-group and --record-in-kubeconfig go with --observe"
    if args.as_group and not args.as_user:
        return "--as-group needs --as"
    if args.record_in_kubeconfig and not args.kubeconfig:
        return "--record-in-kubeconfig needs --kubeconfig"
    if not args.explain_port:
        return None
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        return "--tls-cert-file and --tls-private-key-file go together"
    if not args.tls_cert_file and not is_loopback(args.explain_address):
        return f"--explain-address {args.explain_address} without --tls-cert-file: plain HTTP is served on loopback addresses only"
    return None


def explain_url(args: argparse.Namespace) -> str:
    if args.explain_url:
        return str(args.explain_url)
    scheme = "https" if args.tls_cert_file else "http"
    host = args.explain_address if args.explain_address not in ("0.0.0.0", "::", "") else socket.gethostname()
    return f"{scheme}://{host}:{args.explain_port}"


async def run(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run until SIGTERM/SIGINT."""
    client = client_from_args(args, user_agent="dra-scheduler/0.1")
    features = AllocatorFeatures.from_gates(gates)

    explainer: ExplainServer | None = None
    served: asyncio.Server | None = None
    annotations: dict[str, str] = {}
    if args.explain_port:
        auth = DelegatedAuth(
            client,
            connection_from_args(args),
            token_ttl=args.authentication_token_webhook_cache_ttl,
            allowed_ttl=args.authorization_webhook_cache_authorized_ttl,
            denied_ttl=args.authorization_webhook_cache_unauthorized_ttl,
        )
        explainer = ExplainServer(auth, ExplainLimits(seconds=args.explain_seconds))
        tls = server_tls_context(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file) if args.tls_cert_file else None
        served = await serve_http(explainer.handle, args.explain_port, args.explain_address, tls)
        annotations[EXPLAIN_URL_ANNOTATION] = explain_url(args)
        log.info("serving explanations", extra={"url": annotations[EXPLAIN_URL_ANNOTATION]})

    def new_scheduler() -> Callable[[], Coroutine[Any, Any, None]]:
        filter_timeout = args.filter_timeout if args.filter_timeout > 0 and gates.enabled(Gate.DRASchedulerFilterTimeout) else None
        scheduler = Scheduler(
            client,
            scheduler_name=args.scheduler_name,
            features=features,
            nodes_to_find=args.nodes_to_find,
            filter_timeout=filter_timeout,
            binding_timeout=max(args.binding_timeout, 1.0),  # upstream's minimum
            pop_from_backoff=gates.enabled(Gate.SchedulerPopFromBackoffQ),
        )

        async def lead() -> None:
            if explainer is not None:
                explainer.scheduler = scheduler
            try:
                await scheduler.run()
            finally:
                if explainer is not None and explainer.scheduler is scheduler:
                    explainer.scheduler = None

        return lead

    try:
        await run_leader_elected(
            client, args, lease_name=LEASE_NAME, lease_namespace=LEASE_NAMESPACE, new_worker=new_scheduler, annotations=annotations
        )
    finally:
        if served is not None:
            served.close()


async def observe(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run as an observer (:mod:`schedulers.observer`) until SIGTERM/SIGINT; a cluster it cannot
    observe ends it with one error (exit code 1)."""
    client = client_from_args(args, user_agent="dra-observer/0.1")
    if args.as_user:
        client = client.impersonating(args.as_user, groups=tuple(args.as_group))
    filter_timeout = args.filter_timeout if args.filter_timeout > 0 and gates.enabled(Gate.DRASchedulerFilterTimeout) else None
    followed = args.follow or [args.scheduler_name]
    observer = Observer(
        client, followed=followed, features=AllocatorFeatures.from_gates(gates), nodes_to_find=args.nodes_to_find, filter_timeout=filter_timeout
    )
    try:
        await preflight(client, observer.cache)
    except ObserveError as exc:
        await client.close()
        raise SystemExit(f"error: {exc}") from None
    auth = DelegatedAuth(
        client, connection_from_args(args),
        token_ttl=args.authentication_token_webhook_cache_ttl,
        allowed_ttl=args.authorization_webhook_cache_authorized_ttl,
        denied_ttl=args.authorization_webhook_cache_unauthorized_ttl,
    )  # fmt: skip
    server = ExplainServer(auth, ExplainLimits(seconds=args.explain_seconds), check_pods=False)
    server.scheduler = observer  # answers "not synced yet" until its informers have listed
    port = args.explain_port or OBSERVER_PORT
    ca_pem: bytes | None = None
    if args.tls_cert_file:
        tls = server_tls_context(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    else:
        client_ca_pem = Path(args.client_ca_file).read_bytes() if args.client_ca_file else await client_ca(client)
        hosts = list(dict.fromkeys([args.explain_address if args.explain_address not in ("0.0.0.0", "::", "") else socket.gethostname(), "127.0.0.1", "localhost"]))
        tls, ca_pem = serving_tls(hosts, client_ca_pem)
    served = await serve_http(server.handle, port, args.explain_address, tls)
    url = args.explain_url or explain_url(argparse.Namespace(**{**vars(args), "explain_port": port, "tls_cert_file": "tls"}))
    if args.record_in_kubeconfig:
        context = record_in_kubeconfig(args.kubeconfig, url, ca_pem)
        log.info("recorded in the kubeconfig for kubectl dra", extra={"kubeconfig": args.kubeconfig, "context": context})
    log.info("serving explanations and what-if answers", extra={"url": url, "schedulers": followed})

    try:
        await run_worker(client, args, observer.run, name="observer", ready=lambda: all(i.has_synced for i in observer.cache.informers))
    finally:
        served.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m schedulers``."""
    args = build_parser().parse_args(argv)
    if args.observe:
        return worker_main(args, lambda gates: observe(args, gates), lambda: check_flags(args))
    return worker_main(args, lambda gates: run(args, gates), lambda: check_flags(args))
