"""Strict decoding and field validation as kube-apiserver's decoders apply them.

A body's unknown and repeated fields are strict decoding errors: Strict refuses them (400 from
transformDecodeError for creates and updates, 422 on the field ``patch`` for patches), Warn (the
default) stores the object and sends one Warning per error, Ignore stores it silently. JSON
errors come in document order (a repeated unknown field named once, as unknown); a YAML body's
repeated keys are go-yaml's one error of lines, then its unknown fields by sorted keys, as
upstream decodes the JSON it converts YAML to. The bodies are upstream's field validation
integration test's, on a Pod.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.app.api.refusals import ACCOUNT, MERGE_PATCH, Refusal, account, check, ids, seed, state

POD_BODY = (
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dupename","name":"%s","labels":{"app":"nginx"},"unknownMeta":"metaVal"},'
    b'"spec":{"unknown1":"val1","unknownDupe":"valDupe","unknownDupe":"valDupe2","hostname":"a","hostname":"b",'
    b'"containers":[{"name":"nginx","image":"nginx:latest","unknownNested":"val1","imagePullPolicy":"Always","imagePullPolicy":"Never"}]}}'
)
POD_YAML = b"""apiVersion: v1
kind: Pod
metadata:
  name: dupename
  name: %s
  unknownMeta: metaVal
  labels:
    app: nginx
spec:
  unknown1: val1
  unknownDupe: valDupe
  unknownDupe: valDupe2
  hostname: a
  hostname: b
  containers:
  - name: nginx
    image: nginx:latest
    unknownNested: val1
    imagePullPolicy: Always
    imagePullPolicy: Never
