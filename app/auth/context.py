"""The requester of the request being served, for the code that acts on it.

The authentication filter sets it for the request's task (as upstream's request context carries
the user); work the server does on its own (start-up, background loops) has none and acts with
the server's own authority.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.auth.admission import AdmissionPlugin, AdmissionRequest
from app.auth.attributes import Attributes, request_attributes
from app.auth.authorizers import Authorizer, Decision, forbidden
from app.auth.rbac import RBACIndex, aggregate_errors
from app.auth.rules import Rule, compact, compact_string, covers
from app.auth.user import SYSTEM_PRIVILEGED_GROUP, UserInfo


@dataclass
class Requester:
    """Who makes the request being served, and the authorizers and admission that judge it."""

    user: UserInfo
    # The request's method, path and undecoded query, which ``attributes`` are read off.
    request: tuple[str, str, str]
    authorizer: Authorizer
    rbac: RBACIndex | None
    admission: Sequence[AdmissionPlugin] = ()
    # Whatever the audit line should say about the authorization decision.
    audit: dict[str, Any] = field(default_factory=dict)
    # The configured authorization modes, in order (what a rules review asks of each).
    modes: tuple[str, ...] = ()
    # Warnings admission gave for the response (each once, in order: upstream's warning recorder).
    warnings: list[str] = field(default_factory=list)
    leading_warnings: list[str] = field(default_factory=list)
    _attributes: Attributes | None = None

    @property
    def attributes(self) -> Attributes:
        """What the request asks to do, as the authorizers see it (read off the request when first
        needed: under AlwaysAllow most requests never need it)."""
        attributes = self._attributes
        if attributes is None:
            attributes = self._attributes = request_attributes(self.user, *self.request)
        return attributes

    @property
    def privileged(self) -> bool:
        """Members of system:masters may grant anything (RBAC's escalation checks pass them)."""
        return SYSTEM_PRIVILEGED_GROUP in self.user.groups

    def authorize(self, verb: str, group: str, resource: str, subresource: str = "", namespace: str = "", name: str = "") -> str | None:
        """None when the requester may do this; otherwise the Forbidden message upstream gives."""
        attrs = Attributes(self.user, verb, True, api_group=group, api_version="*", resource=resource, subresource=subresource, namespace=namespace, name=name)
        decision, reason = self.authorizer.authorize(attrs)
        if decision is Decision.ALLOW:
            return None
        return forbidden(attrs, reason).message

    def escalation(self, namespace: str, rules: Sequence[Any]) -> str | None:
        """None when the requester holds every permission in ``rules`` (API form) in
        ``namespace``; otherwise the reason a grant of them is refused."""
        if self.privileged:
            return None
        owned, errors = self.rbac.rules_for(self.user, namespace) if self.rbac is not None else ([], [])
        missing = covers(owned, [Rule.from_api(r) for r in rules])
        if not missing:
            return None
        listed = "\n".join(sorted({compact_string(r) for r in compact(missing)}))
        groups = "[" + " ".join(json.dumps(g) for g in self.user.groups) + "]"
        message = f"user {json.dumps(self.user.name)} (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{listed}"
        if errors:
            message += f"; resolution errors: {aggregate_errors(errors)}"
        return message

    def access_review(self, spec: dict[str, Any], of_subject: bool = False) -> dict[str, Any]:
        """The status of an access review of ``spec`` (a SubjectAccessReviewSpec): allowed, denied
        and why, for the requester, or ``of_subject`` for the user the spec names."""
        who = self.user
        if of_subject:
            extra = spec.get("extra") or {}
            who = UserInfo(
                str(spec.get("user") or ""),
                str(spec.get("uid") or ""),
                tuple(str(g) for g in spec.get("groups") or ()),
                {str(k): tuple(str(v) for v in values or ()) for k, values in extra.items()} if isinstance(extra, dict) else {},
            )
        resource = spec.get("resourceAttributes")
        if isinstance(resource, dict):
            attrs = Attributes(
                who,
                str(resource.get("verb") or ""),
                True,
                api_group=str(resource.get("group") or ""),
                api_version=str(resource.get("version") or ""),
                resource=str(resource.get("resource") or ""),
                subresource=str(resource.get("subresource") or ""),
                namespace=str(resource.get("namespace") or ""),
                name=str(resource.get("name") or ""),
            )
        else:
            other = spec.get("nonResourceAttributes") or {}
            attrs = Attributes(who, str(other.get("verb") or ""), False, path=str(other.get("path") or ""))
        decision, reason = self.authorizer.authorize(attrs)
        status: dict[str, Any] = {"allowed": decision is Decision.ALLOW}
        if decision is Decision.DENY:
            status["denied"] = True
        if reason:
            status["reason"] = reason
        return status

    def rules_review(self, namespace: str) -> dict[str, Any]:
        """The status of a rules review: what the requester may do in ``namespace``, as far as the
        authorizers can list it."""
        resource_rules: list[dict[str, Any]] = []
        url_rules: list[dict[str, Any]] = []
        incomplete = False
        errors: list[str] = []
        for mode in self.modes:
            if mode == "Node" and self.user.name.startswith("system:node:") and "system:nodes" in self.user.groups:
                incomplete = True
                errors.append("node authorizer does not support user rule resolution")
            elif mode == "RBAC" and self.rbac is not None:
                rules, rbac_errors = self.rbac.rules_for(self.user, namespace)
                errors.extend(rbac_errors)
                for rule in rules:
                    target = url_rules if rule.non_resource_urls else resource_rules
                    target.append(rule.to_api())
            elif mode == "AlwaysAllow":
                resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
                url_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": url_rules, "incomplete": incomplete}
        if errors:
            status["evaluationError"] = aggregate_errors(errors)
        return status

    def admit(self, request: AdmissionRequest) -> None:
        """Run the admission plugins on one write this requester makes (``request.user`` is its user)."""
        for plugin in self.admission:
            plugin.admit(request)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def warn_first(self, text: str) -> None:
        """A warning that goes before the handler's own (the endpoint's deprecation, as upstream
        records it before the handler runs)."""
        if text not in self.leading_warnings:
            self.leading_warnings.append(text)

    def annotate(self, key: str, value: str) -> None:
        """An annotation of the request's audit event (the first value given a key stands, as upstream's)."""
        self.audit.setdefault("annotations", {}).setdefault(key, value)


def warning_header_value(warnings: list[str]) -> str:
    """Warnings as one Warning header's value: ``299 - "text"`` each, comma-separated (a quoted
    string with control and non-ASCII characters escaped, as header values may hold neither)."""
    return ", ".join(f"299 - {json.dumps(w)}" for w in warnings)


_current: contextvars.ContextVar[Requester | None] = contextvars.ContextVar("requester", default=None)


def current() -> Requester | None:
    """The requester of the request being served; None for the server's own work."""
    return _current.get()


def set_current(requester: Requester | None) -> contextvars.Token[Requester | None]:
    return _current.set(requester)


def reset(token: contextvars.Token[Requester | None]) -> None:
    _current.reset(token)
