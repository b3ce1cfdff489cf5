"""Kubeconfig loading, and the workers' client over HTTPS: the lean transport with a client
certificate, and another identity's token on the same connections."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kube.client import KubeClient
from kube.errors import ApiError
from kube.kubeconfig import KubeconfigError, load_kubeconfig
from kube.transport import LeanTransport
from tests.authcluster import AuthCluster

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def test_load_kubeconfig_reads_files_relative_to_it_and_token_files(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "token").write_text("secret\n")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://example:6443", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    connection = load_kubeconfig(path)
    assert (connection.server, connection.ca_data, connection.token) == ("https://example:6443", b"CA", "secret")
    config["current-context"] = "missing"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeconfigError, match="no context named 'missing'"):
        load_kubeconfig(path)


async def test_client_over_https_with_a_certificate_and_as_another_user(auth_cluster: AuthCluster) -> None:
    connection = load_kubeconfig(auth_cluster.credentials.kubeconfig("scheduler"))
    client = KubeClient.from_connection(connection, user_agent="tests")
    assert isinstance(client._transport, LeanTransport) and client._lean is not None  # the lean path, over TLS
    try:
        me = await client.create(WHOAMI, REVIEW)
        assert me["status"]["userInfo"]["username"] == "system:kube-scheduler"
        # A token on connections without a client certificate: the simulator's way to act as each node.
        fleet = KubeClient.from_connection(load_kubeconfig(auth_cluster.credentials.kubeconfig("kubeletsim")), user_agent="tests")
        node = fleet.as_user(auth_cluster.credentials.token("system:node:n1"))
        try:
            assert (await node.create(WHOAMI, REVIEW))["status"]["userInfo"]["username"] == "system:node:n1"
            assert (await fleet.create(WHOAMI, REVIEW))["status"]["userInfo"]["username"] == "system:kubeletsim"
            with pytest.raises(ApiError) as refused:
                await node.list("/api/v1/nodes")
            assert refused.value.code == 403
        finally:
            await node.close()
            await fleet.close()
    finally:
        await client.close()
