"""What a server writes at start before it reports ready: the system namespaces, the bootstrap
RBAC policy and the service accounts it names, the system PriorityClasses and the authentication
ConfigMap. A first start stores them in two group commits (the namespaces, which namespaced objects
need first, then the rest together); a restart adds back what was removed from the objects still
marked for auto-update, and writes nothing when nothing is missing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from app.api.options import DeleteOptions, WriteOptions
from app.auth import bootstrap
from app.config import Settings
from app.controlplane.rbac import settled_rules
from app.registry.core import namespace as namespace_kind
from app.registry.rbac import clusterrole, clusterrolebinding
from app.registry.scheduling.priorityclass_validation import system_priority_classes
from app.server import ApiServer
from app.storage.db import run_migrations
from tests.conftest import Databases
from tests.processes import eventually_async

CLUSTER_ROLES = clusterrole.STRATEGY.qualified_resource
CLUSTER_ROLE_BINDINGS = clusterrolebinding.STRATEGY.qualified_resource
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
WRITER = WriteOptions(field_manager="test")


@pytest.fixture
def url(databases: Databases) -> str:
    """A new database on the current schema (made here: the tests below run in the event loop)."""
    new = databases.new()
    run_migrations(new)
    return new


@asynccontextmanager
async def started(url: str) -> AsyncIterator[ApiServer]:
    """A server started as ``python -m app serve`` starts it, up to the moment it reports ready."""
    server = ApiServer(Settings(database_url=url))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def stored_keys(server: ApiServer, resource: str) -> set[tuple[str, str]]:
    return {key(item.obj) for item in (await server.storage.list(resource, None, revision=0)).items}


def key(obj: dict[str, object]) -> tuple[str, str]:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return meta.get("namespace", ""), meta["name"]


async def test_a_first_start_stores_every_bootstrap_object_in_two_commits(url: str) -> None:
    async with started(url) as server:
        commits_at_ready = server.storage.commits
        cached = server.storage.cached
        for name in namespace_kind.SYSTEM_NAMESPACES:
            assert cached(namespace_kind.STRATEGY.qualified_resource, "", name) is not None, name
        for objects, resource in (
            (bootstrap.cluster_roles(server.gates), CLUSTER_ROLES),
            (bootstrap.cluster_role_bindings(server.gates), CLUSTER_ROLE_BINDINGS),
            (bootstrap.roles(), "roles.rbac.authorization.k8s.io"),
            (bootstrap.role_bindings(), "rolebindings.rbac.authorization.k8s.io"),
            (bootstrap.service_accounts(), "serviceaccounts"),
            (system_priority_classes(), "priorityclasses.scheduling.k8s.io"),
        ):
            missing = {key(obj) for obj in objects} - await stored_keys(server, resource)
            assert not missing, (resource, missing)
        assert cached("configmaps", "kube-system", "extension-apiserver-authentication") is not None
        # One commit per object was ~160 commits: minutes on a machine whose disk and CPUs are busy.
        assert commits_at_ready <= 2, f"the bootstrap objects took {commits_at_ready} group commits"


async def test_a_restart_restores_what_was_removed_from_auto_updated_objects_only(url: str) -> None:
    async with started(url) as server:
        registry, cached = server.registry, server.storage.cached
        # A rule taken from a role marked for auto-update, a subject from a binding, a binding
        # deleted, and a role whose annotation says to leave it as it is.
        role = cached(CLUSTER_ROLES, "", "system:auth-delegator")
        binding = cached(CLUSTER_ROLE_BINDINGS, "", "system:public-info-viewer")
        assert role is not None and len(role.obj["rules"]) == 2
        assert binding is not None and len(binding.obj["subjects"]) == 2
        await registry.patch(clusterrole.STRATEGY, "", "system:auth-delegator", {"rules": role.obj["rules"][1:]}, "merge", WRITER)
        await registry.patch(clusterrolebinding.STRATEGY, "", "system:public-info-viewer", {"subjects": binding.obj["subjects"][1:]}, "merge", WRITER)
        await registry.delete(clusterrolebinding.STRATEGY, "", "system:discovery", DeleteOptions())
        left_alone = {"metadata": {"annotations": {AUTOUPDATE: "false"}}, "rules": []}
        await registry.patch(clusterrole.STRATEGY, "", "system:public-info-viewer", left_alone, "merge", WRITER)
    async with started(url) as server:
        cached = server.storage.cached
        restored = cached(CLUSTER_ROLES, "", "system:auth-delegator")
        assert restored is not None and sorted(map(str, restored.obj["rules"])) == sorted(map(str, role.obj["rules"]))
        subjects = cached(CLUSTER_ROLE_BINDINGS, "", "system:public-info-viewer")
        assert subjects is not None and sorted(map(str, subjects.obj["subjects"])) == sorted(map(str, binding.obj["subjects"]))
        assert cached(CLUSTER_ROLE_BINDINGS, "", "system:discovery") is not None
        unchanged = cached(CLUSTER_ROLES, "", "system:public-info-viewer")
        assert unchanged is not None and unchanged.obj["rules"] == []
        assert server.storage.commits == 1, "what a restart restores is written together"
    async with started(url) as server:
        assert server.storage.commits == 0, "a restart with nothing missing writes nothing"


async def test_aggregated_roles_are_written_once_each_at_their_settled_rules(url: str) -> None:
    async with started(url) as server:
        cached = server.storage.cached
        replayed = len((await server.storage.list(CLUSTER_ROLES, None, revision=0)).items)
        seen: list[str] = []
        server.storage.follow(CLUSTER_ROLES, lambda _deleted, obj: seen.append(obj["metadata"]["name"]))
        written = seen[replayed:]  # what changes from now on (the first names are the replay)

        def rules(name: str) -> list[Any]:
            role = cached(CLUSTER_ROLES, "", name)
            return (role.obj.get("rules") or []) if role is not None else []

        async def admin_aggregated() -> bool:
            written[:] = seen[replayed:]
            return bool(rules("admin"))

        # admin selects edit's rules, edit selects view's: three levels, each role written once.
        await eventually_async(admin_aggregated, "admin's rules aggregated", timeout=60)
        assert all(rule in rules("admin") for rule in rules("edit")) and all(rule in rules("edit") for rule in rules("view"))
        assert rules("view"), "view aggregates system:aggregate-to-view"
        assert sorted(written) == sorted(set(written)), f"a role written more than once: {written}"
        assert {"admin", "edit", "view"} <= set(written)


def test_aggregation_settles_chains_at_once_and_stops_on_cycles() -> None:
    def role(name: str, labels: dict[str, str], rules: list[str], selects: list[dict[str, str]] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"name": name, "labels": labels}, "rules": rules}
        if selects is not None:
            body["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": s} for s in selects]}
        return body

    chain = [
        role("top", {}, [], [{"to": "top"}]),
        role("middle", {"to": "top"}, [], [{"to": "middle"}]),
        role("leaf", {"to": "middle"}, ["read"]),
    ]
    assert settled_rules(chain) == {"top": ["read"], "middle": ["read"]}
    cycle = [role("a", {"to": "b"}, ["x"], [{"to": "a"}]), role("b", {"to": "a"}, ["y"], [{"to": "b"}])]
    assert set(settled_rules(cycle)) == {"a", "b"}, "an answer, not a loop"
