"""Where the scheduler's explanations are served: the protocol between the scheduler, which serves
them, and its clients (``kubectl dra``, the dashboard), which find the URL on the leader's Lease,
or, for an observer (which holds no Lease), in the kubeconfig context's extension
``KUBECONFIG_EXTENSION``: ``{"url": ..., "certificate-authority-data": ...}``."""

from __future__ import annotations

from urllib.parse import quote

SCHEDULER_LEASE_NAMESPACE = "kube-system"
SCHEDULER_LEASE_NAME = "dra-scheduler"
EXPLAIN_URL_ANNOTATION = "dra.example.com/explain-url"
EXPLANATION_API_VERSION = "explain.dra.example.com/v1"
KUBECONFIG_EXTENSION = "dra.example.com/scheduler"


def explain_path(namespace: str, name: str) -> str:
    """The path of one pod's explanation."""
    return f"/explain/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
