"""The service account controller (upstream's pkg/controller/serviceaccount, in
kube-controller-manager): every active namespace has a ServiceAccount ``default``, made when the
namespace appears or becomes active and made again when it is deleted. Pods that name no account
run as it, and upstream's e2e framework waits for it in every test namespace."""

from __future__ import annotations

import logging

from controllers.namespaced import is_active, namespace_terminating
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj
from kube.objects import meta as metadata
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("service-account-controller")

# The accounts every namespace gets (upstream's DefaultServiceAccountsControllerOptions).
ACCOUNTS = ("default",)


class ServiceAccountsController:
    """A work queue of namespace names, fed by the namespace informer (adds and updates) and by
    deleted accounts; upstream runs one worker."""

    def __init__(self, client: KubeClient, namespaces: Informer, *, workers: int = 1) -> None:
        self.client = client
        self.namespaces = namespaces
        self.workers = workers
        self.accounts = Informer(client, resource_path("", "v1", "serviceaccounts"), name="serviceaccounts")
        self.queue: WorkQueue[str] = WorkQueue()
        namespaces.on_add(self._namespace_changed)
        namespaces.on_update(lambda _old, new: self._namespace_changed(new))
        self.accounts.on_delete(self._account_deleted)

    @property
    def informers(self) -> list[Informer]:
        return [self.accounts]

    def _namespace_changed(self, namespace: Obj) -> None:
        self.queue.add(str(metadata(namespace)["name"]))

    def _account_deleted(self, account: Obj) -> None:
        self.queue.add(str(metadata(account).get("namespace") or ""))

    async def process(self) -> None:
        await self.queue.run(self.sync, self.workers, log_failures(log))

    async def sync(self, namespace: str) -> None:
        """Create the accounts an active namespace lacks (a namespace going away is left alone)."""
        if not is_active(self.namespaces.get("", namespace)):
            return
        failures: list[ApiError] = []
        for name in ACCOUNTS:
            if self.accounts.get(namespace, name) is not None:
                continue
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
            try:
                await self.client.create(resource_path("", "v1", "serviceaccounts", namespace), body)
                log.info("created a service account", extra={"namespace": namespace, "account": name})
            except ApiError as exc:
                if exc.code != 409 and not namespace_terminating(exc):
                    failures.append(exc)
        if failures:
            raise failures[0]
