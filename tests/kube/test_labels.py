"""Label selector parsing/matching and NodeSelector semantics, checked against upstream behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from kube.errors import ApiError
from kube.labels import (
    EXISTS,
    IN,
    LabelSelector,
    Requirement,
    new_requirement,
    node_selector_matches,
    node_selector_requirement_matches,
    node_selector_term_matches,
    parse_label_selector,
    selector_from_label_selector_object,
    selector_from_set,
)

_KEY_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# selector text, canonical str()
VALID = [
    ("", ""),
    ("x=a", "x=a"),
    ("x==a", "x==a"),
    ("x!=a", "x!=a"),
    ("x", "x"),
    ("!x", "!x"),
    ("x>1", "x>1"),
    ("x<1", "x<1"),
    ("x>10", "x>10"),
    ("x<007", "x<007"),
    ("x in (a)", "x in (a)"),
    ("x notin (b,a)", "x notin (a,b)"),
    ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
    ("x in (a,)", "x in (,a)"),
    ("x in (,a)", "x in (,a)"),
    ("x=", "x="),
    ("x=,y=b", "x=,y=b"),
    (" x = a , y ", "x=a,y"),
    ("\tx\t=\ta\n", "x=a"),
    ("z=1,a=2", "a=2,z=1"),
    ("x in (in),in=notin", "in=notin,x in (in)"),
    ("example.com/my-key=v_1.2-x", "example.com/my-key=v_1.2-x"),
    ("x=a,x!=b", "x=a,x!=b"),
    ("a" * 63 + "=" + "b" * 63, "a" * 63 + "=" + "b" * 63),
]


@pytest.mark.parametrize(("text", "canonical"), VALID)
def test_parse_valid(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert parse_label_selector(str(selector)) == selector


# selector text, exact upstream error message
INVALID = [
    ("x b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("e!!!!!ss", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
    ("foo=bar=42", "found '=', expected: ',' or 'end of string'"),
    ("x=a,", "found '', expected: identifier after ','"),
    (",x", "found ',', expected: !, identifier, or 'end of string'"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x in a", "unable to parse requirement: found 'a' expected: '('"),
    ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("x in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
    ("x in (a,", "unable to parse requirement: found '', expected: ',', or identifier"),
    ("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
    ("x=(a)", "unable to parse requirement: found '(', expected: identifier"),
    ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
    ("!!a", "unable to parse requirement: found '!', expected: identifier"),
    ("x>a", "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"),
    ("x<-5", f'unable to parse requirement: values[0][x]: Invalid value: "-5": {_VALUE_RULE}'),
    ("x=-a", f'unable to parse requirement: values[0][x]: Invalid value: "-a": {_VALUE_RULE}'),
    ("x=" + "a" * 64, f'unable to parse requirement: values[0][x]: Invalid value: "{"a" * 64}": must be no more than 63 bytes'),
    ("app: nginx", f'unable to parse requirement: <nil>: Invalid value: "app:": name part {_KEY_NAME_RULE}'),
    ("/x=a", 'unable to parse requirement: <nil>: Invalid value: "/x": prefix part must be non-empty'),
    ("a/=b", f'unable to parse requirement: <nil>: Invalid value: "a/": name part must be non-empty; name part {_KEY_NAME_RULE}'),
    (
        "a/b/c",
        'unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key '
        + _KEY_NAME_RULE
        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ),
    (
        "Example.com/x",
        'unable to parse requirement: <nil>: Invalid value: "Example.com/x": prefix part a lowercase RFC 1123 '
        "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ),
    ("x" * 64, f'unable to parse requirement: <nil>: Invalid value: "{"x" * 64}": name part must be no more than 63 bytes'),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_parse_invalid(text: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector(text)
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.message == message


LABELS = {"app": "web", "tier": "front", "size": "10", "empty": ""}

# selector, matches LABELS
MATCHES = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("missing!=x", True),
    ("app in (db,web)", True),
    ("app notin (db,web)", False),
    ("missing notin (a)", True),
    ("missing in (a)", False),
    ("app", True),
    ("missing", False),
    ("!missing", True),
    ("!app", False),
    ("size>9", True),
    ("size>10", False),
    ("size<11", True),
    ("app>1", False),  # non-integer label value never compares
    ("missing<5", False),
    ("empty=", True),
    ("empty in ()", True),
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
]


@pytest.mark.parametrize(("text", "expected"), MATCHES)
def test_matches(text: str, expected: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is expected


def test_matches_none_labels() -> None:
    assert parse_label_selector("").matches(None)
    assert parse_label_selector("!a").matches(None)
    assert not parse_label_selector("a").matches(None)


def test_empty_and_exact_match() -> None:
    assert parse_label_selector("").empty
    assert not parse_label_selector("a").empty
    selector = parse_label_selector("a=1,b in (2),c in (3,4),d!=5")
    assert selector.requires_exact_match("a") == "1"
    assert selector.requires_exact_match("b") == "2"
    assert selector.requires_exact_match("c") is None
    assert selector.requires_exact_match("d") is None
    assert selector.requires_exact_match("zz") is None


def test_selector_from_set() -> None:
    selector = selector_from_set({"b": "2", "a": "1"})
    assert str(selector) == "a=1,b=2"
    assert selector.matches({"a": "1", "b": "2", "c": "3"})
    assert selector_from_set(None).empty


# metav1.LabelSelector objects
def test_label_selector_object_nil_and_empty() -> None:
    nothing = selector_from_label_selector_object(None)
    assert not nothing.matches({}) and not nothing.empty and nothing.matches_nothing
    assert selector_from_label_selector_object(None, nil_selects_all=True).matches({})
    assert selector_from_label_selector_object({}).matches({"a": "b"})
    assert selector_from_label_selector_object({"matchLabels": {}, "matchExpressions": []}).empty


@pytest.mark.parametrize(
    ("obj", "canonical"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["y", "x"]}]}, "a in (x,y)"),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, "a notin (x)"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, "a"),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, "!a"),
        ({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]}, "a,z=1"),
    ],
)
def test_label_selector_object(obj: dict[str, Any], canonical: str) -> None:
    assert str(selector_from_label_selector_object(obj)) == canonical


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist',
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, '"Gt" is not a valid label selector operator'),
        ({"matchLabels": {"a b": "c"}}, f'key: Invalid value: "a b": name part {_KEY_NAME_RULE}'),
        ({"matchLabels": {"a": "-x"}}, f'values[0][a]: Invalid value: "-x": {_VALUE_RULE}'),
    ],
)
def test_label_selector_object_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as info:
        selector_from_label_selector_object(obj)
    assert info.value.code == 400
    assert info.value.message == message


def test_new_requirement() -> None:
    assert new_requirement("a", IN, ["x"]) == Requirement("a", IN, ("x",))
    with pytest.raises(ApiError) as info:
        new_requirement("a", EXISTS, ["x"], path="spec.selector")
    assert info.value.message.startswith("spec.selector.values: Invalid value: ")
    with pytest.raises(ApiError) as info:
        new_requirement("a", "bogus")
    assert info.value.message == (
        'operator: Unsupported value: "bogus": supported values: "in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!"'
    )


def test_nothing_selector() -> None:
    nothing = LabelSelector.nothing()
    assert not nothing.matches({"a": "b"})
    assert str(nothing) == ""
    assert nothing != LabelSelector()


# --- NodeSelector ---------------------------------------------------------------------------

NODE: dict[str, Any] = {"metadata": {"name": "node-1", "labels": {"zone": "a", "gpu": "true", "cores": "16"}}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expr["values"] = list(values)
    return expr


def _term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = list(exprs)
    if fields is not None:
        term["matchFields"] = fields
    return term


NODE_CASES = [
    ("in", {"nodeSelectorTerms": [_term(_expr("zone", "In", "a", "b"))]}, True),
    ("notin", {"nodeSelectorTerms": [_term(_expr("zone", "NotIn", "a"))]}, False),
    ("exists", {"nodeSelectorTerms": [_term(_expr("gpu", "Exists"))]}, True),
    ("does-not-exist", {"nodeSelectorTerms": [_term(_expr("gpu", "DoesNotExist"))]}, False),
    ("gt", {"nodeSelectorTerms": [_term(_expr("cores", "Gt", "8"))]}, True),
    ("lt", {"nodeSelectorTerms": [_term(_expr("cores", "Lt", "8"))]}, False),
    ("terms-ored", {"nodeSelectorTerms": [_term(_expr("zone", "In", "b")), _term(_expr("gpu", "Exists"))]}, True),
    ("exprs-anded", {"nodeSelectorTerms": [_term(_expr("zone", "In", "a"), _expr("gpu", "DoesNotExist"))]}, False),
    ("no-terms", {"nodeSelectorTerms": []}, False),
    ("empty-term", {"nodeSelectorTerms": [{}]}, False),
    ("field-name-in", {"nodeSelectorTerms": [_term(fields=[_expr("metadata.name", "In", "node-1")])]}, True),
    ("field-name-notin", {"nodeSelectorTerms": [_term(fields=[_expr("metadata.name", "NotIn", "node-1")])]}, False),
    ("field-other-key", {"nodeSelectorTerms": [_term(fields=[_expr("spec.x", "In", "node-1")])]}, False),
    ("field-two-values", {"nodeSelectorTerms": [_term(fields=[_expr("metadata.name", "In", "node-1", "x")])]}, False),
    ("field-bad-op", {"nodeSelectorTerms": [_term(fields=[_expr("metadata.name", "Exists")])]}, False),
    ("labels-and-fields", {"nodeSelectorTerms": [_term(_expr("zone", "In", "a"), fields=[_expr("metadata.name", "In", "node-1")])]}, True),
    ("invalid-term-skipped", {"nodeSelectorTerms": [_term(_expr("zone", "Bogus", "a")), _term(_expr("zone", "In", "a"))]}, True),
    ("gt-non-integer", {"nodeSelectorTerms": [_term(_expr("cores", "Gt", "x"))]}, False),
    ("in-without-values", {"nodeSelectorTerms": [_term(_expr("zone", "In"))]}, False),
    ("none", None, True),
]


@pytest.mark.parametrize(("name", "selector", "expected"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node_selector(name: str, selector: dict[str, Any] | None, expected: bool) -> None:
    assert node_selector_matches(selector, NODE) is expected


def test_node_selector_fields_ignored_for_unnamed_node() -> None:
    # Upstream only applies matchFields when the node has a name to match against.
    term = _term(fields=[_expr("metadata.name", "In", "other")])
    assert node_selector_term_matches(term, {"metadata": {}})
    assert not node_selector_term_matches(term, NODE)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (_expr("zone", "In", "a"), True),
        (_expr("zone", "NotIn", "b"), True),
        (_expr("cores", "Gt", "15"), True),
        (_expr("cores", "Lt", "16"), False),
        (_expr("bad key!", "Exists"), False),
        (_expr("zone", "Exists", "a"), False),
    ],
)
def test_node_selector_requirement(expr: dict[str, Any], expected: bool) -> None:
    assert node_selector_requirement_matches(expr, NODE["metadata"]["labels"]) is expected
