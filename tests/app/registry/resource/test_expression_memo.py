"""Selector and derived-attribute expressions found valid are not checked again: the answers stay
validate_selector_expression's, the first time and every time after, valid or not."""

from __future__ import annotations

import pytest

from app.registry.resource import common
from app.registry.resource.common import ClaimOptions, expression_errors, known_valid_expression, validate_selectors
from kube.cel import validate_selector_expression
from kube.errors import FieldError
from tests.app.registry.resource.helpers import COSTLY_EXPR, LONG_EXPR

EXPRESSIONS = (
    'device.driver == "gpu.example.com"',
    'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"',
    "device.driver",  # a string, not a bool
    "device.driver ==",  # does not parse
    "true",
    COSTLY_EXPR,
    LONG_EXPR,
    "",
)


def _selector_errors(expression: str) -> list[FieldError]:
    errs: list[FieldError] = []
    validate_selectors({"selectors": [{"cel": {"expression": expression}}]}, "spec", ClaimOptions(None), errs)
    return errs


@pytest.fixture(autouse=True)
def _forget_valid_expressions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "_VALID_EXPRESSIONS", {"bool": set(), "any": set()})


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_selector_answers_are_the_checks_every_time(expression: str) -> None:
    expected = validate_selector_expression(expression, "spec.selectors[0].cel.expression")
    for _ in range(3):
        assert _selector_errors(expression) == expected
    assert known_valid_expression(expression, "bool") == (not expected)


@pytest.mark.parametrize("expression", EXPRESSIONS)
@pytest.mark.parametrize("result_type", ["bool", "any"])
def test_expression_errors_are_the_checks_every_time(expression: str, result_type: str) -> None:
    expected = validate_selector_expression(expression, "p", result_type)
    for _ in range(3):
        assert expression_errors(expression, "p", result_type) == expected
    assert known_valid_expression(expression, result_type) == (not expected)


def test_valid_for_one_result_type_is_not_valid_for_the_other() -> None:
    assert expression_errors("device.driver", "p", "any") == []
    assert known_valid_expression("device.driver", "any")
    assert not known_valid_expression("device.driver", "bool")
    assert _selector_errors("device.driver") != []


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "_VALID_EXPRESSIONS_MAX", 3)
    for i in range(10):
        assert expression_errors(f"device.driver == 'd{i}'", "p", "bool") == []
        assert len(common._VALID_EXPRESSIONS["bool"]) <= 3
