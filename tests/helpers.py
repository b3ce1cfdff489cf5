"""Small builders and readers for API tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson

from tests.contract import check_object

RESOURCE = "/apis/resource.k8s.io/v1"


def claims_path(ns: str, name: str = "") -> str:
    base = f"{RESOURCE}/namespaces/{ns}/resourceclaims"
    return f"{base}/{name}" if name else base


def claim(name: str = "", generate_name: str = "", labels: dict[str, str] | None = None, device_class: str = "gpu.example.com") -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if name:
        metadata["name"] = name
    if generate_name:
        metadata["generateName"] = generate_name
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }


def device_class(name: str, selector: str = 'device.driver == "gpu.example.com"') -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }


def pod(name: str, node: str = "", gates: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def new_namespace(client: httpx.Client) -> str:
    """A fresh namespace, made through ``client``."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    response = client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert response.status_code == 201, response.text
    return name


def assert_status(response: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body = response.json()
    assert body["kind"] == "Status", body
    assert body["code"] == code
    assert body["reason"] == reason, body
    return body  # type: ignore[no-any-return]


def watch_lines(client: httpx.Client, path: str, params: dict[str, str], limit: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Read up to ``limit`` watch events (the server closes at timeoutSeconds)."""
    events: list[dict[str, Any]] = []
    with client.stream("GET", path, params={"watch": "true", **params}, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line:
                continue
            event = orjson.loads(line)
            check_object(event["object"], f"watch {path}")
            events.append(event)
            if len(events) >= limit:
                break
    return events


def iter_watch(client: httpx.Client, path: str, params: dict[str, str], timeout: float = 10.0) -> Iterator[dict[str, Any]]:
    with client.stream("GET", path, params={"watch": "true", **params}, timeout=timeout) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                event = orjson.loads(line)
                check_object(event["object"], f"watch {path}")
                yield event
