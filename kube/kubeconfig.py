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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


def _data(section: dict[str, Any], data_key: str, file_key: str, base: Path) -> bytes | None:
    if section.get(data_key):
        return base64.b64decode(section[data_key])
    if section.get(file_key):
        path = Path(section[file_key])
        return (path if path.is_absolute() else base / path).read_bytes()
    return None


@dataclass(frozen=True)
class KubeconfigContext:
    """A resolved context: how to connect, and the namespace commands default to."""

    name: str
    connection: Connection
    namespace: str = "default"
    # The context's extensions by name (kubeconfig's NamedExtension list): where tools that are not
    # the API server (kubectl dra's scheduler) are found.
    extensions: Mapping[str, Any] = field(default_factory=dict)


def default_kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where kubectl looks: the files ``KUBECONFIG`` lists (path separator), else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    listed = [Path(p) for p in (env.get("KUBECONFIG") or "").split(os.pathsep) if p]
    return listed or [Path(env.get("HOME") or Path.home()) / ".kube" / "config"]


def load_kubeconfig_context(paths: Sequence[str | Path], context: str = "") -> KubeconfigContext:
    """The current (or named) context of kubeconfig files merged as kubectl merges them: for each
    cluster, user and context name, and for current-context, the first file that sets it wins;
    files that do not exist are skipped, and relative paths resolve against the file that names them."""
    sections: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    read: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            continue
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise KubeconfigError(f"{path}: {exc}") from exc
        if not isinstance(config, dict):
            raise KubeconfigError(f"{path}: not a kubeconfig")
        read.append(path)
        current = current or str(config.get("current-context") or "")
        for kind, what in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in config.get(kind) or ():
                if isinstance(entry, dict) and isinstance(entry.get(what), dict) and entry.get("name") not in sections[kind]:
                    sections[kind][str(entry.get("name"))] = (entry[what], path.parent)
    where = ", ".join(str(p) for p in read) or ", ".join(str(p) for p in paths)
    if not read:
        raise KubeconfigError("Missing or incomplete configuration info. Please point to an existing, complete config file")
    name = context or current
    if not name:
        raise KubeconfigError(f"{where}: no current-context")

    def named(kind: str, what: str, key: str) -> tuple[dict[str, Any], Path]:
        if key not in sections[kind]:
            raise KubeconfigError(f"{where}: no {what} named {key!r}")
        return sections[kind][key]

    ctx, _ = named("contexts", "context", name)
    cluster, cluster_base = named("clusters", "cluster", str(ctx.get("cluster") or ""))
    user, user_base = named("users", "user", str(ctx.get("user"))) if ctx.get("user") else ({}, Path("."))
    unsupported = [k for k in ("exec", "auth-provider", "username") if user.get(k)]
    if unsupported:
        raise KubeconfigError(f"{where}: user of context {name!r} uses {unsupported[0]!r}, which this client does not support")
    token = user.get("token") or None
    if token is None and user.get("tokenFile"):
        token = (user_base / user["tokenFile"]).read_text().strip()
    server = str(cluster.get("server") or "")
    if not server:
        raise KubeconfigError(f"{where}: cluster of context {name!r} has no server")
    connection = Connection(
        server=server,
        ca_data=_data(cluster, "certificate-authority-data", "certificate-authority", cluster_base),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
        client_cert_data=_data(user, "client-certificate-data", "client-certificate", user_base),
        client_key_data=_data(user, "client-key-data", "client-key", user_base),
        token=token,
    )
    extensions = {str(e["name"]): e.get("extension") for e in ctx.get("extensions") or () if isinstance(e, dict) and e.get("name")}
    return KubeconfigContext(name, connection, str(ctx.get("namespace") or "default"), extensions)


def load_kubeconfig(path: str | Path, context: str = "") -> Connection:
    """The connection a kubeconfig's current (or named) context describes."""
    if not Path(path).exists():
        raise KubeconfigError(f"{path}: no such file")
    return load_kubeconfig_context([path], context).connection


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
