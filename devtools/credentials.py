"""Credentials of a whole cluster, made once under a directory: a CA, the server's serving
certificate and service account signing key, a client certificate for each control plane
identity (the admin, the scheduler, the controller, the kubelet simulator), a bearer token for
each simulated node, and a kubeconfig for each identity. Private keys and tokens are 0600."""

from __future__ import annotations

import csv
import io
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from kube.kubeconfig import kubeconfig_text
from kube.pki import Authority, cert_pem, key_pem, new_key, write_private

# identity -> (user, groups) of its client certificate.
IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "admin": ("kubernetes-admin", ("system:masters",)),
    "scheduler": ("system:kube-scheduler", ()),
    "controller": ("system:kube-controller-manager", ()),
}
# Identities that authenticate with a bearer token: the simulator's connections carry its nodes'
# requests too, each with the node's token, and a client certificate would name them all.
TOKEN_IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {"kubeletsim": ("system:kubeletsim", ())}
DRIVER_SERVICE_ACCOUNT = "kube-system/dra-kubeletsim-driver"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class ClusterCredentials:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "service-account.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "service-account.pub"

    @property
    def scheduler_serving_cert(self) -> Path:
        return self.directory / "scheduler-serving.crt"

    @property
    def scheduler_serving_key(self) -> Path:
        return self.directory / "scheduler-serving.key"

    @property
    def node_tokens(self) -> Path:
        return self.directory / "node-tokens.csv"

    def client_cert(self, identity: str) -> Path:
        return self.directory / f"{identity}.crt"

    def client_key(self, identity: str) -> Path:
        return self.directory / f"{identity}.key"

    def kubeconfig(self, identity: str) -> Path:
        return self.directory / f"{identity}.kubeconfig"

    @classmethod
    def ensure(cls, directory: str | Path, hosts: tuple[str, ...] | list[str] = DEFAULT_HOSTS) -> ClusterCredentials:
        """The credentials under ``directory``, made there first when missing."""
        creds = cls(Path(directory))
        if creds.ca_cert.exists():
            creds._ensure_scheduler_serving()  # directories made before the scheduler served explanations
            creds._ensure_service_account_public_key()  # and before upstream's kube-apiserver ran on them
            return creds
        creds.directory.mkdir(parents=True, exist_ok=True)
        creds.directory.chmod(0o700)
        authority = Authority.create("dra-ca")
        authority.save(creds.ca_cert, creds.directory / "ca.key")
        cert, key = authority.serving([*DEFAULT_HOSTS, *[h for h in hosts if h not in DEFAULT_HOSTS]])
        creds.serving_cert.write_bytes(cert_pem(cert))
        write_private(creds.serving_key, key_pem(key))
        write_private(creds.service_account_key, key_pem(new_key()))
        creds._ensure_service_account_public_key()
        for identity, (user, groups) in IDENTITIES.items():
            cert, key = authority.client(user, groups)
            creds.client_cert(identity).write_bytes(cert_pem(cert))
            write_private(creds.client_key(identity), key_pem(key))
        rows = io.StringIO()
        for _identity, (user, groups) in TOKEN_IDENTITIES.items():
            csv.writer(rows, lineterminator="\n").writerow([secrets.token_urlsafe(24), user, str(uuid.uuid4()), ",".join(groups)])
        write_private(creds.node_tokens, rows.getvalue().encode())
        creds._ensure_scheduler_serving()
        return creds

    def _ensure_scheduler_serving(self) -> None:
        """The serving certificate of the scheduler's explanation port (on loopback)."""
        if self.scheduler_serving_cert.exists():
            return
        cert, key = Authority.load(self.ca_cert, self.directory / "ca.key").serving(list(DEFAULT_HOSTS))
        self.scheduler_serving_cert.write_bytes(cert_pem(cert))
        write_private(self.scheduler_serving_key, key_pem(key))

    def _ensure_service_account_public_key(self) -> None:
        """The signing key's public half, which verifies tokens: kube-apiserver's
        --service-account-key-file reads no PKCS#8 EC private key, only public keys (or SEC1/PKCS#1 private keys)."""
        if self.service_account_public_key.exists():
            return
        key = serialization.load_pem_private_key(self.service_account_key.read_bytes(), password=None)
        public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.service_account_public_key.write_bytes(public)

    def token(self, user: str) -> str:
        """The bearer token of ``user`` in the token file."""
        for row in csv.reader(io.StringIO(self.node_tokens.read_text())):
            if len(row) >= 2 and row[1] == user:
                return row[0]
        raise KeyError(user)

    def ensure_node_tokens(self, names: list[str]) -> None:
        """A token for each node named (kept across runs, so a restarted server knows it)."""
        known = {row[1] for row in csv.reader(io.StringIO(self.node_tokens.read_text())) if len(row) >= 2}
        rows = [
            [secrets.token_urlsafe(24), f"system:node:{name}", str(uuid.uuid4()), "system:nodes"]
            for name in names
            if f"system:node:{name}" not in known
        ]
        if rows:
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(rows)
            write_private(self.node_tokens, self.node_tokens.read_bytes() + out.getvalue().encode())

    def server_flags(self) -> list[str]:
        """The API server flags that serve HTTPS and authenticate and authorize with these credentials."""
        return [
            "--tls-cert-file", str(self.serving_cert),
            "--tls-private-key-file", str(self.serving_key),
            "--client-ca-file", str(self.ca_cert),
            "--token-auth-file", str(self.node_tokens),
            "--service-account-signing-key-file", str(self.service_account_key),
            "--service-account-key-file", str(self.service_account_public_key),
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
        ]  # fmt: skip

    def write_kubeconfigs(self, server: str) -> None:
        """A kubeconfig per identity for ``server`` (certificates and keys inline)."""
        ca = self.ca_cert.read_bytes()
        for identity, (user, _groups) in IDENTITIES.items():
            text = kubeconfig_text(
                server, ca, cert_pem=self.client_cert(identity).read_bytes(), key_pem=self.client_key(identity).read_bytes(), user=user
            )
            write_private(self.kubeconfig(identity), text.encode())
        for identity, (user, _groups) in TOKEN_IDENTITIES.items():
            write_private(self.kubeconfig(identity), kubeconfig_text(server, ca, token=self.token(user), user=user).encode())

    def httpx_options(self, identity: str = "admin") -> dict[str, object]:
        """``verify`` (with the client certificate) or a token header for an httpx client acting as ``identity``."""
        import ssl

        context = ssl.create_default_context(cafile=str(self.ca_cert))
        if identity in TOKEN_IDENTITIES:
            return {"verify": context, "headers": {"Authorization": f"Bearer {self.token(TOKEN_IDENTITIES[identity][0])}"}}
        context.load_cert_chain(self.client_cert(identity), self.client_key(identity))
        return {"verify": context}

    def worker_flags(self, identity: str) -> list[str]:
        """The flags a worker runs as ``identity`` with (the simulator also gets its node tokens)."""
        flags = ["--kubeconfig", str(self.kubeconfig(identity))]
        if identity == "scheduler":
            # For its explanation port, when one is asked for: HTTPS, callers' certificates from the cluster's CA.
            flags += ["--tls-cert-file", str(self.scheduler_serving_cert), "--tls-private-key-file", str(self.scheduler_serving_key),
                      "--client-ca-file", str(self.ca_cert)]  # fmt: skip
        if identity == "kubeletsim":
            flags += ["--node-token-file", str(self.node_tokens), "--driver-service-account", DRIVER_SERVICE_ACCOUNT]
        return flags


