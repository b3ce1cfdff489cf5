"""What-if capacity on the whole stack: ``kubectl dra fit``'s answer, then that many pods created,
and what the scheduler actually does with them; ``drain-plan``; bad input as the user sees it."""

from __future__ import annotations

import json
import ssl
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.grants import ADMIN_IMPERSONATION
from kube.pki import Authority, cert_pem, key_pem
from tests.e2e.test_kubectl_dra import GPU, kubectl, pod, template
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = [pytest.mark.slow]

PODS = "/api/v1/namespaces/default/pods"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Three nodes of 8 GPUs; one pod already holds 3 GPUs."""
    with running_stack(tmp_path_factory.mktemp("whatif"), nodes=3) as stack, stack.admin() as admin:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class).status_code == 201
        templates = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
        for body in (template("two", 2), template("three", 3)):
            assert admin.post(templates, json=body).status_code == 201, body
        assert admin.post(PODS, json=pod("holder", "three")).status_code == 201
        eventually(lambda: admin.get(f"{PODS}/holder").json()["spec"].get("nodeName"), "the holder runs", timeout=60)
        yield stack


def pod_file(tmp: Path, body: dict[str, object]) -> str:
    path = tmp / "pod.yaml"
    path.write_text(yaml.safe_dump(body))
    return str(path)


def test_fit_then_create_that_many(stack: Stack, tmp_path: Path) -> None:
    """The answer, then the pods: as many bind as fit said, on the nodes it said; one more waits."""
    with stack.admin() as admin:
        claims_before = len(admin.get(CLAIMS).json()["items"])
        run = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "-o", "json")
        assert run.returncode == 0, run.stderr
        answer = json.loads(run.stdout)
        assert list(answer) == ["total", "nodes", "unfit"]
        assert answer["total"] == 10  # (24 - 3) // 2, less the one odd device left on the holder's node
        assert all(len(copy) == 2 and all(d.startswith(f"{GPU}/") for d in copy) for n in answer["nodes"] for copy in n["devices"])
        assert len(admin.get(CLAIMS).json()["items"]) == claims_before  # nothing was created
        predicted = Counter({n["name"]: n["count"] for n in answer["nodes"]})

        for i in range(answer["total"] + 1):
            assert admin.post(PODS, json=pod(f"worker-{i}", "two")).status_code == 201

        def settled() -> bool:
            items = [p for p in admin.get(PODS).json()["items"] if p["metadata"]["name"].startswith("worker-")]
            tried = [
                p
                for p in items
                if p["spec"].get("nodeName") or any(c["type"] == "PodScheduled" for c in (p.get("status") or {}).get("conditions") or [])
            ]
            return len(tried) == len(items)

        eventually(settled, "the scheduler placed or refused every worker", timeout=90)
        items = [p for p in admin.get(PODS).json()["items"] if p["metadata"]["name"].startswith("worker-")]
        actual = Counter(p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName"))
        assert actual == predicted
        assert sum(1 for p in items if not p["spec"].get("nodeName")) == 1

        # Now nothing more fits, and every node says why in kubectl dra why's words.
        after = json.loads(kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "-o", "json").stdout)
        assert after["total"] == 0 and len(after["unfit"]) == 3
        text = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")))
        assert "Total: 0 copies fit on 0 nodes." in text.stdout and "3 nodes take none:" in text.stdout, text.stdout
        why = kubectl(stack, "why", "pod/worker-10")
        assert any(u["reason"].split(": ", 1)[-1] in why.stdout for u in after["unfit"]), (after, why.stdout)

        # Without the workers' node, or with two more nodes of the gpu profile.
        node = sorted(predicted)[0]
        more = json.loads(
            kubectl(
                stack, "fit", "-f", pod_file(tmp_path, pod("worker", "two")), "--add-nodes", "2", "--profile", "gpu", "-o", "json"
            ).stdout
        )
        assert more["total"] == 8 and {n["name"] for n in more["nodes"]} == {"whatif-node-0", "whatif-node-1"}
        plan = json.loads(kubectl(stack, "drain-plan", node, "-o", "json").stdout)
        assert plan["node"] == node and {p["pod"] for p in plan["pods"]} >= {
            f"default/{p['metadata']['name']}" for p in items if p["spec"].get("nodeName") == node
        }
        assert plan["placed"] == 0 and all("reason" in p for p in plan["pods"])  # every device is taken elsewhere


def test_bad_input(stack: Stack, tmp_path: Path) -> None:
    invalid = kubectl(stack, "fit", "-f", pod_file(tmp_path, {**pod("Bad_Name", "two")}))
    assert invalid.returncode == 1 and invalid.stderr.startswith(
        'Error from server (Invalid): Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'
    ), invalid.stderr
    missing = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "nope")))
    assert missing.stderr == 'Error from server (NotFound): resourceclaimtemplates.resource.k8s.io "nope" not found\n'
    named = pod("w")
    named["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "does-not-exist"}]
    no_claim = kubectl(stack, "fit", "-f", pod_file(tmp_path, named))
    assert no_claim.stderr == 'Error from server (NotFound): resourceclaims.resource.k8s.io "does-not-exist" not found\n'
    too_many = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--max", "1000000")
    assert too_many.stderr == (
        'Error from server (Invalid): FitRequest "" is invalid: max: Invalid value: 1000000: must be at most 10000 (the scheduler\'s bound)\n'
    )
    node = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--without-node", "sim-9")
    assert node.stderr == 'Error from server (NotFound): nodes "sim-9" not found\n'
    profile = kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")), "--add-nodes", "1", "--profile", "tpu")
    assert profile.stderr.startswith(
        'Error from server (Invalid): FitRequest "" is invalid: changes.addNodes[0].profile: Unsupported value: "tpu": supported values: "cpu", "gpu"'
    ), profile.stderr
    assert kubectl(stack, "drain-plan", "sim-9").stderr == 'Error from server (NotFound): nodes "sim-9" not found\n'


# --- the endpoint itself, asked directly (no kubectl dra): the API server's answer for the pod ---

RBAC = "/apis/rbac.authorization.k8s.io/v1"
WHATIF_BINDING = f"{RBAC}/clusterrolebindings/system:dra-scheduler-whatif"


def fit_url(stack: Stack, namespace: str = "default") -> str:
    return f"https://127.0.0.1:{stack.explain_port}/whatif/namespaces/{namespace}/fit"


def user_context(stack: Stack, tmp: Path, name: str) -> ssl.SSLContext:
    """TLS with a client certificate of ``name`` from the cluster's CA (how a user reaches the scheduler)."""
    trust = stack.credentials.ca_cert
    cert, key = Authority.load(trust, stack.credentials.directory / "ca.key").client(name, ())
    (tmp / f"{name}.crt").write_bytes(cert_pem(cert))
    (tmp / f"{name}.key").write_bytes(key_pem(key))
    context = ssl.create_default_context(cafile=str(trust))
    context.load_cert_chain(tmp / f"{name}.crt", tmp / f"{name}.key")
    return context


