"""The root CA certificate publisher (upstream's pkg/controller/certificates/rootcacertpublisher,
in kube-controller-manager): every namespace has a ConfigMap ``kube-root-ca.crt`` whose ``ca.crt``
is the CA that signs the API server's serving certificate, for pods to verify the server with (a
projected service account volume mounts it). It is made when missing and put back when deleted or
changed; an active namespace is looked at again whenever it changes."""

from __future__ import annotations

import logging
from pathlib import Path

from controllers.namespaced import is_active, namespace_terminating
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.kubeconfig import Connection
from kube.objects import Obj
from kube.objects import meta as metadata
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("root-ca-cert-publisher")

NAME = "kube-root-ca.crt"
KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
# Upstream's description of the ConfigMap, word for word: clients may show it.
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal "
    "service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
)


def root_ca(root_ca_file: str, connection: Connection) -> str:
    """``--root-ca-file``'s certificates, else the CA the controller itself trusts the server by
    (its kubeconfig's), as kube-controller-manager chooses; empty when there is neither."""
    if root_ca_file:
        return Path(root_ca_file).read_text()
    return connection.ca_data.decode() if connection.ca_data else ""


class RootCACertPublisher:
    """A work queue of namespace names, fed by the namespace informer and by changes to the
    ConfigMaps of that name; upstream runs one worker."""

    def __init__(self, client: KubeClient, namespaces: Informer, ca: str, *, workers: int = 1) -> None:
        self.client = client
        self.namespaces = namespaces
        self.ca = ca
        self.workers = workers
        # Only the ConfigMaps it keeps: the informer holds nothing else.
        self.config_maps = Informer(client, resource_path("", "v1", "configmaps"), field_selector=f"metadata.name={NAME}", name="configmaps")
        self.queue: WorkQueue[str] = WorkQueue()
        namespaces.on_add(self._namespace_added)
        namespaces.on_update(lambda _old, new: self._namespace_updated(new))
        self.config_maps.on_update(lambda _old, new: self._config_map_changed(new))
        self.config_maps.on_delete(self._config_map_changed)

    @property
    def informers(self) -> list[Informer]:
        return [self.config_maps]

    def _namespace_added(self, namespace: Obj) -> None:
        self.queue.add(str(metadata(namespace)["name"]))

    def _namespace_updated(self, namespace: Obj) -> None:
        if is_active(namespace):
            self.queue.add(str(metadata(namespace)["name"]))

    def _config_map_changed(self, config_map: Obj) -> None:
        if metadata(config_map).get("name") == NAME:
            self.queue.add(str(metadata(config_map).get("namespace") or ""))

    async def process(self) -> None:
        await self.queue.run(self.sync, self.workers, log_failures(log))

    async def sync(self, namespace: str) -> None:
        data = {KEY: self.ca}
        current = self.config_maps.get(namespace, NAME)
        if current is None:
            body = {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": namespace, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": data,
            }  # fmt: skip
            try:
                await self.client.create(resource_path("", "v1", "configmaps", namespace), body)
            except ApiError as exc:
                # A namespace that is gone or going away needs none; one made meanwhile is looked
                # at again after the back-off (this failure), as upstream does.
                if exc.code != 404 and not namespace_terminating(exc):
                    raise
            return
        annotations = metadata(current).get("annotations") or {}
        if current.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        changed = {**current, "data": data, "metadata": {**metadata(current), "annotations": {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}}}
        await self.client.update(resource_path("", "v1", "configmaps", namespace, NAME), changed)
        log.info("put back the root CA", extra={"namespace": namespace})
