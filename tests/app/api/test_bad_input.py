"""Hostile and malformed requests get a clear 4xx Status; nothing is stored; no watcher sees anything."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.helpers import assert_status, claim, claims_path, iter_watch


@pytest.fixture
def quiet_watch(api: httpx.Client, ns: str) -> Iterator[list[dict[str, Any]]]:
    """A watch on the namespace's claims; the test asserts it stays silent."""
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []

    def run() -> None:
        for event in iter_watch(api, claims_path(ns), {"resourceVersion": rv, "timeoutSeconds": "2"}):
            seen.append(event)

    thread = threading.Thread(target=run)
    thread.start()
    yield seen
    thread.join(10)
    assert seen == [], "a refused request must not produce a watch event"
    assert api.get(claims_path(ns)).json()["items"] == [], "a refused request must not store anything"
    assert api.get("/readyz").status_code == 200


def _post(api: httpx.Client, ns: str, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return api.post(claims_path(ns), content=body, headers={"content-type": content_type})


def test_random_bytes(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    assert_status(_post(api, ns, os.urandom(4096)), 400, "BadRequest")


def test_yaml_bomb(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    bomb = "\n".join(lines).encode()
    assert_status(_post(api, ns, bomb, "application/yaml"), 400, "BadRequest")


def test_deeply_nested_json(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = b'{"metadata":{"name":"deep"},"spec":' + b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"}"
    assert_status(_post(api, ns, body), 400, "BadRequest")


def test_ten_megabyte_string(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("big")
    body["metadata"]["annotations"] = {"x": "y" * (10 * 1024 * 1024)}
    response = _post(api, ns, orjson.dumps(body))
    assert_status(response, 413, "RequestEntityTooLarge")


def test_wrong_types(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    assert_status(_post(api, ns, b"[1,2,3]"), 400, "BadRequest")
    body = claim("typed")
    body["metadata"]["labels"] = {"a": 1}
    assert_status(_post(api, ns, orjson.dumps(body)), 422, "Invalid")
    body = claim("typed")
    body["metadata"] = "nope"
    assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")


def test_unknown_fields_strict(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("strict")
    body["spec"]["bogus"] = True
    response = api.post(claims_path(ns), params={"fieldValidation": "Strict"}, json=body)
    status = assert_status(response, 400, "BadRequest")
    assert status["message"] == 'strict decoding error: unknown field "spec.bogus"'


def test_unknown_fields_warn_and_drop(api: httpx.Client, ns: str) -> None:
    body = claim("warned")
    body["spec"]["bogus"] = True
    response = api.post(claims_path(ns), params={"fieldValidation": "Warn"}, json=body)
    assert response.status_code == 201
    assert 'unknown field \\"spec.bogus\\"' in response.headers["warning"] or 'unknown field "spec.bogus"' in response.headers["warning"].replace("'", '"')
    assert "bogus" not in api.get(claims_path(ns, "warned")).json()["spec"]


def test_mismatched_type_meta(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("mismatch")
    body["apiVersion"] = "v1"
    assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")
    body = claim("mismatch")
    body["kind"] = "Pod"
    assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")


def test_name_or_namespace_differs_from_url(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("inbody")
    body["metadata"]["namespace"] = "elsewhere"
    assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")
    response = api.put(claims_path(ns, "url-name"), json=claim("body-name"))
    assert_status(response, 400, "BadRequest")


def test_resource_version_not_a_number(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("rvnum")).json()
    created["metadata"]["resourceVersion"] = "abc"
    assert_status(api.put(claims_path(ns, "rvnum"), json=created), 400, "BadRequest")
    assert_status(api.get(claims_path(ns), params={"watch": "true", "resourceVersion": "x1"}), 400, "BadRequest")
    api.delete(claims_path(ns, "rvnum"))


def test_unsupported_media_type_and_method(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    assert_status(_post(api, ns, b"<xml/>", "application/xml"), 415, "UnsupportedMediaType")
    assert_status(api.patch(claims_path(ns, "x"), content=b"{}", headers={"content-type": "application/xml"}), 415, "UnsupportedMediaType")
    assert_status(api.post(claims_path(ns, "x"), json=claim("x")), 405, "MethodNotAllowed")
    assert_status(api.delete("/api/v1/namespaces"), 405, "MethodNotAllowed")


def test_unknown_paths_are_404_status(api: httpx.Client) -> None:
    assert_status(api.get("/apis/resource.k8s.io/v1/widgets"), 404, "NotFound")
    assert_status(api.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/x/bogus"), 404, "NotFound")
