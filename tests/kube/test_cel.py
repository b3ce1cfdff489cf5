"""CEL for DRA selectors: the public API, evaluation semantics, what admission refuses, and inputs
built to be slow (all answered quickly or refused with upstream's message)."""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import pytest

import bench.cel
from kube.cel import (
    DRA_ENVIRONMENT,
    INT,
    MAX_COST,
    MAX_EXPRESSION_LENGTH,
    STRING,
    CELCompileError,
    CELRuntimeError,
    DeviceView,
    Environment,
    compile_selector,
    kubernetes_environment,
    list_of,
    map_of,
    optionals,
    standard,
    validate_selector_expression,
)
from kube.quantity import Quantity
from tests.kube.bounded import RUNAWAY_SECONDS, run_bounded

DEVICE: dict[str, Any] = {
    "driver": "gpu.example.com",
    "attributes": {
        "model": {"string": "A100"},
        "index": {"int": 3},
        "healthy": {"bool": True},
        "driverVersion": {"version": "1.2.3"},
        "numa.example.com/node": {"int": 1},
        "ids": {"strings": ["a", "b"]},
    },
    "capacity": {"memory": {"value": "80Gi"}, "cores": Quantity.parse("108")},
}
TYPICAL = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "A100" && '
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'
)
PATH = "spec.selectors[0].cel.expression"


# Hostile input runs where a hard limit ends it: a regular expression in a subprocess that is
# killed after RUNAWAY_SECONDS (tests/kube/bounded.py), comprehensions under the evaluation's own
# deadline of RUNAWAY_SECONDS (a runaway ends in "operation interrupted" instead of the expected answer).
def _deadline() -> float:
    return time.monotonic() + RUNAWAY_SECONDS


def _errors(expr: str) -> list[str]:
    return [str(e) for e in validate_selector_expression(expr, PATH)]


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
        ('device.attributes["unknown.example.com"].size() == 0', True),
        ('has(device.attributes["gpu.example.com"].model)', True),
        ('device.attributes["gpu.example.com"].?missing.orValue("none") == "none"', True),
        ('device.attributes["gpu.example.com"][?"model"].hasValue()', True),
        ('device.attributes["gpu.example.com"].?index.optMap(i, i + 1).orValue(0) == 4', True),
        ('device.attributes["gpu.example.com"].exists(k, k == "index")', True),
        ('device.attributes["gpu.example.com"].exists(k, v, k == "index" && v == 3)', True),
        ('device.attributes["gpu.example.com"].model.startsWith("A") && device.driver.endsWith(".com")', True),
        ('device.attributes["gpu.example.com"].model.matches("^A[0-9]+$")', True),
        ('device.attributes["gpu.example.com"].model.lowerAscii() == "a100"', True),
        ('device.attributes["gpu.example.com"].model.find("[0-9]+") == "100"', True),
        ('device.attributes["gpu.example.com"].ids.includes("a") && device.attributes["gpu.example.com"].ids.indexOf("b") == 1', True),
        ('device.attributes["gpu.example.com"].ids.sortBy(x, x).reverse() == ["b", "a"]', True),
        ('device.attributes["gpu.example.com"].ids.join(",") == "a,b"', True),
        ("[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2", True),
        ("[1, 2, 3].exists_one(x, x == 2) && [1, 2].all(x, x > 0)", True),
        ("[1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [1, 2].isSorted()", True),
        ("dyn(1) == 1.0 && 2u > 1u && -3 % 2 == -1 && 7 / 2 == 3 && 1 < 1.5", True),
        ('isQuantity("1Gi") && !isQuantity("lots") && isSemver("1.0.0")', True),
        ('{"a": 1}.a == 1 && size("héllo") == 5', True),
        ('ip("10.0.0.1").family() == 4 && cidr("10.0.0.0/8").containsIP("10.1.2.3")', True),
        ('url("https://example.com:8080/x").getPort() == "8080"', True),
        ('"%s-%d".format(["gpu", 3]) == "gpu-3" && strings.quote("a") == "\\"a\\""', True),
        ("device.allowMultipleAllocations == false", True),
        # A runtime error on one side is absorbed when the other side decides (CEL's commutative logic).
        ('device.attributes["gpu.example.com"].missing == 1 || true', True),
        ('false && device.attributes["gpu.example.com"].missing == 1', False),
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
        ("1 == 1.0", "found no matching overload for '_==_' applied to '(int, double)'"),
        ('device.capacity["d"].memory > 1', "found no matching overload for '_>_'"),
        ("device.driver.compareTo(1) == 0", "found no matching overload for 'compareTo' applied to 'string.(int)'"),
        ("Foo{a: 1}", "undeclared reference to 'Foo'"),
        # Refused as upstream refuses them: mixed list literals, math.*, invalid regex literals.
        ('[1, "a"].size() > 0', "expected type 'int' but found 'string'"),
        ('{"a": 1, "b": "c"}.size() > 0', "expected type 'int' but found 'string'"),
        ("math.greatest(1, 2) == 2", "undeclared reference to 'math'"),
        ('device.driver.matches("x++")', "invalid matches argument"),
        ('device.driver.matches("(a)\\\\1")', "invalid matches argument"),
        ('"x".reverse() == "x"', "found no matching overload for 'reverse' applied to 'string.()'"),
        ("(" * 300 + "true" + ")" * 300, "expression recursion limit exceeded: 250"),
        ("device" + ".driver" * 300 + " == ''", "expression recursion limit exceeded: 250"),
        ("[" * 300 + "]" * 300 + " == []", "expression recursion limit exceeded: 250"),
        ("device.attributes.all(x, x > 1)", "found no matching overload for '_>_' applied to '(string, int)'"),
    ],
)
def test_compile_errors(expr: str, fragment: str) -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector(expr)
    assert fragment in str(info.value)


