"""What the controllers that keep an object in every namespace share (upstream's service account
controller and root CA publisher): the namespace informer they follow, and the refusals a create
in a namespace that is gone or going away answers with."""

from __future__ import annotations

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj

NAMESPACE_TERMINATING = "NamespaceTerminating"


def namespace_informer(client: KubeClient) -> Informer:
    return Informer(client, resource_path("", "v1", "namespaces"), name="namespaces")


def is_active(namespace: Obj | None) -> bool:
    return namespace is not None and (namespace.get("status") or {}).get("phase") == "Active"


def namespace_terminating(exc: ApiError) -> bool:
    """Whether a create was refused because its namespace is being deleted (upstream's
    HasStatusCause(err, NamespaceTerminatingCause))."""
    causes = (exc.details or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == NAMESPACE_TERMINATING for c in causes)
