"""events.k8s.io/v1 Event over HTTP on both backends: one storage with core/v1 Event (what the
scheduler writes in one API is read in the other, lists and watches included), the events API's
strict validation, its field selectors, table and discovery."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.helpers import assert_status, watch_lines

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = {"Content-Type": "application/merge-patch+json"}
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def events_path(ns: str, name: str = "") -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{ns}/events" + (f"/{name}" if name else "")


def core_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/events" + (f"/{name}" if name else "")


def scheduled(ns: str, name: str, **fields: Any) -> dict[str, Any]:
    """An event as kube-scheduler's events.k8s.io recorder writes it."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-node-1",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "trainer", "uid": "u-1"},
        "note": f"Successfully assigned {ns}/trainer to sim-0",
        "type": "Normal",
        **fields,
    }


def legacy(ns: str, name: str) -> dict[str, Any]:
    """An event as a core/v1 recorder writes it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "trainer"},
        "reason": "Started",
        "message": "Started container main",
        "source": {"component": "kubelet", "host": "sim-0"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:05Z",
        "count": 2,
        "type": "Normal",
    }


def test_an_event_written_in_the_events_api_is_a_core_event(api: httpx.Client, ns: str) -> None:
    created = api.post(events_path(ns), json=scheduled(ns, "trainer.1"))
    assert created.status_code == 201, created.text
    assert created.json()["apiVersion"] == "events.k8s.io/v1" and created.json()["note"].startswith("Successfully assigned")
    core = api.get(core_path(ns, "trainer.1")).json()
    assert core["apiVersion"] == "v1"
    assert core["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "trainer", "uid": "u-1"}
    assert (core["message"], core["reportingComponent"], core["reportingInstance"], core["action"]) == (
        f"Successfully assigned {ns}/trainer to sim-0", "default-scheduler", "default-scheduler-node-1", "Binding",
    )  # fmt: skip
    assert not {"regarding", "note", "reportingController"} & set(core)
    assert core["metadata"]["uid"] == created.json()["metadata"]["uid"]
    # `kubectl get events` and `kubectl describe pod` read it through core/v1.
    table = api.get(core_path(ns), headers={"Accept": TABLE}).json()
    row = dict(zip([c["name"] for c in table["columnDefinitions"]], table["rows"][0]["cells"], strict=True))
    assert (row["Type"], row["Reason"], row["Object"], row["Message"]) == ("Normal", "Scheduled", "pod/trainer", f"Successfully assigned {ns}/trainer to sim-0")
    described = api.get(core_path(ns), params={"fieldSelector": "involvedObject.name=trainer,involvedObject.kind=Pod"}).json()
    assert [e["metadata"]["name"] for e in described["items"]] == ["trainer.1"]


def test_a_core_event_reads_in_the_events_api(api: httpx.Client, ns: str) -> None:
    listed = api.get(events_path(ns)).json()
    assert api.post(core_path(ns), json=legacy(ns, "trainer.2")).status_code == 201
    event = api.get(events_path(ns, "trainer.2")).json()
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["regarding"]["name"] == "trainer" and event["note"] == "Started container main"
    assert event["deprecatedSource"] == {"component": "kubelet", "host": "sim-0"}
    assert (event["deprecatedCount"], event["deprecatedFirstTimestamp"], event["deprecatedLastTimestamp"]) == (2, "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z")
    assert not {"involvedObject", "message", "source", "count", "firstTimestamp", "lastTimestamp"} & set(event)
    # A watch through the events API sees core writes in its own shape.
    (added,) = watch_lines(api, events_path(ns), {"resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "5"}, limit=1)
    assert (added["type"], added["object"]["apiVersion"], added["object"]["note"]) == ("ADDED", "events.k8s.io/v1", "Started container main")
    # Both APIs list the same objects.
    assert [e["metadata"]["name"] for e in api.get(events_path(ns)).json()["items"]] == ["trainer.2"]
    assert [e["metadata"]["name"] for e in api.get(core_path(ns)).json()["items"]] == ["trainer.2"]


def test_strict_validation_of_new_events(api: httpx.Client, ns: str) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"eventTime": None}, "eventTime: Required value"),
        ({"type": "Bogus"}, 'type: Invalid value: "": has invalid value: Bogus'),
        ({"deprecatedCount": 3}, 'count: Invalid value: "": needs to be unset'),
        ({"deprecatedSource": {"component": "kubelet"}}, 'source: Invalid value: "": needs to be unset'),
        ({"series": {"count": 1, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}}, 'series.count: Invalid value: "": should be at least 2'),
        ({"reportingController": ""}, "reportingController: Required value"),
        ({"action": ""}, "action: Required value"),
    ]
    for fields, message in cases:
        body = assert_status(api.post(events_path(ns), json=scheduled(ns, f"bad-{uuid.uuid4().hex[:6]}", **fields)), 422, "Invalid")
        assert message in body["message"], (fields, body["message"])
        assert body["details"]["group"] == "events.k8s.io"
    # ObjectMeta is validated in the events API (core/v1 Events are exempt upstream).
    body = assert_status(api.post(events_path(ns), json=scheduled(ns, "Bad_Name")), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    # A legacy event (no eventTime) is still a valid core/v1 write.
    assert api.post(core_path(ns), json=legacy(ns, "legacy.1")).status_code == 201


def test_updates_in_the_events_api_change_the_series_only(api: httpx.Client, ns: str) -> None:
    assert api.post(events_path(ns), json=scheduled(ns, "series.1")).status_code == 201
    series = {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}
    # The events recorder counts repeats with a strategic merge patch of the series.
    updated = api.patch(events_path(ns, "series.1"), json={"series": series}, headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert updated.status_code == 200, updated.text
    assert api.get(core_path(ns, "series.1")).json()["series"] == series
    body = assert_status(api.patch(events_path(ns, "series.1"), json={"note": "changed"}, headers=MERGE), 422, "Invalid")
    assert "message: Invalid value: " in body["message"] and "field is immutable" in body["message"]
    body = assert_status(api.patch(events_path(ns, "series.1"), json={"reportingController": "other"}, headers=MERGE), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "reportingController"
    # core/v1 keeps the legacy rules: the same change is allowed there.
    assert api.patch(core_path(ns, "series.1"), json={"message": "changed"}, headers=MERGE).status_code == 200


def test_field_selectors_errors_and_deletecollection(api: httpx.Client, ns: str) -> None:
    assert api.post(events_path(ns), json=scheduled(ns, "sel.1")).status_code == 201
    assert api.post(core_path(ns), json=legacy(ns, "sel.2")).status_code == 201

    def names(selector: str) -> list[str]:
        response = api.get(events_path(ns), params={"fieldSelector": selector})
        assert response.status_code == 200, response.text
        return sorted(e["metadata"]["name"] for e in response.json()["items"])

    assert names("regarding.name=trainer") == ["sel.1", "sel.2"]
    assert names("reportingController=default-scheduler") == ["sel.1"]
    assert names("reason=Started,type=Normal") == ["sel.2"]
    assert_status(api.get(events_path(ns), params={"fieldSelector": "involvedObject.name=trainer"}), 400, "BadRequest")
    missing = assert_status(api.get(events_path(ns, "missing")), 404, "NotFound")
    assert missing["message"] == 'events.events.k8s.io "missing" not found'
    assert api.request("DELETE", events_path(ns)).status_code == 200
    assert api.get(core_path(ns)).json()["items"] == []


def test_discovery(api: httpx.Client) -> None:
    (resource,) = api.get("/apis/events.k8s.io/v1").json()["resources"]
    assert (resource["name"], resource["kind"], resource["namespaced"], resource["shortNames"]) == ("events", "Event", True, ["ev"])
    core = next(r for r in api.get("/api/v1").json()["resources"] if r["name"] == "events")
    # One storage: upstream's storage version hash is the same in both groups.
    assert resource["storageVersionHash"] == core["storageVersionHash"]
    aggregated = api.get("/apis", headers={"Accept": AGGREGATED}).json()
    (group,) = [i for i in aggregated["items"] if i["metadata"]["name"] == "events.k8s.io"]
    assert [r["resource"] for r in group["versions"][0]["resources"]] == ["events"]
