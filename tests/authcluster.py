"""A server with TLS, authentication and Node,RBAC on, and clients acting as whoever a test needs."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

from devtools.credentials import ClusterCredentials
from devtools.server import ServerProcess
from kube.pki import Authority, cert_pem, key_pem, write_private

# Nodes with a token in the test clusters' token file.
AUTH_NODES = ("n1", "n2")


@dataclass
class AuthCluster:
    server: ServerProcess
    credentials: ClusterCredentials
    audit_log: Path
    tmp: Path

    def admin(self) -> httpx.Client:
        return self.identity("admin")

    def identity(self, identity: str) -> httpx.Client:
        """A client acting as one of the stack's identities (admin, scheduler, controller, kubeletsim)."""
        return httpx.Client(**self.server.httpx_options(identity), timeout=30.0)  # type: ignore[arg-type]

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.credentials.ca_cert))

    def as_user(self, user: str, groups: tuple[str, ...] = (), authority: Authority | None = None) -> httpx.Client:
        """A client with a fresh client certificate for ``user`` (from ``authority``, default the cluster's CA)."""
        signer = authority or Authority.load(self.credentials.ca_cert, self.credentials.directory / "ca.key")
        cert, key = signer.client(user, groups)
        name = uuid.uuid4().hex[:8]
        cert_path, key_path = self.tmp / f"{name}.crt", self.tmp / f"{name}.key"
        cert_path.write_bytes(cert_pem(cert))
        write_private(key_path, key_pem(key))
        context = self.context()
        context.load_cert_chain(cert_path, key_path)
        return httpx.Client(base_url=self.server.url, verify=context, timeout=30.0)

    def with_token(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, verify=self.context(), headers={"Authorization": f"Bearer {token}"}, timeout=30.0)

    def node(self, name: str) -> httpx.Client:
        return self.with_token(self.credentials.token(f"system:node:{name}"))

    def anonymous(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, verify=self.context(), timeout=30.0)


def start_auth_cluster(start_server: Callable[..., ServerProcess], tmp: Path, nodes: Sequence[str] = AUTH_NODES, flags: Sequence[str] = ()) -> AuthCluster:
    """A server over HTTPS with Node,RBAC, NodeRestriction and an audit log (and ``flags``), with a token for each of ``nodes``."""
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(list(nodes))
    audit = tmp / "audit.log"
    server = start_server("--audit-log-path", str(audit), *flags, credentials=credentials)
    return AuthCluster(server, credentials, audit, tmp)


def audit_writers(audit_log: Path) -> dict[tuple[str, str], set[str]]:
    """(resource, subresource) -> the users whose creates, updates and patches of it succeeded."""
    writers: dict[tuple[str, str], set[str]] = {}
    for line in audit_log.read_bytes().splitlines():
        event = orjson.loads(line)
        ref = event.get("objectRef") or {}
        if event["verb"] in ("create", "update", "patch") and event["responseStatus"]["code"] < 300:
            writers.setdefault((ref.get("resource", ""), ref.get("subresource", "")), set()).add(event["user"]["username"])
    return writers
