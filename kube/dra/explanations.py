"""Where the scheduler's explanations are served: the protocol between the scheduler, which serves
them, and its clients (``kubectl dra``, the dashboard), which find the URL on the leader's Lease,
or, for an observer (which holds no Lease), in the kubeconfig context's extension
``KUBECONFIG_EXTENSION``: ``{"url": ..., "certificate-authority-data": ...}``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

SCHEDULER_LEASE_NAMESPACE = "kube-system"
SCHEDULER_LEASE_NAME = "dra-scheduler"
EXPLAIN_URL_ANNOTATION = "dra.example.com/explain-url"
EXPLANATION_API_VERSION = "explain.dra.example.com/v1"
KUBECONFIG_EXTENSION = "dra.example.com/scheduler"


def explain_path(namespace: str, name: str) -> str:
    """The path of one pod's explanation."""
    return f"/explain/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def recorded_scheduler(extensions: Mapping[str, Any]) -> tuple[str, bytes | None] | None:
    """The URL (and the CA of its certificate) a kubeconfig context's ``KUBECONFIG_EXTENSION``
    names, if it names one; ValueError when its CA is not base64."""
    extension = extensions.get(KUBECONFIG_EXTENSION)
    if not isinstance(extension, dict) or not extension.get("url"):
        return None
    url = str(extension["url"]).rstrip("/")
    ca = extension.get("certificate-authority-data")
    try:
        return url, base64.b64decode(ca, validate=True) if ca else None
    except (binascii.Error, TypeError, ValueError):
        raise ValueError(f"the kubeconfig's extension {KUBECONFIG_EXTENSION}: certificate-authority-data is not base64") from None
