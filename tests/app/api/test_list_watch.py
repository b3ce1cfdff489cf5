"""LIST (selectors, pagination, resourceVersion semantics) and WATCH streams."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.helpers import assert_status, claim, claims_path, iter_watch, watch_lines


def _names(body: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in body["items"]]


def test_label_selectors(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("a", labels={"app": "x", "tier": "web"}))
    api.post(claims_path(ns), json=claim("b", labels={"app": "y", "tier": "db"}))
    api.post(claims_path(ns), json=claim("c", labels={"app": "x"}))
    cases = {
        "app=x": ["a", "c"],
        "app==x": ["a", "c"],
        "app!=x": ["b"],
        "app in (x,y)": ["a", "b", "c"],
        "app notin (x)": ["b"],
        "tier": ["a", "b"],
        "!tier": ["c"],
        "app=x,tier=web": ["a"],
    }
    for selector, expected in cases.items():
        body = api.get(claims_path(ns), params={"labelSelector": selector}).json()
        assert _names(body) == expected, selector
    assert_status(api.get(claims_path(ns), params={"labelSelector": "app=(x"}), 400, "BadRequest")


def test_field_selectors(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("f1"))
    api.post(claims_path(ns), json=claim("f2"))
    assert _names(api.get(claims_path(ns), params={"fieldSelector": "metadata.name=f2"}).json()) == ["f2"]
    assert _names(api.get(claims_path(ns), params={"fieldSelector": "metadata.name!=f2"}).json()) == ["f1"]
    everywhere = api.get("/apis/resource.k8s.io/v1/resourceclaims", params={"fieldSelector": f"metadata.namespace={ns}"}).json()
    assert _names(everywhere) == ["f1", "f2"]
    body = assert_status(api.get(claims_path(ns), params={"fieldSelector": "spec.nodeName=x"}), 400, "BadRequest")
    assert "spec.nodeName" in body["message"]


def test_pod_field_selectors(api: httpx.Client, ns: str) -> None:
    from tests.helpers import pod

    pods = f"/api/v1/namespaces/{ns}/pods"
    api.post(pods, json=pod("on-a", node="node-a"))
    api.post(pods, json=pod("on-b", node="node-b"))
    assert _names(api.get(pods, params={"fieldSelector": "spec.nodeName=node-a"}).json()) == ["on-a"]
    assert _names(api.get(pods, params={"fieldSelector": "status.phase=Pending,spec.nodeName!=node-a"}).json()) == ["on-b"]


def test_pagination_is_a_consistent_snapshot(api: httpx.Client, ns: str) -> None:
    for i in range(7):
        api.post(claims_path(ns), json=claim(f"p{i}"))
    first = api.get(claims_path(ns), params={"limit": "3"}).json()
    assert _names(first) == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    # Changes after the first page do not show up in later pages of the same list.
    api.post(claims_path(ns), json=claim("p3a"))
    api.delete(claims_path(ns, "p5"))
    second = api.get(claims_path(ns), params={"limit": "3", "continue": token}).json()
    assert _names(second) == ["p3", "p4", "p5"]
    third = api.get(claims_path(ns), params={"limit": "3", "continue": second["metadata"]["continue"]}).json()
    assert _names(third) == ["p6"]
    assert "continue" not in third["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert_status(api.get(claims_path(ns), params={"continue": "garbage!"}), 400, "BadRequest")


def test_cluster_wide_pages_cross_namespaces_whose_names_prefix_each_other(api: httpx.Client, ns: str) -> None:
    # "x" and "x-y": as joined strings "x/..." sorts after "x-y/...", which once made paging start over forever.
    other = f"{ns}-b"
    assert api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}).status_code == 201
    for namespace in (ns, other):
        for i in range(3):
            assert api.post(claims_path(namespace), json=claim(f"c{i}")).status_code == 201
    seen: list[tuple[str, str]] = []
    params = {"limit": "2"}
    for _ in range(5000):  # other tests' claims share this server; the bug made this loop endless
        page = api.get("/apis/resource.k8s.io/v1/resourceclaims", params=params).json()
        seen += [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        params = {"limit": "2", "continue": token}
    mine = [item for item in seen if item[0] in (ns, other)]
    assert mine == [(ns, "c0"), (ns, "c1"), (ns, "c2"), (other, "c0"), (other, "c1"), (other, "c2")]
    assert len(seen) == len(set(seen)), "no object is listed twice"


def test_resource_version_semantics(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("rv1")).json()
    rv = created["metadata"]["resourceVersion"]
    api.post(claims_path(ns), json=claim("rv2"))
    assert _names(api.get(claims_path(ns), params={"resourceVersion": "0"}).json()) == ["rv1", "rv2"]
    exact = api.get(claims_path(ns), params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}).json()
    assert _names(exact) == ["rv1"]
    assert exact["metadata"]["resourceVersion"] == rv
    newer = api.get(claims_path(ns), params={"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}).json()
    assert _names(newer) == ["rv1", "rv2"]
    assert_status(api.get(claims_path(ns), params={"resourceVersion": "abc"}), 400, "BadRequest")
    body = assert_status(api.get(claims_path(ns), params={"resourceVersionMatch": "Exact"}), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "resourceVersionMatch"


def test_watch_replays_from_resource_version(api: httpx.Client, ns: str) -> None:
    start = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    api.post(claims_path(ns), json=claim("w"))
    api.patch(claims_path(ns, "w"), json={"metadata": {"labels": {"k": "v"}}}, headers={"content-type": "application/merge-patch+json"})
    api.delete(claims_path(ns, "w"))
    events = watch_lines(api, claims_path(ns), {"resourceVersion": start, "timeoutSeconds": "2"}, limit=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert revisions == sorted(revisions) and len(set(revisions)) == 3


def test_watch_without_resource_version_sends_current_state(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("now1"))
    api.post(claims_path(ns), json=claim("now2"))
    events = watch_lines(api, claims_path(ns), {"timeoutSeconds": "1"}, limit=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "now1"), ("ADDED", "now2")]


def test_watch_live_events_and_label_transitions(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("lt", labels={"watch": "yes"}))
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    seen: list[tuple[str, str]] = []

    def watch() -> None:
        for event in iter_watch(api, claims_path(ns), {"resourceVersion": rv, "labelSelector": "watch=yes", "timeoutSeconds": "3"}):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 3:
                return

    thread = threading.Thread(target=watch)
    thread.start()
    time.sleep(0.3)
    api.post(claims_path(ns), json=claim("lt2", labels={"watch": "yes"}))
    api.patch(claims_path(ns, "lt"), json={"metadata": {"labels": {"watch": "no"}}}, headers={"content-type": "application/merge-patch+json"})
    api.patch(claims_path(ns, "lt"), json={"metadata": {"labels": {"watch": "yes"}}}, headers={"content-type": "application/merge-patch+json"})
    thread.join(10)
    assert seen == [("ADDED", "lt2"), ("DELETED", "lt"), ("ADDED", "lt")]


def test_watch_bookmarks_and_initial_events(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("init"))
    params = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
    events = watch_lines(api, claims_path(ns), params, limit=2)
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "init"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # The shared test server sends periodic bookmarks every second.
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    events = watch_lines(api, claims_path(ns), {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3"}, limit=1)
    assert events[0]["type"] == "BOOKMARK"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_query_parameters_decode_as_upstreams_parameter_codec(api: httpx.Client, ns: str) -> None:
    """A boolean parameter that is present means true unless it is "0" or "false" in any case
    (``?watch`` alone watches), and a repeated key keeps its first value."""
    for name in ("q1", "q2", "q3"):
        assert api.post(claims_path(ns), json=claim(name)).status_code == 201
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]

    def answer(query: str) -> str:
        """``watch`` for a stream (nothing happens after ``rv``, so it ends empty at its timeout),
        else the list's kind and size."""
        response = api.get(f"{claims_path(ns)}?{query}&resourceVersion={rv}&timeoutSeconds=1", timeout=10)
        assert response.status_code == 200, f"{query}: {response.text}"
        if not response.content.strip():
            return "watch"
        body = response.json()
        return f"{body['kind']}/{len(body['items'])}"

    for query in ("watch", "watch=", "watch=yes", "watch=TRUE", "watch=1", "watch=true&watch=false"):
        assert answer(query) == "watch", query
    for query in ("watch=0", "watch=FALSE", "watch=false&watch=true"):
        assert answer(query) == "ResourceClaimList/3", query
    assert answer("limit=1&limit=5") == "ResourceClaimList/1"


def test_watch_timeout_closes_stream(api: httpx.Client, ns: str) -> None:
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    started = time.monotonic()
    events = watch_lines(api, claims_path(ns), {"resourceVersion": rv, "timeoutSeconds": "1"}, limit=100)
    assert events == []
    assert time.monotonic() - started < 5


def test_watch_all_namespaces(api: httpx.Client, ns: str) -> None:
    rv = api.get("/apis/resource.k8s.io/v1/resourceclaims").json()["metadata"]["resourceVersion"]
    api.post(claims_path(ns), json=claim("everywhere"))
    events = watch_lines(api, "/apis/resource.k8s.io/v1/resourceclaims", {"resourceVersion": rv, "timeoutSeconds": "2"}, limit=1)
    assert events[0]["object"]["metadata"]["namespace"] == ns


def test_watch_send_initial_events_rules(api: httpx.Client, ns: str) -> None:
    response = api.get(claims_path(ns), params={"watch": "true", "sendInitialEvents": "true"})
    body = assert_status(response, 422, "Invalid")
    assert any(c["field"] == "resourceVersionMatch" for c in body["details"]["causes"])
