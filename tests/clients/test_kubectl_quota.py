"""kubectl and ResourceQuotas: ``create quota`` with scopes, ``describe quota`` and ``get quota``
reading the status, and a write over the quota refused with upstream's words. No controller runs
here: the test fills in the status as the controller would."""

from __future__ import annotations

import json
import re

import httpx

from tests.clients.kubectl_helpers import Kubectl
from tests.helpers import claim

COUNT = "count/resourceclaims.resource.k8s.io"


def test_create_describe_and_hit_a_quota(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    out = kubectl.ok("create", "quota", "claims", "-n", ns, f"--hard={COUNT}=1,pods=2,requests.cpu=1", "--scopes=NotTerminating")
    assert out.strip() == "resourcequota/claims created"
    path = f"/api/v1/namespaces/{ns}/resourcequotas/claims"
    quota = api.get(path).json()
    assert quota["spec"] == {"hard": {COUNT: "1", "pods": "2", "requests.cpu": "1"}, "scopes": ["NotTerminating"]}
    status = {"hard": quota["spec"]["hard"], "used": {COUNT: "0", "pods": "1", "requests.cpu": "500m"}}
    assert api.put(f"{path}/status", json={**quota, "status": status}).status_code == 200

    out = kubectl.ok("describe", "quota", "claims", "-n", ns)
    assert re.search(r"^Name:\s+claims$", out, re.M), out
    assert re.search(r"^Scopes:\s+NotTerminating$", out, re.M), out
    assert re.search(r"^Resource\s+Used\s+Hard$", out, re.M), out
    rows = re.findall(r"^(\S+)\s+(\S+)\s+(\S+)$", out[out.index("--------") :], re.M)
    assert rows[1:] == [(COUNT, "0", "1"), ("pods", "1", "2"), ("requests.cpu", "500m", "1")], out

    table = kubectl.ok("get", "quota", "-n", ns)
    assert re.search(rf"^claims\s+{re.escape(COUNT)}: 0/1, pods: 1/2, requests.cpu: 500m/1\s+\S+$", table, re.M), table

    # A scoped quota does not limit claims (their evaluator has no scopes): an unscoped one does.
    for name in ("c1", "c2"):
        assert kubectl.ok("create", "-n", ns, "-f", "-", stdin=json.dumps(claim(name))).strip() == f"resourceclaim.resource.k8s.io/{name} created"
    kubectl.ok("create", "quota", "unscoped", "-n", ns, f"--hard={COUNT}=2")
    unscoped = api.get(f"/api/v1/namespaces/{ns}/resourcequotas/unscoped").json()
    status = {"hard": {COUNT: "2"}, "used": {COUNT: "2"}}
    assert api.put(f"/api/v1/namespaces/{ns}/resourcequotas/unscoped/status", json={**unscoped, "status": status}).status_code == 200
    refused = kubectl.fails("create", "-n", ns, "-f", "-", stdin=json.dumps(claim("c3")))
    assert (
        'Error from server (Forbidden): error when creating "STDIN": resourceclaims.resource.k8s.io "c3" is forbidden: '
        f"exceeded quota: unscoped, requested: {COUNT}=1, used: {COUNT}=2, limited: {COUNT}=2"
    ) in refused.err, str(refused)
