"""The roles and bindings the server serves from its start are upstream kube-apiserver's, entry by
entry: each one in upstream's record of its default policy (the testdata of its bootstrap policy
package, read from Go's module cache at test time; skipped where Go or the module is missing,
unless ``DRA_REQUIRE_GO=1``) is served here with the same labels, annotations, rules, aggregation,
role and subjects. Roles with an aggregationRule are compared without their rules, which upstream
records empty and the aggregation fills in."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.authcluster import start_auth_cluster
from tests.interop.golang import upstream_file

TESTDATA = "plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
# Upstream's file -> where this server serves those objects.
FILES = {
    "cluster-roles.yaml": f"{RBAC}/clusterroles",
    "cluster-role-bindings.yaml": f"{RBAC}/clusterrolebindings",
    "controller-roles.yaml": f"{RBAC}/clusterroles",
    "controller-role-bindings.yaml": f"{RBAC}/clusterrolebindings",
    "namespace-roles.yaml": f"{RBAC}/roles",
    "namespace-role-bindings.yaml": f"{RBAC}/rolebindings",
}


def upstream_items(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(upstream_file(f"{TESTDATA}/{name}").read_text())["items"]
    return items


def essentials(obj: dict[str, Any]) -> dict[str, Any]:
    """What a bootstrap object says: its metadata that upstream records, and what it grants."""
    meta = obj["metadata"]
    out = {
        "kind": obj["kind"],
        "namespace": meta.get("namespace", ""),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "aggregationRule": obj.get("aggregationRule"),
        "roleRef": obj.get("roleRef"),
        "subjects": obj.get("subjects") or [],
    }
    if obj.get("aggregationRule") is None:
        out["rules"] = obj.get("rules") or []
    return out


@pytest.mark.parametrize("name", FILES)
def test_the_bootstrap_policy_is_upstreams(admin: httpx.Client, name: str) -> None:
    expected = upstream_items(name)
    served: dict[tuple[str, str], dict[str, Any]] = {}
    for item in admin.get(FILES[name]).json()["items"]:
        served[(item["metadata"].get("namespace", ""), item["metadata"]["name"])] = item
    differences = []
    for want in expected:
        key = (want["metadata"].get("namespace", ""), want["metadata"]["name"])
        have = served.get(key)
        if have is None:
            differences.append(f"{key}: not served")
            continue
        have = {**have, "kind": want["kind"]}  # a list's items carry no kind
        if essentials(have) != essentials(want):
            differences.append(
                f"{key}:\n  upstream: {json.dumps(essentials(want), sort_keys=True)}\n  served:   {json.dumps(essentials(have), sort_keys=True)}"
            )
    assert not differences, "\n".join(differences)


def test_the_roles_upstreams_gates_add_follow_the_servers_gates(admin: httpx.Client, start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """Upstream adds some rules and controller roles only with a gate on (its controller policy);
    so does the server, with its own gates: off in the shared cluster, on in a server of its own."""
    assert admin.get(f"{RBAC}/clusterroles/system:controller:resourcepoolstatusrequest-controller").status_code == 404
    assert admin.get(f"{RBAC}/clusterroles/system:controller:podgroup-protection-controller").status_code == 404
    gates = gates_flag({Gate.GenericWorkload: True, Gate.DRAWorkloadResourceClaims: True, Gate.DRAResourcePoolStatus: True})
    cluster = start_auth_cluster(start_server, tmp_path, flags=[f"--feature-gates={gates}"])
    with cluster.admin() as gated:
        pool_status = gated.get(f"{RBAC}/clusterrolebindings/system:controller:resourcepoolstatusrequest-controller").json()
        assert pool_status["subjects"] == [{"kind": "ServiceAccount", "name": "resourcepoolstatusrequest-controller", "namespace": "kube-system"}]
        rules = gated.get(f"{RBAC}/clusterroles/system:controller:resourcepoolstatusrequest-controller").json()["rules"]
        assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourcepoolstatusrequests/status"], "verbs": ["patch", "update"]} in rules
        claims = gated.get(f"{RBAC}/clusterroles/system:controller:resource-claim-controller").json()["rules"]
        assert {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups/status"], "verbs": ["patch", "update"]} in claims
        assert gated.get(f"{RBAC}/clusterroles/system:controller:podgroup-protection-controller").status_code == 200

