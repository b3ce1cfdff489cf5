"""DeviceTaintRule: spec and status validation, timeAdded defaulting and effect ratcheting."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from app.registry.resource.devicetaintrule import STATUS_STRATEGY as TAINT_RULE_STATUS
from app.registry.resource.devicetaintrule import STRATEGY as TAINT_RULES
from tests.app.registry.resource.helpers import DELETE, NS, TAINT_RULE, TM, I, Obj, R, changed, create, ctx, update


def test_valid_taint_rule() -> None:
    assert create(TAINT_RULES, TAINT_RULE) == []


# --- DeviceTaintRule --------------------------------------------------------------------------


def _rule(*changes: tuple[str, Any]) -> Obj:
    return changed(TAINT_RULE, *changes)


TAINT_RULE_CASES: list[tuple[str, Obj, list[tuple[str, str]]]] = [
    ("missing-spec", _rule(("spec", DELETE)), [("spec", R)]),
    ("missing-taint", _rule(("spec.taint", DELETE)), [("spec.taint", R)]),
    ("missing-key", _rule(("spec.taint.key", DELETE)), [("spec.taint.key", I), ("spec.taint.key", I)]),
    ("bad-key", _rule(("spec.taint.key", "a/b/c")), [("spec.taint.key", I)]),
    ("bad-value", _rule(("spec.taint.value", "not valid")), [("spec.taint.value", I)]),
    ("missing-effect", _rule(("spec.taint.effect", DELETE)), [("spec.taint.effect", R)]),
    ("bad-effect", _rule(("spec.taint.effect", "Evict")), [("spec.taint.effect", NS)]),
    ("prefer-no-schedule", _rule(("spec.taint.effect", "PreferNoSchedule")), [("spec.taint.effect", NS)]),
    ("bad-driver", _rule(("spec.deviceSelector.driver", "Bad_Driver")), [("spec.deviceSelector.driver", I)]),
    ("empty-driver", _rule(("spec.deviceSelector.driver", "")), [("spec.deviceSelector.driver", I), ("spec.deviceSelector.driver", R)]),
    ("bad-pool", _rule(("spec.deviceSelector.pool", "Pool/")), [("spec.deviceSelector.pool", I), ("spec.deviceSelector.pool", I)]),
    ("empty-pool", _rule(("spec.deviceSelector.pool", "")), [("spec.deviceSelector.pool", R)]),
    ("bad-device", _rule(("spec.deviceSelector.device", "GPU.0")), [("spec.deviceSelector.device", I)]),
    ("selector-wrong-type", _rule(("spec.deviceSelector", "all")), [("spec.deviceSelector", I)]),
    ("taint-wrong-type", _rule(("spec.taint", ["x"])), [("spec.taint", I)]),
    ("effect-wrong-type", _rule(("spec.taint.effect", 1)), [("spec.taint.effect", I), ("spec.taint.effect", R)]),
]


@pytest.mark.parametrize(("name", "obj", "expected"), TAINT_RULE_CASES, ids=[c[0] for c in TAINT_RULE_CASES])
def test_invalid_taint_rules(name: str, obj: Obj, expected: list[tuple[str, str]]) -> None:
    assert create(TAINT_RULES, obj) == sorted(expected)


def test_taint_rule_time_added_and_effect_ratcheting() -> None:
    obj = copy.deepcopy(TAINT_RULE)
    c = ctx()
    TAINT_RULES.default(obj, c)
    stamp = obj["spec"]["taint"]["timeAdded"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    old = copy.deepcopy(obj)
    old["spec"]["taint"]["timeAdded"] = "2020-01-01T00:00:00Z"
    new = copy.deepcopy(old)
    new["spec"]["taint"]["effect"] = "NoSchedule"
    TAINT_RULES.prepare_for_update(new, old, c)
    assert new["spec"]["taint"]["timeAdded"] != "2020-01-01T00:00:00Z"
    # The client's own timeAdded wins.
    new = copy.deepcopy(old)
    new["spec"]["taint"].update(effect="None", timeAdded="2021-01-01T00:00:00Z")
    TAINT_RULES.prepare_for_update(new, old, c)
    assert new["spec"]["taint"]["timeAdded"] == "2021-01-01T00:00:00Z"
    # A stored unknown effect is tolerated as long as it does not change.
    legacy = copy.deepcopy(old)
    legacy["spec"]["taint"]["effect"] = "Legacy"
    assert update(TAINT_RULES, legacy, legacy) == []


def test_taint_rule_status() -> None:
    cond = {"type": "EvictionInProgress", "status": "True", "reason": "Evicting", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    new = copy.deepcopy(TAINT_RULE)
    new["status"] = {"conditions": [{**cond, "type": f"T{i}"} for i in range(9)]}
    errs = sorted((e.field, e.reason) for e in TAINT_RULE_STATUS.validate_update(new, TAINT_RULE, ctx()))
    assert errs == [("status.conditions", TM)]
    new["status"] = {"conditions": [{**cond, "reason": ""}]}
    errs = sorted((e.field, e.reason) for e in TAINT_RULE_STATUS.validate_update(new, TAINT_RULE, ctx()))
    assert errs == [("status.conditions[0].reason", R)]


def test_taint_rule_cases_count() -> None:
    assert len(TAINT_RULE_CASES) >= 15
