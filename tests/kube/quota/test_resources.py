"""Resource list arithmetic as upstream's quota does it (pkg/quota/v1/resources.go)."""

from __future__ import annotations

from kube.quantity import Quantity
from kube.quota import resources
from kube.quota.resources import add, less_than_or_equal, mask, object_count_name, parse_list, pretty, subtract_non_negative, to_api


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def test_sums_keep_the_spelling_of_what_they_add_up() -> None:
    total = add(parse_list({"memory": "1Gi", "cpu": "500m", "pods": "1"}), parse_list({"memory": "1Gi", "cpu": "500m", "count/pods": "1"}))
    assert to_api(total) == {"count/pods": "1", "cpu": "1", "memory": "2Gi", "pods": "1"}
    # A sum that starts from zero takes the other side's suffix family.
    assert to_api(add({"memory": Quantity(0)}, {"memory": q("3G")})) == {"memory": "3G"}


def test_subtraction_never_goes_below_zero_and_keeps_every_name() -> None:
    assert to_api(subtract_non_negative(parse_list({"a": "3", "b": "1"}), parse_list({"b": "2", "c": "1"}))) == {"a": "3", "b": "0", "c": "0"}


def test_comparison_only_looks_at_names_both_sides_have() -> None:
    assert less_than_or_equal({"a": q("2"), "b": q("9")}, {"a": q("2")}) == (True, [])
    assert less_than_or_equal({"a": q("3"), "b": q("9")}, {"a": q("2"), "b": q("10"), "c": q("0")}) == (False, ["a"])


def test_lists_print_sorted_by_name_with_canonical_amounts() -> None:
    assert pretty({"requests.memory": q("1024Mi"), "limits.cpu": q("1000m")}) == "limits.cpu=1,requests.memory=1Gi"
    assert mask({"a": q("1"), "b": q("2")}, ["b", "z"]) == {"b": q("2")}
    assert resources.pretty_names(["b", "a"]) == "a,b"


def test_object_count_names() -> None:
    assert object_count_name("", "pods") == "count/pods"
    assert object_count_name("resource.k8s.io", "resourceclaims") == "count/resourceclaims.resource.k8s.io"


def test_values_that_do_not_parse_are_left_out() -> None:
    assert parse_list({"a": "1", "b": "x", "c": 2}) == {"a": q("1"), "c": q("2")}
    assert parse_list(None) == {}
