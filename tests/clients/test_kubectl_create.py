"""Every ``kubectl create`` subcommand for a kind this server serves: kubectl's typed clients send
these in protobuf, as they do against kube-apiserver. Each row runs the real kubectl, then reads
the object back in JSON and checks what the command asked for."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from kube.objects import Obj
from kube.pki import Authority, cert_pem, key_pem, write_private
from tests.clients.kubectl_helpers import Kubectl


@dataclass(frozen=True)
class Create:
    """One subcommand: its arguments ({name}, {ns} and {dir} filled in), where the object lands,
    and fields it must have there."""

    args: tuple[str, ...]
    path: str
    expect: Obj = field(default_factory=dict)
    printed: str = ""  # kubectl's "<resource>/<name> created" prefix

    def id(self) -> str:
        return " ".join(a for a in self.args[:2] if not a.startswith("{"))


CORE = "/api/v1/namespaces/{ns}"
RBAC = "/apis/rbac.authorization.k8s.io/v1"

ROWS = [
    Create(("priorityclass", "{name}", "--value=100", "--description=low"), "/apis/scheduling.k8s.io/v1/priorityclasses/{name}", {"value": 100, "description": "low", "preemptionPolicy": "PreemptLowerPriority"}, "priorityclass.scheduling.k8s.io"),
    Create(("serviceaccount", "{name}", "-n", "{ns}"), CORE + "/serviceaccounts/{name}", {}, "serviceaccount"),
    Create(("secret", "generic", "{name}", "--from-literal=a=b", "-n", "{ns}"), CORE + "/secrets/{name}", {"data": {"a": base64.b64encode(b"b").decode()}, "type": "Opaque"}, "secret"),
    Create(("secret", "tls", "{name}", "--cert={dir}/tls.crt", "--key={dir}/tls.key", "-n", "{ns}"), CORE + "/secrets/{name}", {"type": "kubernetes.io/tls"}, "secret"),
    Create(
        ("secret", "docker-registry", "{name}", "--docker-server=registry.example.com", "--docker-username=u", "--docker-password=p", "-n", "{ns}"),
        CORE + "/secrets/{name}",
        {"type": "kubernetes.io/dockerconfigjson"},
        "secret",
    ),
    Create(("namespace", "{name}"), "/api/v1/namespaces/{name}", {"status": {"phase": "Active"}}, "namespace"),
    Create(("role", "{name}", "--verb=get,list", "--resource=pods", "-n", "{ns}"), RBAC + "/namespaces/{ns}/roles/{name}", {"rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}, "role.rbac.authorization.k8s.io"),
    Create(("rolebinding", "{name}", "--role=r", "--user=bob", "-n", "{ns}"), RBAC + "/namespaces/{ns}/rolebindings/{name}", {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}, "rolebinding.rbac.authorization.k8s.io"),
    Create(("clusterrole", "{name}", "--verb=get", "--resource=nodes"), RBAC + "/clusterroles/{name}", {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]}, "clusterrole.rbac.authorization.k8s.io"),
    Create(("clusterrolebinding", "{name}", "--clusterrole=cr", "--group=team"), RBAC + "/clusterrolebindings/{name}", {"subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team"}]}, "clusterrolebinding.rbac.authorization.k8s.io"),
    Create(("configmap", "{name}", "--from-literal=a=b", "-n", "{ns}"), CORE + "/configmaps/{name}", {"data": {"a": "b"}}, "configmap"),
    Create(("quota", "{name}", "--hard=pods=2", "-n", "{ns}"), CORE + "/resourcequotas/{name}", {"spec": {"hard": {"pods": "2"}}}, "resourcequota"),
    Create(("service", "clusterip", "{name}", "--tcp=80:8080", "-n", "{ns}"), CORE + "/services/{name}", {}, "service"),
    Create(("poddisruptionbudget", "{name}", "--selector=app=x", "--min-available=1", "-n", "{ns}"), "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}", {"spec": {"minAvailable": 1}}, "poddisruptionbudget.policy"),
    Create(("deployment", "{name}", "--image=registry.k8s.io/pause:3.10", "-n", "{ns}"), "/apis/apps/v1/namespaces/{ns}/deployments/{name}", {}, "deployment.apps"),
    Create(("job", "{name}", "--image=registry.k8s.io/pause:3.10", "-n", "{ns}"), "/apis/batch/v1/namespaces/{ns}/jobs/{name}", {}, "job.batch"),
    Create(("cronjob", "{name}", "--image=registry.k8s.io/pause:3.10", "--schedule=*/5 * * * *", "-n", "{ns}"), "/apis/batch/v1/namespaces/{ns}/cronjobs/{name}", {}, "cronjob.batch"),
    Create(("ingress", "{name}", "--rule=example.com/=svc:80", "-n", "{ns}"), "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/{name}", {}, "ingress.networking.k8s.io"),
]


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(_contains(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(_contains(a, e) for a, e in zip(actual, expected, strict=True))
    return bool(actual == expected)


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = Authority.create().serving(["example.com"])
    (directory / "tls.crt").write_bytes(cert_pem(cert))
    write_private(directory / "tls.key", key_pem(key))
    return directory


@pytest.mark.parametrize("row", ROWS, ids=Create.id)
def test_kubectl_create(kubectl: Kubectl, api: httpx.Client, ns: str, row: Create, tls_pair: Path) -> None:
    collection = row.path.rsplit("/", 1)[0].format(ns=ns)
    if api.get(collection).status_code == 404:
        pytest.skip(f"this server does not serve {collection}")
    name = f"{ns}-{row.args[0][:4]}"
    args = [a.format(name=name, ns=ns, dir=tls_pair) for a in row.args]
    out = kubectl.ok("create", *args)
    assert out.strip() == f"{row.printed}/{name} created"
    stored = api.get(row.path.format(name=name, ns=ns))
    assert stored.status_code == 200, stored.text
    assert _contains(stored.json(), row.expect), json.dumps(stored.json(), indent=1)
    again = kubectl.fails("create", *args)
    assert f"\"{name}\" already exists" in again.err, str(again)


def test_kubectl_create_token(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    assert kubectl.ok("create", "serviceaccount", "robot", "-n", ns).strip() == "serviceaccount/robot created"
    token = kubectl.ok("create", "token", "robot", "-n", ns, "--duration=20m").strip()
    claims = _token_claims(token)
    assert claims["sub"] == f"system:serviceaccount:{ns}:robot"
    assert claims["exp"] - claims["iat"] == 1200
    # No --duration: kubectl leaves expirationSeconds unset (null) and the server's default holds.
    default = _token_claims(kubectl.ok("create", "token", "robot", "-n", ns).strip())
    assert default["exp"] - default["iat"] == 3600
    missing = kubectl.fails("create", "token", "nobody", "-n", ns)
    assert 'serviceaccounts "nobody" not found' in missing.err, str(missing)


def _token_claims(token: str) -> Obj:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]
