"""DeviceClass: spec validation, stored-selector ratcheting and gate drop rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.registry.resource.deviceclass import STRATEGY as CLASSES
from tests.app.registry.resource.helpers import CLASS, COSTLY_EXPR, DELETE, LONG_EXPR, TL, TM, F, I, Obj, R, changed, create, ctx, update


def test_valid_class() -> None:
    assert create(CLASSES, CLASS) == []


# --- DeviceClass ------------------------------------------------------------------------------


def _class(*changes: tuple[str, Any]) -> Obj:
    return changed(CLASS, *changes)


CLASS_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("too-many-selectors", _class(("spec.selectors", [{"cel": {"expression": "true"}}] * 33)), [("spec.selectors", TM)]),
    ("selector-without-cel", _class(("spec.selectors", [{}])), [("spec.selectors[0].cel", R)]),
    ("selector-without-expression", _class(("spec.selectors", [{"cel": {}}])), [("spec.selectors[0].cel.expression", R)]),
    ("cel-syntax", _class(("spec.selectors[0].cel.expression", "device.")), [("spec.selectors[0].cel.expression", I)]),
    ("cel-not-bool", _class(("spec.selectors[0].cel.expression", '"x"')), [("spec.selectors[0].cel.expression", I)]),
    ("cel-too-long", _class(("spec.selectors[0].cel.expression", LONG_EXPR)), [("spec.selectors[0].cel.expression", TL)]),
    ("cel-too-costly", _class(("spec.selectors[0].cel.expression", COSTLY_EXPR)), [("spec.selectors[0].cel.expression", F)]),
    ("cel-bad-overload", _class(("spec.selectors[0].cel.expression", "device.driver > 1")), [("spec.selectors[0].cel.expression", I)]),
    ("too-many-configs", _class(("spec.config", CLASS["spec"]["config"] * 33)), [("spec.config", TM)]),
    ("config-without-opaque", _class(("spec.config", [{}])), [("spec.config[0].opaque", R)]),
    ("config-bad-driver", _class(("spec.config[0].opaque.driver", "Bad_Driver")), [("spec.config[0].opaque.driver", I)]),
    ("config-without-parameters", _class(("spec.config[0].opaque.parameters", DELETE)), [("spec.config[0].opaque.parameters", R)]),
    ("config-parameters-string-json", _class(("spec.config[0].opaque.parameters", "not json")), [("spec.config[0].opaque.parameters", I)]),
    ("config-parameters-too-long", _class(("spec.config[0].opaque.parameters", {"a": "b" * 10240})), [("spec.config[0].opaque.parameters", TL)]),
    ("extended-resource-no-domain", _class(("spec.extendedResourceName", "gpu")), [("spec.extendedResourceName", I)]),
    ("extended-resource-native", _class(("spec.extendedResourceName", "kubernetes.io/gpu")), [("spec.extendedResourceName", I)]),
    ("selectors-wrong-type", _class(("spec.selectors", "device.driver == 'x'")), [("spec.selectors", I)]),
    ("spec-wrong-type", _class(("spec", [])), [("spec", I)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), CLASS_CASES, ids=[c[0] for c in CLASS_CASES])
def test_invalid_classes(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(CLASSES, obj) == sorted(expected)


def test_class_update_treats_unchanged_selectors_as_stored() -> None:
    stored = _class(("spec.selectors[0].cel.expression", "device.driver"))  # would be refused when new
    assert update(CLASSES, stored, stored) == []
    edited = _class(("spec.selectors", [{"cel": {"expression": "device.driver"}}, {"cel": {"expression": "true"}}]))
    assert update(CLASSES, edited, stored) == [("spec.selectors[0].cel.expression", I)]


def test_class_cases_count() -> None:
    assert len(CLASS_CASES) >= 15


def test_device_class_extended_resource_gate_is_locked_on() -> None:
    obj = copy.deepcopy(CLASS)
    CLASSES.drop_disabled_fields(obj, None, ctx())
    assert obj["spec"]["extendedResourceName"] == "example.com/gpu"
