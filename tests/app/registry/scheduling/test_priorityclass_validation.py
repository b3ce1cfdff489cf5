"""PriorityClass: upstream's validation (reserved names and values, the policy, immutable value)
and the Priority admission rules for pods, without a server."""

from __future__ import annotations

import copy

import pytest

from app.registry.base import RequestContext
from app.registry.scheduling.priorityclass import STRATEGY, admit_pod, keep_pod_priority
from app.registry.scheduling.priorityclass_validation import global_default, system_priority_classes
from kube.errors import FORBIDDEN, INVALID, NOT_SUPPORTED, REQUIRED, ApiError
from kube.features import FeatureGates
from tests.app.registry.helpers import Mutation, Obj, mutated, pairs, setitem

HIGH: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}


def context(*classes: Obj) -> RequestContext:
    by_name = {c["metadata"]["name"]: c for c in classes}
    return RequestContext(
        FeatureGates(),
        lookup=lambda group, resource, ns, name: by_name.get(name),
        lookup_all=lambda group, resource: list(by_name.values()),
    )


CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("above the user maximum", setitem("value", 1_000_000_001), [("value", FORBIDDEN)]),
    ("system prefix, unknown", setitem("metadata.name", "system-mine"), [("metadata.name", FORBIDDEN)]),
    ("system name, wrong value", lambda o: o.update(metadata={"name": "system-node-critical"}, value=5), [("metadata.name", FORBIDDEN)]),
    ("unknown policy", setitem("preemptionPolicy", "Sometimes"), [("preemptionPolicy", NOT_SUPPORTED)]),
    ("empty policy", setitem("preemptionPolicy", ""), [("preemptionPolicy", REQUIRED)]),
    ("value not an integer", setitem("value", "10"), [("value", INVALID)]),
]


def test_valid_classes_and_the_system_ones() -> None:
    assert STRATEGY.validate_create(copy.deepcopy(HIGH), context()) == []
    assert STRATEGY.validate_create(mutated(HIGH, setitem("value", -5)), context()) == []  # negative values are fine
    assert STRATEGY.validate_create(mutated(HIGH, setitem("value", 1_000_000_000)), context()) == []
    for pc in system_priority_classes():
        assert STRATEGY.validate_create(copy.deepcopy(pc), context()) == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_class(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(STRATEGY.validate_create(mutated(HIGH, mutate), context())) == sorted(expected)


def test_system_name_messages() -> None:
    errs = STRATEGY.validate_create(mutated(HIGH, lambda o: o.update(metadata={"name": "system-node-critical"}, value=5)), context())
    assert str(errs[0]) == (
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: value of system-node-critical PriorityClass must be 2000001000"
    )


def test_value_and_policy_are_immutable() -> None:
    errs = STRATEGY.validate_update(mutated(HIGH, lambda o: o.update(value=7, preemptionPolicy="Never")), HIGH, context())
    assert pairs(errs) == [("preemptionPolicy", INVALID), ("value", FORBIDDEN)]
    assert str(errs[0]) == "value: Forbidden: may not be changed in an update."
    assert STRATEGY.validate_update(mutated(HIGH, setitem("globalDefault", True)), HIGH, context()) == []


def test_one_global_default() -> None:
    default = mutated(HIGH, lambda o: o.update(metadata={"name": "default"}, globalDefault=True))
    second = mutated(HIGH, lambda o: o.update(metadata={"name": "second"}, globalDefault=True))
    with pytest.raises(ApiError) as refused:
        STRATEGY.validate_create(second, context(default))
    assert refused.value.code == 403
    assert refused.value.message == (
        'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass default is already marked as default. Only one default can exist'
    )
    assert STRATEGY.validate_update(default, default, context(default)) == []  # the default itself may be updated
    # Of two defaults (a race), the one with the lower value counts.
    assert global_default([mutated(default, setitem("value", 5)), mutated(second, setitem("value", 3))])["metadata"]["name"] == "second"  # type: ignore[index]


def test_system_classes_cannot_be_deleted() -> None:
    with pytest.raises(ApiError) as refused:
        STRATEGY.check_delete(system_priority_classes()[0])
    assert refused.value.message == 'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted'
    STRATEGY.check_delete(copy.deepcopy(HIGH))


def pod(**spec: object) -> Obj:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def test_admission_resolves_the_class() -> None:
    never = mutated(HIGH, lambda o: o.update(metadata={"name": "never"}, preemptionPolicy="Never", value=50))
    p = pod(priorityClassName="never")
    admit_pod(p, context(never))
    assert (p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (50, "Never")
    plain = pod()
    admit_pod(plain, context(never))
    assert (plain["spec"]["priority"], plain["spec"]["preemptionPolicy"], "priorityClassName" in plain["spec"]) == (0, "PreemptLowerPriority", False)
    default = mutated(never, lambda o: o.update(metadata={"name": "dflt"}, globalDefault=True, value=7))
    defaulted = pod()
    admit_pod(defaulted, context(default))
    assert (defaulted["spec"]["priority"], defaulted["spec"]["priorityClassName"], defaulted["spec"]["preemptionPolicy"]) == (7, "dflt", "Never")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"priorityClassName": "missing"}, 'pods "p" is forbidden: no PriorityClass with name missing was found'),
        (
            {"priority": 5},
            'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name',
        ),
        (
            {"preemptionPolicy": "Never"},
            'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
            "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
        ),
    ],
)
def test_admission_refusals(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ApiError) as refused:
        admit_pod(pod(**spec), context())
    assert (refused.value.code, refused.value.message) == (403, message)


def test_admission_accepts_the_computed_values_and_keeps_them_on_update() -> None:
    p = pod(priority=1000, priorityClassName="high", preemptionPolicy="PreemptLowerPriority")
    admit_pod(p, context(HIGH))
    assert p["spec"]["priority"] == 1000
    update = pod()
    keep_pod_priority(update, p)
    assert (update["spec"]["priority"], update["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
