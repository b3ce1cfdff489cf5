"""Constrained impersonation (gate ConstrainedImpersonation, on by default as in v1.37): each mode
needs ``impersonate-on:<mode>:<verb>`` on what the request does and ``impersonate:<mode>`` on who it
acts as; the legacy ``impersonate`` verb works as before; with the gate off only the legacy verb
counts. Every request here asks the server who it is (a SelfSubjectReview, which every
authenticated user may create), so what is checked is the impersonation alone."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.authcluster import AuthCluster, start_auth_cluster
from tests.processes import eventually

RBAC = "/apis/rbac.authorization.k8s.io/v1"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
AUTHN = "authentication.k8s.io"


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> dict[str, object]:
    out: dict[str, object] = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def on(mode: str) -> dict[str, object]:
    """``impersonate-on:<mode>:create`` on SelfSubjectReviews, what every request here does."""
    return rule([f"impersonate-on:{mode}:create"], [AUTHN], ["selfsubjectreviews"])


def grant(admin: httpx.Client, subject: dict[str, str], *rules: dict[str, object]) -> None:
    name = f"impersonation-{uuid.uuid4().hex[:8]}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}
    assert admin.post(f"{RBAC}/clusterroles", json=role).status_code == 201
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": [subject],
    }  # fmt: skip
    assert admin.post(f"{RBAC}/clusterrolebindings", json=binding).status_code == 201


def user(name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def whoami(client: httpx.Client, headers: dict[str, str] | list[tuple[str, str]]) -> httpx.Response:
    return client.post(WHOAMI, json=REVIEW, headers=headers)


def user_info(response: httpx.Response) -> dict[str, object]:
    assert response.status_code == 201, response.text
    info: dict[str, object] = response.json()["status"]["userInfo"]
    return info


def assert_forbidden(response: httpx.Response, message: str) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    assert (body["reason"], body["message"]) == ("Forbidden", message)


@pytest.fixture
def requester(auth_cluster: AuthCluster) -> Iterator[tuple[str, httpx.Client]]:
    name = f"impersonator-{uuid.uuid4().hex[:8]}"
    with auth_cluster.as_user(name) as client:
        yield name, client


def constraint_in_audit(auth_cluster: AuthCluster, requester: str, count: int) -> list[tuple[str, str]]:
    """(impersonated user, constraint) of the audited requests of ``requester``, once there are
    ``count`` (the server writes the line after it has answered)."""

    def found() -> list[tuple[str, str]] | None:
        lines = [orjson.loads(line) for line in auth_cluster.audit_log.read_bytes().splitlines()]
        events = [e for e in lines if e["user"].get("username") == requester and "impersonatedUser" in e]
        pairs = [
            (e["impersonatedUser"]["username"], (e.get("authenticationMetadata") or {}).get("impersonationConstraint", "")) for e in events
        ]
        return pairs if len(pairs) >= count else None

    result: list[tuple[str, str]] = eventually(found, "the audit lines")
    return result


# ---- user-info ---------------------------------------------------------------------------------


def test_user_info_with_groups_and_extras(admin: httpx.Client, requester: tuple[str, httpx.Client], auth_cluster: AuthCluster) -> None:
    name, client = requester
    grant(
        admin, user(name), on("user-info"),
        rule(["impersonate:user-info"], [AUTHN], ["users"], ["jane"]),
        rule(["impersonate:user-info"], [AUTHN], ["groups"], ["devs"]),
        rule(["impersonate:user-info"], [AUTHN], ["userextras/example.com/team"], ["blue"]),
        rule(["impersonate:user-info"], [AUTHN], ["uids"], ["1234"]),
    )  # fmt: skip
    headers = [
        ("Impersonate-User", "jane"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Uid", "1234"),
        ("Impersonate-Extra-Example.com%2fteam", "blue"),
    ]
    assert user_info(whoami(client, headers)) == {
        "username": "jane",
        "uid": "1234",
        "groups": ["devs", "system:authenticated"],
        "extra": {"example.com/team": ["blue"]},
    }
    assert constraint_in_audit(auth_cluster, name, 1) == [("jane", "impersonate:user-info")]


def test_user_info_denials(admin: httpx.Client, requester: tuple[str, httpx.Client], auth_cluster: AuthCluster) -> None:
    name, client = requester
    # Nothing granted: the first mode that applies to a user name (user-info) answers.
    assert_forbidden(
        whoami(client, {"Impersonate-User": "jane"}),
        f'selfsubjectreviews.authentication.k8s.io is forbidden: User "{name}" cannot impersonate-on:user-info:create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope',
    )
    grant(
        admin, user(name), on("user-info"),
        rule(["impersonate:user-info"], [AUTHN], ["users"], ["jane"]), rule(["impersonate:user-info"], [AUTHN], ["groups", "userextras/*"]),
    )  # fmt: skip
    assert_forbidden(
        whoami(client, {"Impersonate-User": "jane", "Impersonate-Uid": "1234"}),
        f'uids.authentication.k8s.io "1234" is forbidden: User "{name}" cannot impersonate:user-info resource "uids" in API group "authentication.k8s.io" at the cluster scope',
    )
    # Never system:masters, whatever the grant says.
    assert_forbidden(
        whoami(client, {"Impersonate-User": "jane", "Impersonate-Group": "system:masters"}),
        f'groups.authentication.k8s.io "system:masters" is forbidden: User "{name}" cannot impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster scope: impersonating the system:masters group is not allowed',
    )
    # An extra's key must be a domain-prefixed path.
    assert_forbidden(
        whoami(client, {"Impersonate-User": "jane", "Impersonate-Extra-Scopes": "view"}),
        f'userextras.authentication.k8s.io is forbidden: User "{name}" cannot impersonate:user-info resource "userextras" in API group "authentication.k8s.io" at the cluster scope: '
        'impersonating an invalid key in extra is not allowed: extra.key: Invalid value: "scopes": must be a domain-prefixed path (such as "acme.io/foo")',
    )
    # The permission is per verb of the request.
    response = client.get("/api/v1/namespaces", headers={"Impersonate-User": "jane"})
    assert_forbidden(
        response,
        f'namespaces is forbidden: User "{name}" cannot impersonate-on:user-info:list resource "namespaces" in API group "" at the cluster scope',
    )
    # Where no constrained mode allows it, the legacy verb still does (and the audit line names no constraint).
    grant(admin, user(name), rule(["impersonate"], [""], ["users"], ["joe"]))
    assert user_info(whoami(client, {"Impersonate-User": "joe"})) == {"username": "joe", "groups": ["system:authenticated"]}
    assert constraint_in_audit(auth_cluster, name, 1) == [("joe", "")]


# ---- serviceaccount ----------------------------------------------------------------------------


def test_service_account(admin: httpx.Client, requester: tuple[str, httpx.Client], namespace: str) -> None:
    name, client = requester
    grant(admin, user(name), on("serviceaccount"), rule(["impersonate:serviceaccount"], [AUTHN], ["serviceaccounts"], ["robot"]))
    info = user_info(whoami(client, {"Impersonate-User": f"system:serviceaccount:{namespace}:robot"}))
    assert info == {
        "username": f"system:serviceaccount:{namespace}:robot",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
    }
    assert_forbidden(
        whoami(client, {"Impersonate-User": f"system:serviceaccount:{namespace}:other"}),
        f'serviceaccounts.authentication.k8s.io "other" is forbidden: User "{name}" cannot impersonate:serviceaccount resource "serviceaccounts" in API group "authentication.k8s.io" in the namespace "{namespace}"',
    )


# ---- arbitrary-node ----------------------------------------------------------------------------


def test_arbitrary_node(admin: httpx.Client, requester: tuple[str, httpx.Client]) -> None:
    name, client = requester
    grant(admin, user(name), on("arbitrary-node"), rule(["impersonate:arbitrary-node"], [AUTHN], ["nodes"], ["n1"]))
    assert user_info(whoami(client, {"Impersonate-User": "system:node:n1"})) == {
        "username": "system:node:n1",
        "groups": ["system:nodes", "system:authenticated"],
    }
    assert_forbidden(
        whoami(client, {"Impersonate-User": "system:node:n2"}),
        f'nodes.authentication.k8s.io "n2" is forbidden: User "{name}" cannot impersonate:arbitrary-node resource "nodes" in API group "authentication.k8s.io" at the cluster scope',
    )


# ---- associated-node ---------------------------------------------------------------------------


def node_bound_token(admin: httpx.Client, namespace: str, account: str, node: str) -> str:
    assert admin.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}).status_code == 201
    uid = admin.get(f"/api/v1/nodes/{node}").json()["metadata"]["uid"]
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    assert admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", json=body).status_code == 201
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}},
    }
    answer = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", json=request)
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["status"]["token"]
    return token


def test_associated_node(admin: httpx.Client, auth_cluster: AuthCluster, namespace: str) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    token = node_bound_token(admin, namespace, "driver", node)
    account = f"system:serviceaccount:{namespace}:driver"
    # The node's name is not asked about ("*"): the token binds the account to its node.
    grant(
        admin,
        {"kind": "ServiceAccount", "name": "driver", "namespace": namespace},
        on("associated-node"),
        rule(["impersonate:associated-node"], [AUTHN], ["nodes"]),
    )
    with auth_cluster.with_token(token) as driver:
        assert user_info(whoami(driver, {"Impersonate-User": f"system:node:{node}"})) == {
            "username": f"system:node:{node}",
            "groups": ["system:nodes", "system:authenticated"],
        }
        # Another node is not its own: the arbitrary-node mode is the first that applies.
        assert_forbidden(
            whoami(driver, {"Impersonate-User": "system:node:elsewhere"}),
            f'selfsubjectreviews.authentication.k8s.io is forbidden: User "{account}" cannot impersonate-on:arbitrary-node:create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope',
        )
    assert constraint_in_audit(auth_cluster, account, 1) == [(f"system:node:{node}", "impersonate:associated-node")]


def test_associated_node_needs_the_impersonate_permission(admin: httpx.Client, auth_cluster: AuthCluster, namespace: str) -> None:
    node = f"node-{uuid.uuid4().hex[:8]}"
    token = node_bound_token(admin, namespace, "driver", node)
    account = f"system:serviceaccount:{namespace}:driver"
    grant(admin, {"kind": "ServiceAccount", "name": "driver", "namespace": namespace}, on("associated-node"))
    with auth_cluster.with_token(token) as driver:
        assert_forbidden(
            whoami(driver, {"Impersonate-User": f"system:node:{node}"}),
            f'nodes.authentication.k8s.io "*" is forbidden: User "{account}" cannot impersonate:associated-node resource "nodes" in API group "authentication.k8s.io" at the cluster scope',
        )


# ---- legacy and the request itself --------------------------------------------------------------


def test_groups_without_a_user_are_a_bad_request(requester: tuple[str, httpx.Client]) -> None:
    _name, client = requester
    response = whoami(client, [("Impersonate-Group", "devs"), ("Impersonate-Group", "ops")])
    assert response.status_code == 400
    body = response.json()
    assert (body["reason"], body["message"]) == (
        "BadRequest",
        'requested &user.DefaultInfo{Name:"", UID:"", Groups:[]string{"devs", "ops"}, Extra:map[string][]string(nil)} without impersonating a user name',
    )


# ---- the gate off ------------------------------------------------------------------------------


def test_with_the_gate_off_only_the_legacy_verb_counts(start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    cluster = start_auth_cluster(start_server, tmp_path, flags=["--feature-gates", gates_flag({Gate.ConstrainedImpersonation: False})])
    with cluster.admin() as admin:
        grant(admin, user("constrained"), on("user-info"), rule(["impersonate:user-info"], [AUTHN], ["users"], ["jane"]))
        grant(admin, user("legacy"), rule(["impersonate"], [""], ["users"], ["jane"]))
    with cluster.as_user("constrained") as client:
        assert_forbidden(
            whoami(client, {"Impersonate-User": "jane"}),
            'users "jane" is forbidden: User "constrained" cannot impersonate resource "users" in API group "" at the cluster scope',
        )
    with cluster.as_user("legacy") as client:
        assert user_info(whoami(client, {"Impersonate-User": "jane"})) == {"username": "jane", "groups": ["system:authenticated"]}
