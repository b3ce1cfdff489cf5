"""The workload controllers together: they share the pod informer (the claim controller's) and
an index of pods by controlling owner, and the garbage collector reads their informers."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from controllers.daemonset import DaemonSetController
from controllers.deployment import DeploymentController
from controllers.garbagecollector import Collected
from controllers.job import JobController
from controllers.replicaset import ReplicaSetController
from controllers.statefulset import StatefulSetController
from controllers.ttlafterfinished import TTLAfterFinishedController
from controllers.workloads import OwnerIndexKey, controller_index_keys
from kube.client import KubeClient
from kube.indexer import Index
from kube.informer import Informer

# The service account of each controller under --use-service-account-credentials (upstream's names).
ACCOUNTS = {
    "replicasets": "replicaset-controller",
    "deployments": "deployment-controller",
    "jobs": "job-controller",
    "daemonsets": "daemon-set-controller",
    "statefulsets": "statefulset-controller",
    "ttl": "ttl-after-finished-controller",
}


class WorkloadControllers:
    """Every workload controller, each with its own client (``client_for(<ACCOUNTS key>)``)."""

    def __init__(self, client_for: Callable[[str], KubeClient], pods: Informer, *, workers: int = 4, watch_timeout_seconds: int | None = None) -> None:
        self.pods = pods
        self.pods_by_controller: Index[OwnerIndexKey] = Index(pods, controller_index_keys)
        self.replica_sets = ReplicaSetController(
            client_for("replicasets"), pods=pods, pods_by_controller=self.pods_by_controller, workers=workers, watch_timeout_seconds=watch_timeout_seconds
        )
        self.deployments = DeploymentController(
            client_for("deployments"), replica_sets=self.replica_sets.owners, pods=pods, pods_by_controller=self.pods_by_controller,
            workers=workers, watch_timeout_seconds=watch_timeout_seconds,
        )  # fmt: skip
        self.jobs = JobController(
            client_for("jobs"), pods=pods, pods_by_controller=self.pods_by_controller, workers=workers, watch_timeout_seconds=watch_timeout_seconds
        )
        self.ttl = TTLAfterFinishedController(client_for("ttl"), jobs=self.jobs.jobs)
        self.daemon_sets = DaemonSetController(
            client_for("daemonsets"), pods=pods, pods_by_controller=self.pods_by_controller, workers=workers, watch_timeout_seconds=watch_timeout_seconds
        )
        self.stateful_sets = StatefulSetController(
            client_for("statefulsets"), pods=pods, pods_by_controller=self.pods_by_controller, revisions=self.daemon_sets.revisions,
            revisions_by_namespace=self.daemon_sets.revisions_by_namespace, workers=workers, watch_timeout_seconds=watch_timeout_seconds,
        )  # fmt: skip

    @property
    def informers(self) -> list[Informer]:
        return [
            self.pods, self.replica_sets.replica_sets, self.deployments.deployments, self.jobs.jobs,
            self.daemon_sets.daemon_sets, self.daemon_sets.nodes, self.daemon_sets.revisions, self.stateful_sets.stateful_sets,
        ]  # fmt: skip

    @property
    def collected(self) -> list[Collected]:
        """What the garbage collector looks after besides pods, claims and events."""
        return [
            Collected("apps", "v1", "replicasets", "ReplicaSet", self.replica_sets.replica_sets),
            Collected("apps", "v1", "deployments", "Deployment", self.deployments.deployments),
            Collected("batch", "v1", "jobs", "Job", self.jobs.jobs),
            Collected("apps", "v1", "daemonsets", "DaemonSet", self.daemon_sets.daemon_sets),
            Collected("apps", "v1", "controllerrevisions", "ControllerRevision", self.daemon_sets.revisions),
            Collected("apps", "v1", "statefulsets", "StatefulSet", self.stateful_sets.stateful_sets),
        ]

    @property
    def processes(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        return [
            self.replica_sets.process, self.deployments.process, self.jobs.process, self.ttl.process, self.daemon_sets.process,
            self.stateful_sets.process,
        ]
