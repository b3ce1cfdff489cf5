"""HTTPS serving: the serving certificate (given, or self-signed and kept in ``--cert-dir``),
client certificates requested from every client, and the presented certificate handed to the
application in the ASGI scope.

Client certificates are requested but not checked during the handshake: the authenticator checks
them against ``--client-ca-file`` and answers a foreign or expired one with 401, as upstream
does. Python's ``ssl`` module can only refuse such a certificate in the handshake, so the context
gets OpenSSL's accept-and-record verify callback through ctypes, and no chain verification at all
(its verdict would be overruled); where that is not possible the handshake checks the CA itself
(a foreign certificate then fails the handshake instead).

A new connection's CPU is mostly OpenSSL 3.0 decoding the client certificate (its public key
through the provider decoders); what can be spared of it is: chain verification, and a second
session ticket (see SESSION_TICKETS).
"""

from __future__ import annotations

import _ssl
import ctypes
import logging
import socket
import ssl
from pathlib import Path
from typing import Any

from app.auth.system import PEER_CERTIFICATE
from app.config import Settings
from app.filters.connections import GuardedHttpToolsProtocol
from kube.httpserve import is_loopback
from kube.pki import Authority, cert_pem, key_pem, write_private

log = logging.getLogger("app.tls")

_SSL_VERIFY_PEER = 0x01
_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
# Accept whatever certificate the client presents; it is checked per request, not here.
_ACCEPT_ANY = _VerifyCallback(lambda _preverified, _store: 1)
_ChainCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
# In place of OpenSSL's chain verification, whose every verdict _ACCEPT_ANY overrules: building
# and checking a chain nobody reads took a tenth of a new connection's CPU.
_SKIP_CHAIN_VERIFICATION = _ChainCallback(lambda _store, _argument: 1)
# TLS 1.3 session tickets sent after each full handshake: one, as Go's crypto/tls (upstream's
# server) sends, not OpenSSL's default two. OpenSSL 3.0 makes each ticket by encoding the session
# and decoding it back, the client certificate with it (its public key through OpenSSL 3.0's slow
# decoder lookup): about 1.8 M instructions per ticket, a sixth of a new connection's (callgrind),
# paid for clients (client-go, kubectl) that keep no session cache and never resume.
SESSION_TICKETS = 1


class InsecureServingError(ValueError):
    """Plain HTTP asked for on an address other hosts can reach."""


def self_signed_paths(cert_dir: str) -> tuple[Path, Path]:
    return Path(cert_dir) / "apiserver.crt", Path(cert_dir) / "apiserver.key"


def ensure_self_signed(cert_dir: str, host: str) -> tuple[Path, Path]:
    """A serving certificate for ``host`` (and localhost) signed by a CA of its own, made once."""
    cert_path, key_path = self_signed_paths(cert_dir)
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    authority = Authority.create("dra-apiserver-ca")
    hosts = ["localhost", "127.0.0.1", socket.gethostname()]
    if host not in hosts and host not in ("0.0.0.0", "::", ""):
        hosts.append(host)
    cert, key = authority.serving(hosts)
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    cert_path.write_bytes(cert_pem(cert) + cert_pem(authority.cert))
    write_private(key_path, key_pem(key))
    log.info("made a self-signed serving certificate", extra={"path": str(cert_path)})
    return cert_path, key_path


def _request_any_client_certificate(context: ssl.SSLContext) -> bool:
    """Make ``context`` ask clients for a certificate and accept any (False when not possible)."""
    try:
        library = ctypes.CDLL(_ssl.__file__)
        set_verify = library.SSL_CTX_set_verify
        set_chain_verification = library.SSL_CTX_set_cert_verify_callback
        get_mode = library.SSL_CTX_get_verify_mode
    except (OSError, AttributeError):
        return False
    set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    set_chain_verification.argtypes = [ctypes.c_void_p, _ChainCallback, ctypes.c_void_p]
    get_mode.argtypes = [ctypes.c_void_p]
    get_mode.restype = ctypes.c_int
    # The SSL_CTX pointer is the first field after the object header of CPython's SSLContext.
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    context.verify_mode = ssl.CERT_OPTIONAL  # a mode the pointer check below can recognise
    if not pointer or get_mode(pointer) != _SSL_VERIFY_PEER:
        return False
    set_verify(pointer, _SSL_VERIFY_PEER, _ACCEPT_ANY)
    set_chain_verification(pointer, _SKIP_CHAIN_VERIFICATION, None)
    return True


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The serving TLS context, or None for plain HTTP (``--insecure-serving``, loopback only)."""
    if settings.insecure_serving:
        if not is_loopback(settings.host):
            raise InsecureServingError(f"--insecure-serving needs a loopback --listen address, not {settings.host}")
        return None
    if settings.tls_cert_file:
        cert_path, key_path = Path(settings.tls_cert_file), Path(settings.tls_private_key_file)
    else:
        cert_path, key_path = ensure_self_signed(settings.cert_dir, settings.host)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_path, key_path)
    context.set_alpn_protocols(["http/1.1"])
    context.num_tickets = SESSION_TICKETS
    if settings.client_ca_file and not _request_any_client_certificate(context):
        log.warning("client certificates from unknown CAs fail the TLS handshake instead of answering 401")
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(settings.client_ca_file)
    return context


class PeerCertificateProtocol(GuardedHttpToolsProtocol):
    """The guarded httptools protocol, with the client's certificate (DER) in every request's scope."""

    _peer_certificate: bytes | None = None

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        self._peer_certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._peer_certificate is not None:
            self.scope[PEER_CERTIFICATE] = self._peer_certificate  # type: ignore[literal-required]
