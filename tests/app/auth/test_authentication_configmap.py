"""kube-system/extension-apiserver-authentication: the client CA published for upstream's
components, which read it at start to authenticate callers of their own ports (without it they
log an error every few seconds)."""

from __future__ import annotations

from tests.authcluster import AuthCluster


def test_the_client_ca_is_published_for_components(auth_cluster: AuthCluster) -> None:
    with auth_cluster.identity("scheduler") as scheduler:
        # kube-scheduler reads it as itself (upstream's extension-apiserver-authentication-reader Role).
        answer = scheduler.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication")
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data == {"client-ca-file": auth_cluster.credentials.ca_cert.read_text()}
    assert answer.json()["metadata"]["managedFields"][0]["manager"] == "kube-apiserver"
