"""CEL device selectors: compile errors, cost limit, evaluation semantics of the DRA environment."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kube.cel import (
    MAX_EXPRESSION_LENGTH,
    CELCompileError,
    CELRuntimeError,
    DeviceView,
    compile_selector,
    validate_selector_expression,
)
from kube.quantity import Quantity

DEVICE: dict[str, Any] = {
    "driver": "gpu.example.com",
    "attributes": {
        "model": {"string": "A100"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3"},
        "numa.example.com/node": {"int": 1},
    },
    "capacity": {"memory": {"value": "80Gi"}, "cores": Quantity.parse("108")},
}
TYPICAL = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "A100" && '
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'
)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (TYPICAL, True),
        ('device.attributes["gpu.example.com"].index > 2 && device.attributes["gpu.example.com"].healthy', True),
        ('device.attributes["numa.example.com"].node == 1', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("100Gi"))', True),
        ('device.capacity["gpu.example.com"].memory.add(quantity("20Gi")) == quantity("100Gi")', True),
        ('device.capacity["gpu.example.com"].cores.asInteger() == 108', True),
        ('device.capacity["gpu.example.com"].memory.sub(quantity("80Gi")).sign() == 0', True),
        ('cel.bind(g, device.attributes["gpu.example.com"], g.model == "A100" && g.index == 3)', True),
        ('"model" in device.attributes["gpu.example.com"]', True),
        ('"x" in device.attributes["unknown.example.com"]', False),
        ('has(device.attributes["gpu.example.com"].model)', True),
        ('device.attributes["gpu.example.com"].?missing.orValue("none") == "none"', True),
        ('device.attributes["gpu.example.com"][?"model"].hasValue()', True),
        ('device.attributes["gpu.example.com"].exists(k, k == "index")', True),
        ('device.attributes["gpu.example.com"].exists(k, v, k == "index" && v == 3)', True),
        ('device.attributes["gpu.example.com"].model.startsWith("A") && device.driver.endsWith(".com")', True),
        ('device.attributes["gpu.example.com"].model.matches("^A[0-9]+$")', True),
        ('device.attributes["gpu.example.com"].model.lowerAscii() == "a100"', True),
        ("[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2", True),
        ("[1, 2, 3].exists_one(x, x == 2) && [1, 2].all(x, x > 0)", True),
        ("dyn(1) == 1.0 && 2u > 1u && -3 % 2 == -1 && 7 / 2 == 3", True),
        ('isQuantity("1Gi") && !isQuantity("lots") && isSemver("1.0.0")', True),
        ('{"a": 1}.a == 1 && size("héllo") == 5', True),
        ("device.allowMultipleAllocations == false", True),
        # Runtime error on the right is absorbed when the left side decides (CEL commutative logic).
        ('device.attributes["gpu.example.com"].missing == 1 || true', True),
    ],
)
def test_evaluate(expr: str, want: bool) -> None:
    assert compile_selector(expr).evaluate(DEVICE) is want
    assert compile_selector(expr).evaluate(DeviceView(DEVICE)) is want


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("device.driver ==", "Syntax error"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        ("1 + 2", "must evaluate to bool or the unknown type, not int"),
        ("nosuch(1)", "undeclared reference to 'nosuch'"),
        ("dev.driver == 'x'", "undeclared reference to 'dev'"),
        ("device.name == 'x'", "undefined field 'name'"),
        ('"a" + 1 == "a1"', "found no matching overload for '_+_' applied to '(string, int)'"),
        ('device.capacity["d"].memory > 1', "found no matching overload for '_>_'"),
        ("device.driver.compareTo(1) == 0", "found no matching overload for 'compareTo'"),
        ("Foo{a: 1}", "undeclared reference to 'Foo'"),
        ("(" * 200 + "true" + ")" * 200, "recursion limit"),
    ],
)
def test_compile_errors(expr: str, fragment: str) -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector(expr)
    assert fragment in str(info.value)


def test_compile_error_format_matches_cel_go() -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector("foo(1)")
    assert str(info.value) == (
        "compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')\n | foo(1)\n | ...^"
    )


def test_runtime_errors_name_the_expression() -> None:
    expr = 'device.attributes["gpu.example.com"].missing == 1'
    selector = compile_selector(expr)
    with pytest.raises(CELRuntimeError) as info:
        selector.evaluate(DEVICE)
    assert "no such key: missing" in str(info.value)
    assert info.value.expression == expr
    with pytest.raises(CELRuntimeError):
        compile_selector('quantity("lots") == quantity("1")').evaluate(DEVICE)
    with pytest.raises(CELRuntimeError):
        compile_selector("dyn(1) == 1 && dyn(1 / 0) == 1").evaluate(DEVICE)


def test_cost_explosion_refused_quickly() -> None:
    ten = "[" + ",".join(str(i) for i in range(10)) + "]"
    # Seven nested comprehensions over ten elements: 10^7 iterations, i.e. many seconds to run.
    expr = "".join(f"{ten}.all(x{i}, " for i in range(7)) + "x0 >= 0" + ")" * 7
    start = time.perf_counter()
    with pytest.raises(CELCompileError) as info:
        compile_selector(expr)
    assert time.perf_counter() - start < 0.2
    assert info.value.kind == "cost"
    errs = validate_selector_expression(expr, "spec.selectors[0].cel.expression")
    assert [str(e) for e in errs] == ["spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"]


def test_comprehension_over_device_maps_is_bounded() -> None:
    # Two nested loops over attribute maps (at most 32 entries each) stay under the limit.
    expr = 'device.attributes["a"].all(k, device.attributes["b"].exists(j, j == k))'
    assert compile_selector(expr).max_cost < 1_000_000


def test_validate_selector_expression() -> None:
    assert validate_selector_expression('device.driver == "x"', "p") == []
    (err,) = validate_selector_expression("x" * (MAX_EXPRESSION_LENGTH + 1), "p")
    assert err.reason == "FieldValueTooLong"
    (err,) = validate_selector_expression("device.driver", "p")
    assert err.reason == "FieldValueInvalid"
    assert str(err).startswith('p: Invalid value: "device.driver": must evaluate to bool')


def test_cache_returns_same_program() -> None:
    assert compile_selector(TYPICAL) is compile_selector(TYPICAL)
