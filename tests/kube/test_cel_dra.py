"""DRA selector expressions as upstream's DRA CEL compiler answers them: compile errors, the
estimated cost of each expression, match results and runtime errors (the cases of
k8s.io/dynamic-resource-allocation/cel, with list-type attributes and consumable capacity on)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kube.cel import (
    DRA_ENVIRONMENT,
    MAX_COST,
    CELCompileError,
    CELRuntimeError,
    CompiledSelector,
    DeviceView,
    check_result_type,
    compile_selector,
    validate_selector_expression,
)
from tests.kube.bounded import RUNAWAY_SECONDS

LIST_MAX = 64  # the declared maximum size of an attribute value (scalar or list)
D = "dra.example.com"


@dataclass
class Case:
    expression: str
    match: bool | None = None
    cost: int | None = None
    compile_error: str = ""
    match_error: str = ""
    driver: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] = field(default_factory=dict)
    allow_multiple: bool | None = None


def _values(n: int) -> list[str]:
    return [f"value-{i}" for i in range(n)]


_MANY_ATTRIBUTES = {f"{D}/" + "x" * (32 - len(f"-{i}")) + f"-{i}": {"string": "abc"} for i in range(32)}
_NESTED = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
_EXPENSIVE = "".join(f"{_NESTED}.all({v}, " for v in ("x", "y", "z", "z2", "z3", "z4", "z5")) + "int('1'.find('[0-9]*')) < 100" + ")" * 7

CASES: dict[str, Case] = {
    "true": Case("true", match=True, cost=0),
    "false": Case("false", match=False, cost=0),
    "syntax-error": Case("?!", compile_error="Syntax error"),
    "type-error": Case("1", compile_error="must evaluate to bool or the unknown type, not int"),
    "runtime-error-lookup-identifier": Case(
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))', match_error="no such key: noSuchAttr", cost=6
    ),
    "runtime-error-lookup-map": Case(
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))', match_error="no such key: noSuchAttr", cost=6
    ),
    "domain-check-negative": Case('"no-such-domain" in device.attributes', match=False, cost=3),
    "domain-check-positive": Case(f'"{D}" in device.attributes', match=True, cost=3, attributes={f"{D}/something": {"bool": True}}),
    "empty-driver-name": Case('device.driver == ""', match=True, cost=2),
    "real-driver-name": Case(f'device.driver == "{D}"', match=True, cost=4, driver=D),
    "driver-name-qualifier": Case(f'device.attributes["{D}"].name', match=True, cost=4, driver=D, attributes={"name": {"bool": True}}),
    "driver-name-qualifier-map-lookup": Case(
        f'device.attributes["{D}"]["name"]', match=True, cost=4, driver=D, attributes={"name": {"bool": True}}
    ),
    "bind": Case(f'cel.bind(dra, device.attributes["{D}"], dra.name)', match=True, cost=15, driver=D, attributes={"name": {"bool": True}}),
    "qualified-attribute-name": Case(
        'device.attributes["other.example.com"].name', match=True, cost=4, driver=D, attributes={"other.example.com/name": {"bool": True}}
    ),
    "bool": Case(f'device.attributes["{D}"].name', match=True, cost=4, driver=D, attributes={"name": {"bool": True}}),
    "int": Case(f'device.attributes["{D}"].name > 0', match=True, cost=5, driver=D, attributes={"name": {"int": 1}}),
    "string": Case(f'device.attributes["{D}"].name == "fish"', match=True, cost=5, driver=D, attributes={"name": {"string": "fish"}}),
    "macro-exists-on-int": Case(
        f'device.attributes["{D}"].name.exists(x, x > 0)',
        match_error="got 'types.Int', expected iterable type",
        cost=5 + 6 * LIST_MAX,
        driver=D,
        attributes={"name": {"int": 1}},
    ),
    "macro-exists-on-bool": Case(
        f'device.attributes["{D}"].name.exists(x, x == true)',
        match_error="got 'types.Bool', expected iterable type",
        cost=5 + 6 * LIST_MAX,
        driver=D,
        attributes={"name": {"bool": True}},
    ),
    "macro-exists-on-string": Case(
        f'device.attributes["{D}"].name.exists(x, x == "fish")',
        match_error="got 'types.String', expected iterable type",
        cost=5 + 6 * LIST_MAX,
        driver=D,
        attributes={"name": {"string": "fish"}},
    ),
    "list-result-type-causes-match-error": Case(
        f'device.attributes["{D}"].names',
        match_error="CEL result of type list could not be converted to bool",
        cost=4,
        driver=D,
        attributes={"names": {"strings": ["fish", "bird"]}},
    ),
    "list-of-bool": Case(
        f'device.attributes["{D}"].names.size() == 2', match=True, cost=6, driver=D, attributes={"names": {"bools": [True, False]}}
    ),
    "list-of-int": Case(
        f'device.attributes["{D}"].names.size() == 2', match=True, cost=6, driver=D, attributes={"names": {"ints": [1, 2]}}
    ),
    "list-of-string": Case(
        f'device.attributes["{D}"].names.size() == 2', match=True, cost=6, driver=D, attributes={"names": {"strings": ["fish", "bird"]}}
    ),
    "list-of-semver": Case(
        f'device.attributes["{D}"].names.size() == 2', match=True, cost=6, driver=D, attributes={"names": {"versions": ["1.0.0", "2.0.0"]}}
    ),
    "macro-on-list-of-int": Case(
        f'device.attributes["{D}"].names.exists(x, x > 0)',
        match=True,
        cost=5 + 6 * LIST_MAX,
        driver=D,
        attributes={"names": {"ints": [1, 2]}},
    ),
    "macro-on-list-of-string": Case(
        f'device.attributes["{D}"].names.all(x, x != "")',
        match=True,
        cost=5 + 4 * LIST_MAX,
        driver=D,
        attributes={"names": {"strings": ["fish", "bird"]}},
    ),
    "macro-on-list-of-semver": Case(
        f'device.attributes["{D}"].names.all(x, x.isGreaterThan(semver("0.0.1")))',
        match=True,
        cost=5 + 6 * LIST_MAX,
        driver=D,
        attributes={"names": {"versions": ["1.0.0", "2.0.0"]}},
    ),
    "includes-list-of-string": Case(
        f'device.attributes["{D}"].name.includes("fish")',
        match=True,
        cost=4 + 48,
        driver=D,
        attributes={"name": {"strings": ["fish", "bird"]}},
    ),
    "includes-bool-scalar": Case(
        f'device.attributes["{D}"].name.includes(true)', match=False, cost=4 + 48, driver=D, attributes={"name": {"bool": False}}
    ),
    "includes-bool-list": Case(
        f'device.attributes["{D}"].name.includes(true)', match=True, cost=4 + 48, driver=D, attributes={"name": {"bools": [True, False]}}
    ),
    "includes-int-scalar": Case(
        f'device.attributes["{D}"].name.includes(1)', match=True, cost=4 + 48, driver=D, attributes={"name": {"int": 1}}
    ),
    "includes-int-list": Case(
        f'device.attributes["{D}"].name.includes(3)', match=False, cost=4 + 48, driver=D, attributes={"name": {"ints": [1, 2]}}
    ),
    "includes-string-scalar": Case(
        f'device.attributes["{D}"].name.includes("bird")', match=False, cost=4 + 48, driver=D, attributes={"name": {"string": "fish"}}
    ),
    "includes-semver-scalar": Case(
        f'device.attributes["{D}"].name.includes(semver("1.0.0"))',
        match=True,
        cost=4 + 48 + 1,
        driver=D,
        attributes={"name": {"version": "1.0.0"}},
    ),
    "includes-semver-list": Case(
        f'device.attributes["{D}"].name.includes(semver("3.0.0"))',
        match=False,
        cost=4 + 48 + 1,
        driver=D,
        attributes={"name": {"versions": ["1.0.0", "2.0.0"]}},
    ),
    # The other halves of upstream's positive/negative includes() pairs.
    "includes-bool-scalar-positive": Case(
        f'device.attributes["{D}"].name.includes(true)', match=True, cost=4 + 48, driver=D, attributes={"name": {"bool": True}}
    ),
    "includes-bool-list-negative": Case(
        f'device.attributes["{D}"].name.includes(false)', match=False, cost=4 + 48, driver=D, attributes={"name": {"bools": [True, True]}}
    ),
    "includes-int-scalar-negative": Case(
        f'device.attributes["{D}"].name.includes(1)', match=False, cost=4 + 48, driver=D, attributes={"name": {"int": 2}}
    ),
    "includes-int-list-positive": Case(
        f'device.attributes["{D}"].name.includes(1)', match=True, cost=4 + 48, driver=D, attributes={"name": {"ints": [1, 2]}}
    ),
    "includes-string-scalar-positive": Case(
        f'device.attributes["{D}"].name.includes("fish")', match=True, cost=4 + 48, driver=D, attributes={"name": {"string": "fish"}}
    ),
    "includes-string-list-negative": Case(
        f'device.attributes["{D}"].name.includes("cat")', match=False, cost=4 + 48, driver=D, attributes={"name": {"strings": ["fish", "bird"]}}
    ),
    "includes-semver-scalar-negative": Case(
        f'device.attributes["{D}"].name.includes(semver("2.0.0"))',
        match=False,
        cost=4 + 48 + 1,
        driver=D,
        attributes={"name": {"version": "1.0.0"}},
    ),
    "includes-semver-list-positive": Case(
        f'device.attributes["{D}"].name.includes(semver("1.0.0"))',
        match=True,
        cost=4 + 48 + 1,
        driver=D,
        attributes={"name": {"versions": ["1.0.0", "2.0.0"]}},
    ),
    "includes-longest-list": Case(
        f'device.attributes["{D}"].name.includes("value-48")',
        match=False,
        cost=4 + 48,
        driver=D,
        attributes={"name": {"strings": _values(48)}},
    ),
    "includes-too-long-list": Case(
        f'device.attributes["{D}"].name.includes("value-49")',
        match_error="'includes' function cannot be applied to lists longer than 48 values",
        cost=4 + 48,
        driver=D,
        attributes={"name": {"strings": _values(49)}},
    ),
    "in-operator-on-list": Case(
        f'1 in device.attributes["{D}"].names', match=True, cost=4 + LIST_MAX, driver=D, attributes={"names": {"ints": [1, 2, 3]}}
    ),
    "version": Case(
        f'device.attributes["{D}"].name.isGreaterThan(semver("0.0.1"))',
        match=True,
        cost=6,
        driver=D,
        attributes={"name": {"version": "1.0.0"}},
    ),
    "version_v": Case(
        f'device.attributes["{D}"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
        match=True,
        cost=7,
        driver=D,
        attributes={"name": {"version": "1.0.0"}},
    ),
    "macro-exists-on-version": Case(
        f'device.attributes["{D}"].name.exists(x, x.isGreaterThan(semver("0.0.1")))',
        match_error="got 'cel.Semver', expected iterable type",
        cost=5 + 7 * LIST_MAX,
        driver=D,
        attributes={"name": {"version": "1.0.0"}},
    ),
    "quantity": Case(
        f'device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))', match=True, cost=6, driver=D, capacity={"name": {"value": "1Mi"}}
    ),
    "check-positive": Case(
        f'"name" in device.capacity["{D}"] && device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))',
        match=True,
        cost=10,
        driver=D,
        capacity={"name": {"value": "1Mi"}},
    ),
    "check-negative": Case(
        f'!("name" in device.capacity["{D}"]) || device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))', match=True, cost=11
    ),
    "all": Case(
        f"""
