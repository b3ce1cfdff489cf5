"""The ConfigMap ``kube-system/extension-apiserver-authentication``: where upstream's components
(kube-scheduler, kube-controller-manager, aggregated API servers) read the CA that signs client
certificates, to authenticate callers of their own ports. kube-apiserver's cluster
authentication trust controller publishes it at start; so does this server, with the CA of
``--client-ca-file``. There is no request-header authentication here, so none of its keys."""

from __future__ import annotations

import logging
from pathlib import Path

from app.api.generic import GenericStore
from app.api.options import WriteOptions
from app.registry.core import configmap
from kube.errors import ApiError

log = logging.getLogger("app.authentication")
SYSTEM_MANAGER = WriteOptions(field_manager="kube-apiserver")
NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"


def wanted_data(client_ca_file: str) -> dict[str, str]:
    return {"client-ca-file": Path(client_ca_file).read_text()} if client_ca_file else {}


async def ensure_authentication_configmap(registry: GenericStore, client_ca_file: str) -> None:
    """Create the ConfigMap, or bring its data up to date (a new CA at restart)."""
    strategy = configmap.STRATEGY
    data = wanted_data(client_ca_file)
    stored = registry.storage.cached(strategy.qualified_resource, NAMESPACE, NAME)
    try:
        if stored is None:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data}
            await registry.create(strategy, NAMESPACE, body, SYSTEM_MANAGER)
            log.info("published the client CA", extra={"configMap": f"{NAMESPACE}/{NAME}"})
        elif (stored.obj.get("data") or {}) != data:
            body = stored.copy()
            body["data"] = data
            await registry.update(strategy, NAMESPACE, NAME, body, SYSTEM_MANAGER)
            log.info("updated the client CA", extra={"configMap": f"{NAMESPACE}/{NAME}"})
    except ApiError as exc:
        log.warning("could not publish the client CA: %s", exc)
