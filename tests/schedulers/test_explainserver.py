"""The scheduler's explanation endpoint on its own: routes, who may ask, standby and unsynced
answers, and an explanation from a scheduler's cache (callers checked by a stand-in for the API server)."""

from __future__ import annotations

from typing import Any

import orjson

from kube.client import KubeClient
from kube.delegation import ANONYMOUS_USER, DelegatedAuth, Unauthenticated, User
from kube.httpserve import Request
from kube.kubeconfig import Connection
from schedulers.explainserver import ExplainServer
from schedulers.scheduler import Scheduler
from tests.schedulers import cluster as c


class Auth(DelegatedAuth):
    """Alice may get pods in "default"; tokens other than "alice" are refused."""

    def __init__(self) -> None:
        super().__init__(KubeClient("http://127.0.0.1:9", user_agent="test"), Connection("http://127.0.0.1:9"))
        self.asked: list[dict[str, str]] = []

    async def authenticate(self, authorization: str | None, certificate: bytes | None) -> User:
        if authorization is None:
            return ANONYMOUS_USER
        if authorization != "Bearer alice":
            raise Unauthenticated("no")
        return User("alice", ("system:authenticated",))

    async def allowed(self, user: User, **attributes: str) -> tuple[bool, str]:
        self.asked.append(attributes)
        return user.name == "alice" and attributes.get("namespace") == "default" and attributes["verb"] == "get", ""


async def ask(server: ExplainServer, path: str, token: str | None = "alice", method: str = "GET") -> tuple[int, dict[str, Any]]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = await server.handle(Request(method, path, {}, headers))
    return response.status, orjson.loads(response.body) if response.content_type == "application/json" else {}


async def test_routes_and_callers() -> None:
    server = ExplainServer(Auth())
    assert (await ask(server, "/nope"))[0] == 404
    assert (await ask(server, "/explain/namespaces/default/pods/p", method="POST"))[0] == 405
    assert (await ask(server, "/explain/namespaces/default/pods/p", token="mallory"))[0] == 401
    code, body = await ask(server, "/explain/namespaces/default/pods/p", token=None)
    assert code == 403 and body["message"] == 'pods "p" is forbidden: User "system:anonymous" cannot get resource "pods" in API group "" in the namespace "default"'
    code, body = await ask(server, "/explain/namespaces/other/pods/p")
    assert code == 403 and body["reason"] == "Forbidden"
    code, body = await ask(server, "/explain/namespaces/default/pods/p")
    assert code == 503 and body["message"] == "this scheduler is not the leader; the leader's URL is on its Lease"


async def test_an_explanation_from_the_leaders_cache() -> None:
    cluster = c.Cluster()
    scheduler = Scheduler(cluster.client)
    cluster.cache = scheduler.cache  # the test feeds the scheduler's own informers
    server = ExplainServer(Auth())
    server.scheduler = scheduler
    code, body = await ask(server, "/explain/namespaces/default/pods/p")
    assert code == 503 and body["message"] == "the scheduler's caches are not synced yet"
    for informer in cluster.cache.informers:
        informer._synced.set()
    assert (await ask(server, "/explain/namespaces/default/pods/p"))[0] == 404
    await cluster.topology({"a": 1})
    await cluster.put(cluster.cache.claims, c.claim("held", status={"allocation": c.allocation("a", "dev-0")}))
    await cluster.put(cluster.cache.claims, c.claim("mine"))
    await cluster.put(cluster.cache.pods, c.pod("p", claims=["mine"]))
    code, body = await ask(server, "/explain/namespaces/default/pods/p")
    assert code == 200 and body["kind"] == "PodExplanation" and body["state"] == "Unschedulable"
    # Alice may not list claims everywhere, but the holder is in her namespace, so it is named.
    assert body["groups"][0]["reasons"][0]["details"] == ["dev-0 by default/held"]
    assert {"verb": "list", "resource": "resourceclaims", "group": "resource.k8s.io"} in server.auth.asked  # type: ignore[attr-defined]
