"""RBAC inside the server: the bootstrap roles and bindings exist from the start (missing rules
and subjects are restored in those marked for auto-update, as upstream reconciles them), and a
ClusterRole with an aggregationRule holds the union of the rules of the ClusterRoles it selects
(upstream's aggregation controller, which runs in kube-controller-manager)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.api.generic import GenericStore
from app.api.options import WriteOptions
from app.auth import bootstrap
from app.controlplane.loop import ControlLoop
from app.registry.base import KindStrategy
from app.registry.core import serviceaccount
from app.registry.rbac import clusterrole, clusterrolebinding, rolebinding
from app.registry.rbac import role as namespace_role
from kube.errors import ApiError
from kube.labels import selector_from_label_selector_object
from kube.tasks import together

log = logging.getLogger("app.rbac")
SYSTEM_MANAGER = WriteOptions(field_manager="kube-apiserver")
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
CLUSTER_ROLES = clusterrole.STRATEGY.qualified_resource


def _missing(wanted: list[Any], have: list[Any]) -> list[Any]:
    return [item for item in wanted if item not in have]


async def ensure_bootstrap_policy(registry: GenericStore) -> None:
    """Create the default ClusterRoles, ClusterRoleBindings, Roles and RoleBindings (and the
    service accounts they name), and add back what was removed from those still marked for
    auto-update. All at once: their writes share group commits."""
    await together(
        *(_ensure_service_account(registry, account) for account in bootstrap.service_accounts()),
        *(
            _ensure_policy_object(registry, strategy, obj, field)
            for strategy, objects, field in (
                (clusterrole.STRATEGY, bootstrap.cluster_roles(registry.gates), "rules"),
                (clusterrolebinding.STRATEGY, bootstrap.cluster_role_bindings(registry.gates), "subjects"),
                (namespace_role.STRATEGY, bootstrap.roles(), "rules"),
                (rolebinding.STRATEGY, bootstrap.role_bindings(), "subjects"),
            )
            for obj in objects
        ),
    )


async def _ensure_service_account(registry: GenericStore, account: dict[str, Any]) -> None:
    meta = account["metadata"]
    if registry.storage.cached(serviceaccount.STRATEGY.qualified_resource, meta["namespace"], meta["name"]) is None:
        with contextlib.suppress(ApiError):
            await registry.create(serviceaccount.STRATEGY, meta["namespace"], account, SYSTEM_MANAGER)


async def _ensure_policy_object(registry: GenericStore, strategy: KindStrategy, obj: dict[str, Any], field: str) -> None:
    """Create ``obj``, or add back the ``field`` entries (rules, subjects) missing from the stored one."""
    name = obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace", "")
    stored = registry.storage.cached(strategy.qualified_resource, namespace, name)
    try:
        if stored is None:
            await registry.create(strategy, namespace, obj, SYSTEM_MANAGER)
            return
        current = stored.obj
        if (current["metadata"].get("annotations") or {}).get(AUTOUPDATE) != "true" or "aggregationRule" in obj:
            return
        missing = _missing(obj.get(field) or [], current.get(field) or [])
        if missing:
            await registry.patch(strategy, namespace, name, {field: [*(current.get(field) or []), *missing]}, "merge", SYSTEM_MANAGER)
    except ApiError as exc:
        if exc.code != 409:
            raise


def aggregated_rules(role: dict[str, Any], roles: list[dict[str, Any]]) -> list[Any]:
    """The rules of the ClusterRoles ``role``'s aggregationRule selects, each once, in name order."""
    selectors = [selector_from_label_selector_object(s) for s in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []]
    rules: list[Any] = []
    name = role["metadata"]["name"]
    for other in sorted(roles, key=lambda r: r["metadata"]["name"]):
        if other["metadata"]["name"] == name:
            continue
        labels = other["metadata"].get("labels") or {}
        if any(selector.matches(labels) for selector in selectors):
            rules.extend(r for r in other.get("rules") or [] if r not in rules)
    return rules


def roles_by_name(roles: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {role["metadata"]["name"]: role for role in roles}


def settled_rules(roles: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The rules of every aggregated ClusterRole once aggregation has settled: an aggregated role
    may select others (admin selects edit, edit selects view), so the rules are worked out again with
    the new ones until nothing changes, and written once, rather than one round of writes per level.
    Roles that select each other could change forever: the rounds stop at one per aggregated role."""
    current = roles_by_name(roles)
    aggregated = [name for name, role in current.items() if role.get("aggregationRule") is not None]
    for _ in range(len(aggregated) + 1):
        rules = {name: aggregated_rules(current[name], list(current.values())) for name in aggregated}
        if all(rules[name] == (current[name].get("rules") or []) for name in aggregated):
            break
        current = {**current, **{name: {**current[name], "rules": rules[name]} for name in aggregated}}
    return {name: current[name].get("rules") or [] for name in aggregated}


class ClusterRoleAggregation(ControlLoop):
    """Keeps every aggregated ClusterRole's rules the union of the roles it selects."""

    name = "clusterrole-aggregation"

    def __init__(self, registry: GenericStore) -> None:
        super().__init__()
        self.registry = registry
        self._changed = asyncio.Event()

    def start(self) -> None:
        self.registry.storage.follow(CLUSTER_ROLES, lambda _deleted, _obj: self._changed.set())
        super().start()

    async def run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("cluster role aggregation failed")

    async def reconcile(self) -> None:
        roles = [item.obj for item in (await self.registry.storage.list(CLUSTER_ROLES, None, revision=0)).items]
        stored = roles_by_name(roles)
        changed = {name: rules for name, rules in settled_rules(roles).items() if rules != (stored[name].get("rules") or [])}
        await together(*(self._set_rules(name, rules) for name, rules in changed.items()))

    async def _set_rules(self, name: str, rules: list[Any]) -> None:
        with contextlib.suppress(ApiError):
            await self.registry.patch(clusterrole.STRATEGY, "", name, {"rules": rules}, "merge", SYSTEM_MANAGER)
