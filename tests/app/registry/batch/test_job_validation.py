"""batch/v1 Job's defaults, generated selector and validation, against upstream's
pkg/apis/batch/v1/defaults.go, pkg/registry/batch/job/strategy.go and pkg/apis/batch/validation
(v1.37.2): each invalid case names the exact (field path, reason) pairs upstream reports."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api.generic import complete_status
from app.registry.base import RequestContext
from app.registry.batch.job import STATUS_STRATEGY, STRATEGY
from app.registry.batch.job_validation import indexes_total
from kube.errors import DUPLICATE, FORBIDDEN, INVALID, NOT_SUPPORTED, REQUIRED
from kube.features import FeatureGates
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

UID = "0c2b6e1a-3f7d-4c8e-9a1b-2d3e4f5a6b7c"


def created(name: str = "pi", **spec: Any) -> Obj:
    """A Job as the server holds it after create's hooks (named, defaulted, selector generated)."""
    template = spec.pop("template", {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "pause"}]}})
    job: Obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ns", "uid": UID}, "spec": {"template": template, **spec}}
    STRATEGY.prepare_for_create(job, ctx())
    STRATEGY.prepare_named(job, ctx())
    STRATEGY.default(job, ctx())
    complete_status(STRATEGY, job)
    return job


def test_defaults_and_generated_selector() -> None:
    job = created()
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"], spec["manualSelector"]) == ("NonIndexed", False, "TerminatingOrFailed", False)
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    assert spec["template"]["metadata"]["labels"] == {
        "controller-uid": UID, "batch.kubernetes.io/controller-uid": UID, "job-name": "pi", "batch.kubernetes.io/job-name": "pi",
    }  # fmt: skip
    # The template had no labels: the Job gets none (defaults run before the selector's labels).
    assert "labels" not in job["metadata"]
    assert job["status"] == {}
    assert STRATEGY.validate_create(job, ctx()) == []


def test_job_labels_come_from_the_template() -> None:
    job = created(template={"metadata": {"labels": {"app": "pi"}}, "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}})
    assert job["metadata"]["labels"] == {"app": "pi"}


def test_parallel_defaults() -> None:
    spec = created(parallelism=3)["spec"]
    assert (spec.get("completions"), spec["parallelism"]) == (None, 3)
    per_index = created(completionMode="Indexed", completions=4, backoffLimitPerIndex=1)["spec"]
    assert per_index["backoffLimit"] == 2**31 - 1
    policy = created(podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]})["spec"]
    assert policy["podReplacementPolicy"] == "Failed"
    assert policy["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("restart Always", setitem("spec.template.spec.restartPolicy", "Always"), [("spec.template.spec.restartPolicy", REQUIRED)]),
    ("negative parallelism", setitem("spec.parallelism", -1), [("spec.parallelism", INVALID)]),
    ("negative backoff", setitem("spec.backoffLimit", -1), [("spec.backoffLimit", INVALID)]),
    ("negative ttl", setitem("spec.ttlSecondsAfterFinished", -1), [("spec.ttlSecondsAfterFinished", INVALID)]),
    ("unknown mode", setitem("spec.completionMode", "Sometimes"), [("spec.completionMode", NOT_SUPPORTED)]),
    ("indexed without completions", lambda j: j["spec"].update(completionMode="Indexed", completions=None), [("spec.completions", REQUIRED)]),
    ("per-index on non-indexed", setitem("spec.backoffLimitPerIndex", 1), [("spec.backoffLimitPerIndex", INVALID)]),
    ("maxFailedIndexes without per-index", lambda j: j["spec"].update(completionMode="Indexed", maxFailedIndexes=1),
     [("spec.backoffLimitPerIndex", REQUIRED)]),
    ("selector not generated", setitem("spec.selector.matchLabels", {"batch.kubernetes.io/controller-uid": "other"}),
     [("spec.selector", INVALID), ("spec.template.metadata.labels", INVALID)]),
    ("generated label changed", setitem("spec.template.metadata.labels.job-name", "other"), [("spec.template.metadata.labels[job-name]", INVALID)]),
    ("managedBy", setitem("spec.managedBy", "not-a-path"), [("spec.managedBy", INVALID)]),
    ("replacement policy", setitem("spec.podReplacementPolicy", "Never"), [("spec.podReplacementPolicy", NOT_SUPPORTED)]),
    ("failure policy replaces only failed pods", setitem("spec.podFailurePolicy", {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]}),
     [("spec.podReplacementPolicy", NOT_SUPPORTED)]),
    ("failure policy action", lambda j: j["spec"].update(podReplacementPolicy="Failed", podFailurePolicy={"rules": [{"action": "Explode", "onExitCodes": {"operator": "In", "values": [1]}}]}),
     [("spec.podFailurePolicy.rules[0].action", NOT_SUPPORTED)]),
    ("failure policy exit codes", lambda j: j["spec"].update(podReplacementPolicy="Failed", podFailurePolicy={"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0, 3, 2, 2]}}]}),
     [("spec.podFailurePolicy.rules[0].onExitCodes.values", INVALID), ("spec.podFailurePolicy.rules[0].onExitCodes.values[0]", INVALID),
      ("spec.podFailurePolicy.rules[0].onExitCodes.values[3]", DUPLICATE)]),
    ("failure policy needs Never", lambda j: (j["spec"].update(podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}),
                                               j["spec"].update(podReplacementPolicy="Failed"),
                                               j["spec"]["template"]["spec"].update(restartPolicy="OnFailure")),
     [("spec.template.spec.restartPolicy", INVALID)]),
    ("success policy on non-indexed", setitem("spec.successPolicy", {"rules": [{"succeededCount": 1}]}), [("spec.successPolicy", INVALID)]),
    ("ephemeral containers", setitem("spec.template.spec.ephemeralContainers", [{"name": "d", "image": "i"}]), [("spec.template.spec.ephemeralContainers", FORBIDDEN)]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "mutate", "expected"), CASES, ids=[c[0] for c in CASES])
