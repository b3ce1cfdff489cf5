"""The scheduler's what-if pod check against upstream's kube-apiserver v1.37.2: the dry run create
it makes as the asker (``DelegatedAuth.create_as``, constrained impersonation) with the role of
``examples/scheduler/rbac.yaml`` and the development admin's grant (``devtools.grants``), as
``schedulers/whatifserver.py`` makes it. Upstream's answers are the ones this project's server gives
(tests/e2e/test_whatif.py), and its refusal of the scheduler's impersonation is the one the endpoint
recognises."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devtools import upstream
from devtools.credentials import IDENTITIES
from kube.client import KubeClient
from kube.delegation import AUTHENTICATED, DelegatedAuth, User
from kube.errors import ApiError
from kube.kubeconfig import load_kubeconfig
from schedulers.whatifserver import IMPERSONATION_REFUSED
from tests.interop.upstream import needs_upstream, upstream_binaries
from tests.processes import eventually

pytestmark = needs_upstream

PODS = "/api/v1/namespaces/default/pods"
DRY_RUN = f"{PODS}?dryRun=All"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
WHATIF_BINDING = f"{RBAC}/clusterrolebindings/system:dra-scheduler-whatif"


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}  # fmt: skip


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[upstream.UpstreamControlPlane]:
    upstream_binaries()
    with upstream.UpstreamControlPlane(tmp_path_factory.mktemp("upstream-whatif")) as plane:
        yield plane


@pytest.fixture(scope="module")
def admin(plane: upstream.UpstreamControlPlane) -> Iterator[httpx.Client]:
    with httpx.Client(**plane.httpx_options(), timeout=30.0) as client:  # type: ignore[arg-type]
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "pod-creator"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]}  # fmt: skip
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "carol-creates-pods"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-creator"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"},
                                {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}  # fmt: skip
        assert client.post(f"{RBAC}/clusterroles", json=role).status_code == 201
        assert client.post(f"{RBAC}/clusterrolebindings", json=binding).status_code == 201
        yield client


def create_as(plane: upstream.UpstreamControlPlane, user: User, obj: dict[str, Any]) -> dict[str, Any] | ApiError:
    """The scheduler's dry run of ``obj`` as ``user``: the created object, or the server's refusal."""

    async def run() -> dict[str, Any] | ApiError:
        connection = load_kubeconfig(plane.kubeconfig("scheduler"))
        async with KubeClient.from_connection(connection, user_agent="whatif-interop") as scheduler:
            try:
                return await DelegatedAuth(scheduler, connection).create_as(user, DRY_RUN, obj)
            except ApiError as exc:
                return exc

    return asyncio.run(run())


CAROL = User("carol", ("team-a", AUTHENTICATED), uid=str(uuid.uuid4()), extra=(("example.com/badge", ("1", "2")),))


def test_the_asker_is_who_the_server_judges(plane: upstream.UpstreamControlPlane, admin: httpx.Client) -> None:
    created = eventually(lambda: (r := create_as(plane, CAROL, pod("w"))) and not isinstance(r, ApiError) and r, "carol may create pods", timeout=20)
    assert created["metadata"]["name"] == "w" and created["spec"]["containers"][0]["name"] == "c"
    assert admin.get(f"{PODS}/w").status_code == 404  # a dry run
    bad = create_as(plane, CAROL, pod("Bad_Name"))
    assert isinstance(bad, ApiError) and bad.code == 422
    assert bad.message.startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    assert any(c.get("field") == "metadata.name" for c in (bad.details or {}).get("causes") or [])
    dave = create_as(plane, User("dave", (AUTHENTICATED,)), pod("w"))
    assert isinstance(dave, ApiError) and (dave.code, dave.message) == (
        403, 'pods is forbidden: User "dave" cannot create resource "pods" in API group "" in the namespace "default"',
    )  # fmt: skip
    assert not IMPERSONATION_REFUSED.search(dave.message)
    account = create_as(plane, User("system:serviceaccount:default:default", ("system:serviceaccounts", AUTHENTICATED)), pod("w"))
    assert not isinstance(account, ApiError), account
    name, groups = IDENTITIES["admin"]
    masters = create_as(plane, User(name, (*groups, AUTHENTICATED)), pod("w"))
    assert not isinstance(masters, ApiError), masters  # the development admin's legacy grant


def test_without_the_role_the_scheduler_is_refused_in_words_the_endpoint_recognises(plane: upstream.UpstreamControlPlane, admin: httpx.Client) -> None:
    binding = admin.get(WHATIF_BINDING).json()
    assert admin.delete(WHATIF_BINDING).status_code == 200
    try:
        refused = eventually(lambda: r if isinstance(r := create_as(plane, CAROL, pod("w")), ApiError) else None, "the role is gone", timeout=20)
        assert refused.code == 403 and 'User "system:kube-scheduler" cannot impersonate' in refused.message, refused.message
        assert IMPERSONATION_REFUSED.search(refused.message)
    finally:
        assert admin.post(f"{RBAC}/clusterrolebindings", json={**binding, "metadata": {"name": binding["metadata"]["name"]}}).status_code == 201
