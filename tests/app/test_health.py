"""/healthz, /livez and /readyz in upstream's format: in process with checks that pass or fail at
will, and on the real server with its database checks."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from app.health import Check, HealthEndpoints


class Switch:
    def __init__(self) -> None:
        self.failing = False

    async def __call__(self) -> None:
        if self.failing:
            raise RuntimeError("the database is gone")


async def elsewhere(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"elsewhere"})


async def ok() -> None:
    return None


@pytest.fixture
def storage() -> Switch:
    return Switch()


@pytest.fixture
def client(storage: Switch) -> httpx.AsyncClient:
    checks = {"readyz": [Check("ping", ok), Check("etcd", storage)], "livez": [Check("ping", ok)]}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=HealthEndpoints(elsewhere, checks)), base_url="http://server")


async def test_passing(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert (response.status_code, response.text) == (200, "ok")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["x-content-type-options"] == "nosniff"
    verbose = await client.get("/readyz", params={"verbose": "false"})  # present is enough, as upstream
    assert verbose.text == "[+]ping ok\n[+]etcd ok\nreadyz check passed\n"


async def test_failing_withholds_the_reason(client: httpx.AsyncClient, storage: Switch) -> None:
    storage.failing = True
    response = await client.get("/readyz")
    assert response.status_code == 500
    assert response.text == "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"
    assert (await client.get("/livez")).text == "ok"
    single = await client.get("/readyz/etcd")
    assert (single.status_code, single.text) == (500, "internal server error: the database is gone\n")


async def test_exclude(client: httpx.AsyncClient, storage: Switch) -> None:
    storage.failing = True
    response = await client.get("/readyz?exclude=etcd&exclude=nosuch&exclude=other&verbose")
    assert response.status_code == 200
    assert response.text == (
        "[+]ping ok\n[+]etcd excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "nosuch","other"\n'
        "readyz check passed\n"
    )


async def test_single_checks_and_other_paths(client: httpx.AsyncClient) -> None:
    assert (await client.get("/readyz/ping")).text == "ok"
    assert (await client.get("/readyz/nosuch")).text == "elsewhere"
    assert (await client.get("/healthz")).text == "elsewhere", "only the paths given are served"


def test_the_servers_checks(api: httpx.Client) -> None:
    assert api.get("/readyz", params={"verbose": "1"}).text == "[+]ping ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]storage-loops ok\nreadyz check passed\n"
    assert api.get("/livez", params={"verbose": "1"}).text == "[+]ping ok\n[+]storage-loops ok\nlivez check passed\n"
    assert api.get("/healthz", params={"verbose": "1"}).text == "[+]ping ok\n[+]etcd ok\n[+]storage-loops ok\nhealthz check passed\n"
    assert api.get("/readyz/etcd").text == "ok"