"""
JSON_ERRORS = [
    'duplicate field "metadata.name"',
    'unknown field "metadata.unknownMeta"',
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknownDupe"',
    'duplicate field "spec.hostname"',
    'unknown field "spec.containers[0].unknownNested"',
    'duplicate field "spec.containers[0].imagePullPolicy"',
]
YAML_LINES = [
    'line 5: key "name" already set in map',
    'line 12: key "unknownDupe" already set in map',
    'line 14: key "hostname" already set in map',
    'line 20: key "imagePullPolicy" already set in map',
]
YAML_UNKNOWN = [
    'unknown field "metadata.unknownMeta"',
    'unknown field "spec.containers[0].unknownNested"',
    'unknown field "spec.unknown1"',
    'unknown field "spec.unknownDupe"',
]
POD_PREFIX = 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
ACCOUNT_PREFIX = 'ServiceAccount in version "v1" cannot be handled as a ServiceAccount: strict decoding error: '
STRICT = (("fieldValidation", "Strict"),)
YAML = "application/yaml"


def _strict(upstream: str, case: str, method: str, path: str, body: Any, message: str, content_type: str = "application/json") -> Refusal:
    return Refusal(upstream, case, method, path, 400, "BadRequest", message, body, content_type, STRICT)


ROWS = [
    _strict("handlers.transformDecodeError", "an unknown field", "POST", "serviceaccounts", {**account("new"), "foo": 1}, ACCOUNT_PREFIX + 'unknown field "foo"'),
    _strict(
        "handlers.transformDecodeError", "an unknown field of metadata", "POST", "serviceaccounts",
        account("new", bogus=True), ACCOUNT_PREFIX + 'unknown field "metadata.bogus"',
    ),
    _strict(
        "handlers.transformDecodeError", "an unknown field in a list item", "POST", "serviceaccounts",
        {**account("new"), "secrets": [{"name": "a"}, {"name": "b", "bogus": 1}]}, ACCOUNT_PREFIX + 'unknown field "secrets[1].bogus"',
    ),
    _strict(
        "handlers.transformDecodeError", "repeated and unknown fields in document order", "POST", "pods",
        POD_BODY % b"p1", POD_PREFIX + ", ".join(JSON_ERRORS),
    ),
    _strict(
        "json.Serializer.unmarshal", "a YAML body's repeated keys, then its unknown fields by sorted keys", "POST", "pods",
        POD_YAML % b"p2", POD_PREFIX + "yaml: unmarshal errors:\n  " + "\n  ".join(YAML_LINES) + ", " + ", ".join(YAML_UNKNOWN), YAML,
    ),
    _strict(
        "json.Serializer.unmarshal", "a repeated key in a YAML list item", "POST", "serviceaccounts",
        b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: new\nsecrets:\n- name: a\n  name: b\n",
        ACCOUNT_PREFIX + 'yaml: unmarshal errors:\n  line 7: key "name" already set in map', YAML,
    ),
    _strict(
        "handlers.transformDecodeError", "an update", "PUT", ACCOUNT,
        b'{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"existing","labels":{"a":"1","a":"2"}},"bogus":1}',
        ACCOUNT_PREFIX + 'duplicate field "metadata.labels.a", unknown field "bogus"',
    ),
    Refusal(
        "handlers.jsonPatcher.applyPatchToCurrentObject", "a merge patch's repeated key, under Strict", "PATCH", ACCOUNT, 422, "Invalid", None,
        b'{"metadata":{"labels":{"x":"1","x":"2"}}}', MERGE_PATCH, STRICT,
        pattern=r' "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: duplicate field "metadata\.labels\.x"',
    ),
    Refusal(
        "handlers.transformDecodeError", "malformed JSON", "POST", "serviceaccounts", 400, "BadRequest", None, b'{"apiVersion":', "application/json",
        pattern=r"the object provided is unrecognized \(must be of type ServiceAccount\): couldn't get version/kind; json parse error: .+",
    ),
    Refusal(
        "handlers.transformDecodeError", "no body", "POST", "serviceaccounts", 400, "BadRequest",
        "the object provided is unrecognized (must be of type ServiceAccount): no content", b"",
    ),
    Refusal(
        "handlers.transformDecodeError", "malformed YAML", "POST", "serviceaccounts", 400, "BadRequest", None, b"metadata: [", YAML,
        pattern=r"the object provided is unrecognized \(must be of type ServiceAccount\): error converting YAML to JSON: .+",
    ),
    Refusal("handlers.transformDecodeError", "an array is no object", "POST", "serviceaccounts", 400, "BadRequest", None, b"[1]", pattern=r".+"),
    Refusal(
        "handlers.transformDecodeError", "a number no Go value holds", "POST", "serviceaccounts", 400, "BadRequest",
        'ServiceAccount in version "v1" cannot be handled as a ServiceAccount: json: cannot unmarshal number into Go struct field '
        "ServiceAccount.automountServiceAccountToken of type bool",
        b'{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"new"},"automountServiceAccountToken":1e400}',
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


def _warnings(response: httpx.Response) -> list[str]:
    """The texts of the Warning header (one header, comma-separated quoted warn-values)."""
    header = response.headers.get("warning", "")
    return [orjson.loads(part.split(" ", 2)[2]) for part in _split_warnings(header)] if header else []


def _split_warnings(header: str) -> list[str]:
    parts, current, quoted, escaped = [], "", False, False
    for char in header:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    parts.append(current.strip())
    return parts


@pytest.mark.parametrize(
    ("validation", "content_type", "body", "expected"),
    [
        ("Warn", "application/json", POD_BODY, JSON_ERRORS),
        ("", "application/json", POD_BODY, JSON_ERRORS),
        ("Ignore", "application/json", POD_BODY, []),
        ("Warn", YAML, POD_YAML, YAML_LINES + YAML_UNKNOWN),
        ("Ignore", YAML, POD_YAML, []),
    ],
    ids=["warn", "default", "ignore", "warn-yaml", "ignore-yaml"],
)
def test_warn_stores_and_warns_once_per_error(api: httpx.Client, ns: str, validation: str, content_type: str, body: bytes, expected: list[str]) -> None:
    params = {"fieldValidation": validation} if validation else {}
    response = api.post(f"/api/v1/namespaces/{ns}/pods", params=params, content=body % b"kept", headers={"content-type": content_type})
    assert response.status_code == 201, response.text
    assert _warnings(response) == expected
    stored = api.get(f"/api/v1/namespaces/{ns}/pods/kept").json()
    # The last of repeated keys wins; unknown fields are dropped.
    assert stored["spec"]["hostname"] == "b"
    assert stored["spec"]["containers"][0]["imagePullPolicy"] == "Never"
    assert "unknown1" not in stored["spec"] and "unknownMeta" not in stored["metadata"]


def test_a_strict_refusal_of_a_patch_changes_nothing_and_warn_applies_it(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    before = state(api, ns)
    path = f"/api/v1/namespaces/{ns}/{ACCOUNT}"
    body = b'{"metadata":{"labels":{"x":"1","x":"2"}},"bogus":1}'
    refused = api.patch(path, params={"fieldValidation": "Strict"}, content=body, headers={"content-type": MERGE_PATCH})
    assert refused.status_code == 422, refused.text
    assert state(api, ns) == before
    warned = api.patch(path, content=body, headers={"content-type": MERGE_PATCH})
    assert warned.status_code == 200, warned.text
    assert _warnings(warned) == ['duplicate field "metadata.labels.x"', 'unknown field "bogus"']
    assert warned.json()["metadata"]["labels"]["x"] == "2"
