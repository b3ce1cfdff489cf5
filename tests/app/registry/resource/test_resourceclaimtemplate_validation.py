"""ResourceClaimTemplate: its metadata rules, its claim spec (the ResourceClaimSpec rules), immutability and gate drop rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.registry.resource.resourceclaimtemplate import STRATEGY as TEMPLATES
from kube.features import Gate
from tests.app.registry.resource.helpers import (
    ADMIN_NS,
    DELETE,
    NS,
    TEMPLATE,
    D,
    F,
    I,
    Obj,
    R,
    changed,
    check_gate_drop,
    create,
    ctx,
    subrequests,
    update,
)


def test_valid_template() -> None:
    assert create(TEMPLATES, TEMPLATE) == []


# --- ResourceClaimTemplate --------------------------------------------------------------------

TRQ = "spec.spec.devices.requests[0]"
TEX = f"{TRQ}.exactly"


def _template(*changes: tuple[str, Any]) -> Obj:
    return changed(TEMPLATE, *changes)


TEMPLATE_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-request-name", _template((f"{TRQ}.name", DELETE)), [(f"{TRQ}.name", R)]),
    ("bad-request-name", _template((f"{TRQ}.name", "Bad")), [(f"{TRQ}.name", I)]),
    ("no-exactly", _template((f"{TRQ}.exactly", DELETE)), [(TRQ, R)]),
    ("both", _template((f"{TRQ}.firstAvailable", subrequests())), [(TRQ, I)]),
    ("empty-class", _template((f"{TEX}.deviceClassName", "")), [(f"{TEX}.deviceClassName", R)]),
    ("bad-mode", _template((f"{TEX}.allocationMode", "Any")), [(f"{TEX}.allocationMode", NS)]),
    ("negative-count", _template((f"{TEX}.count", -2)), [(f"{TEX}.count", I)]),
    ("cel-syntax", _template((f"{TEX}.selectors[0].cel.expression", "((")), [(f"{TEX}.selectors[0].cel.expression", I)]),
    ("cel-not-bool", _template((f"{TEX}.selectors[0].cel.expression", "1 + 2")), [(f"{TEX}.selectors[0].cel.expression", I)]),
    ("selector-without-cel", _template((f"{TEX}.selectors", [{}])), [(f"{TEX}.selectors[0].cel", R)]),
    (
        "duplicate-requests",
        _template(("spec.spec.devices.requests[1]", {"name": "gpu", "exactly": {"deviceClassName": "c"}})),
        [("spec.spec.devices.requests[1]", D)],
    ),
    ("constraint-without-attribute", _template(("spec.spec.devices.constraints", [{}])), [("spec.spec.devices.constraints[0]", R)]),
    ("config-without-opaque", _template(("spec.spec.devices.config", [{}])), [("spec.spec.devices.config[0].opaque", R)]),
    ("template-metadata-name", _template(("spec.metadata.name", "x")), [("spec.metadata.name", F)]),
    ("template-bad-label", _template(("spec.metadata.labels", {"bad key": "v"})), [("spec.metadata.labels", I)]),
    ("spec-wrong-type", _template(("spec.spec", "x")), [("spec.spec", I)]),
    ("toleration-bad-operator", _template((f"{TEX}.tolerations", [{"operator": "Gt"}])), [(f"{TEX}.tolerations[0].operator", NS)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_invalid_templates(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(TEMPLATES, obj, ctx(labels=ADMIN_NS)) == sorted(expected)


def test_template_admin_access_and_immutability() -> None:
    obj = _template((f"{TEX}.adminAccess", True))
    assert create(TEMPLATES, obj) == [(f"{TRQ}.adminAccess", F)]
    assert create(TEMPLATES, obj, ctx(labels=ADMIN_NS)) == []
    stored = copy.deepcopy(TEMPLATE)
    TEMPLATES.default(stored, ctx())
    assert update(TEMPLATES, _template((f"{TEX}.deviceClassName", "other")), stored) == [("spec", I)]
    assert update(TEMPLATES, TEMPLATE, stored) == []


def test_template_cases_count() -> None:
    assert len(TEMPLATE_CASES) >= 15


# --- feature gates ----------------------------------------------------------------------------

_TOL = [{"key": "k", "operator": "Exists"}]

TEMPLATE_GATE_CASES: list[tuple[str, Obj, str, Any]] = [
    (Gate.DRADeviceTaints, TEMPLATE, f"{TEX}.tolerations", _TOL),
]


@pytest.mark.parametrize(("gate", "base", "path", "value"), TEMPLATE_GATE_CASES, ids=[f"{c[0]}-{c[2]}" for c in TEMPLATE_GATE_CASES])
def test_gated_field_dropped_when_off_kept_when_on(gate: str, base: Obj, path: str, value: Any) -> None:
    check_gate_drop(gate, TEMPLATES, base, path, value)
