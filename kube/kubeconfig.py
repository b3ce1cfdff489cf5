"""Kubeconfig files: which server to talk to, how to trust it, and who to be there.

``load_kubeconfig`` reads the current context (or a named one) the way kubectl does for the
fields this project uses: the cluster's ``server``, ``certificate-authority(-data)`` and
``insecure-skip-tls-verify``, and the user's client certificate and key (files or data), bearer
``token`` or ``tokenFile``.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class KubeconfigError(ValueError):
    """A kubeconfig this project cannot use."""


@dataclass(frozen=True)
class Connection:
    """Everything a client needs to reach one API server as one user."""

    server: str
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    client_cert_data: bytes | None = None
    client_key_data: bytes | None = None
    token: str | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context for an https server (None for http)."""
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context()
        if self.insecure_skip_tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            context.load_verify_locations(cadata=self.ca_data.decode("ascii"))
        if self.client_cert_data is not None and self.client_key_data is not None:
            # ssl loads a certificate chain from files only; a private directory holds them briefly.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
                cert.write_bytes(self.client_cert_data)
                fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(self.client_key_data)
                context.load_cert_chain(cert, key)
        return context

    def with_token(self, token: str) -> Connection:
        """The same server as another user, named by a bearer token."""
        return Connection(self.server, self.ca_data, self.insecure_skip_tls_verify, None, None, token)


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(what)
            return value if isinstance(value, dict) else {}
    raise KubeconfigError(f"no {what} named {name!r}")


def _data(section: dict[str, Any], data_key: str, file_key: str, base: Path) -> bytes | None:
    if section.get(data_key):
        return base64.b64decode(section[data_key])
    if section.get(file_key):
        path = Path(section[file_key])
        return (path if path.is_absolute() else base / path).read_bytes()
    return None


def load_kubeconfig(path: str | Path, context: str = "") -> Connection:
    """The connection a kubeconfig's current (or named) context describes."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"{path}: {exc}") from exc
    name = context or config.get("current-context") or ""
    if not name:
        raise KubeconfigError(f"{path}: no current-context")
    ctx = _named(config.get("contexts"), name, "context")
    cluster = _named(config.get("clusters"), str(ctx.get("cluster") or ""), "cluster")
    user = _named(config.get("users"), str(ctx.get("user") or ""), "user") if ctx.get("user") else {}
    base = path.parent
    token = user.get("token") or None
    if token is None and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    server = str(cluster.get("server") or "")
    if not server:
        raise KubeconfigError(f"{path}: cluster of context {name!r} has no server")
    return Connection(
        server=server,
        ca_data=_data(cluster, "certificate-authority-data", "certificate-authority", base),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        client_cert_data=_data(user, "client-certificate-data", "client-certificate", base),
        client_key_data=_data(user, "client-key-data", "client-key", base),
        token=token,
    )


def kubeconfig_text(server: str, ca_pem: bytes | None, *, cert_pem: bytes | None = None, key_pem: bytes | None = None, token: str | None = None, user: str = "admin", namespace: str = "default") -> str:
    """A kubeconfig with one cluster, one user and one context (``dra``), data inline."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    credentials: dict[str, Any] = {}
    if cert_pem is not None and key_pem is not None:
        credentials["client-certificate-data"] = base64.b64encode(cert_pem).decode()
        credentials["client-key-data"] = base64.b64encode(key_pem).decode()
    if token is not None:
        credentials["token"] = token
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dra", "cluster": cluster}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "dra", "context": {"cluster": "dra", "user": user, "namespace": namespace}}],
        "current-context": "dra",
    }
    return yaml.safe_dump(document, sort_keys=False)
