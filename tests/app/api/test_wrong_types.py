"""A value of the wrong JSON type is a decoding error, as kube-apiserver's typed decoding makes it:
400 BadRequest with Go's words on create and update (JSON and YAML), 422 on the field ``patch``
for JSON, merge and strategic merge patches (each in its own words: the patched object is decoded,
a strategic merge patch's is converted from its unstructured form), and the typed-patch error of
server-side apply; never the 422 of validation, and nothing is stored.

``ROWS`` (tests/app/api/wrong_types.py) covers each kind of Go field; every served kind is then
refused a string for ``metadata.labels`` by every write.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
import yaml

from app.api.openapi import create_example
from app.registry import served_kinds
from app.registry.base import KindStrategy
from devtools.server import ServerProcess
from kube.client import resource_path
from tests.app.api.wrong_types import LABELS_NOT_A_MAP, ROWS, YAML, WrongType, cannot_handle
from tests.helpers import assert_status


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.case)
def test_create_with_a_value_of_the_wrong_type(api: httpx.Client, ns: str, row: WrongType) -> None:
    refused = assert_status(row.send(api, ns), 400, "BadRequest")
    assert refused["message"] == row.message
    assert not row.stored(api, ns)


@pytest.fixture(scope="module")
def own_server(start_server: Callable[..., ServerProcess]) -> Iterator[tuple[httpx.Client, str]]:
    """A server of this module's own (every kind gets an object, cluster-scoped ones too) and a namespace in it."""
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        namespace = f"wrong-{uuid.uuid4().hex[:8]}"
        created = client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        assert created.status_code == 201, created.text
        yield client, namespace


def _namespace(strategy: KindStrategy, namespace: str) -> str | None:
    if not strategy.namespaced:
        return None
    # An Event's example is about an object of "default", a LocalSubjectAccessReview's asks about it.
    return "default" if strategy.kind in ("Event", "LocalSubjectAccessReview") else namespace


def _settled(client: httpx.Client, item: str, strategy: KindStrategy, created: Any) -> Any:
    """The object once the server's own writes after its create are done: a policy's status is
    written by the type checker (app.controlplane.policystatus)."""
    if strategy.kind != "ValidatingAdmissionPolicy":
        return created
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        current = client.get(item).json()
        if (current.get("status") or {}).get("observedGeneration"):
            return current
        time.sleep(0.05)
    raise AssertionError(f"{item} was not type-checked")


def _send(client: httpx.Client, method: str, path: str, body: Any, content_type: str) -> httpx.Response:
    content = yaml.safe_dump(body).encode() if content_type == YAML else orjson.dumps(body)
    return client.request(method, path, content=content, headers={"Content-Type": content_type})


@pytest.mark.parametrize("strategy", served_kinds(), ids=lambda s: f"{s.api_version}/{s.kind}")
def test_every_kind_refuses_labels_of_the_wrong_type_on_every_write(own_server: tuple[httpx.Client, str], strategy: KindStrategy) -> None:
    client, namespace = own_server
    collection = resource_path(strategy.group, strategy.version, strategy.plural, _namespace(strategy, namespace))
    name = f"wrong-{uuid.uuid4().hex[:8]}"
    decode_error = cannot_handle(strategy.kind, strategy.version) + LABELS_NOT_A_MAP
    body = {"apiVersion": strategy.api_version, "kind": strategy.kind, "metadata": {"name": name, "labels": "x"}}
    for content_type in ("application/json", YAML):
        refused = assert_status(_send(client, "POST", collection, body, content_type), 400, "BadRequest")
        assert refused["message"] == decode_error, content_type
    if not strategy.stored:
        return  # a review is only created
    assert client.get(f"{collection}/{name}").status_code == 404

    example = create_example(strategy)
    assert example is not None
    example["metadata"] = {"name": name}
    created = client.post(collection, json=example)
    assert created.status_code == 201, created.text
    item = f"{collection}/{name}"
    before = _settled(client, item, strategy, created.json())

    replaced = {**before, "metadata": {**before["metadata"], "labels": "x"}}
    refused = assert_status(client.put(item, json=replaced), 400, "BadRequest")
    assert refused["message"] == decode_error

    patches = {
        "application/merge-patch+json": {"metadata": {"labels": "x"}},
        "application/json-patch+json": [{"op": "add", "path": "/metadata/labels", "value": "x"}],
    }
    for content_type, patch in patches.items():
        refused = assert_status(_send(client, "PATCH", item, patch, content_type), 422, "Invalid")
        # The patched object is shown as upstream's decoder saw it, then its error.
        assert re.fullmatch(r' "" is invalid: patch: Invalid value: "\{.*\}": ' + re.escape(LABELS_NOT_A_MAP), refused["message"], re.S), content_type
        assert [cause["field"] for cause in refused["details"]["causes"]] == ["patch"]

    strategic = _send(client, "PATCH", item, {"metadata": {"labels": "x"}}, "application/strategic-merge-patch+json")
    refused = assert_status(strategic, 422, "Invalid")
    assert refused["message"] == ' "" is invalid: patch: Invalid value: "map[metadata:map[labels:x]]": cannot restore map from string'

    applied = {"apiVersion": strategy.api_version, "kind": strategy.kind, "metadata": {"name": name, "labels": "x"}}
    apply = client.patch(item, params={"fieldManager": "wrong"}, content=orjson.dumps(applied), headers={"Content-Type": "application/apply-patch+yaml"})
    refused = assert_status(apply, 400, "BadRequest")
    group_version = f"{strategy.group}/{strategy.version}"
    assert refused["message"] == f"failed to create typed patch object (/{name}; {group_version}, Kind={strategy.kind}): .metadata.labels: expected map, got &{{x}}"

    after = client.get(item)
    assert after.status_code == 200, after.text
    assert after.json()["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
