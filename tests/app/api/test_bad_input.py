"""Hostile and malformed requests get a clear 4xx Status; nothing is stored; no watcher sees anything."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.helpers import assert_status, claim, claims_path, iter_watch

SENTINEL = "after-the-test"


@pytest.fixture
def quiet_watch(api: httpx.Client, ns: str) -> Iterator[list[dict[str, Any]]]:
    """A watch on the namespace's claims; the test asserts it stays silent. After the test a
    sentinel claim is written: events come in the order of their revisions, so the watch ends at
    the sentinel's event, and anything a refused request had stored would have come before it."""
    rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []
    reached = threading.Event()

    def run() -> None:
        for event in iter_watch(api, claims_path(ns), {"resourceVersion": rv, "timeoutSeconds": "30"}, timeout=40):
            if event["object"]["metadata"]["name"] == SENTINEL:
                reached.set()
                return
            seen.append(event)

    thread = threading.Thread(target=run)
    thread.start()
    yield seen
    assert api.post(claims_path(ns), json=claim(SENTINEL)).status_code == 201
    thread.join(40)
    assert seen == [], "a refused request must not produce a watch event"
    assert reached.is_set(), "the watch saw the sentinel's event"
    assert [i["metadata"]["name"] for i in api.get(claims_path(ns)).json()["items"]] == [SENTINEL], "a refused request must not store anything"
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


def _nested(levels: int) -> bytes:
    """A claim whose body nests ``levels`` objects deep (the body itself is the first)."""
    inner = levels - 2
    return b'{"metadata":{"name":"deep"},"spec":' + b'{"a":' * inner + b"1" + b"}" * inner + b"}"


