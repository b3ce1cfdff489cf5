"""Content negotiation refuses what kube-apiserver refuses.

Bodies are read in JSON, YAML or protobuf (NegotiateInputSerializer, which parses the
Content-Type as Go's mime.ParseMediaType does); a PATCH's Content-Type must be a patch type,
compared as written (PatchResource, before anything else); answers are negotiated from the
Accept header (NegotiateOutputMediaType: goautoneg's parsing, case-sensitive types, only the
conversions and stream framings the endpoint offers).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.app.api.refusals import ACCOUNT, APPLY, JSON_PATCH, MERGE_PATCH, POD, Refusal, account, check, ids, seed, send, state
from tests.helpers import assert_status

BODY_TYPES = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
PATCH_TYPES = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
)
SERIALIZED = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
STREAMED = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
NEW = account("new")


def _body_type(case: str, content_type: str, method: str = "POST", path: str = "serviceaccounts") -> Refusal:
    body = account() if method == "PUT" else NEW
    return Refusal("negotiation.NegotiateInputSerializer", case, method, path, 415, "UnsupportedMediaType", BODY_TYPES, body, content_type)


def _patch_type(case: str, content_type: str | None, path: str = ACCOUNT, **extra: Any) -> Refusal:
    return Refusal("handlers.PatchResource", case, "PATCH", path, 415, "UnsupportedMediaType", PATCH_TYPES, b'{"metadata":{"labels":{"x":"y"}}}', content_type, **extra)


def _accept(case: str, accept: str, method: str = "GET", path: str = ACCOUNT, body: object = None, content_type: str = "application/json") -> Refusal:
    return Refusal("negotiation.NegotiateOutputMediaType", case, method, path, 406, "NotAcceptable", SERIALIZED, body, content_type, headers=(("accept", accept),))


ROWS = [
    _body_type("XML", "application/xml"),
    _body_type("plain text is not JSON", "text/plain"),
    _body_type("a wildcard is no media type", "*/*"),
    _body_type("application/x-yaml is not served", "application/x-yaml"),
    _body_type("text/yaml is not served", "text/yaml"),
    _body_type("CBOR is behind a gate that is off", "application/cbor"),
    _body_type("no subtype", "application"),
    _body_type("a parameter without a value (mime.ErrInvalidMediaParameter)", "application/json; charset"),
    _body_type("a repeated parameter", "application/json; charset=utf-8; charset=utf-8"),
    _body_type("junk after the subtype", "application/json x"),
    _body_type("a patch type on a create", MERGE_PATCH),
    _body_type("an update", "text/plain", "PUT", ACCOUNT),
    _body_type("an action subresource", "application/xml", "POST", f"{POD}/binding"),
    Refusal(
        "negotiation.NegotiateInputSerializer", "a DELETE body", "DELETE", ACCOUNT, 415, "UnsupportedMediaType", BODY_TYPES,
        {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}, "text/plain",
    ),
    _patch_type("plain JSON is no patch type", "application/json"),
    _patch_type("no Content-Type", None),
    _patch_type("compared with its case", "Application/merge-patch+json"),
    _patch_type("a space before the parameters stays", "application/merge-patch+json ;charset=utf-8"),
    _patch_type("CBOR apply is behind a gate that is off", "application/apply-patch+cbor"),
    _patch_type("checked before the object is looked up", JSON_PATCH.replace("json-patch", "xml-patch"), "serviceaccounts/missing"),
    _patch_type("checked before the options", "application/json", params=(("fieldManager", "x" * 200), ("dryRun", "bogus"))),
    _patch_type("on a subresource too", "application/json", f"{POD}/status"),
    _accept("XML", "application/xml"),
    _accept("HTML", "text/html"),
    _accept("types are compared with their case", "Application/JSON"),
    _accept("a subtype wildcard of another type", "text/*"),
    _accept("an unknown conversion", "application/json;as=Bogus;v=v1;g=meta.k8s.io"),
    _accept("a Table of an unknown version", "application/json;as=Table;v=v2;g=meta.k8s.io"),
    _accept("a Table without a group", "application/json;as=Table;v=v1"),
    _accept("a Table in protobuf", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"),
    _accept("a stream framing YAML lacks", "application/yaml;stream=watch"),
    _accept("an unknown stream", "application/json;stream=bogus"),
    _accept("another server version", "application/json;sv=v2"),
    _accept("a list", "application/xml", path="serviceaccounts"),
    _accept("before a create decodes its body", "application/xml", "POST", "serviceaccounts", NEW),
    _accept("before a delete", "text/html", "DELETE", ACCOUNT),
    _accept("before a patch", "application/xml", "PATCH", ACCOUNT, {"metadata": {"labels": {"x": "y"}}}, MERGE_PATCH),
    Refusal(
        "negotiation.NegotiateOutputMediaType", "before an apply", "PATCH", ACCOUNT, 406, "NotAcceptable", SERIALIZED,
        account(), APPLY, (("fieldManager", "m"),), (("accept", "text/html"),),
    ),
    Refusal(
        "negotiation.NegotiateOutputMediaTypeStream", "a watch in YAML", "GET", "serviceaccounts", 406, "NotAcceptable", STREAMED,
        params=(("watch", "true"), ("timeoutSeconds", "1")), headers=(("accept", "application/yaml"),),
    ),
    Refusal(
        "negotiation.NegotiateOutputMediaTypeStream", "YAML preferred for a watch", "GET", "serviceaccounts", 406, "NotAcceptable", STREAMED,
        params=(("watch", "true"), ("timeoutSeconds", "1")), headers=(("accept", "application/yaml, application/json;q=0.9"),),
    ),
    Refusal(
        "handlers.doTransformObject", "an object conversion of a list", "GET", "serviceaccounts", 406, "NotAcceptable",
        "you requested PartialObjectMetadata, but the requested object is a list (*core.ServiceAccountList)",
        headers=(("accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),),
    ),
    Refusal(
        "validation.ValidateTableOptions", "includeObject of a Table", "GET", "serviceaccounts", 400, "BadRequest",
        "Unable to convert to Table as requested: includeObject: Invalid value: \"x\": must be 'Metadata', 'Object', 'None', or empty",
        params=(("includeObject", "x"),), headers=(("accept", TABLE),),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


ACCEPTED_BODIES = [
    ("application/json; charset=utf-8", b'{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"a1"}}'),
    ("Application/JSON;", b'{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"a2"}}'),
    ("application/yaml; charset=utf-8", b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a3\n"),
    (None, b'{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"a4"}}'),
]


@pytest.mark.parametrize(("content_type", "body"), ACCEPTED_BODIES)
def test_parameters_and_case_of_a_served_type_are_accepted(api: httpx.Client, ns: str, content_type: str | None, body: bytes) -> None:
    headers = {"content-type": content_type} if content_type is not None else {}
    response = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts", content=body, headers=headers)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;q=0",  # a zero quality only sorts last upstream
        "application/yaml",  # served upstream in YAML; answered in JSON here
        "application/vnd.kubernetes.protobuf",
        "application/*",
        "*",
        "text/html, application/json;q=0.1",
        "application/json;as=Table;v=v2;g=meta.k8s.io, application/json",
        "application/json;pretty=1;foo=bar",
    ],
)
def test_accept_headers_upstream_serves(api: httpx.Client, ns: str, accept: str) -> None:
    seed(api, ns)
    response = api.get(f"/api/v1/namespaces/{ns}/{ACCOUNT}", headers={"accept": accept})
    assert response.status_code == 200, response.text


def test_a_patch_type_with_a_charset_is_served(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    before = state(api, ns)
    response = send(api, ns, Refusal("", "", "PATCH", ACCOUNT, 200, "", body={"metadata": {"labels": {"x": "y"}}}, content_type=MERGE_PATCH + "; charset=utf-8"))
    assert response.status_code == 200, response.text
    assert state(api, ns) != before


def test_a_refused_patch_type_is_a_status(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    response = api.patch(f"/api/v1/namespaces/{ns}/{ACCOUNT}", content=b"{}", headers={"content-type": "text/plain"})
    assert assert_status(response, 415, "UnsupportedMediaType")["message"] == PATCH_TYPES
