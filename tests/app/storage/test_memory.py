"""What the server holds in memory and how it bounds it: objects over the storage
limit refused as upstream refuses them, streamed answers a client does not read cut off, a
history over its byte budget served from the database without losing an event, and the
watch cache's figures in /metrics."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from devtools.server import REPO_ROOT, ServerProcess
from tests.helpers import assert_status, claim, claims_path, pod, watch_lines

MiB = 1024 * 1024


def _ns(client: httpx.Client, name: str) -> None:
    client.post("/api/v1/namespaces", json={"metadata": {"name": name}})


def test_an_object_grown_past_the_storage_limit_is_refused_with_etcds_error(api: httpx.Client, ns: str) -> None:
    # Each body is under the 3 MiB request limit; together they make an object storage refuses.
    body = pod("big")
    body["spec"]["containers"][0]["env"] = [{"name": "A", "value": "a" * (2 * MiB)}]
    created = api.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert created.status_code == 201, created.text
    patch = {"metadata": {"resourceVersion": created.json()["metadata"]["resourceVersion"]}, "status": {"message": "m" * (MiB + MiB // 2)}}
    refused = api.patch(
        f"/api/v1/namespaces/{ns}/pods/big/status", content=orjson.dumps(patch), headers={"Content-Type": "application/merge-patch+json"}
    )
    assert refused.status_code == 500
    status = refused.json()
    assert status["message"] == "etcdserver: request is too large"
    assert "reason" not in status and status["status"] == "Failure" and status["code"] == 500
    # Nothing was stored: the object is as it was.
    assert api.get(f"/api/v1/namespaces/{ns}/pods/big").json()["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]
    # A body over the request limit is refused before it is read, as upstream does.
    assert_status(api.post(f"/api/v1/namespaces/{ns}/pods", content=b"x" * (3 * MiB + 1)), 413, "RequestEntityTooLarge")


@pytest.fixture(scope="module")
def impatient_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """A server that gives a streamed answer's reader one second, and a LIST two."""
    return start_server("--stream-write-timeout", "1", "--request-timeout", "2s")


def _big_pods(client: httpx.Client, ns: str, count: int) -> None:
    _ns(client, ns)
    for i in range(count):
        body = pod(f"p{i}")
        body["spec"]["containers"][0]["env"] = [{"name": "A", "value": "a" * MiB}]
        assert client.post(f"/api/v1/namespaces/{ns}/pods", json=body).status_code == 201


# What the server logs when it gives up on a client: a stream nobody reads, a request past its deadline.
GAVE_UP = (b"cut off a client that read nothing", b"request timed out after")


def _gave_up(server: ServerProcess) -> int:
    assert server.log_path is not None
    log = server.log_path.read_bytes()
    return sum(log.count(line) for line in GAVE_UP)