def test_json_past_the_depth_limit_within_the_decoders_is_refused(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    response = _post(api, ns, _nested(101))
    assert_status(response, 400, "BadRequest")
    assert response.json()["message"] == "the request body is nested deeper than 100 levels"


def test_json_at_the_depth_limit_is_not_refused_for_its_depth(api: httpx.Client, ns: str) -> None:
    response = _post(api, ns, _nested(100))
    assert "nested deeper" not in response.json().get("message", "")


def test_ten_megabyte_string(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("big")
    body["metadata"]["annotations"] = {"x": "y" * (10 * 1024 * 1024)}
    response = _post(api, ns, orjson.dumps(body))
    assert_status(response, 413, "RequestEntityTooLarge")


def test_wrong_types(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    assert_status(_post(api, ns, b"[1,2,3]"), 400, "BadRequest")
    body = claim("typed")
    body["metadata"]["labels"] = {"a": 1}
    refused = assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")  # Go's decoding refuses it, as upstream
    assert refused["message"].endswith("json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string")
    body = claim("typed")
    body["metadata"] = "nope"
    assert_status(_post(api, ns, orjson.dumps(body)), 400, "BadRequest")


def test_unknown_fields_strict(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = claim("strict")
    body["spec"]["bogus"] = True
    response = api.post(claims_path(ns), params={"fieldValidation": "Strict"}, json=body)
    status = assert_status(response, 400, "BadRequest")
    assert status["message"] == 'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: strict decoding error: unknown field "spec.bogus"'


def test_unknown_fields_warn_and_drop(api: httpx.Client, ns: str) -> None:
    body = claim("warned")
    body["spec"]["bogus"] = True
    response = api.post(claims_path(ns), params={"fieldValidation": "Warn"}, json=body)
    assert response.status_code == 201
    assert 'unknown field \\"spec.bogus\\"' in response.headers["warning"] or 'unknown field "spec.bogus"' in response.headers["warning"].replace("'", '"')
    assert "bogus" not in api.get(claims_path(ns, "warned")).json()["spec"]


def test_nulls_the_request_fills_in_are_kept_and_the_rest_dropped(api: httpx.Client, ns: str) -> None:
    # The body's kind and namespace are null: the request fills them in before the nulls and
    # unknown fields its decoding found are dropped, so they are stored, not dropped.
    body = claim("nulls")
    body["kind"] = None
    body["metadata"]["namespace"] = None
    body["spec"]["devices"]["constraints"] = None
    body["spec"]["devices"]["requests"][0]["bogus"] = {"deeper": None}
    response = api.post(claims_path(ns), params={"fieldValidation": "Warn"}, json=body)
    assert response.status_code == 201, response.text
    assert response.headers["warning"] == '299 - "unknown field \\"spec.devices.requests[0].bogus\\""'
    stored = api.get(claims_path(ns, "nulls")).json()
    assert stored["kind"] == "ResourceClaim"
    assert stored["metadata"]["namespace"] == ns
    assert "constraints" not in stored["spec"]["devices"]
    assert "bogus" not in stored["spec"]["devices"]["requests"][0]


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


def _raw(api: httpx.Client, request: bytes) -> bytes:
    """One request written as is on a new connection; everything the server sends back until it closes."""
    url = api.base_url
    with socket.create_connection((url.host, url.port or 80), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def _claim_request(ns: str, head: bytes, body: bytes) -> bytes:
    return b"POST " + claims_path(ns).encode() + b" HTTP/1.1\r\nHost: server\r\nContent-Type: application/json\r\n" + head + b"\r\n" + body


def test_both_content_length_and_transfer_encoding(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    """As Go's server: the chunked body counts (empty here), and what a Content-Length reader would
    take for the body is read as the next request, which is no request at all."""
    smuggled = orjson.dumps(claim("smuggled"))
    request = _claim_request(ns, b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % (5 + len(smuggled)), b"0\r\n\r\n" + smuggled)
    answer = _raw(api, request)
    first, _, rest = answer.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"no content" in rest
    assert rest.endswith(b"400 Bad Request"), "the leftover bytes are a malformed request"


def test_duplicate_content_length(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = orjson.dumps(claim("dup-length"))
    answer = _raw(api, _claim_request(ns, b"Content-Length: %d\r\nContent-Length: 2\r\n" % len(body), body))
    assert answer == b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"


def _get_raw(api: httpx.Client, target: str) -> tuple[bytes, Any]:
    """GET a target too long for httpx; the status line and the decoded JSON body."""
    answer = _raw(api, f"GET {target} HTTP/1.1\r\nHost: server\r\nConnection: close\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], orjson.loads(body)


def test_a_hundred_kilobyte_url(api: httpx.Client, ns: str) -> None:
    name = "a" * 100_000
    status_line, status = _get_raw(api, claims_path(ns, name))
    assert status_line == b"HTTP/1.1 404 Not Found"
    assert status["reason"] == "NotFound" and status["message"] == f'resourceclaims.resource.k8s.io "{name}" not found'
    status_line, listed = _get_raw(api, f"{claims_path(ns)}?labelSelector=a%3D{'b' * 100_000}")
    assert status_line == b"HTTP/1.1 400 Bad Request", "a label value longer than 63 characters"
    assert listed["reason"] == "BadRequest"
    assert api.get("/readyz").status_code == 200


def test_ten_thousand_query_parameters(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("listed"))
    junk = "&".join(f"p{i}=v" for i in range(9_999))
    status_line, listed = _get_raw(api, f"{claims_path(ns)}?limit=1&{junk}")
    assert status_line == b"HTTP/1.1 200 OK" and [i["metadata"]["name"] for i in listed["items"]] == ["listed"]
    # One more and Go's query parser gives up: upstream reads no parameter at all, not even watch.
    status_line, ignored = _get_raw(api, f"{claims_path(ns)}?watch=true&{junk}&one=more")
    assert status_line == b"HTTP/1.1 200 OK" and ignored["kind"] == "ResourceClaimList"
    assert api.get("/readyz").status_code == 200


def test_duplicate_keys(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]]) -> None:
    body = b'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"twice","name":"twice"},"spec":{"devices":{"requests":[]}}}'
    response = api.post(claims_path(ns), params={"fieldValidation": "Strict"}, content=body, headers={"content-type": "application/json"})
    status = assert_status(response, 400, "BadRequest")
    assert status["message"] == 'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: strict decoding error: duplicate field "metadata.name"'


def test_duplicate_keys_warn_and_the_last_wins(api: httpx.Client, ns: str) -> None:
    body = b'{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "first", "name": "last"}, "spec": {"devices": {}}}'
    response = _post(api, ns, body)
    assert response.status_code == 201
    assert response.headers["warning"] == '299 - "duplicate field \\"metadata.name\\""'
    assert response.json()["metadata"]["name"] == "last"


@pytest.mark.parametrize("number", ["1e400", "18446744073709551616", "-9223372036854775809"])
def test_numbers_no_go_integer_holds(api: httpx.Client, ns: str, quiet_watch: list[dict[str, Any]], number: str) -> None:
    body = orjson.dumps(claim("numbers")).replace(b'"gpu.example.com"', b'"gpu.example.com","count":' + number.encode())
    assert b'"count"' in body
    status = assert_status(_post(api, ns, body), 400, "BadRequest")
    assert status["message"] == (
        'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal number '
        f"{number} into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64"
    )
