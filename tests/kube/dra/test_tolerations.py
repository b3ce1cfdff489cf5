"""Toleration matching: the cases of upstream's node and device toleration tests, plus the
corners where this project's three former matchers disagreed."""

from __future__ import annotations

import pytest

from kube.dra.tolerations import tolerates, tolerations_tolerate
from kube.objects import Obj

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
SLA = "node.kubernetes.io/sla"

# (what the case shows, toleration, taint, tolerated)
CASES: list[tuple[str, Obj, Obj, bool]] = [
    # Upstream's cases, the same for node taints and device taints.
    ("exists, same key and effect, taint without value",
     {"key": "foo", "operator": "Exists", "effect": NO_SCHEDULE}, {"key": "foo", "effect": NO_SCHEDULE}, True),
    ("exists, same key and effect, taint with a value",
     {"key": "foo", "operator": "Exists", "effect": NO_SCHEDULE}, {"key": "foo", "value": "bar", "effect": NO_SCHEDULE}, True),
    ("exists with an empty key matches every key",
     {"key": "", "operator": "Exists", "effect": NO_SCHEDULE}, {"key": "foo", "value": "bar", "effect": NO_SCHEDULE}, True),
    ("equal, same key, value and effect",
     {"key": "foo", "operator": "Equal", "value": "bar", "effect": NO_SCHEDULE}, {"key": "foo", "value": "bar", "effect": NO_SCHEDULE}, True),
    ("equal, same key and effect, other value",
     {"key": "foo", "operator": "Equal", "value": "value1", "effect": NO_SCHEDULE}, {"key": "foo", "value": "value2", "effect": NO_SCHEDULE}, False),
    ("equal, same key and value, other effect",
     {"key": "foo", "operator": "Equal", "value": "bar", "effect": NO_SCHEDULE}, {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, False),
    # Upstream's numeric operators, with their feature gate off (this project does not serve it):
    # they tolerate nothing, not even where the comparison would hold.
    ("gt with the gate off, taint value above", {"key": SLA, "operator": "Gt", "value": "750", "effect": NO_SCHEDULE},
     {"key": SLA, "value": "950", "effect": NO_SCHEDULE}, False),
    ("gt with the gate off, taint value below", {"key": SLA, "operator": "Gt", "value": "950", "effect": NO_SCHEDULE},
     {"key": SLA, "value": "800", "effect": NO_SCHEDULE}, False),
    ("lt with the gate off, taint value below", {"key": SLA, "operator": "Lt", "value": "950", "effect": NO_SCHEDULE},
     {"key": SLA, "value": "800", "effect": NO_SCHEDULE}, False),
    # Defaults and empty fields.
    ("no operator means equal", {"key": "foo", "value": "bar"}, {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, True),
    ("no operator means equal, other value", {"key": "foo", "value": "baz"}, {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, False),
    ("equal without values on either side", {"key": "foo", "operator": "Equal"}, {"key": "foo", "effect": NO_SCHEDULE}, True),
    ("no effect matches every effect", {"key": "foo", "operator": "Exists"}, {"key": "foo", "effect": NO_EXECUTE}, True),
    ("an empty toleration tolerates taints without value", {}, {"key": "foo", "effect": NO_SCHEDULE}, True),
    ("an empty toleration does not tolerate a taint with a value", {}, {"key": "foo", "value": "bar", "effect": NO_SCHEDULE}, False),
    ("exists with nothing else tolerates everything", {"operator": "Exists"}, {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, True),
    ("other key", {"key": "other", "operator": "Exists"}, {"key": "foo", "effect": NO_SCHEDULE}, False),
    ("unknown operator", {"key": "foo", "operator": "In", "value": "bar"}, {"key": "foo", "value": "bar", "effect": NO_SCHEDULE}, False),
    # The disputed case: an empty key with Equal matches every key with that value, as upstream's
    # matcher does (device validation accepts it; the allocator used to refuse it).
    ("empty key with equal, same value", {"key": "", "operator": "Equal", "value": "v"}, {"key": "foo", "value": "v", "effect": NO_SCHEDULE}, True),
    ("empty key with equal, other value", {"key": "", "operator": "Equal", "value": "v"}, {"key": "foo", "value": "w", "effect": NO_SCHEDULE}, False),
]


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tolerates(toleration: Obj, taint: Obj, tolerated: bool) -> None:
    assert tolerates(toleration, taint) is tolerated


def test_any_toleration_suffices() -> None:
    taint = {"key": "foo", "value": "bar", "effect": NO_EXECUTE}
    assert tolerations_tolerate([{"key": "other", "operator": "Exists"}, {"key": "foo", "value": "bar"}], taint)
    assert not tolerations_tolerate([{"key": "other", "operator": "Exists"}, {"key": "foo", "effect": NO_SCHEDULE, "operator": "Exists"}], taint)
    assert not tolerations_tolerate([], taint)
