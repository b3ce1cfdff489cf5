"""A Postgres outage under a running server: readiness fails and recovers by itself, liveness
stays, requests get upstream's Status with Retry-After, reads served from the watch cache go on,
watches and an informer stay open and see every change made after the database is back; a worker
rides it out without a restart."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from devtools.postgres import ThrowawayPostgres, find_postgres_bin
from devtools.server import ServerProcess, migrate
from kube.client import KubeClient
from kube.informer import Informer
from tests.controllers.test_resourceclaim import ControllerProcess
from tests.helpers import assert_status, claim, claims_path
from tests.processes import eventually

NS = "outage"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-controller"


@pytest.fixture(scope="module")
def postgres() -> Iterator[ThrowawayPostgres]:
    """A cluster of this module's own: the shared one must not go down under other tests."""
    if find_postgres_bin() is None:
        if os.environ.get("DRA_REQUIRE_POSTGRES"):
            pytest.fail("Postgres is required here but its binaries are not installed")
        pytest.skip("PostgreSQL server binaries not found")
    with ThrowawayPostgres(fast=True) as pg:
        yield pg


@pytest.fixture(scope="module")
def server(postgres: ThrowawayPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    migrate(postgres.url)
    log = tmp_path_factory.mktemp("outage") / "server.log"
    with ServerProcess(postgres.url, "--bookmark-interval", "1", "--poll-interval", "0.2", log_path=log) as process:
        yield process


class Watch(threading.Thread):
    """One watch stream, read until stopped: its events, and whether it ended early."""

    def __init__(self, url: str, rv: str) -> None:
        super().__init__(daemon=True)
        self.url, self.rv = url, rv
        self.events: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.ended_early = False

    def run(self) -> None:
        params = {"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        with httpx.Client(base_url=self.url, timeout=30) as client, client.stream("GET", claims_path(NS), params=params) as response:
            for line in response.iter_lines():
                if self.stop.is_set():
                    return
                if line:
                    self.events.append(orjson.loads(line))
        self.ended_early = not self.stop.is_set()

    def names(self, kind: str) -> list[str]:
        return [e["object"]["metadata"]["name"] for e in self.events if e["type"] == kind]


class InformerThread(threading.Thread):
    """An informer whose watches end every second, so that it watches again during the outage."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.seen: list[str] = []
        self.lists = 0
        self.stop = threading.Event()

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        async with KubeClient(self.url, user_agent="outage-test") as client:
            informer = Informer(client, claims_path(NS), watch_timeout_seconds=1)
            informer.on_add(lambda obj: self.seen.append(obj["metadata"]["name"]))
            informer.start()
            while not self.stop.is_set():
                await asyncio.sleep(0.05)
                self.lists = informer.list_count
            await informer.stop()


def test_a_database_outage(server: ServerProcess, postgres: ThrowawayPostgres) -> None:
    api = httpx.Client(base_url=server.url, timeout=30)
    api.post("/api/v1/namespaces", json={"metadata": {"name": NS}})
    assert api.post(claims_path(NS), json=claim("before")).status_code == 201
    watch = Watch(server.url, api.get(claims_path(NS)).json()["metadata"]["resourceVersion"])
    informer = InformerThread(server.url)
    watch.start()
    informer.start()
    eventually(lambda: informer.seen == ["before"], "the informer synced")

    postgres.pause()
    try:
        down = eventually(lambda: (r := api.get("/readyz", params={"verbose": "1"})).status_code == 500 and r, "readiness failed", timeout=15)
        assert "[-]etcd failed: reason withheld\n" in down.text and down.text.endswith("readyz check failed\n")
        assert api.get("/livez").text == "ok"

        refused = api.post(claims_path(NS), json=claim("during"))
        status = assert_status(refused, 500, "ServerTimeout")
        assert refused.headers["retry-after"] == "2"
        assert status["message"] == "The create operation against resourceclaims.resource.k8s.io could not be completed at this time, please try again."
        assert_status(api.get(claims_path(NS, "before")), 500, "ServerTimeout")  # a consistent read needs the database

        # What upstream serves from its watch cache is served on.
        assert api.get(claims_path(NS, "before"), params={"resourceVersion": "0"}).status_code == 200
        cached = api.get(claims_path(NS), params={"resourceVersion": "0"})
        assert [i["metadata"]["name"] for i in cached.json()["items"]] == ["before"]
        time.sleep(1.5)  # the informer's watches end and resume from the watch cache meanwhile
    finally:
        postgres.resume()

    eventually(lambda: api.get("/readyz").status_code == 200, "readiness recovered", timeout=30)
    assert api.post(claims_path(NS), json=claim("after")).status_code == 201
    eventually(lambda: watch.names("ADDED") == ["after"], "the watch open through the outage saw the new claim")
    eventually(lambda: informer.seen == ["before", "after"], "the informer saw the new claim")
    watch.stop.set()
    informer.stop.set()
    informer.join(10)
    assert not watch.ended_early
    assert not [e for e in watch.events if e["type"] == "ERROR"]
    assert informer.lists == 1, "the informer resumed its watch instead of listing again"
    assert_status(api.get(claims_path(NS, "during")), 404, "NotFound")


def test_a_worker_rides_out_an_outage_without_a_restart(server: ServerProcess, postgres: ThrowawayPostgres, tmp_path: Path) -> None:
    """The claim controller, leading with a 2 s lease, through an outage longer than its lease: it
    keeps running, leads again once the database is back, and makes the claim of a pod created then."""
    api = httpx.Client(base_url=server.url, timeout=30)
    namespace = "outage-worker"
    api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
    log = tmp_path / "controller.log"
    controller = ControllerProcess(server.url, log).start()
    assert controller.process is not None
    try:
        eventually(lambda: api.get(LEASE).status_code == 200, "the controller leads")
        postgres.pause()
        try:
            eventually(lambda: api.get("/readyz").status_code == 500, "readiness failed", timeout=15)
            time.sleep(4)  # two lease durations: the renewals fail meanwhile
        finally:
            postgres.resume()
        eventually(lambda: api.get("/readyz").status_code == 200, "readiness recovered", timeout=30)
        template = {
            "metadata": {"name": "gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
        }
        assert api.post(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", json=template).status_code == 201
        pod = {
            "metadata": {"name": "after"},
            "spec": {
                "containers": [{"name": "main", "image": "pause"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            },
        }
        assert api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
        claims = eventually(lambda: api.get(claims_path(namespace)).json()["items"], "the controller made the pod's claim", timeout=60)
        assert claims[0]["metadata"]["ownerReferences"][0]["name"] == "after"
        assert controller.process.poll() is None, "the controller never exited"
    finally:
        controller.stop()


def test_writes_through_an_outage_are_answered_as_they_were_stored(server: ServerProcess, postgres: ThrowawayPostgres) -> None:
    """Four writers create claims while Postgres is stopped for 5 s (``pg_ctl stop -m fast``, which
    cuts the connections of commits under way) and started again. A write answered 201 is stored,
    one answered 500 is not, whatever moment the outage hit it; a 504 Timeout (the outcome could
    not be learned) is allowed, since it says the write may or may not have been stored."""
    namespace = "outage-writes"
    httpx.post(f"{server.url}/api/v1/namespaces", json={"metadata": {"name": namespace}}, timeout=30)
    answers: dict[str, httpx.Response] = {}

    async def writers() -> None:
        stop = asyncio.Event()
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:

            async def writer(w: int) -> None:
                i = 0
                while not stop.is_set():
                    i += 1
                    name = f"w{w}-{i}"
                    answers[name] = await client.post(claims_path(namespace), json=claim(name))
                    if answers[name].status_code != 201:
                        await asyncio.sleep(0.05)

            tasks = [asyncio.create_task(writer(w)) for w in range(4)]
            await asyncio.sleep(2)
            await asyncio.to_thread(postgres.pause)
            await asyncio.sleep(5)
            await asyncio.to_thread(postgres.resume)
            await asyncio.sleep(2)
            stop.set()
            await asyncio.gather(*tasks)

    asyncio.run(writers())
    eventually(lambda: httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200, "readiness recovered", timeout=30)
    stored = {item["metadata"]["name"] for item in httpx.get(f"{server.url}{claims_path(namespace)}", timeout=30).json()["items"]}
    by_status: dict[int, list[str]] = {}
    for name, answer in answers.items():
        by_status.setdefault(answer.status_code, []).append(name)
    assert set(by_status) <= {201, 500, 504}, {code: names[:3] for code, names in by_status.items()}
    assert by_status.get(500), "no write met the outage"
    assert [name for name in by_status.get(201, []) if name not in stored] == []
    assert [name for name in by_status[500] if name in stored] == [], "answered 500, but stored"
    for name in by_status.get(500, []):
        assert_status(answers[name], 500, "ServerTimeout")
    for name in by_status.get(504, []):
        assert_status(answers[name], 504, "Timeout")
