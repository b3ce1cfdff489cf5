"""The controller process: flags, logging, health endpoint, leader election, and the claim,
garbage collection, device taint eviction, resource quota, (gate DRAResourcePoolStatus) pool
status and workload controllers, and kube-controller-manager's service account controller and root
CA publisher."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from controllers.credentials import ServiceAccountClients
from controllers.devicetainteviction import DEFAULT_RULE_STATUS_PERIOD, DeviceTaintEvictionController
from controllers.garbagecollector import GarbageCollector
from controllers.namespaced import namespace_informer
from controllers.podgroups import PodGroupController
from controllers.resourceclaim import ClaimController
from controllers.resourcepoolstatus import PoolStatusController
from controllers.resourcequota import DEFAULT_WORKERS as QUOTA_WORKERS
from controllers.resourcequota import ResourceQuotaController
from controllers.rootcacertpublisher import RootCACertPublisher, root_ca
from controllers.serviceaccounts import ServiceAccountsController
from controllers.workloadcontrollers import ACCOUNTS as WORKLOAD_ACCOUNTS
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient
from kube.dra import podgroups
from kube.features import FeatureGates, Gate
from kube.informer import run_with_informers
from kube.process import client_from_args, connection_from_args, run_leader_elected, worker_main, worker_parser
from kube.timeutil import duration_seconds

log = logging.getLogger("controllers")

LEASE_NAME = "dra-controller"
LEASE_NAMESPACE = "kube-system"
# The service account of each controller under --use-service-account-credentials: upstream's names,
# which its bootstrap policy binds the controllers' roles to.
ACCOUNTS = {
    "claims": "resource-claim-controller",
    "gc": "generic-garbage-collector",
    "eviction": "device-taint-eviction-controller",
    "pool-status": "resourcepoolstatusrequest-controller",
    "quota": "resourcequota-controller",
    "service-accounts": "service-account-controller",
    "root-ca": "root-ca-cert-publisher",
    **WORKLOAD_ACCOUNTS,
}


def build_parser() -> argparse.ArgumentParser:
    """The common worker flags, each with an environment variable of the same meaning, and the controllers' own."""
    parser = worker_parser("python -m controllers", "DRA claim controller and garbage collector", leader_elected=True)
    parser.add_argument("--workers", type=int, default=16, help="concurrent syncs (each waits on API round trips, so more than cores)")
    parser.add_argument(
        "--device-taint-rule-status-period", type=float, default=DEFAULT_RULE_STATUS_PERIOD,
        help="seconds between DeviceTaintRule status updates while an eviction runs (upstream: 10)",
    )  # fmt: skip
    parser.add_argument(
        "--resource-quota-sync-period", type=duration_seconds, default="5m0s",
        help="how often every quota's use is counted again (Go duration, as upstream's flag; 0 = never)",
    )  # fmt: skip
    parser.add_argument("--concurrent-resource-quota-syncs", type=int, default=QUOTA_WORKERS, help="quotas counted at once (upstream's flag)")
    parser.add_argument(
        "--use-service-account-credentials", action="store_true",
        help="each controller as its own service account kube-system/<controller> (made when missing, tokens renewed), as "
        "kube-controller-manager's flag of the same name does; what upstream kube-apiserver's bootstrap RBAC grants",
    )  # fmt: skip
    parser.add_argument(
        "--root-ca-file", default="",
        help="the CA published in every namespace's ConfigMap kube-root-ca.crt (default: the CA of the --kubeconfig)",
    )  # fmt: skip
    return parser