def main(argv: list[str] | None = None) -> int:
    """``python -m devtools.credentials``: make a cluster's credentials (once) and its kubeconfigs."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m devtools.credentials", description=main.__doc__)
    parser.add_argument("--dir", required=True, help="where the credentials live (made once, kept after)")
    parser.add_argument("--server", required=True, help="the API server URL the processes' kubeconfigs name")
    parser.add_argument("--host", action="append", default=[], help="a further name of the server in its certificate (repeatable)")
    parser.add_argument("--nodes", type=int, default=0, help="simulated nodes that get a token: <prefix>0 .. <prefix>N-1")
    parser.add_argument("--node-prefix", default="sim-")
    parser.add_argument("--outside-server", default="", help="also write outside-admin.kubeconfig for this URL (a user's machine)")
    args = parser.parse_args(argv)
    creds = ClusterCredentials.ensure(args.dir, [*DEFAULT_HOSTS, *args.host])
    creds.ensure_node_tokens([f"{args.node_prefix}{i}" for i in range(args.nodes)])
    creds.write_kubeconfigs(args.server)
    if args.outside_server:
        text = kubeconfig_text(
            args.outside_server, creds.ca_cert.read_bytes(),
            cert_pem=creds.client_cert("admin").read_bytes(), key_pem=creds.client_key("admin").read_bytes(), user=IDENTITIES["admin"][0],
        )  # fmt: skip
        write_private(creds.directory / "outside-admin.kubeconfig", text.encode())
    print(f"credentials in {creds.directory}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
