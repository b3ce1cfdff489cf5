"""The serving TLS context: TLS 1.2 at least, ALPN http/1.1, any client certificate accepted in the
handshake (the authenticator answers a foreign one with 401), and one session ticket, as Go's server."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

from app.config import Settings
from app.tls import server_context
from kube.pki import Authority, cert_pem, key_pem


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Both ends of a completed in-memory handshake."""
    server_in, server_out, client_in, client_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(server_in, server_out, server_side=True)
    client_end = client.wrap_bio(client_in, client_out, server_hostname="localhost")
    done: set[str] = set()
    for _ in range(10):
        for name, end in (("client", client_end), ("server", server_end)):
            if name not in done:
                try:
                    end.do_handshake()
                    done.add(name)
                except ssl.SSLWantReadError:
                    pass
            server_in.write(client_out.read())
            client_in.write(server_out.read())
        if len(done) == 2:
            return server_end, client_end
    raise AssertionError("the handshake did not complete")


def contexts(tmp_path: Path, client_authority: Authority) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    authority = Authority.create("test-ca")
    serving_cert, serving_key = authority.serving(["localhost"])
    files = {"ca.crt": cert_pem(authority.cert), "server.crt": cert_pem(serving_cert), "server.key": key_pem(serving_key)}
    client_cert, client_key = client_authority.client("alice")
    files |= {"client.crt": cert_pem(client_cert), "client.key": key_pem(client_key)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    settings = dataclasses.replace(
        Settings(),
        tls_cert_file=str(tmp_path / "server.crt"),
        tls_private_key_file=str(tmp_path / "server.key"),
        client_ca_file=str(tmp_path / "ca.crt"),
    )
    server = server_context(settings)
    assert server is not None
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
    client.set_alpn_protocols(["h2", "http/1.1"])
    return server, client


def test_a_client_certificate_of_any_authority_completes_the_handshake(tmp_path: Path) -> None:
    server, client = contexts(tmp_path, Authority.create("foreign-ca"))
    server_end, client_end = handshake(server, client)
    assert server_end.getpeercert(binary_form=True)  # handed to the authenticator, which refuses it
    assert client_end.selected_alpn_protocol() == "http/1.1"
    assert server.minimum_version is ssl.TLSVersion.TLSv1_2


def test_one_session_ticket_per_handshake_as_gos_server_sends(tmp_path: Path) -> None:
    server, _client = contexts(tmp_path, Authority.create("test-ca"))
    assert server.num_tickets == 1
