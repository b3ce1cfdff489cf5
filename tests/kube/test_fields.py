"""Field selector parsing, escaping and matching, checked against upstream fields.ParseSelector."""

from __future__ import annotations

import pytest

from kube.errors import ApiError
from kube.fields import (
    FieldSelector,
    escape_value,
    one_term_selector,
    parse_field_selector,
    unescape_value,
    unknown_field_error,
    unsupported_field_error,
)

# selector text, requirements, canonical str()
VALID = [
    ("", [], ""),
    (",", [], ""),
    ("a=b", [("a", "=", "b")], "a=b"),
    ("a==b", [("a", "=", "b")], "a=b"),
    ("a!=b", [("a", "!=", "b")], "a!=b"),
    ("a=", [("a", "=", "")], "a="),
    ("a!=", [("a", "!=", "")], "a!="),
    ("b=1,a=2", [("a", "=", "2"), ("b", "=", "1")], "a=2,b=1"),
    (",,a=b,,", [("a", "=", "b")], "a=b"),
    ("metadata.name=x,metadata.namespace=y", [("metadata.name", "=", "x"), ("metadata.namespace", "=", "y")],
     "metadata.name=x,metadata.namespace=y"),
    ("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed",
     [("spec.nodeName", "=", "n1"), ("status.phase", "!=", "Failed"), ("status.phase", "!=", "Succeeded")],
     "spec.nodeName=n1,status.phase!=Failed,status.phase!=Succeeded"),
    ("a=b\\,c", [("a", "=", "b,c")], "a=b\\,c"),
    ("a=b\\=c", [("a", "=", "b=c")], "a=b\\=c"),
    ("a=b\\\\c", [("a", "=", "b\\c")], "a=b\\\\c"),
    ("a=b\\,c,d=e", [("a", "=", "b,c"), ("d", "=", "e")], "a=b\\,c,d=e"),
    ("a==", [("a", "=", "")], "a="),
    ("x =y", [("x ", "=", "y")], "x =y"),  # no whitespace trimming upstream
    ("a=!b", [("a", "=", "!b")], "a=!b"),
    ("involvedObject.kind=Pod,involvedObject.name=p", [("involvedObject.kind", "=", "Pod"), ("involvedObject.name", "=", "p")],
     "involvedObject.kind=Pod,involvedObject.name=p"),
]


@pytest.mark.parametrize(("text", "requirements", "canonical"), VALID)
def test_parse_valid(text: str, requirements: list[tuple[str, str, str]], canonical: str) -> None:
    selector = parse_field_selector(text)
    assert selector.requirements == requirements
    assert str(selector) == canonical
    assert parse_field_selector(str(selector)) == selector


INVALID = [
    ("abc", "invalid selector: 'abc'; can't understand 'abc'"),
    ("a=b,cd", "invalid selector: 'a=b,cd'; can't understand 'cd'"),
    ("a=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a!=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a!==b", "invalid field selector: unescaped character in value: 61"),
    ("a\\=b=c", "invalid field selector: unescaped character in value: 61"),
    ("a=b\\x", "invalid field selector: invalid escape sequence: \\x"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
    ("a=b\\ ", "invalid field selector: invalid escape sequence: \\ "),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_field_selector(text)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.message == message


OBJECT_FIELDS = {"metadata.name": "p1", "metadata.namespace": "default", "spec.nodeName": "n1", "status.phase": "Running"}

MATCHES = [
    ("", True),
    ("metadata.name=p1", True),
    ("metadata.name=p2", False),
    ("metadata.name!=p2", True),
    ("spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", True),
    ("spec.nodeName=n1,status.phase!=Running", False),
    ("spec.missing=", True),
    ("spec.missing!=", False),
    ("spec.missing=x", False),
]


@pytest.mark.parametrize(("text", "expected"), MATCHES)
def test_matches(text: str, expected: bool) -> None:
    selector = parse_field_selector(text)
    assert selector.matches(lambda name: OBJECT_FIELDS.get(name, "")) is expected
    assert selector.matches_fields(OBJECT_FIELDS) is expected


def test_fields_and_exact_value() -> None:
    selector = parse_field_selector("spec.nodeName=n1,status.phase!=Failed,metadata.name==x")
    assert selector.fields() == {"spec.nodeName", "status.phase", "metadata.name"}
    assert selector.exact_value("spec.nodeName") == "n1"
    assert selector.exact_value("metadata.name") == "x"
    assert selector.exact_value("status.phase") is None
    assert selector.exact_value("other") is None
    assert not selector.empty
    assert parse_field_selector("").empty


@pytest.mark.parametrize(("raw", "escaped"), [("a", "a"), ("a,b", "a\\,b"), ("a=b", "a\\=b"), ("a\\b", "a\\\\b"), ("", "")])
def test_escape_roundtrip(raw: str, escaped: str) -> None:
    assert escape_value(raw) == escaped
    assert unescape_value(escaped) == raw


def test_transform_and_constructors() -> None:
    selector = parse_field_selector("a=1,b=2")
    dropped = selector.transform(lambda f, v: ("", "") if f == "a" else (f, v))
    assert dropped.requirements == [("b", "=", "2")]
    assert one_term_selector("metadata.name", "x,y") == FieldSelector([("metadata.name", "=", "x,y")])
    assert str(one_term_selector("metadata.name", "x,y")) == "metadata.name=x\\,y"


def test_field_errors() -> None:
    err = unsupported_field_error("spec.bogus")
    assert (err.code, err.reason, err.message) == (400, "BadRequest", "field label not supported: spec.bogus")
    err = unsupported_field_error("spec.bogus", gvk="resource.k8s.io/v1, Kind=ResourceSlice")
    assert err.message == "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.bogus"
    err = unknown_field_error("spec.bogus")
    assert err.message == '"spec.bogus" is not a known field selector: only "metadata.name", "metadata.namespace"'