def new_controllers(
    client: KubeClient, args: argparse.Namespace, gates: FeatureGates, clients: dict[str, KubeClient] | None = None
) -> Callable[[], Coroutine[Any, Any, None]]:
    """Fresh controllers sharing the pod and claim informers, for one leadership term; each
    controller's requests go through ``clients[<ACCOUNTS key>]`` when given, else ``client``."""
    clients = clients or {}
    claims = ClaimController(clients.get("claims", client), workers=args.workers)
    workloads = WorkloadControllers(lambda key: clients.get(key, client), claims.pods, workers=args.workers)
    collector = GarbageCollector(
        clients.get("gc", client), pods=claims.pods, claims=claims.claims, claims_by_owner=claims.claims_by_owner, workers=args.workers, more=workloads.collected
    )
    quotas = ResourceQuotaController(
        clients.get("quota", client), pods=claims.pods, claims=claims.claims, sync_period=args.resource_quota_sync_period, workers=args.concurrent_resource_quota_syncs
    )  # fmt: skip
    # kube-controller-manager's: every namespace's default ServiceAccount and kube-root-ca.crt.
    namespaces = namespace_informer(client)
    accounts = ServiceAccountsController(clients.get("service-accounts", client), namespaces)
    publisher = RootCACertPublisher(clients.get("root-ca", client), namespaces, root_ca(args.root_ca_file, connection_from_args(args)))
    informers = [*claims.informers, *collector.informers, namespaces, *accounts.informers, *publisher.informers, *workloads.informers]
    work = [claims.process, collector.process, quotas.process, accounts.process, publisher.process, *workloads.processes]
    # Upstream starts the eviction controller only with DynamicResourceAllocation and DRADeviceTaints,
    # and watches DeviceTaintRules only with DRADeviceTaintRules.
    if gates.enabled(Gate.DynamicResourceAllocation) and gates.enabled(Gate.DRADeviceTaints):
        evictor = DeviceTaintEvictionController(
            clients.get("eviction", client), pods=claims.pods, claims=claims.claims, pods_by_claim=claims.pods_by_claim,
            rules_enabled=gates.enabled(Gate.DRADeviceTaintRules), rule_status_period=args.device_taint_rule_status_period,
        )  # fmt: skip
        informers += evictor.informers
        work.append(evictor.process)
    if gates.enabled(Gate.DRAResourcePoolStatus):
        # Its own informers start once the server is known to serve the requests (see process).
        pool_status = PoolStatusController(clients.get("pool-status", client), claims.claims, rules_enabled=gates.enabled(Gate.DRADeviceTaintRules))
        work.append(pool_status.process)

    async def run_all() -> None:
        if gates.enabled(Gate.GenericWorkload):
            # PodGroups need the gate and a --runtime-config that serves scheduling.k8s.io/v1beta1.
            if await client.serves(podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL):
                groups = new_pod_group_controller(claims, collector, args, gates)
                informers.extend(groups.informers)
                work.append(groups.process)
            else:
                log.warning("the server does not serve %s/%s %s; PodGroups are not looked after", podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL)
        await run_with_informers(informers, *(w() for w in work))

    return run_all


def new_pod_group_controller(claims: ClaimController, collector: GarbageCollector, args: argparse.Namespace, gates: FeatureGates) -> PodGroupController:
    """The PodGroup controller, sharing the claim controller's informers; its claims need DRAWorkloadResourceClaims."""
    groups = PodGroupController(
        claims.client, pods=claims.pods, claims=claims.claims, templates=claims.templates, claims_by_owner=claims.claims_by_owner,
        claims_by_reserved=claims.claims_by_reserved, claim_queue=claims.queue,
        claims_enabled=gates.enabled(Gate.DRAWorkloadResourceClaims), workers=args.workers,
    )  # fmt: skip
    collector.owner_kinds[(podgroups.GROUP, podgroups.KIND)] = (podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL, True)
    groups.groups.on_delete(collector.owner_deleted)
    if groups.claims_enabled:
        claims.groups = groups
    return groups


async def run(args: argparse.Namespace, gates: FeatureGates) -> None:
    """Run until SIGTERM/SIGINT."""
    client = client_from_args(args, user_agent="dra-controller/0.1")
    if not args.use_service_account_credentials:
        await run_leader_elected(
            client, args, lease_name=LEASE_NAME, lease_namespace=LEASE_NAMESPACE, new_worker=lambda: new_controllers(client, args, gates)
        )
        return
    accounts = ServiceAccountClients(client, connection_from_args(args), user_agent="dra-controller/0.1", qps=args.qps or None)
    try:
        # Only the accounts of the controllers that run (as kube-controller-manager makes them).
        wanted = {"claims", "gc", "quota", "service-accounts", "root-ca", *WORKLOAD_ACCOUNTS}
        if gates.enabled(Gate.DynamicResourceAllocation) and gates.enabled(Gate.DRADeviceTaints):
            wanted.add("eviction")
        if gates.enabled(Gate.DRAResourcePoolStatus):
            wanted.add("pool-status")
        clients = {key: await accounts.client(ACCOUNTS[key]) for key in sorted(wanted)}
        renewals = asyncio.create_task(accounts.renew_forever(), name="token-renewal")
        try:
            await run_leader_elected(
                client, args, lease_name=LEASE_NAME, lease_namespace=LEASE_NAMESPACE, new_worker=lambda: new_controllers(client, args, gates, clients)
            )
        finally:
            renewals.cancel()
    finally:
        await accounts.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m controllers``."""
    args = build_parser().parse_args(argv)
    return worker_main(args, lambda gates: run(args, gates))
