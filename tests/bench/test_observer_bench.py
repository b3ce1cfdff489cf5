"""bench.observer's judgement without a cluster: what counts as a write by the observer in the
audit log, what counts as agreement, and that the workload holds every kind it claims to."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import httpx

from bench.observer import FEATURES, GATE, KINDS, OBSERVER_USER, Verdict, devices_refused, observer_writes, pod_of, summary, workload
from kube.client import KubeClient
from tests.schedulers import cluster as c


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
    assert not Verdict("p", "k", "Schedulable", fitting=["a", "b"], scheduler="bound", node="b", devices_refused="taken").agrees
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


def cluster_of(claims: list[dict[str, Any]]) -> KubeClient:
    """A stand-in API server holding node a (two devices), its class and ``claims``."""
    items = {
        "resourceclaims": claims, "resourceslices": [c.node_slice("a", 2)], "deviceclasses": [c.device_class()],
        "devicetaintrules": [], "namespaces": [{"metadata": {"name": "default"}}],
    }  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/nodes/a":
            return httpx.Response(200, json=c.node("a"))
        return httpx.Response(200, json={"items": items[request.url.path.rsplit("/", 1)[-1]]})

    return KubeClient("http://cluster", user_agent="test", transport=httpx.MockTransport(handler))


BOUND = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": "a"}, "status": {}}


async def test_kube_schedulers_devices_are_checked_against_the_same_state() -> None:
    mine = c.claim("mine", status={"allocation": c.allocation("a", "dev-1")})
    held = c.claim("held", status={"allocation": c.allocation("a", "dev-0")})
    assert await devices_refused(cluster_of([held, mine]), BOUND, {"default/mine"}, FEATURES) == ""
    # Allocated before the pod was asked about (a shared claim): nothing of kube-scheduler's to check.
    assert await devices_refused(cluster_of([held, mine]), BOUND, set(), FEATURES) is None
    # A device another claim holds, or fewer devices than asked for: not an answer.
    taken = c.claim("mine", status={"allocation": c.allocation("a", "dev-0")})
    assert "gpu.example.com/a/dev-0" in str(await devices_refused(cluster_of([held, taken]), BOUND, {"default/mine"}, FEATURES))
    short = c.claim("mine", count=2, status={"allocation": c.allocation("a", "dev-1")})
    assert await devices_refused(cluster_of([short]), BOUND, {"default/mine"}, FEATURES)
