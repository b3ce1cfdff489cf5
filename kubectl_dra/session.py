"""What every ``kubectl dra`` command and the dashboard share: the kubeconfig context they run
with (:class:`Session`), errors in kubectl's words (:class:`CommandError`), and the way to the
scheduler's explanations (:func:`fetch_explanation`: its URL is given, or in the kubeconfig
context's extension ``dra.example.com/scheduler`` where an observing scheduler records itself,
or on the scheduler's Lease)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import httpx

from kube.client import KubeClient, resource_path
from kube.dra.explanations import EXPLAIN_URL_ANNOTATION, SCHEDULER_LEASE_NAME, SCHEDULER_LEASE_NAMESPACE, explain_path
from kube.dra.explanations import recorded_scheduler as recorded
from kube.errors import ApiError
from kube.kubeconfig import KubeconfigContext
from kube.objects import Obj

USER_AGENT = "kubectl-dra/0.1"
SCHEDULER_URL_ENV = "KUBECTL_DRA_SCHEDULER_URL"


class CommandError(Exception):
    """What went wrong, in kubectl's words (printed as is; exit code 1)."""


@dataclasses.dataclass
class Session:
    """The kubeconfig context a command runs with, and its API client."""

    context: KubeconfigContext
    namespace: str
    scheduler_url: str

    def client(self) -> KubeClient:
        return KubeClient.from_connection(self.context.connection, user_agent=USER_AGENT)

    def scheduler_client(self, url: str) -> KubeClient:
        """The scheduler's explanation port, with the same credentials as the API server (and the
        CA the kubeconfig's extension names for that URL, if any)."""
        connection = dataclasses.replace(self.context.connection, server=url)
        recorded = recorded_scheduler(self.context.extensions)
        if recorded is not None and recorded[0] == url and recorded[1] is not None:
            connection = dataclasses.replace(connection, ca_data=recorded[1], insecure_skip_tls_verify=False)
        return KubeClient.from_connection(connection, user_agent=USER_AGENT)


def recorded_scheduler(extensions: Mapping[str, Any]) -> tuple[str, bytes | None] | None:
    """The scheduler the kubeconfig context records (``kube.dra.explanations.recorded_scheduler``)."""
    try:
        return recorded(extensions)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


async def scheduler_url(session: Session, client: KubeClient) -> str:
    """The explanation URL: given, else the one the kubeconfig context records (an observer's),
    else the one the leading scheduler wrote on its Lease."""
    if session.scheduler_url:
        return session.scheduler_url.rstrip("/")
    recorded = recorded_scheduler(session.context.extensions)
    if recorded is not None:
        return recorded[0]
    lease_path = resource_path("coordination.k8s.io", "v1", "leases", SCHEDULER_LEASE_NAMESPACE, SCHEDULER_LEASE_NAME)
    hint = f"pass --scheduler-url or set {SCHEDULER_URL_ENV}"
    try:
        lease = await client.get(lease_path)
    except ApiError as exc:
        if exc.code in (403, 404):
            raise CommandError(f"cannot find the scheduler: {exc.message}; {hint}") from None
        raise
    url = ((lease.get("metadata") or {}).get("annotations") or {}).get(EXPLAIN_URL_ANNOTATION)
    if not (lease.get("spec") or {}).get("holderIdentity"):
        raise CommandError(f"no scheduler is leading (lease {SCHEDULER_LEASE_NAMESPACE}/{SCHEDULER_LEASE_NAME} has no holder); {hint}")
    if not url:
        raise CommandError(f"the leading scheduler does not serve explanations (start it with --explain-port); {hint}")
    return str(url).rstrip("/")


async def fetch_explanation(session: Session, client: KubeClient, namespace: str, name: str) -> Obj:
    """The scheduler's explanation of a pod (a PodExplanation), asked with the session's credentials."""
    url = await scheduler_url(session, client)
    async with session.scheduler_client(url) as scheduler:
        try:
            return await scheduler.get(explain_path(namespace, name))
        except (httpx.TransportError, OSError) as exc:
            raise CommandError(f"Unable to connect to the scheduler at {url}: {exc or type(exc).__name__}") from None
