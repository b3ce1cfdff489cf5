"""Prometheus metrics: requests by verb, resource and code; latencies; watches; storage revision."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from app.storage.storage import Storage

REGISTRY = CollectorRegistry()
REQUESTS = Counter(
    "apiserver_request_total", "Requests by verb, resource and HTTP code.", ["verb", "resource", "subresource", "code"], registry=REGISTRY
)
LATENCY = Histogram(
    "apiserver_request_duration_seconds",
    "Response latency by verb and resource (watches: time to the first byte).",
    ["verb", "resource"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
WATCHERS = Gauge("apiserver_registered_watchers", "Open watch streams.", registry=REGISTRY)
REVISION = Gauge("apiserver_storage_revision", "Newest revision applied to the watch cache.", registry=REGISTRY)
COMPACTED = Gauge("apiserver_storage_compacted_revision", "Revision below which the event log is compacted.", registry=REGISTRY)
COMMITS = Gauge("apiserver_storage_group_commits", "Group commits since start.", registry=REGISTRY)
OBJECTS = Gauge("apiserver_storage_objects", "Objects in the watch cache by resource.", ["resource"], registry=REGISTRY)
# What the watch cache holds per resource (the names after upstream's apiserver_watch_cache_*).
CACHE_BYTES = Gauge("apiserver_watch_cache_bytes", "Serialised bytes of the current objects in the watch cache by resource.", ["resource"], registry=REGISTRY)
CACHE_EVENTS = Gauge("apiserver_watch_cache_events", "Events in the watch cache's history by resource.", ["resource"], registry=REGISTRY)
CACHE_CAPACITY = Gauge("apiserver_watch_cache_capacity", "Capacity of the watch cache's history by resource.", ["resource"], registry=REGISTRY)
CACHE_HISTORY_BYTES = Gauge(
    "apiserver_watch_cache_history_bytes", "Bytes of replaced and deleted versions only the history keeps, by resource.", ["resource"], registry=REGISTRY
)

_storage: Storage | None = None


def bind_storage(storage: Storage) -> None:
    global _storage
    _storage = storage


def _verb(scope: dict[str, Any]) -> tuple[str, str, str]:
    """Kubernetes verb, resource and subresource from the path (approximate for discovery)."""
    path: str = scope.get("path", "")
    method: str = scope.get("method", "")
    parts = [p for p in path.split("/") if p]
    count = len(parts)
    # Where the resource's segments start: after /api/v1 or /apis/GROUP/VERSION.
    if count >= 2 and parts[0] == "api" and parts[1] == "v1":
        first = 2
    elif count >= 3 and parts[0] == "apis":
        first = 3
    else:
        return method, parts[0] if parts else "", ""
    if count - first >= 3 and parts[first] == "namespaces" and parts[first + 2] != "status" and parts[first + 2] != "finalize":
        first += 2
    resource = parts[first] if count > first else ""
    name = parts[first + 1] if count > first + 1 else ""
    sub = parts[first + 2] if count > first + 2 else ""
    if method == "GET":
        query: bytes = scope.get("query_string", b"")
        watching = b"watch=true" in query or b"watch=1" in query
        verb = "WATCH" if watching else ("GET" if name else "LIST")
    elif method == "DELETE" and not name:
        verb = "DELETECOLLECTION"
    else:
        verb = method
    return verb, resource, sub


# labels() validates and locks on every call; the few label sets real traffic uses are kept
# (bounded: paths come from clients).
_series: dict[tuple[str, str, str, int], tuple[Any, Any]] = {}


def observe_request(scope: dict[str, Any], code: int, seconds: float) -> None:
    verb, resource, sub = _verb(scope)
    key = (verb, resource, sub, code)
    series = _series.get(key)
    if series is None:
        series = (REQUESTS.labels(verb, resource, sub, str(code)), LATENCY.labels(verb, resource))
        if len(_series) < 4096:
            _series[key] = series
    series[0].inc()
    series[1].observe(seconds)


def render() -> tuple[bytes, str]:
    if _storage is not None:
        REVISION.set(_storage.revision)
        COMPACTED.set(_storage.compacted_revision)
        COMMITS.set(_storage.commits)
        from app.registry import KINDS

        for resource in dict.fromkeys(kind.qualified_resource for kind in KINDS):
            objects, size, events, held = _storage.memory(resource)
            OBJECTS.labels(resource).set(objects)
            CACHE_BYTES.labels(resource).set(size)
            CACHE_EVENTS.labels(resource).set(events)
            CACHE_CAPACITY.labels(resource).set(max(_storage.history_capacity(resource), events))
            CACHE_HISTORY_BYTES.labels(resource).set(held)
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


