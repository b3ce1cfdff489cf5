"""LeaderElector against an in-process mock server: a renewal stuck in the client's retries loses the lease in time."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from kube.client import KubeClient
from kube.leaderelection import LeaderElector
from kube.tasks import wait_for


async def test_a_renewal_the_server_keeps_asking_to_retry_is_cut_at_the_renew_deadline() -> None:
    """The server answers every renewal 500 + Retry-After: 1 (ten retries would take ten seconds);
    as in client-go, the renew deadline bounds the attempt and the leader steps down."""
    lease: dict[str, Any] = {}
    renewals = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal renewals
        if request.method == "GET":
            return httpx.Response(200, json=lease) if lease else httpx.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})
        body = orjson.loads(request.content)
        if request.method == "POST":
            lease.update(body, metadata={**body["metadata"], "resourceVersion": "1"})
            return httpx.Response(201, json=lease)
        renewals += 1
        return httpx.Response(500, headers={"Retry-After": "1"}, json={"kind": "Status", "code": 500, "reason": "ServerTimeout"})

    client = KubeClient("http://test", user_agent="unit/1", transport=httpx.MockTransport(handler))
    elector = LeaderElector(client, name="l", identity="me", lease_duration=2, renew_deadline=0.5, retry_period=0.1, release_on_cancel=False)
    led = asyncio.Event()

    async def lead() -> None:
        led.set()
        await asyncio.Event().wait()

    await wait_for(elector.run(lead), timeout=5)
    assert led.is_set() and not elector.is_leader and renewals >= 1
    await client.close()