def test_create(name: str, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    job = mutated(created(), mutate)
    assert pairs(STRATEGY.validate_create(job, ctx())) == sorted(expected)


def test_privileged_template_only_where_the_server_allows_it() -> None:
    old = created()
    job = copy.deepcopy(old)
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    forbidden = ("spec.template.spec.containers[0].securityContext.privileged", FORBIDDEN)
    assert pairs(STRATEGY.validate_create(job, ctx())) == [forbidden]
    assert forbidden in pairs(STRATEGY.validate_update(job, old, ctx()))  # (the template is immutable too)
    allowed = RequestContext(feature_gates=FeatureGates(), allow_privileged=True)
    assert STRATEGY.validate_create(job, allowed) == []
    assert forbidden not in pairs(STRATEGY.validate_update(job, old, allowed))


def test_indexed_name_leaves_room_for_the_index() -> None:
    # Pods are named <job>-<index>: the longest must still be a DNS label.
    job = created(name="x" * 62, completionMode="Indexed", completions=10)
    assert ("metadata.name", INVALID) in pairs(STRATEGY.validate_create(job, ctx()))


def test_indexes_format() -> None:
    assert indexes_total("1,3-5,7", 10) == 5
    for text, message in [("3-1", "non-increasing order, previous: 3, current: 1"), ("9,10", 'too large index: "10"'), ("a", 'cannot convert string to integer for index: "a"'), ("3,2", "non-increasing order, previous: 3, current: 2")]:
        with pytest.raises(ValueError, match=message):
            indexes_total(text, 10)


def _update(old: Obj, mutate: Mutation) -> list[tuple[str, str]]:
    new = mutated(old, mutate)
    STRATEGY.prepare_for_update(new, old, ctx())
    STRATEGY.default(new, ctx())
    return pairs(STRATEGY.validate_update(new, old, ctx()))


def test_update_rules() -> None:
    job = created()
    assert _update(job, setitem("spec.parallelism", 4)) == []
    assert _update(job, setitem("spec.completions", 4)) == [("spec.completions", INVALID)]
    assert _update(job, setitem("spec.template.spec.containers.0.image", "other")) == [("spec.template", INVALID)]
    assert _update(job, setitem("spec.completionMode", "Indexed")) == [("spec.completionMode", INVALID)]
    # A suspended Job that never started may change its scheduling directives and resources.
    suspended = created(suspend=True)
    assert _update(suspended, setitem("spec.template.spec.nodeSelector", {"zone": "a"})) == []
    assert _update(suspended, setitem("spec.template.spec.containers.0.resources", {"requests": {"cpu": "1"}})) == []
    assert _update(suspended, setitem("spec.template.spec.containers.0.image", "other")) == [("spec.template.spec", INVALID)]
    started = copy.deepcopy(suspended)
    started["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 1}
    assert _update(started, setitem("spec.template.spec.nodeSelector", {"zone": "a"})) == [("spec.template", INVALID)]


def _status(old_status: Obj, new_status: Obj, **spec: Any) -> list[tuple[str, str]]:
    old = created(**spec)
    old["status"] = old_status
    new = {**copy.deepcopy(old), "status": new_status}
    STATUS_STRATEGY.prepare_for_update(new, old, ctx())
    return pairs(STATUS_STRATEGY.validate_update(new, old, ctx()))


COMPLETE = [
    {"type": "SuccessCriteriaMet", "status": "True"},
    {"type": "Complete", "status": "True"},
]


def test_status_rules() -> None:
    start, done = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
    assert _status({"startTime": start, "active": 1}, {"startTime": start, "succeeded": 1, "completionTime": done, "conditions": COMPLETE}) == []
    # Complete needs SuccessCriteriaMet and a completionTime, and no active pods.
    assert _status({"startTime": start}, {"startTime": start, "conditions": [COMPLETE[1]]}) == [("status.completionTime", REQUIRED), ("status.conditions", INVALID)]
    assert _status({"startTime": start}, {"startTime": start, "active": 1, "completionTime": done, "conditions": COMPLETE}) == [("status.active", INVALID)]
    # Failed needs FailureTarget.
    assert _status({"startTime": start}, {"startTime": start, "conditions": [{"type": "Failed", "status": "True"}]}) == [("status.conditions", INVALID)]
    # Counters only go up; terminal conditions stay.
    assert _status({"startTime": start, "failed": 2}, {"startTime": start, "failed": 1}) == [("status.failed", INVALID)]
    finished = {"startTime": start, "succeeded": 1, "completionTime": done, "conditions": COMPLETE}
    assert ("status.conditions", INVALID) in _status(finished, {"startTime": start, "succeeded": 1, "completionTime": done})
    assert _status({"startTime": start}, {"startTime": "2026-02-01T00:00:00Z"}) == [("status.startTime", INVALID)]
    assert _status({}, {"uncountedTerminatedPods": {"succeeded": ["a", "a"], "failed": [""]}}) == [
        ("status.uncountedTerminatedPods.failed[0]", INVALID), ("status.uncountedTerminatedPods.succeeded[1]", DUPLICATE),
    ]  # fmt: skip
    assert _status({}, {"active": 1, "ready": 2}) == [("status.ready", INVALID)]
