"""bench.observer's judgement without a cluster: what counts as a write by the observer in the
audit log, what counts as agreement, and that the workload holds every kind it claims to."""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench.observer import GATE, KINDS, OBSERVER_USER, Verdict, observer_writes, pod_of, summary, workload


def event(verb: str, resource: str, *, user: str = OBSERVER_USER, impersonated: str = "", stage: str = "ResponseComplete") -> str:
    record = {"stage": stage, "verb": verb, "user": {"username": user}, "objectRef": {"resource": resource}, "requestURI": f"/{resource}",
              "responseStatus": {"code": 201}}  # fmt: skip
    if impersonated:
        record["impersonatedUser"] = {"username": impersonated}
    return json.dumps(record)


def test_only_the_observers_writes_count(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text("\n".join([
        event("list", "pods"), event("watch", "resourceclaims"), event("get", "configmaps"),
        event("create", "subjectaccessreviews"),  # its callers' checks store nothing
        event("create", "pods", user="admin"),  # someone else's
        event("create", "pods", stage="RequestReceived"),  # the same request's first stage
        event("create", "bindings"), event("patch", "resourceclaims", user="admin", impersonated=OBSERVER_USER),
        "not json",
    ]))  # fmt: skip
    assert observer_writes(log) == ["create /bindings -> 201", "patch /resourceclaims -> 201"]


def test_agreement() -> None:
    assert Verdict("p", "k", "Schedulable", fitting=["a", "b"], scheduler="bound", node="b").agrees
    assert not Verdict("p", "k", "Schedulable", fitting=["a"], scheduler="bound", node="b").agrees
    assert not Verdict("p", "k", "Unschedulable", scheduler="bound", node="b").agrees
    assert Verdict("p", "k", "Unschedulable", scheduler="unschedulable").agrees
    assert not Verdict("p", "k", "Schedulable", fitting=["a"], scheduler="unschedulable").agrees
    assert Verdict("p", "k", "Error", scheduler="error").agrees
    assert not Verdict("p", "k", "Unschedulable", scheduler="undecided").agrees
    result = summary([Verdict("p", "k", "Unschedulable", scheduler="unschedulable", nodes_explained=2), Verdict("q", "k", "Schedulable", scheduler="undecided")])
    assert (result["decided"], result["agreed"], result["agreement"], result["unschedulable_explained_per_node"]) == (1, 1, 1.0, 1)
    assert [d["pod"] for d in result["disagreements"]] == ["q"]


def test_the_workload_holds_every_kind_gated() -> None:
    pods = workload(len(KINDS))
    assert [kind for kind, _ in pods] == list(KINDS)
    assert all(pod["spec"]["schedulingGates"] == [{"name": GATE}] for _, pod in pods)
    assert workload(200, seed=1) == workload(200, seed=1)
    assert pod_of("admin", 0, random.Random(0))["metadata"]["namespace"] == "observed-admin"
