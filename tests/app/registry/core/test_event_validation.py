"""Event (core/v1): upstream's legacy rules.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.registry.core.event import STRATEGY as EVENTS
from kube.errors import INVALID, REQUIRED
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

EVENT: Obj = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "pod-with-gpu.17a2b3c4d5e6f7a8", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "namespace": "default", "name": "pod-with-gpu", "apiVersion": "v1"},
    "reason": "Scheduled",
    "message": "Successfully assigned default/pod-with-gpu to node-1",
    "source": {"component": "default-scheduler"},
    "type": "Normal",
    "count": 1,
}

NEW_STYLE: dict[str, Any] = {"eventTime": "2026-01-01T00:00:00.000000Z", "reportingComponent": "example.com/scheduler", "reportingInstance": "sched-1", "action": "Binding"}

EVENT_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("namespace mismatch", setitem("involvedObject.namespace", "other"), [("involvedObject.namespace", INVALID)]),
    ("cluster object in namespace", lambda e: (e["involvedObject"].pop("namespace"), e["metadata"].update(namespace="team-a")), [("involvedObject.namespace", INVALID)]),
    ("bad namespace", lambda e: (e["metadata"].update(namespace="Bad_NS"), e["involvedObject"].update(namespace="Bad_NS")), [("namespace", INVALID)]),
    ("involvedObject wrong type", setitem("involvedObject", "pod"), [("involvedObject", INVALID)]),
    ("reason wrong type", setitem("reason", 5), [("reason", INVALID)]),
    ("message wrong type", setitem("message", ["x"]), [("message", INVALID)]),
    ("new style no controller", lambda e: e.update({**NEW_STYLE, "reportingComponent": ""}), [("reportingComponent", REQUIRED), ("reportingComponent", INVALID), ("reportingComponent", INVALID)]),
    ("new style bad controller", lambda e: e.update({**NEW_STYLE, "reportingComponent": "a/b/c"}), [("reportingComponent", INVALID)]),
    ("new style no instance", lambda e: e.update({**NEW_STYLE, "reportingInstance": ""}), [("reportingInstance", REQUIRED)]),
    ("new style long instance", lambda e: e.update({**NEW_STYLE, "reportingInstance": "i" * 129}), [("reportingInstance", INVALID)]),
    ("new style no action", lambda e: e.update({**NEW_STYLE, "action": ""}), [("action", REQUIRED)]),
    ("new style long action", lambda e: e.update({**NEW_STYLE, "action": "a" * 129}), [("action", INVALID)]),
    ("new style no reason", lambda e: e.update({**NEW_STYLE, "reason": ""}), [("reason", REQUIRED)]),
    ("new style long reason", lambda e: e.update({**NEW_STYLE, "reason": "r" * 129}), [("reason", INVALID)]),
    ("new style long message", lambda e: e.update({**NEW_STYLE, "message": "m" * 1025}), [("message", INVALID)]),
    (
        "new style cluster object elsewhere",
        lambda e: (e.update(NEW_STYLE), e["involvedObject"].pop("namespace"), e["metadata"].update(namespace="team-a")),
        [("involvedObject.namespace", INVALID)],
    ),
]


def test_valid_event() -> None:
    assert EVENTS.validate_create(copy.deepcopy(EVENT), ctx()) == []
    assert EVENTS.validate_create(mutated(EVENT, lambda e: e.update(NEW_STYLE)), ctx()) == []
    node_event = mutated(EVENT, lambda e: e["involvedObject"].pop("namespace"))
    assert EVENTS.validate_create(node_event, ctx()) == []  # "default" is accepted for cluster objects
    assert EVENTS.validates_object_meta is False


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES])
def test_invalid_event(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(EVENTS.validate_create(mutated(EVENT, mutate), ctx())) == sorted(expected)
    assert pairs(EVENTS.validate_update(mutated(EVENT, mutate), EVENT, ctx())) == sorted(expected)


def test_event_messages() -> None:
    errs = EVENTS.validate_create(mutated(EVENT, setitem("involvedObject.namespace", "other")), ctx())
    assert [str(e) for e in errs] == ['involvedObject.namespace: Invalid value: "other": does not match event.namespace']