def grant(admin: httpx.Client, name: str, subject: dict[str, str], rules: list[dict[str, Any]], namespace: str = "") -> None:
    """A (Cluster)Role of ``rules`` bound to ``subject``; in ``namespace`` when given."""
    where = f"{RBAC}/namespaces/{namespace}" if namespace else RBAC
    kind = "Role" if namespace else "ClusterRole"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": meta,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}, "subjects": [subject]}  # fmt: skip
    assert admin.post(f"{where}/{kind.lower()}s", json=role).status_code == 201
    assert admin.post(f"{where}/{kind.lower()}bindings", json=binding).status_code == 201


def fit(url: str, question: dict[str, Any], context: ssl.SSLContext, token: str = "") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url, json=question, verify=context, headers=headers, timeout=30)


def causes(response: httpx.Response) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c["reason"]) for c in response.json()["details"]["causes"]]


@pytest.fixture(scope="module")
def asker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """Carol, a user (client certificate) who may create pods in every namespace and read claims in "default"."""
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    with stack.admin() as admin:
        grant(admin, "whatif-carol", {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}, rules)
        claims = [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}]
        grant(admin, "whatif-carol-claims", {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}, claims, "default")
    context = user_context(stack, tmp_path_factory.mktemp("carol"), "carol")
    question = {"pod": pod("w", "two"), "templates": [template("two", 2)], "max": 1}
    eventually(lambda: fit(fit_url(stack), question, context).status_code == 200, "carol may ask", timeout=20)
    return context


