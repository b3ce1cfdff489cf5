"""--use-service-account-credentials' clients: each controller as its own service account, made
when missing, with a token renewed before it expires; informers still read as the process."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from controllers import credentials
from controllers.credentials import ServiceAccountClients
from kube.client import KubeClient
from kube.kubeconfig import load_kubeconfig
from tests.authcluster import AuthCluster, audit_writers
from tests.processes import eventually_async

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


async def whoami(client: KubeClient) -> str:
    answer = await client.post_raw("/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW)
    return str(answer["status"]["userInfo"]["username"])


async def tokens_asked(auth_cluster: AuthCluster, at_least: int) -> bool:
    """Whether the audit log shows ``at_least`` token requests for the account."""
    lines = auth_cluster.audit_log.read_text().splitlines()
    return len([line for line in lines if '"test-controller"' in line and '"token"' in line]) >= at_least


async def test_a_controller_acts_as_its_account_and_keeps_acting_as_it_after_renewals(
    auth_cluster: AuthCluster, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    # Renew after under a second (the tokens asked for live an hour).
    monkeypatch.setattr(credentials, "RENEW_FRACTION", 0.0002)
    connection = load_kubeconfig(auth_cluster.credentials.kubeconfig("admin"))
    root = KubeClient.from_connection(connection, user_agent="test")
    accounts = ServiceAccountClients(root, connection, user_agent="test")
    try:
        client = await accounts.client("test-controller")
        assert await whoami(client) == "system:serviceaccount:kube-system:test-controller"
        # The informers' reads go as the process (here the admin), not as the account.
        pages = [page async for page in client.pages("/api/v1/namespaces/kube-system/serviceaccounts")]
        assert "test-controller" in {item["metadata"]["name"] for page in pages for item in page["items"]}

        renewals = asyncio.create_task(accounts.renew_forever())
        # Until the token was renewed twice (the first token and two more asked for), not a fixed 3 s.
        await eventually_async(lambda: tokens_asked(auth_cluster, 3), what="two renewals", timeout=30)
        renewals.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewals
        assert await whoami(client) == "system:serviceaccount:kube-system:test-controller"
    finally:
        await accounts.close()
        await root.close()
    assert await tokens_asked(auth_cluster, 2), "the token was never renewed"
    assert ("serviceaccounts", "") in audit_writers(auth_cluster.audit_log)