def _read_until_closed(server: ServerProcess, path: str) -> bytes:
    """Ask for ``path`` on a connection that reads nothing until the server has given up on it
    (its log says so; at most 30 s), then everything the server sent until it closed the connection."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        before = _gave_up(server)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n".encode())
        deadline = time.monotonic() + 30
        while _gave_up(server) == before and time.monotonic() < deadline:
            time.sleep(0.1)
        sock.settimeout(20)
        received = []
        while data := sock.recv(1 << 20):
            received.append(data)
    return b"".join(received)


def test_a_client_that_reads_nothing_is_cut_off_not_buffered_for(impatient_server: ServerProcess) -> None:
    with httpx.Client(base_url=impatient_server.url, timeout=30) as client:
        _big_pods(client, "unread", 24)
    # 24 MiB of objects: far more than the connection's buffers hold. A watch that stays open for
    # 60 s and a LIST are each closed early, their answers cut short.
    watch = _read_until_closed(impatient_server, "/api/v1/namespaces/unread/pods?watch=1&resourceVersion=0&timeoutSeconds=60")
    assert watch.startswith(b"HTTP/1.1 200")
    assert watch.count(b'"type":"ADDED"') < 24
    listed = _read_until_closed(impatient_server, "/api/v1/namespaces/unread/pods")
    assert listed.startswith(b"HTTP/1.1 200")
    assert not listed.endswith(b"0\r\n\r\n")
    assert listed.count(b'"kind":"Pod"') < 24
    # The server still answers, and a client that reads gets everything.
    with httpx.Client(base_url=impatient_server.url, timeout=60) as client:
        assert len(client.get("/api/v1/namespaces/unread/pods").json()["items"]) == 24


def test_a_large_list_is_streamed_and_complete(impatient_server: ServerProcess) -> None:
    with httpx.Client(base_url=impatient_server.url, timeout=30) as client:
        _big_pods(client, "streamed", 3)
        with client.stream("GET", "/api/v1/namespaces/streamed/pods") as response:
            assert response.headers.get("transfer-encoding") == "chunked" and "content-length" not in response.headers
            body = orjson.loads(response.read())
    assert [item["metadata"]["name"] for item in body["items"]] == ["p0", "p1", "p2"]
    assert body["kind"] == "PodList" and body["metadata"]["resourceVersion"]


@pytest.fixture(scope="module")
def budget_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """A server whose history may keep one byte of replaced versions: it keeps almost none."""
    return start_server("--watch-cache-history-bytes", "1")


def _metric(text: str, name: str, resource: str) -> float:
    match = re.search(rf'^{name}{{resource="{re.escape(resource)}"}} (\S+)$', text, re.M)
    assert match is not None, name
    return float(match.group(1))


def test_a_history_over_its_budget_is_read_from_the_database_without_losing_events(budget_server: ServerProcess) -> None:
    with httpx.Client(base_url=budget_server.url, timeout=30) as client:
        _ns(client, "budget")
        start = client.post(claims_path("budget"), json=claim("c")).json()["metadata"]["resourceVersion"]
        expected: list[tuple[str, str]] = []
        for i in range(5):
            current = client.get(claims_path("budget", "c")).json()
            current["metadata"]["labels"] = {"step": str(i)}
            updated = client.put(claims_path("budget", "c"), json=current).json()
            expected.append(("MODIFIED", updated["metadata"]["resourceVersion"]))
        deleted = client.delete(claims_path("budget", "c")).json()
        expected.append(("DELETED", deleted["metadata"]["resourceVersion"]))
        metrics = client.get("/metrics").text
        assert _metric(metrics, "apiserver_watch_cache_history_bytes", "resourceclaims.resource.k8s.io") <= 1
        # Every change since ``start`` arrives, in order and as it was written.
        events = watch_lines(client, claims_path("budget"), {"resourceVersion": start, "timeoutSeconds": "3"}, limit=len(expected))
        assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == expected
        assert [e["object"]["metadata"].get("labels") for e in events[:5]] == [{"step": str(i)} for i in range(5)]


def test_metrics_report_objects_bytes_and_history_per_resource(api: httpx.Client, ns: str) -> None:
    resource = "resourceclaims.resource.k8s.io"
    created: list[Any] = [api.post(claims_path(ns), json=claim(f"m{i}")).json() for i in range(3)]
    text = api.get("/metrics").text
    assert _metric(text, "apiserver_storage_objects", resource) >= 3
    assert _metric(text, "apiserver_watch_cache_bytes", resource) >= sum(len(orjson.dumps(c)) for c in created) * 0.9
    assert _metric(text, "apiserver_watch_cache_events", resource) >= 3
    assert _metric(text, "apiserver_watch_cache_capacity", resource) >= 100


def test_watch_cache_sizes_are_read_as_upstream_reads_them() -> None:
    for value, message in (
        ("pods", "invalid value of watch cache size: pods"),
        ("pods#x", "invalid size of watch cache size: pods#x"),
        ("pods#-1", "watch cache size cannot be negative: pods#-1"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "app", "serve", "--watch-cache-sizes", value], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 2
        assert message in result.stderr