def test_a_direct_caller_gets_the_api_servers_answer_for_the_pod(stack: Stack, asker: ssl.SSLContext) -> None:
    """The pod is checked by the API server as the caller (a dry run): its 422 with field paths,
    its 404 for a namespace that does not exist; nothing is created."""
    two = [template("two", 2)]
    with stack.admin() as admin:
        pods_before = {p["metadata"]["name"] for p in admin.get(PODS).json()["items"]}
        bad_name = fit(fit_url(stack), {"pod": pod("Bad_Name", "two"), "templates": two}, asker)
        assert bad_name.status_code == 422, bad_name.text
        assert bad_name.json()["reason"] == "Invalid"
        assert bad_name.json()["message"].startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
        assert ("metadata.name", "FieldValueInvalid") in causes(bad_name)
        no_containers = pod("w", "two")
        del no_containers["spec"]["containers"]
        missing = fit(fit_url(stack), {"pod": no_containers, "templates": two}, asker)
        assert missing.status_code == 422, missing.text
        assert missing.json()["message"] == 'Pod "w" is invalid: spec.containers: Required value'
        assert causes(missing) == [("spec.containers", "FieldValueRequired")]
        both = pod("w", "two")
        both["spec"]["resourceClaims"][0]["resourceClaimName"] = "x"
        entry = fit(fit_url(stack), {"pod": both, "templates": two}, asker)
        assert entry.status_code == 422 and entry.json()["message"].startswith('Pod "w" is invalid: spec.resourceClaims[0]: Invalid value')
        assert causes(entry)[0][0] == "spec.resourceClaims[0]"
        nowhere = fit(fit_url(stack, "nowhere"), {"pod": pod("w", "two", namespace="nowhere"), "templates": two}, asker)
        assert (nowhere.status_code, nowhere.json()["reason"], nowhere.json()["message"]) == (404, "NotFound", 'namespaces "nowhere" not found')
        # A pod of a name that exists is asked about all the same.
        existing = fit(fit_url(stack), {"pod": pod("holder", "two"), "templates": two, "max": 1}, asker)
        assert existing.status_code == 200 and existing.json()["kind"] == "FitAnswer", existing.text
        assert {p["metadata"]["name"] for p in admin.get(PODS).json()["items"]} == pods_before


def test_a_service_account_is_asked_about_as_itself(stack: Stack, tmp_path: Path) -> None:
    """A bearer token of a service account: the dry run is made as that service account."""
    with stack.admin() as admin:
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "asker"}}
        assert admin.post("/api/v1/namespaces/default/serviceaccounts", json=account).status_code == 201
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        token = admin.post("/api/v1/namespaces/default/serviceaccounts/asker/token", json=request).json()["status"]["token"]
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
        grant(admin, "whatif-asker", {"kind": "ServiceAccount", "name": "asker", "namespace": "default"}, rules, "default")
    context = ssl.create_default_context(cafile=str(stack.credentials.ca_cert))
    question = {"pod": pod("Bad_Name", "two"), "templates": [template("two", 2)]}
    refused = eventually(lambda: (r := fit(fit_url(stack), question, context, token)).status_code != 403 and r, "the account may ask", timeout=20)
    assert refused.status_code == 422 and refused.json()["message"].startswith('Pod "Bad_Name" is invalid: metadata.name'), refused.text


def test_a_caller_who_may_not_create_pods_is_refused(stack: Stack, tmp_path: Path) -> None:
    dave = user_context(stack, tmp_path, "dave")
    refused = fit(fit_url(stack), {"pod": pod("w", "two"), "templates": [template("two", 2)]}, dave)
    assert (refused.status_code, refused.json()["reason"], refused.json()["message"]) == (
        403, "Forbidden", 'pods is forbidden: User "dave" cannot create resource "pods" in API group "" in the namespace "default"',
    )  # fmt: skip


