"""kubectl (1.37, and the dispatcher's 1.32) and the official Python client against a server
with TLS, authentication and Node,RBAC: a client certificate, a token, ``kubectl auth whoami``
and ``kubectl auth can-i`` (with ``--list``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.kubeconfig import kubeconfig_text
from tests.authcluster import AuthCluster
from tests.clients.kubectl_helpers import DISPATCHER, VENV_KUBECTL

BINARIES = [b for b in (VENV_KUBECTL, DISPATCHER) if b]


def kubectl(binary: str, kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([binary, "--cache-dir", str(home / "cache"), *args], env=env, capture_output=True, text=True, timeout=60)


def kubeconfig_for(auth_cluster: AuthCluster, tmp: Path, *, token: str | None = None, identity: str = "") -> Path:
    creds = auth_cluster.credentials
    ca = creds.ca_cert.read_bytes()
    if token is not None:
        text = kubeconfig_text(auth_cluster.server.url, ca, token=token, user="token-user")
    else:
        text = kubeconfig_text(auth_cluster.server.url, ca, cert_pem=creds.client_cert(identity).read_bytes(), key_pem=creds.client_key(identity).read_bytes())
    path = tmp / "kubeconfig"
    path.write_text(text)
    return path


@pytest.mark.parametrize("binary", BINARIES, ids=lambda b: "venv" if b == VENV_KUBECTL else "dispatcher")
def test_kubectl_with_a_client_certificate(auth_cluster: AuthCluster, tmp_path: Path, binary: str) -> None:
    config = kubeconfig_for(auth_cluster, tmp_path, identity="admin")
    whoami = kubectl(binary, config, tmp_path, "auth", "whoami")
    assert whoami.returncode == 0, whoami.stderr
    assert "kubernetes-admin" in whoami.stdout and "system:masters" in whoami.stdout
    assert kubectl(binary, config, tmp_path, "auth", "can-i", "delete", "resourceslices").stdout.strip() == "yes"
    listed = kubectl(binary, config, tmp_path, "get", "clusterroles", "cluster-admin", "-o", "name")
    assert listed.stdout.strip() == "clusterrole.rbac.authorization.k8s.io/cluster-admin", listed.stderr


@pytest.mark.parametrize("binary", BINARIES, ids=lambda b: "venv" if b == VENV_KUBECTL else "dispatcher")
def test_kubectl_with_a_node_token(auth_cluster: AuthCluster, tmp_path: Path, binary: str) -> None:
    config = kubeconfig_for(auth_cluster, tmp_path, token=auth_cluster.credentials.token("system:node:n1"))
    whoami = kubectl(binary, config, tmp_path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert whoami.stdout == "system:node:n1", whoami.stderr
    assert kubectl(binary, config, tmp_path, "auth", "can-i", "create", "resourceslices").stdout.strip() == "yes"
    denied = kubectl(binary, config, tmp_path, "auth", "can-i", "list", "pods", "-A")
    assert denied.stdout.strip() == "no - can only list/watch pods with spec.nodeName field selector" and denied.returncode == 1
    listing = kubectl(binary, config, tmp_path, "get", "nodes")
    assert listing.returncode == 1
    assert 'nodes is forbidden: User "system:node:n1" cannot list resource "nodes" in API group "" at the cluster scope' in listing.stderr


def test_kubectl_can_i_list(auth_cluster: AuthCluster, tmp_path: Path) -> None:
    if VENV_KUBECTL is None:
        pytest.skip("no kubectl in the venv")
    config = kubeconfig_for(auth_cluster, tmp_path, identity="scheduler")
    listed = kubectl(VENV_KUBECTL, config, tmp_path, "auth", "can-i", "--list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert any(line.split()[0] == "resourceclaims.resource.k8s.io/binding" and "[patch" in line for line in lines[1:])
    assert any(line.split()[0] == "selfsubjectreviews.authentication.k8s.io" for line in lines[1:])
    wrong_ca = kubeconfig_text(auth_cluster.server.url, None, token="x")
    (tmp_path / "insecure").write_text(wrong_ca)
    refused = kubectl(VENV_KUBECTL, tmp_path / "insecure", tmp_path, "get", "pods")
    assert refused.returncode == 1 and "certificate" in refused.stderr


def test_python_client_with_a_token(auth_cluster: AuthCluster, tmp_path: Path) -> None:
    token = auth_cluster.credentials.token("system:node:n2")
    config = client.Configuration(host=auth_cluster.server.url)
    config.ssl_ca_cert = str(auth_cluster.credentials.ca_cert)
    config.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(config) as api:
        # The client keeps a refused request's connection out of its pool (the exception holds it), so
        # closing the client leaves it open, and the server's SIGTERM then waits 10 s for it at teardown.
        api.set_default_header("Connection", "close")
        core = client.CoreV1Api(api)
        with pytest.raises(ApiException) as raised:
            core.list_namespaced_pod("default")
        assert raised.value.status == 403
        review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
        assert review.status is not None and review.status.user_info is not None
        assert review.status.user_info.username == "system:node:n2"
    assert sys.executable  # the client ran in this interpreter
