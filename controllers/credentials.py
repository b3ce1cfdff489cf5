"""Each controller as its own service account, as kube-controller-manager does with
``--use-service-account-credentials``: upstream's bootstrap policy grants a controller's
permissions (``system:controller:<name>``) to the service account ``kube-system/<name>``, not to
``system:kube-controller-manager``, which may only list and watch, make service accounts and ask
for their tokens. The process's own credentials make each account when it is missing and ask for
a short-lived token for it, renewed before it expires."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import httpx

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.kubeconfig import Connection
from kube.objects import Obj

log = logging.getLogger("controllers")


NAMESPACE = "kube-system"
# As upstream's controller client builder: an hour, renewed with a fifth of it left.
TOKEN_SECONDS = 3600
RENEW_FRACTION = 0.8
RETRY_SECONDS = 5.0


class ControllerClient(KubeClient):
    """A controller's client: its requests go as the controller's service account, but the lists
    and watches that feed informers go as the process itself, as kube-controller-manager's shared
    informers do (upstream's controller roles lack some of them: the claim controller's has no
    list or watch of ResourceClaimTemplates)."""

    reader: KubeClient

    async def pages(
        self, path: str, *, label_selector: str = "", field_selector: str = "", resource_version: str = "", limit: int = 0
    ) -> AsyncIterator[Obj]:  # fmt: skip
        pages = self.reader.pages(path, label_selector=label_selector, field_selector=field_selector, resource_version=resource_version, limit=limit)
        async for page in pages:
            yield page

    async def watch(
        self, path: str, *, resource_version: str, label_selector: str = "", field_selector: str = "", timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[Obj]:  # fmt: skip
        events = self.reader.watch(
            path, resource_version=resource_version, label_selector=label_selector, field_selector=field_selector,
            timeout_seconds=timeout_seconds, allow_bookmarks=allow_bookmarks,
        )  # fmt: skip
        async for event in events:
            yield event


class ServiceAccountClients:
    """A client per controller, each authenticated by a token of the controller's service account."""

    def __init__(self, root: KubeClient, connection: Connection, *, user_agent: str, qps: float | None = None) -> None:
        self.root = root
        self.connection = connection
        self.user_agent = user_agent
        self.qps = qps
        self._clients: dict[str, tuple[ControllerClient, float]] = {}  # account -> (client, renew at)

    async def client(self, account: str) -> KubeClient:
        """The client of ``kube-system/<account>``, made (with the account, if missing) on first use."""
        known = self._clients.get(account)
        if known is not None:
            return known[0]
        token, renew_at = await self._token(account)
        # A connection of its own, without the process's client certificate: the server would take
        # the certificate's user over the token's.
        connection = self.connection.with_token(token)
        client = ControllerClient(connection.server, user_agent=f"{self.user_agent} {account}", qps=self.qps, token=token, ssl_context=connection.ssl_context())
        client.reader = self.root
        self._clients[account] = (client, renew_at)
        return client

    async def _token(self, account: str) -> tuple[str, float]:
        path = resource_path("", "v1", "serviceaccounts", NAMESPACE, account)
        try:
            await self.root.get(path)
        except ApiError as exc:
            if exc.code != 404:
                raise
            obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": NAMESPACE}}
            try:
                await self.root.create(resource_path("", "v1", "serviceaccounts", NAMESPACE), obj)
            except ApiError as created:
                if created.code != 409:
                    raise
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": TOKEN_SECONDS}}
        answer = await self.root.post_raw(resource_path("", "v1", "serviceaccounts", NAMESPACE, account, "token"), request)
        seconds = float(answer["spec"].get("expirationSeconds") or TOKEN_SECONDS)
        return str(answer["status"]["token"]), time.monotonic() + seconds * RENEW_FRACTION

    async def renew_forever(self) -> None:
        """Renew each account's token before it expires (retrying while the server refuses)."""
        while True:
            now = time.monotonic()
            due = min((renew_at for _client, renew_at in self._clients.values()), default=now + 60.0)
            await asyncio.sleep(max(0.0, due - now))
            for account, (client, renew_at) in list(self._clients.items()):
                if renew_at > time.monotonic():
                    continue
                try:
                    token, next_renewal = await self._token(account)
                except (ApiError, httpx.TransportError) as exc:
                    log.warning("renewing the service account token failed", extra={"account": account, "error": str(exc)})
                    self._clients[account] = (client, time.monotonic() + RETRY_SECONDS)
                    continue
                client.set_token(token)
                self._clients[account] = (client, next_renewal)

    async def close(self) -> None:
        for client, _renew_at in self._clients.values():
            await client.close()
        self._clients.clear()