def test_the_other_bad_input_through_the_endpoint(stack: Stack, asker: ssl.SSLContext) -> None:
    """Unknown profile and node, a claim that does not exist, ``max`` over the bound: clear 4xx with field paths."""
    question = {"pod": pod("w", "two"), "templates": [template("two", 2)]}
    profile = fit(fit_url(stack), {**question, "changes": {"addNodes": [{"count": 1, "profile": "tpu"}]}}, asker)
    assert profile.status_code == 422 and causes(profile) == [("changes.addNodes[0].profile", "FieldValueNotSupported")], profile.text
    node = fit(fit_url(stack), {**question, "changes": {"removeNodes": ["sim-9"]}}, asker)
    assert (node.status_code, node.json()["message"]) == (404, 'nodes "sim-9" not found')
    named = pod("w")
    named["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "does-not-exist"}]
    claim = fit(fit_url(stack), {"pod": named}, asker)
    assert (claim.status_code, claim.json()["message"]) == (404, 'resourceclaims.resource.k8s.io "does-not-exist" not found')
    no_template = fit(fit_url(stack), {"pod": pod("w", "two")}, asker)
    assert (no_template.status_code, no_template.json()["message"]) == (404, 'resourceclaimtemplates.resource.k8s.io "two" not found')
    too_many = fit(fit_url(stack), {**question, "max": 1_000_000}, asker)
    assert too_many.status_code == 422 and causes(too_many) == [("max", "FieldValueInvalid")], too_many.text


def test_a_scheduler_that_may_not_impersonate_says_so(stack: Stack, asker: ssl.SSLContext) -> None:
    """Without its impersonation grant the scheduler cannot have the pod checked: a clear 500, never an answer."""
    question = {"pod": pod("w", "two"), "templates": [template("two", 2)], "max": 1}
    with stack.admin() as admin:
        binding = admin.get(WHATIF_BINDING).json()
        assert admin.delete(WHATIF_BINDING).status_code == 200
        try:
            refused = eventually(lambda: (r := fit(fit_url(stack), question, asker)).status_code != 200 and r, "the grant is gone", timeout=20)
            body = refused.json()
            assert (refused.status_code, body["reason"]) == (500, "InternalError"), refused.text
            assert body["message"].startswith('the scheduler cannot have the API server check the pod as "carol": ')
            assert 'User "system:kube-scheduler" cannot impersonate' in body["message"]
            assert '"impersonate-on:user-info:create"' in body["message"] and "the ClusterRole system:dra-scheduler-whatif" in body["message"]
        finally:
            restored = {**binding, "metadata": {k: v for k, v in binding["metadata"].items() if k in ("name", "labels", "annotations")}}
            assert admin.post(f"{RBAC}/clusterrolebindings", json=restored).status_code == 201
    eventually(lambda: fit(fit_url(stack), question, asker).status_code == 200, "the grant is back", timeout=20)


def test_an_admin_in_system_masters_needs_the_legacy_grant(stack: Stack, tmp_path: Path) -> None:
    """Constrained impersonation never acts as system:masters: without the development stacks'
    legacy grant (devtools/grants.py) the admin's kubectl dra fit says so, naming what is missing."""
    path = f"{RBAC}/clusterrolebindings/{ADMIN_IMPERSONATION}"
    with stack.admin() as admin:
        binding = admin.get(path).json()
        assert admin.delete(path).status_code == 200
        try:
            refused = eventually(
                lambda: (r := kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two")))).returncode == 1 and r, "the grant is gone", timeout=20
            )
            assert refused.stderr.startswith(
                'Error from server (InternalError): the scheduler cannot have the API server check the pod as "kubernetes-admin": '
            ), refused.stderr
            assert "impersonating the system:masters group is not allowed" in refused.stderr
            assert 'a member of system:masters can only be impersonated with "impersonate"' in refused.stderr
        finally:
            restored = {**binding, "metadata": {"name": ADMIN_IMPERSONATION}}
            assert admin.post(f"{RBAC}/clusterrolebindings", json=restored).status_code == 201
    eventually(lambda: kubectl(stack, "fit", "-f", pod_file(tmp_path, pod("w", "two"))).returncode == 0, "the grant is back", timeout=20)
