"""The RBAC authorizer: Roles, ClusterRoles and their bindings, indexed by subject so a request
looks only at the bindings that name its user, its groups or its service account.

The index follows the server's own storage (``RBACIndex.apply`` receives every committed
change of the four kinds), so a binding written a moment ago is in force for the next request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.auth.attributes import Attributes
from app.auth.authorizers import Decision
from app.auth.rules import Rule
from app.auth.user import UserInfo, split_service_account_username

GROUP = "rbac.authorization.k8s.io"
ROLES = f"roles.{GROUP}"
CLUSTER_ROLES = f"clusterroles.{GROUP}"
ROLE_BINDINGS = f"rolebindings.{GROUP}"
CLUSTER_ROLE_BINDINGS = f"clusterrolebindings.{GROUP}"
RESOURCES = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)

# A subject as the index keys it: ("User", name), ("Group", name), ("ServiceAccount", "ns:name").
SubjectKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def describe(self, binding_namespace: str) -> str:
        """How upstream names the subject in an allow reason: ``Group "g"``, ``ServiceAccount "sa/ns"``."""
        if self.kind == "ServiceAccount":
            return f'{self.kind} {json.dumps(self.name + "/" + (self.namespace or binding_namespace))}'
        return f"{self.kind} {json.dumps(self.name)}"


@dataclass(frozen=True, slots=True)
class Binding:
    kind: str  # RoleBinding or ClusterRoleBinding
    namespace: str
    name: str
    role_kind: str  # Role or ClusterRole
    role_name: str
    subjects: tuple[Subject, ...]

    def describe(self, subject: Subject) -> str:
        name = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return f"{self.kind} {json.dumps(name)} of {self.role_kind} {json.dumps(self.role_name)} to {subject.describe(self.namespace)}"


def _binding_from(kind: str, obj: dict[str, Any]) -> Binding:
    meta = obj.get("metadata") or {}
    ref = obj.get("roleRef") or {}
    subjects = []
    for s in obj.get("subjects") or ():
        if isinstance(s, dict):
            subjects.append(Subject(str(s.get("kind") or ""), str(s.get("name") or ""), str(s.get("namespace") or "")))
    return Binding(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(ref.get("kind") or ""), str(ref.get("name") or ""), tuple(subjects))


def _subject_key(subject: Subject, binding_namespace: str) -> SubjectKey | None:
    if subject.kind == "ServiceAccount":
        namespace = subject.namespace or binding_namespace
        return ("ServiceAccount", f"{namespace}:{subject.name}") if namespace else None
    if subject.kind in ("User", "Group"):
        return subject.kind, subject.name
    return None


def user_keys(user: UserInfo) -> list[SubjectKey]:
    """The subject keys a binding may name ``user`` by."""
    keys: list[SubjectKey] = [("User", user.name)]
    keys.extend(("Group", g) for g in user.groups)
    account = split_service_account_username(user.name)
    if account is not None:
        keys.append(("ServiceAccount", f"{account[0]}:{account[1]}"))
    return keys


def _not_found(kind: str, name: str) -> str:
    return f"{kind.lower()}.{GROUP} {json.dumps(name)} not found"


# (why it applies, the rule or None, an error) as the visitor sees each step.
Visitor = Callable[[str, Rule | None, str], bool]


class RBACIndex:
    """Every Role, ClusterRole and binding, with bindings indexed by subject."""

    def __init__(self) -> None:
        # Moves on every change, so that whatever was worked out from the index can tell it is stale.
        self.generation = 0
        self.roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        self.cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self._bindings: dict[tuple[str, str, str], Binding] = {}  # (kind, namespace, name)
        # subject key -> binding keys; RoleBindings also by their namespace.
        self._cluster_by_subject: dict[SubjectKey, set[tuple[str, str, str]]] = {}
        self._namespaced_by_subject: dict[tuple[str, SubjectKey], set[tuple[str, str, str]]] = {}
        # How many bindings resolving rules has looked at, in all: what the subject index keeps small.
        self.bindings_examined = 0

    # ---- following storage ----------------------------------------------------------

    def apply(self, resource: str, deleted: bool, obj: dict[str, Any]) -> None:
        """One committed change of a Role, ClusterRole, RoleBinding or ClusterRoleBinding."""
        self.generation += 1
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if resource == ROLES:
            if deleted:
                self.roles.pop((namespace, name), None)
            else:
                self.roles[(namespace, name)] = tuple(Rule.from_api(r) for r in obj.get("rules") or ())
        elif resource == CLUSTER_ROLES:
            if deleted:
                self.cluster_roles.pop(name, None)
            else:
                self.cluster_roles[name] = tuple(Rule.from_api(r) for r in obj.get("rules") or ())
        elif resource in (ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS):
            kind = "RoleBinding" if resource == ROLE_BINDINGS else "ClusterRoleBinding"
            self._unindex((kind, namespace, name))
            if not deleted:
                self._index(_binding_from(kind, obj))

    def _index(self, binding: Binding) -> None:
        key = (binding.kind, binding.namespace, binding.name)
        self._bindings[key] = binding
        for subject in binding.subjects:
            subject_key = _subject_key(subject, binding.namespace)
            if subject_key is None:
                continue
            if binding.kind == "ClusterRoleBinding":
                self._cluster_by_subject.setdefault(subject_key, set()).add(key)
            else:
                self._namespaced_by_subject.setdefault((binding.namespace, subject_key), set()).add(key)

    def _unindex(self, key: tuple[str, str, str]) -> None:
        binding = self._bindings.pop(key, None)
        if binding is None:
            return
        for subject in binding.subjects:
            subject_key = _subject_key(subject, binding.namespace)
            if subject_key is None:
                continue
            index_key: Any = subject_key if binding.kind == "ClusterRoleBinding" else (binding.namespace, subject_key)
            index: Any = self._cluster_by_subject if binding.kind == "ClusterRoleBinding" else self._namespaced_by_subject
            keys = index.get(index_key)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[index_key]

    # ---- resolving ------------------------------------------------------------------

    def role_rules(self, role_kind: str, role_name: str, namespace: str) -> tuple[tuple[Rule, ...], str]:
        """The rules a roleRef points at, and an error when it points at nothing."""
        if role_kind == "ClusterRole":
            rules = self.cluster_roles.get(role_name)
        elif role_kind == "Role":
            rules = self.roles.get((namespace, role_name))
        else:
            return (), f'unsupported role reference kind: "{role_kind}"'
        if rules is None:
            return (), _not_found(role_kind, role_name)
        return rules, ""

    def _applicable(self, user: UserInfo, namespace: str) -> Iterable[tuple[Binding, Subject]]:
        """(binding, the subject that names the user) for each binding that applies, cluster-wide
        ones first, each binding once, in a stable order."""
        keys = user_keys(user)
        seen: set[tuple[str, str, str]] = set()
        for scope in ("", namespace) if namespace else ("",):
            found: list[tuple[str, str, str]] = []
            for key in keys:
                index = self._cluster_by_subject.get(key) if not scope else self._namespaced_by_subject.get((scope, key))
                if index:
                    found.extend(b for b in index if b not in seen)
            for binding_key in sorted(set(found)):
                seen.add(binding_key)
                self.bindings_examined += 1
                binding = self._bindings[binding_key]
                subject = next((s for s in binding.subjects if _subject_key(s, binding.namespace) in keys), None)
                if subject is not None:
                    yield binding, subject

    def visit_rules(self, user: UserInfo, namespace: str, visit: Visitor) -> None:
        """Call ``visit`` for every rule that applies to ``user`` in ``namespace`` until it returns False."""
        for binding, subject in self._applicable(user, namespace):
            rules, error = self.role_rules(binding.role_kind, binding.role_name, binding.namespace)
            if error and not visit("", None, error):
                return
            source = binding.describe(subject)
            for rule in rules:
                if not visit(source, rule, ""):
                    return

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        """Every rule that applies to ``user`` in ``namespace``, and the errors met resolving them."""
        rules: list[Rule] = []
        errors: list[str] = []

        def collect(_source: str, rule: Rule | None, error: str) -> bool:
            if rule is not None:
                rules.append(rule)
            if error:
                errors.append(error)
            return True

        self.visit_rules(user, namespace, collect)
        return rules, errors


def aggregate_errors(errors: list[str]) -> str:
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


@dataclass(slots=True)
class _Resolved:
    """What applies to one user in one namespace, and the decisions already taken from it."""

    steps: list[tuple[str, Rule | None, str]]
    # Some rule names objects: a decision then depends on the object's name too.
    by_name: bool
    decisions: dict[tuple[str, ...], tuple[Decision, str]] = field(default_factory=dict)


class RBACAuthorizer:
    """``--authorization-mode=RBAC``. What applies to a user in a namespace (the rules and where
    they come from), and each decision taken from it, is remembered until the next change of any
    role or binding: clients repeat requests as the same user, and roles and bindings change rarely."""

    MAX_REMEMBERED = 4096
    MAX_DECISIONS = 512  # per user and namespace

    def __init__(self, index: RBACIndex) -> None:
        self.index = index
        self._resolved: dict[tuple[object, ...], _Resolved] = {}
        self._generation = -1

    def _resolve(self, user: UserInfo, namespace: str) -> _Resolved:
        if len(self._resolved) >= self.MAX_REMEMBERED:
            self._resolved.clear()
        steps: list[tuple[str, Rule | None, str]] = []

        def collect(source: str, rule: Rule | None, error: str) -> bool:
            steps.append((source, rule, error))
            return True

        self.index.visit_rules(user, namespace, collect)
        by_name = any(rule is not None and rule.resource_names for _source, rule, _error in steps)
        resolved = self._resolved[(user.name, user.groups, namespace)] = _Resolved(steps, by_name)
        return resolved

    def authorize(self, attrs: Attributes) -> tuple[Decision, str]:
        if self._generation != self.index.generation:
            self._resolved.clear()
            self._generation = self.index.generation
        user = attrs.user
        resolved = self._resolved.get((user.name, user.groups, attrs.namespace)) or self._resolve(user, attrs.namespace)
        if attrs.resource_request:
            key: tuple[str, ...] = (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, attrs.name if resolved.by_name else "")
        else:
            key = (attrs.verb, attrs.path)
        decision = resolved.decisions.get(key)
        if decision is None:
            if len(resolved.decisions) >= self.MAX_DECISIONS:
                resolved.decisions.clear()
            decision = resolved.decisions[key] = self._decide(resolved.steps, attrs)
        return decision

    @staticmethod
    def _decide(steps: list[tuple[str, Rule | None, str]], attrs: Attributes) -> tuple[Decision, str]:
        errors: list[str] = []
        for source, rule, error in steps:
            if rule is not None and rule.allows(attrs):
                return Decision.ALLOW, f"RBAC: allowed by {source}"
            if error:
                errors.append(error)
        return Decision.NO_OPINION, f"RBAC: {aggregate_errors(errors)}" if errors else ""
