"""The server's authentication and authorization, assembled from its settings, and the filter
that runs them on every request: authenticate (401), impersonate, authorize (403), then hand the
request on with its requester set, and write the audit line when the answer is complete."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, MutableMapping
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec

from app.auth import context, jwt
from app.auth.admission import AdmissionPlugin
from app.auth.attributes import Attributes, request_attributes
from app.auth.audit import AuditLog
from app.auth.authenticators import (
    AuthenticationFailed,
    Authenticator,
    ClientCertificates,
    Credentials,
    RequestAuthenticator,
    ServiceAccountTokens,
    TokenFile,
    bearer_token,
)
from app.auth.authorizers import (
    ALLOW,
    AUTHORIZATION_MODES,
    AlwaysAllow,
    AlwaysDeny,
    Authorizer,
    PrivilegedGroups,
    UnionAuthorizer,
    forbidden,
    unauthorized,
)
from app.auth.impersonation import ConstrainedImpersonation, impersonate, wanted_user
from app.auth.node import NodeAuthorizer, NodeGraph
from app.auth.noderestriction import NodeRestriction
from app.auth.policies import ValidatingAdmissionPolicies
from app.auth.rbac import RBACAuthorizer, RBACIndex
from app.auth.user import SYSTEM_PRIVILEGED_GROUP, UserInfo
from app.config import Settings
from app.storage.storage import Storage
from kube.errors import ApiError
from kube.features import FeatureGates, Gate
from kube.uids import new_uid

log = logging.getLogger("app.auth")

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Where the TLS layer puts the client certificate (DER) in the ASGI scope.
PEER_CERTIFICATE = "dra.peer_certificate"
# What every impersonation header's (lower-case) name starts with.
IMPERSONATION_HEADER_PREFIX = b"impersonate-"
# The admission plugins this server has, in upstream's order.
ADMISSION_PLUGINS = ("NodeRestriction", "ValidatingAdmissionPolicy", "ResourceQuota")
# On unless --disable-admission-plugins names them, as upstream's default plugins are.
DEFAULT_ADMISSION_PLUGINS = ("ValidatingAdmissionPolicy", "ResourceQuota")


class ConfigurationError(ValueError):
    """Settings the server cannot start with."""


def enabled_admission_plugins(settings: Settings) -> frozenset[str]:
    """The default plugins and those --enable-admission-plugins names, less those --disable-admission-plugins names."""
    enabled, disabled = ({p.strip() for p in flag.split(",") if p.strip()} for flag in (settings.admission_plugins, settings.disabled_admission_plugins))
    for name, plugins in (("--enable-admission-plugins", enabled), ("--disable-admission-plugins", disabled)):
        if unknown := sorted(plugins.difference(ADMISSION_PLUGINS)):
            raise ConfigurationError(f"{name}: unknown plugin(s) {unknown}; known: {', '.join(ADMISSION_PLUGINS)}")
    return frozenset(enabled.union(DEFAULT_ADMISSION_PLUGINS).difference(disabled))


def _lookup(storage: Storage) -> Any:
    def lookup(group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        qualified = f"{resource}.{group}" if group else resource
        stored = storage.cached(qualified, namespace, name)
        return stored.obj if stored is not None else None

    return lookup


class AuthSystem:
    """Authenticators, authorizers, admission plugins and the audit log of one server."""

    def __init__(self, settings: Settings, storage: Storage, gates: FeatureGates | None = None) -> None:
        self.settings = settings
        gates = gates if gates is not None else FeatureGates.parse(settings.feature_gates)
        self.storage = storage
        lookup = _lookup(storage)
        self.rbac = RBACIndex()
        self.graph = NodeGraph()
        self.modes = tuple(m.strip() for m in settings.authorization_mode.split(",") if m.strip())
        unknown = [m for m in self.modes if m not in AUTHORIZATION_MODES]
        if unknown or not self.modes:
            raise ConfigurationError(f"--authorization-mode: unknown mode(s) {unknown or ['']}; known: {', '.join(AUTHORIZATION_MODES)}")
        authorizers: list[Authorizer] = []
        for mode in self.modes:
            if mode == "Node":
                authorizers.append(NodeAuthorizer(self.graph))
            elif mode == "RBAC":
                authorizers.append(RBACAuthorizer(self.rbac))
            elif mode == "AlwaysAllow":
                authorizers.append(AlwaysAllow())
            else:
                authorizers.append(AlwaysDeny())
        self.authorizer = UnionAuthorizer([PrivilegedGroups(SYSTEM_PRIVILEGED_GROUP), *authorizers])
        self.constrained = ConstrainedImpersonation(self.authorizer) if gates.enabled(Gate.ConstrainedImpersonation) else None
        # Everything is allowed: skip attribute parsing and the authorizers on the request path.
        self.allow_all = self.modes == ("AlwaysAllow",)
        self.admission_plugins = enabled_admission_plugins(settings)
        self.policies = ValidatingAdmissionPolicies(storage, self.authorizer)
        plugins: dict[str, AdmissionPlugin] = {"NodeRestriction": NodeRestriction(lookup), "ValidatingAdmissionPolicy": self.policies}
        # ResourceQuota is the generic store's write admission (app.admission), not a plugin of the requester.
        self.admission = [plugins[name] for name in ADMISSION_PLUGINS if name in plugins and name in self.admission_plugins]
        self.tokens = self._service_account_tokens(settings, lookup)
        authenticators: list[Authenticator] = []
        if settings.client_ca_file:
            authenticators.append(ClientCertificates(settings.client_ca_file))
        if settings.token_auth_file:
            authenticators.append(TokenFile(settings.token_auth_file))
        authenticators.append(self.tokens)
        self.authenticator = RequestAuthenticator(authenticators, settings.anonymous_auth)
        self.audit = AuditLog(settings.audit_log_path) if settings.audit_log_path else None

    @staticmethod
    def _service_account_tokens(settings: Settings, lookup: Any) -> ServiceAccountTokens:
        signing: jwt.PrivateKey | None
        if settings.service_account_signing_key_file:
            signing = jwt.load_private_key(settings.service_account_signing_key_file)
        else:
            # Tokens this process issues verify only here, and only until it stops.
            signing = ec.generate_private_key(ec.SECP256R1())
        public = [k for path in settings.service_account_key_files for k in jwt.load_public_keys(path)]
        public.append(signing.public_key())
        issuers = settings.service_account_issuers or (DEFAULT_ISSUER,)
        return ServiceAccountTokens(
            issuers=issuers,
            signing_key=signing,
            public_keys=public,
            audiences=settings.api_audiences or issuers[:1],
            lookup=lookup,
            max_expiration=settings.service_account_max_token_expiration,
        )

    def start(self) -> None:
        """Build the RBAC index and the node graph from storage and follow its changes."""
        from app.auth import node, rbac

        for resource in rbac.RESOURCES:
            self.storage.follow(resource, functools.partial(self.rbac.apply, resource))
        for resource in node.RESOURCES:
            self.storage.follow(resource, functools.partial(self.graph.apply, resource))
        if self.policies in self.admission:
            self.policies.start()

    def close(self) -> None:
        if self.audit is not None:
            self.audit.close()

    # ---- one request ------------------------------------------------------------------

    def requester(self, scope: MutableMapping[str, Any]) -> context.Requester:
        """Who makes this request and whether they may: raises ApiError 401 or 403."""
        headers = scope["headers"]
        authorization = None
        impersonating = False
        for name, value in headers:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            # The first byte spares the method call for every other header (a quarter of this
            # function's instructions went to it).
            elif name[:1] == b"i" and name.startswith(IMPERSONATION_HEADER_PREFIX):
                impersonating = True
        try:
            credentials = Credentials(bearer_token(authorization), scope.get(PEER_CERTIFICATE))
        except AuthenticationFailed:
            raise unauthorized() from None
        user = self.authenticator.authenticate(credentials)
        if user is None:
            raise unauthorized()
        audit: dict[str, Any] = {"user": user}
        query = scope.get("query_string", b"").decode("latin-1")
        if impersonating:
            if self.constrained is None:
                audit["impersonated"] = user = impersonate(user, headers, self.authorizer)
            elif (wanted := wanted_user(headers)) is not None:
                impersonation = self.constrained.impersonate(user, wanted, request_attributes(user, scope["method"], scope["path"], query))
                audit["impersonated"] = user = impersonation.user
                audit["impersonation_constraint"] = impersonation.constraint
        requester = context.Requester(user, (scope["method"], scope["path"], query), self.authorizer, self.rbac, self.admission, audit, self.modes)
        if self.allow_all:
            audit["decision"] = ("allow", "")
            return requester
        attrs = requester.attributes
        decision, reason = self.authorizer.authorize(attrs)
        if decision is not ALLOW:
            audit["decision"] = ("forbid", reason)
            error = forbidden(attrs, reason)
            error.requester = requester  # type: ignore[attr-defined]  # for the audit line
            raise error
        audit["decision"] = ("allow", reason)
        return requester


def json_status(exc: ApiError, _scope: MutableMapping[str, Any]) -> tuple[str, bytes]:
    return "application/json", orjson.dumps(exc.status())


# (Content-Type, body) of a refusal's Status for a request: the server's writes it in the media
# type the request's Accept header chose.
StatusWriter = Callable[[ApiError, MutableMapping[str, Any]], tuple[str, bytes]]


def _error_response(exc: ApiError, scope: MutableMapping[str, Any], write: StatusWriter) -> tuple[dict[str, Any], bytes]:
    content_type, body = write(exc, scope)
    start = {
        "type": "http.response.start",
        "status": exc.code,
        "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())],
    }
    return start, body


class AuthFilter:
    """The ASGI middleware that authenticates, authorizes and audits every HTTP request."""

    def __init__(self, app: Any, auth: AuthSystem, write_status: StatusWriter = json_status) -> None:
        self.app = app
        self.auth = auth
        self.write_status = write_status

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        received = time.time()
        audit = self.auth.audit
        code = 500
        requester: context.Requester | None = None

        async def send_out(message: MutableMapping[str, Any]) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                if requester is not None and (requester.warnings or requester.leading_warnings):
                    message = with_warnings(message, requester.warnings, requester.leading_warnings)
            await send(message)

        try:
            try:
                requester = self.auth.requester(scope)
            except ApiError as exc:
                requester = getattr(exc, "requester", None)
                start, body = _error_response(exc, scope, self.write_status)
                code = exc.code
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            token = context.set_current(requester)
            try:
                await self.app(scope, receive, send_out)
            finally:
                context.reset(token)
        finally:
            if audit is not None:
                self._audit(audit, scope, requester, code, received)

    @staticmethod
    def _audit(audit: AuditLog, scope: MutableMapping[str, Any], requester: context.Requester | None, code: int, received: float) -> None:
        notes = requester.audit if requester is not None else {}
        user: UserInfo | None = notes.get("user")
        attrs: Attributes | None = requester.attributes if requester is not None else None
        if attrs is None:
            attrs = request_attributes(user or UserInfo(""), scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"))
        query = scope.get("query_string", b"").decode("latin-1")
        user_agent = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"user-agent"), "")
        client = scope.get("client")
        decision, reason = notes.get("decision", ("", ""))
        audit.record(
            audit_id=next((v.decode("latin-1") for k, v in scope["headers"] if k == b"audit-id"), "") or _audit_id(),
            request_uri=scope["path"] + (f"?{query}" if query else ""),
            attrs=attrs,
            user=user,
            impersonated=notes.get("impersonated"),
            impersonation_constraint=notes.get("impersonation_constraint", ""),
            source_ip=client[0] if client else "",
            user_agent=user_agent,
            code=code,
            received=received,
            finished=time.time(),
            decision=decision,
            reason=reason,
            annotations=notes.get("annotations"),
        )


def with_warnings(message: MutableMapping[str, Any], warnings: list[str], leading: list[str] | None = None) -> MutableMapping[str, Any]:
    """A response start with admission's warnings after those the handler wrote (upstream's order:
    the strategy's warnings are recorded before admission runs), and ``leading`` ones before them."""
    headers = list(message.get("headers") or [])
    parts = [context.warning_header_value(leading)] if leading else []
    for index, (name, value) in enumerate(headers):
        if name.lower() == b"warning":
            del headers[index]
            parts.append(value.decode("latin-1"))
            break
    if warnings:
        parts.append(context.warning_header_value(warnings))
    headers.append((b"warning", ", ".join(parts).encode("latin-1")))
    return {**message, "headers": headers}


def _audit_id() -> str:
    return new_uid()