device.capacity["{D}"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["{D}"].bool &&
device.attributes["{D}"].int > 0 &&
device.attributes["{D}"].string == "fish" &&
device.attributes["{D}"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["{D}"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["{D}"]["bool"] &&
device.attributes["{D}"]["int"] > 0 &&
device.attributes["{D}"]["string"] == "fish" &&
device.attributes["{D}"]["version"].isGreaterThan(semver("0.0.1"))
""",
        match=True,
        cost=52,
        driver=D,
        attributes={"bool": {"bool": True}, "int": {"int": 1}, "string": {"string": "fish"}, "version": {"version": "1.0.0"}},
        capacity={"quantity": {"value": "1Mi"}},
    ),
    "many": Case(
        f'device.attributes["{D}"].a && device.attributes["{D}"].b && device.attributes["{D}"].c',
        match=True,
        cost=12,
        driver=D,
        attributes={"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}},
    ),
    "check_attribute_domains": Case(
        f'device.attributes.exists_one(x, x == "{D}")',
        match=True,
        cost=164,
        driver=D,
        attributes={"services": {"string": "some_example_value"}},
    ),
    "check_attribute_ids": Case(
        f'device.attributes["{D}"].exists_one(x, x == "services")',
        match=True,
        cost=133,
        driver=D,
        attributes={"services": {"string": "some_example_value"}},
    ),
    "split_attribute": Case(
        f'device.attributes["{D}"].services.split("example").size() >= 2',
        match=True,
        cost=19,
        driver=D,
        attributes={"services": {"string": "some_example_value"}},
    ),
    "regexp_attribute": Case(
        f'device.attributes["{D}"].services.matches("[^a]?sym")',
        match=True,
        cost=18,
        driver=D,
        attributes={"services": {"string": "asymetric"}},
    ),
    "check_capacity_domains": Case(
        f'device.capacity.exists_one(x, x == "{D}")', match=True, cost=164, driver=D, capacity={"memory": {"value": "1Mi"}}
    ),
    "check_capacity_ids": Case(
        f'device.capacity["{D}"].exists_one(x, x == "memory")', match=True, cost=133, driver=D, capacity={"memory": {"value": "1Mi"}}
    ),
    "expensive": Case(_EXPENSIVE, match_error="actual cost limit exceeded", cost=85555551, driver=D, attributes=_MANY_ATTRIBUTES),
    "allow_multiple_allocations": Case("device.allowMultipleAllocations == true", match=True, cost=3, driver=D, allow_multiple=True),
    "allow_multiple_allocations_default": Case("device.allowMultipleAllocations == false", match=True, cost=3, driver=D),
    "allow_multiple_allocations_false": Case("device.allowMultipleAllocations == false", match=True, cost=3, driver=D, allow_multiple=False),
}


def _device(c: Case) -> dict[str, Any]:
    device: dict[str, Any] = {"driver": c.driver, "attributes": c.attributes, "capacity": c.capacity}
    if c.allow_multiple is not None:
        device["allowMultipleAllocations"] = c.allow_multiple
    return device


@pytest.mark.parametrize("name", list(CASES))
def test_dra_expression(name: str) -> None:
    c = CASES[name]
    try:
        # The estimated-cost limit is admission's business; compile the expression as such.
        program = DRA_ENVIRONMENT.compile(c.expression)
        check_result_type(program, "bool")
        selector = CompiledSelector(program)
    except CELCompileError as exc:
        assert c.compile_error, f"unexpected compile error: {exc}"
        assert c.compile_error in str(exc)
        return
    assert not c.compile_error, "expected a compile error"
    assert selector.max_cost == c.cost
    view = DeviceView(_device(c))
    try:
        got = selector.evaluate(view)
    except CELRuntimeError as exc:
        assert c.match_error, f"unexpected evaluation error: {exc}"
        assert c.match_error in str(exc)
        return
    assert not c.match_error, f"expected {c.match_error!r}"
    assert got is c.match
    _, actual = program.evaluate_with_cost({"device": view})
    assert actual <= selector.max_cost


def test_expensive_expression_stops_at_the_cost_limit_quickly() -> None:
    c = CASES["expensive"]
    assert validate_selector_expression(c.expression, "p")[0].detail == "too complex, exceeds cost limit"
    program = DRA_ENVIRONMENT.compile(c.expression)
    # Under the evaluation's own deadline, not a wall-clock assert: one that ran away would end in
    # "operation interrupted" after RUNAWAY_SECONDS instead of the cost limit's message.
    with pytest.raises(CELRuntimeError, match="operation cancelled: actual cost limit exceeded"):
        program.evaluate({"device": DeviceView(_device(c))}, cost_limit=MAX_COST, deadline=time.monotonic() + RUNAWAY_SECONDS)


def test_selector_api_keeps_the_scheduler_contract() -> None:
    selector = compile_selector(f'device.attributes["{D}"].name == "fish"')
    assert selector.max_cost == 5
    assert selector.evaluate({"driver": D, "attributes": {"name": {"string": "fish"}}}) is True
    assert selector.evaluate(DeviceView({"driver": D, "attributes": {"name": {"string": "bird"}}})) is False