def test_compile_error_format_matches_cel_go() -> None:
    with pytest.raises(CELCompileError) as info:
        compile_selector("foo(1)")
    assert str(info.value) == "compilation failed: ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')\n | foo(1)\n | ...^"
    assert _errors('[1, "a"] == []') == [
        f'{PATH}: Invalid value: "[1, \\"a\\"] == []": compilation failed: ERROR: <input>:1:5: '
        "expected type 'int' but found 'string'\n | [1, \"a\"] == []\n | ....^"
    ]


def test_nesting_up_to_the_limit_compiles() -> None:
    assert compile_selector("(" * 249 + "true" + ")" * 249).evaluate(DEVICE) is True
    with pytest.raises(CELCompileError, match="expression recursion limit exceeded: 250"):
        compile_selector("(" * 250 + "true" + ")" * 250)


def test_invalid_constant_regex_for_find_fails_program_instantiation() -> None:
    assert _errors('device.driver.find("(") == ""') == [
        f"{PATH}: Internal error: program instantiation failed: error parsing regexp: missing closing ): `(`"
    ]


def test_runtime_errors_name_the_expression() -> None:
    expr = 'device.attributes["gpu.example.com"].missing == 1'
    with pytest.raises(CELRuntimeError) as info:
        compile_selector(expr).evaluate(DEVICE)
    assert info.value.detail == "no such key: missing"
    assert info.value.expression == expr
    with pytest.raises(CELRuntimeError, match="quantities must match"):
        compile_selector('quantity("lots") == quantity("1")').evaluate(DEVICE)
    with pytest.raises(CELRuntimeError, match="division by zero"):
        compile_selector("dyn(1) == 1 && 1 / (1 - 1) == 1").evaluate(DEVICE)
    with pytest.raises(CELRuntimeError, match="CEL result of type string could not be converted to bool"):
        compile_selector('device.attributes["gpu.example.com"].model').evaluate(DEVICE)


def test_list_attribute_as_map_key_or_membership_is_a_cel_error() -> None:
    """These raised a raw TypeError before, which the scheduler does not catch."""
    assert compile_selector('device.attributes["gpu.example.com"].ids in device.attributes["gpu.example.com"]').evaluate(DEVICE) is False
    for expr in (
        'device.attributes["gpu.example.com"][device.attributes["gpu.example.com"].ids] == 1',
        '{device.attributes["gpu.example.com"].ids: 1}.size() == 1',
    ):
        with pytest.raises(CELRuntimeError, match="unsupported key type: list"):
            compile_selector(expr).evaluate(DEVICE)


def test_regular_expressions_are_re2() -> None:
    env = kubernetes_environment()
    assert env.compile("'abc\\n'.matches('abc$')").evaluate({}) is False
    assert env.compile("'\u0663'.matches('^\\\\d$')").evaluate({}) is False
    assert env.compile("'Ä'.matches('^\\\\pL$')").evaluate({}) is True
    assert env.compile("'a1'.matches('^[[:alpha:]][[:digit:]]$')").evaluate({}) is True


