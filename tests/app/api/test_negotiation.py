"""Content negotiation: Accept headers, request bodies by Content-Type, and the 406s."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.negotiation import (
    check_watch_acceptable,
    conversion,
    decode_delete_options,
    decode_object,
    decode_patch,
    list_response,
    parse_accept,
    patch_type,
    wants_aggregated_discovery,
    wants_protobuf_only,
)
from app.api.tables import Conversion
from app.registry import lookup
from kube.errors import ApiError

KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
KUBECTL_132 = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
KUBECTL_137 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_CLAIMS = lookup("resource.k8s.io", "v1", "resourceclaims")
assert _CLAIMS is not None
CLAIMS = _CLAIMS


# ---- Accept -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_GET, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
        ("application/json", None),
        ("application/json, */*", None),
        ("*/*", None),
        ("", None),
        (None, None),
        # plain JSON first: the client prefers it
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
        # q-values reorder
        ("application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        # a protobuf Table is not served (upstream neither): skipped, then plain JSON decides
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", None),
        # unknown conversions and unknown Table versions are skipped too
        ("application/json;as=Unknown;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        # q=0 does not rule an entry out upstream: it only sorts last
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0", "v1"),
    ],
)
def test_table_negotiation(accept: str | None, expected: str | None) -> None:
    assert conversion(accept) == (Conversion("Table", expected) if expected else None)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", Conversion("PartialObjectMetadata", "v1")),
        # client-go's metadata client: protobuf first (a protobuf PartialObjectMetadataList), then JSON
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            Conversion("PartialObjectMetadataList", "v1"),
        ),
        # the first servable conversion wins over a later Table
        (
            "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io",
            Conversion("PartialObjectMetadataList", "v1beta1"),
        ),
        ("application/json;as=PartialObjectMetadata;g=example.com;v=v1,application/json", None),
    ],
)
def test_metadata_only_negotiation(accept: str, expected: Conversion | None) -> None:
    assert conversion(accept) == expected


def test_parse_accept_orders_as_goautoneg() -> None:
    # goautoneg's comparison is not a strict order: its insertion sort puts a concrete q=0.9
    # type ahead of a q=1 wildcard it meets first.
    ranges = parse_accept("*/*;q=0.9, application/*, text/plain;q=0.9, application/json")
    assert [r.media_type for r in ranges] == ["application/json", "text/plain", "application/*", "*/*"]
    assert parse_accept("application/json; charset=utf-8")[0].params == {"charset": "utf-8"}
    assert [(r.media_type, r.q) for r in parse_accept("application/json;q=0, Application/YAML")] == [("Application/YAML", 1.0), ("application/json", 0.0)]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_132, True),
        (KUBECTL_137, True),
        ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", True),
        # v2beta1 is no longer served (removed upstream): only plain JSON remains
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", False),
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", False),
        ("application/json", False),
        ("application/json, */*", False),
        ("*/*", False),
        ("", False),
        (None, False),
        ("application/json, " + KUBECTL_137, False),
        ("application/json;q=0.9, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", True),
        (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
            False,
        ),
    ],
)
def test_wants_aggregated_discovery(accept: str | None, expected: bool) -> None:
    assert wants_aggregated_discovery(accept) is expected


def test_openapi_protobuf_only() -> None:
    assert wants_protobuf_only("application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert not wants_protobuf_only("application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json")
    assert not wants_protobuf_only("")


# ---- request bodies -------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, "", "application/json", "application/json; charset=utf-8", "Application/JSON", "application/json;"])
def test_objects_in_json(content_type: str | None) -> None:
    assert decode_object(b'{"kind": "ResourceClaim"}', content_type, "ResourceClaim") == {"kind": "ResourceClaim"}


@pytest.mark.parametrize("content_type", ["application/yaml", "application/yaml; charset=utf-8"])
def test_objects_in_yaml(content_type: str) -> None:
    assert decode_object(b"kind: ResourceClaim\nmetadata: {name: a}\n", content_type, "ResourceClaim") == {"kind": "ResourceClaim", "metadata": {"name": "a"}}


def _refusal(call: Any, *args: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args)
    return caught.value


def test_unknown_body_types_are_415() -> None:
    error = _refusal(decode_object, b"<claim/>", "application/xml", "ResourceClaim")
    assert (error.code, error.reason) == (415, "UnsupportedMediaType")
    assert error.message == "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    for content_type in ("*/*", "text/plain", "application/x-yaml", "application/json; charset", "application/json; a=1; a=2"):
        assert _refusal(decode_object, b"{}", content_type, "ResourceClaim").code == 415, content_type
    # CBOR apply patches are known upstream but behind a gate that is off.
    error = _refusal(patch_type, "application/apply-patch+cbor")
    assert error.message.endswith("include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml")
    # A patch needs a patch type: plain JSON is not one; the type is compared as it is written.
    for patch_content_type in ("application/json", "Application/merge-patch+json", "application/merge-patch+json ;charset=utf-8", None):
        assert _refusal(patch_type, patch_content_type).code == 415, patch_content_type


def test_empty_and_broken_bodies_are_400() -> None:
    error = _refusal(decode_object, b"  ", "application/json", "ResourceClaim")
    assert (error.code, error.message) == (400, "the object provided is unrecognized (must be of type ResourceClaim): no content")
    assert _refusal(decode_object, b"{", None, "ResourceClaim").code == 400
    assert _refusal(decode_patch, b"", "application/merge-patch+json", "ResourceClaim").message == "the body of the request was empty"


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json-patch+json", "json"),
        ("application/merge-patch+json", "merge"),
        ("application/strategic-merge-patch+json", "strategic"),
        ("application/apply-patch+yaml", "apply"),
    ],
)
def test_patch_types(content_type: str, expected: str) -> None:
    assert patch_type(content_type) == expected
    assert patch_type(content_type + "; charset=utf-8") == expected
    body = b"[]" if expected == "json" else b"{}"
    assert decode_patch(body, "ResourceClaim", expected) == ([] if expected == "json" else {})


def test_delete_options_bodies() -> None:
    assert decode_delete_options(b"", "application/json") is None
    assert decode_delete_options(b"gracePeriodSeconds: 5", "application/yaml") == {"gracePeriodSeconds": 5}
    assert decode_delete_options(b'{"gracePeriodSeconds": 5}', None) == {"gracePeriodSeconds": 5}
    # Any other type is refused, as upstream's NegotiateInputSerializer refuses it.
    assert _refusal(decode_delete_options, b'{"gracePeriodSeconds": 5}', "application/octet-stream").code == 415


# ---- 406 --------------------------------------------------------------------------------------


def test_an_object_conversion_of_a_list_is_406() -> None:
    error = _refusal(list_response, CLAIMS, [], {"resourceVersion": "1"}, PARTIAL, "Metadata")
    assert (error.code, error.reason) == (406, "NotAcceptable")
    assert error.message == "you requested PartialObjectMetadata, but the requested object is a list (*resource.ResourceClaimList)"


def test_a_list_conversion_of_a_watch_is_406() -> None:
    error = _refusal(check_watch_acceptable, CLAIMS, PARTIAL_LIST)
    assert error.code == 406
    assert "is not a list (*resource.ResourceClaim)" in error.message
    check_watch_acceptable(CLAIMS, PARTIAL)
    check_watch_acceptable(CLAIMS, KUBECTL_GET)