def test_catastrophic_backtracking_patterns_answer_quickly() -> None:
    # In a subprocess killed after RUNAWAY_SECONDS: a backtracking match would not return for hours.
    answers = run_bounded(
        """
        from kube.cel import compile_selector
        device = {"driver": "d", "attributes": {"s": {"string": "a" * 64 + "!"}}}
        result = []
        for pattern in ("^(a+)+$", "^(a|aa)+$", "^(a|a?)+$", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$"):
            result.append([
                pattern,
                compile_selector(f'device.attributes["d"].s.matches("{pattern}")').evaluate(device),
                compile_selector(f'device.attributes["d"].s.findAll("{pattern}").size() == 0').evaluate(device),
            ])
        """
    )
    assert answers == [[p, False, True] for p in ("^(a+)+$", "^(a|aa)+$", "^(a|a?)+$", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$")]


def test_cost_explosion_refused_at_admission_quickly() -> None:
    ten = "[" + ",".join(str(i) for i in range(10)) + "]"
    expr = "".join(f"{ten}.all(x{i}, " for i in range(7)) + "x0 >= 0" + ")" * 7
    # In a subprocess killed after RUNAWAY_SECONDS: admission that evaluated these would build lists in C code.
    answers = run_bounded(
        f"""
        from kube.cel import validate_selector_expression
        result = [[str(e) for e in validate_selector_expression(x, {PATH!r})] for x in ({expr!r}, "lists.range(100000000).size() > 0")]
        """
    )
    assert answers == [[f"{PATH}: Forbidden: too complex, exceeds cost limit"]] * 2
    with pytest.raises(CELCompileError) as info:
        compile_selector(expr)
    assert info.value.kind == "cost"


def test_stored_expensive_expressions_stop_at_the_runtime_cost_limit() -> None:
    """Expressions admitted before (or by another server) still cannot run away in the scheduler."""
    ten = "[" + ",".join(str(i) for i in range(10)) + "]"
    for expr in (
        "".join(f"{ten}.all(x{i}, " for i in range(7)) + "x0 >= 0" + ")" * 7,
        "lists.range(100000000).size() > 0",
        "lists.range(1000).map(i, lists.range(1000).map(j, i * j)).size() > 0",
    ):
        program = DRA_ENVIRONMENT.compile(expr)
        with pytest.raises(CELRuntimeError) as info:
            program.evaluate({"device": DeviceView(DEVICE)}, deadline=_deadline())
        assert info.value.detail == "operation cancelled: actual cost limit exceeded"


def test_cost_just_under_the_limit_is_admitted_and_answered() -> None:
    expr = (
        'device.attributes["d"].all(k, device.attributes["e"].all(j, device.attributes["f"].all(i, k + j + i != "" && i != k && j != "")))'
    )
    selector = compile_selector(expr)
    assert MAX_COST * 0.98 < selector.max_cost <= MAX_COST
    attributes = {f"{dom}/{dom * 29}{n:03d}": {"int": n} for dom in "def" for n in range(32)}
    device = DeviceView({"driver": "x", "attributes": attributes})
    assert selector.evaluate(device, deadline=_deadline()) is True
    _, actual = selector.program.evaluate_with_cost({"device": device})
    assert actual <= selector.max_cost


def test_deadline_interrupts_evaluation() -> None:
    program = DRA_ENVIRONMENT.compile("lists.range(10000).all(i, lists.range(50).all(j, i >= 0))")
    with pytest.raises(CELRuntimeError, match="operation interrupted") as info:
        program.evaluate({"device": DeviceView(DEVICE)}, cost_limit=float("inf"), deadline=time.monotonic())
    assert info.value.interrupted
    # As in cel-go, only comprehension loops are interrupted: a finished evaluation stands.
    assert DRA_ENVIRONMENT.compile('device.driver != ""').evaluate({"device": DeviceView(DEVICE)}, deadline=time.monotonic() - 1) is True


def test_environment_api_with_declared_variables() -> None:
    env = Environment([standard(), optionals()], {"names": list_of(STRING), "limits": map_of(STRING, INT)})
    program = env.compile("names.exists(n, n in limits && limits[n] > 1)")
    assert program.output_type.name == "bool"
    assert program.estimated_cost().max == 2**64 - 1  # undeclared sizes: unbounded
    assert program.evaluate({"names": ["a", "b"], "limits": {"b": 2}}) is True
    value, cost = program.evaluate_with_cost({"names": ["a"], "limits": {}})
    assert (value, cost) == (False, 9)  # range 1, one iteration (condition 3, step 4), result 1
    with pytest.raises(CELRuntimeError, match="no such attribute"):
        program.evaluate({"names": ["a"]})
    with pytest.raises(CELCompileError, match="undeclared reference to 'other'"):
        env.compile("other > 1")


def _random_expression(rng: random.Random, depth: int = 0) -> str:
    leaves = [
        'device.attributes["d"].s', 'device.attributes["d"].i', 'device.attributes["d"].b', 'device.attributes["d"].l',
        'device.attributes["d"].v', 'device.attributes["d"].missing', 'device.attributes["x"]', 'device.capacity["d"].q',
        "1", "2u", "1.5", '"s"', "true", "null", "[]", "{}", "[1, 2]", '{"a": 1}', 'b"x"', "device.driver",
    ]  # fmt: skip
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(leaves)
    a, b = _random_expression(rng, depth + 1), _random_expression(rng, depth + 1)
    forms = [
        f"dyn({a}) == dyn({b})", f"dyn({a}) < dyn({b})", f"dyn({a}) + dyn({b})", f"dyn({a}) in dyn({b})",
        f"dyn({a})[dyn({b})]", f"dyn({a}).size()", f"dyn({a}).exists(x, x == dyn({b}))", f"dyn({a}).includes(dyn({b}))",
        f"{{dyn({a}): 1}}", f"[dyn({a}), dyn({b})]", f"dyn({a}).matches(dyn({b}))", f"string(dyn({a}))", f"int(dyn({a}))",
        f"dyn({a}).isGreaterThan(dyn({b}))", f"dyn({a}).sum()", f"dyn({a}).sortBy(x, x)", f"dyn({a}) / dyn({b})",
        f"dyn({a}).?f.orValue(dyn({b}))", f"has(dyn({a}).f)", f"dyn({a}).join(',')", f"dyn({a}).format([dyn({b})])",
    ]  # fmt: skip
    return rng.choice(forms)


def test_no_evaluation_raises_anything_but_cel_errors() -> None:
    device = DeviceView(
        {
            "driver": "d",
            "attributes": {
                "s": {"string": "abc"},
                "i": {"int": 3},
                "b": {"bool": True},
                "l": {"strings": ["x", "y"]},
                "v": {"version": "1.0.0"},
            },
            "capacity": {"q": {"value": "1Gi"}},
        }
    )
    rng = random.Random(16)
    seen = 0
    for expr in itertools.islice((_random_expression(rng) for _ in itertools.count()), 1500):
        try:
            program = DRA_ENVIRONMENT.compile(f"dyn({expr}) == true")
        except CELCompileError:
            continue
        seen += 1
        try:
            program.evaluate({"device": device})
        except CELRuntimeError as exc:
            assert not exc.detail.startswith("internal error"), f"{expr}: {exc.detail}"
    assert seen > 500


def test_validate_selector_expression() -> None:
    assert validate_selector_expression('device.driver == "x"', "p") == []
    (err,) = validate_selector_expression("x" * (MAX_EXPRESSION_LENGTH + 1), "p")
    assert err.reason == "FieldValueTooLong"
    (err,) = validate_selector_expression("device.driver", "p")
    assert err.reason == "FieldValueInvalid"
    assert str(err).startswith('p: Invalid value: "device.driver": must evaluate to bool')


def test_derived_attribute_result_types() -> None:
    assert validate_selector_expression('device.attributes["d"].x', "p", result_type="any") == []
    assert validate_selector_expression("[1, 2]", "p", result_type="any") == []
    (err,) = validate_selector_expression('quantity("1")', "p", result_type="any")
    assert (
        err.detail
        == "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these scalars, not kubernetes.Quantity"
    )


def test_cache_returns_same_program() -> None:
    assert compile_selector(TYPICAL) is compile_selector(TYPICAL)


def test_device_with_an_unusable_attribute_fails_every_selector() -> None:
    device = {"driver": "d", "attributes": {"v": {"version": "1.x.0"}, "ok": {"int": 1}}}
    with pytest.raises(CELRuntimeError) as info:
        compile_selector('device.attributes["d"].ok == 1').evaluate(device)
    assert info.value.detail.startswith("attribute v: parse semantic version: Invalid character(s) found in minor number")
    with pytest.raises(CELRuntimeError, match="attribute d/e: unsupported attribute value"):
        compile_selector("true").evaluate({"driver": "d", "attributes": {"d": {"e": {"ints": None}}}})


def test_cel_benchmark_runs_without_cel_expr_python(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.cel.main(["--loops", "1", "--repeat", "1", "--cel-expr-python", ""]) == 0
    out = capsys.readouterr().out
    assert "cel-expr-python skipped: no interpreter at ''" in out
    assert all(name in out for name in bench.cel.SELECTORS)
