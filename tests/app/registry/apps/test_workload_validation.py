"""apps/v1 workloads' defaults and validation, against upstream's pkg/apis/apps/v1/defaults.go and
pkg/apis/apps/validation (v1.37.2): each invalid case names the exact (field path, reason) pairs
upstream reports for it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from app.api.generic import complete_status
from app.registry.apps import controllerrevision, daemonset, deployment, replicaset, statefulset
from app.registry.base import KindStrategy, RequestContext
from kube.errors import FORBIDDEN, INVALID, NOT_SUPPORTED, REQUIRED
from kube.features import FeatureGates
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "pause"}]}}


def created(strategy: KindStrategy, spec: Obj, name: str = "web") -> Obj:
    """An object as the server holds it after prepare_for_create, defaults and the store's status completion."""
    obj: Obj = {"apiVersion": strategy.api_version, "kind": strategy.kind, "metadata": {"name": name, "namespace": "ns", "uid": "u1"}, "spec": copy.deepcopy(spec)}
    strategy.prepare_for_create(obj, ctx())
    strategy.default(obj, ctx())
    complete_status(strategy, obj)
    return obj


def workload_spec(**extra: Any) -> Obj:
    return {"selector": {"matchLabels": {"app": "web"}}, "template": copy.deepcopy(TEMPLATE), **extra}


# ---- defaults ----------------------------------------------------------------------------------


def test_deployment_defaults() -> None:
    spec = created(deployment.STRATEGY, workload_spec())["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    pod_spec = spec["template"]["spec"]
    assert (pod_spec["restartPolicy"], pod_spec["dnsPolicy"], pod_spec["terminationGracePeriodSeconds"]) == ("Always", "ClusterFirst", 30)
    # Pods get enableServiceLinks; templates do not (SetDefaults_Pod, not SetDefaults_PodSpec).
    assert "enableServiceLinks" not in pod_spec
    # Recreate gets no rollingUpdate.
    recreate = created(deployment.STRATEGY, workload_spec(strategy={"type": "Recreate"}))["spec"]["strategy"]
    assert recreate == {"type": "Recreate"}


def test_stateful_set_defaults() -> None:
    spec = created(statefulset.STRATEGY, workload_spec())["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    # MaxUnavailableStatefulSet is on in v1.37: maxUnavailable defaults to 1.
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert (spec["replicas"], spec["revisionHistoryLimit"]) == (1, 10)


def test_daemon_set_defaults_and_template_generation() -> None:
    obj = created(daemonset.STRATEGY, workload_spec())
    assert obj["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    # apps/v1 keeps the template generation in an annotation (upstream's conversion).
    generation = daemonset.TEMPLATE_GENERATION_ANNOTATION
    assert obj["metadata"]["annotations"] == {generation: "1"}
    assert obj["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}
    new = copy.deepcopy(obj)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "pause:2"
    daemonset.STRATEGY.prepare_for_update(new, obj, ctx())
    assert new["metadata"]["annotations"][generation] == "2"
    same = copy.deepcopy(obj)
    same["spec"]["minReadySeconds"] = 5
    daemonset.STRATEGY.prepare_for_update(same, obj, ctx())
    assert same["metadata"]["annotations"][generation] == "1"


def test_statuses_are_stored_as_upstream_serialises_them() -> None:
    assert created(replicaset.STRATEGY, workload_spec())["status"] == {"replicas": 0}
    assert created(statefulset.STRATEGY, workload_spec())["status"] == {"replicas": 0, "availableReplicas": 0}
    assert created(deployment.STRATEGY, workload_spec())["status"] == {}


def test_deployment_annotations_move_the_generation() -> None:
    old = created(deployment.STRATEGY, workload_spec())
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {"note": "x"}
    assert deployment.STRATEGY.spec_changed(new, old)
    assert not deployment.STATUS_STRATEGY.spec_changed(new, old)


# ---- validation ---------------------------------------------------------------------------------

Case = tuple[str, Mutation, list[tuple[str, str]]]

COMMON_CASES: list[Case] = [
    ("negative replicas", setitem("spec.replicas", -1), [("spec.replicas", INVALID)]),
    ("no selector", lambda o: o["spec"].pop("selector"), [("spec.selector", REQUIRED), ("spec.template.metadata.labels", INVALID)]),
    ("empty selector", setitem("spec.selector", {}), [("spec.selector", INVALID)]),
    ("selector mismatch", setitem("spec.selector.matchLabels", {"app": "other"}), [("spec.template.metadata.labels", INVALID)]),
    ("bad selector operator", setitem("spec.selector", {"matchExpressions": [{"key": "app", "operator": "Is"}]}),
     [("spec.selector", INVALID), ("spec.selector.matchExpressions[0].operator", INVALID)]),
    # A selector that cannot be parsed: upstream checks no template against it.
    ("In without values", setitem("spec.selector", {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In"}]}),
     [("spec.selector", INVALID), ("spec.selector.matchExpressions[0].values", REQUIRED)]),
    ("restart policy", setitem("spec.template.spec.restartPolicy", "Never"), [("spec.template.spec.restartPolicy", NOT_SUPPORTED)]),
    ("active deadline", setitem("spec.template.spec.activeDeadlineSeconds", 5), [("spec.template.spec.activeDeadlineSeconds", FORBIDDEN)]),
    ("template labels", setitem("spec.template.metadata.labels", {"app": "web", "bad key!": "x"}), [("spec.template.labels", INVALID)]),
    ("pod spec", setitem("spec.template.spec.containers", []), [("spec.template.spec.containers", REQUIRED)]),
    ("ephemeral containers", setitem("spec.template.spec.ephemeralContainers", [{"name": "debug", "image": "busybox"}]),
     [("spec.template.spec.ephemeralContainers", FORBIDDEN)]),
]  # fmt: skip

DEPLOYMENT_CASES: list[Case] = [
    ("recreate with rollingUpdate", setitem("spec.strategy", {"type": "Recreate", "rollingUpdate": {}}), [("spec.strategy.rollingUpdate", FORBIDDEN)]),
    ("unknown strategy", setitem("spec.strategy", {"type": "Blue"}), [("spec.strategy", NOT_SUPPORTED)]),
    ("both zero", setitem("spec.strategy.rollingUpdate", {"maxSurge": 0, "maxUnavailable": "0%"}), [("spec.strategy.rollingUpdate.maxUnavailable", INVALID)]),
    ("over 100%", setitem("spec.strategy.rollingUpdate.maxUnavailable", "150%"), [("spec.strategy.rollingUpdate.maxUnavailable", INVALID)]),
    ("bad percent", setitem("spec.strategy.rollingUpdate.maxSurge", "5 percent"), [("spec.strategy.rollingUpdate.maxSurge", INVALID)]),
    ("deadline not above minReady", lambda o: o["spec"].update(minReadySeconds=10, progressDeadlineSeconds=10), [("spec.progressDeadlineSeconds", INVALID)]),
    ("negative history", setitem("spec.revisionHistoryLimit", -1), [("spec.revisionHistoryLimit", INVALID)]),
]  # fmt: skip

STATEFUL_CASES: list[Case] = [
    ("pod management", setitem("spec.podManagementPolicy", "Random"), [("spec.podManagementPolicy", INVALID)]),
    ("update strategy", setitem("spec.updateStrategy", {"type": "Sometimes"}), [("spec.updateStrategy", INVALID)]),
    ("OnDelete with rollingUpdate", setitem("spec.updateStrategy", {"type": "OnDelete", "rollingUpdate": {"partition": 0}}), [("spec.updateStrategy.rollingUpdate", INVALID)]),
    ("maxUnavailable 0", setitem("spec.updateStrategy.rollingUpdate.maxUnavailable", 0), [("spec.updateStrategy.rollingUpdate.maxUnavailable", INVALID)]),
    ("service name", setitem("spec.serviceName", "Not_A_Label"), [("spec.serviceName", INVALID)]),
    ("retention", setitem("spec.persistentVolumeClaimRetentionPolicy.whenScaled", "Keep"), [("spec.persistentVolumeClaimRetentionPolicy.whenScaled", NOT_SUPPORTED)]),
    ("ordinals", setitem("spec.ordinals", {"start": -2}), [("spec.ordinals.start", INVALID)]),
]  # fmt: skip

DAEMON_CASES: list[Case] = [
    ("no selector", lambda o: o["spec"].pop("selector"), [("spec.template.metadata.labels", INVALID)]),
    ("surge and unavailable", setitem("spec.updateStrategy.rollingUpdate", {"maxSurge": 1, "maxUnavailable": 1}), [("spec.updateStrategy.rollingUpdate.maxSurge", INVALID)]),
    ("neither", setitem("spec.updateStrategy.rollingUpdate", {"maxSurge": 0, "maxUnavailable": 0}), [("spec.updateStrategy.rollingUpdate.maxUnavailable", REQUIRED)]),
    ("unknown strategy", setitem("spec.updateStrategy", {"type": "Fast"}), [("spec.updateStrategy", NOT_SUPPORTED)]),
    ("restart policy", setitem("spec.template.spec.restartPolicy", "OnFailure"), [("spec.template.spec.restartPolicy", NOT_SUPPORTED)]),
    ("empty selector", setitem("spec.selector", {}), [("spec.selector", INVALID)]),
]  # fmt: skip


def _check(strategy: KindStrategy, spec_extra: Obj, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    base = created(strategy, workload_spec(**spec_extra))
    assert strategy.validate_create(base, ctx()) == []
    obj = mutated(base, mutate)
    assert pairs(strategy.validate_create(obj, ctx())) == sorted(expected)


@pytest.mark.parametrize(("name", "mutate", "expected"), COMMON_CASES, ids=[c[0] for c in COMMON_CASES])
@pytest.mark.parametrize("strategy", [replicaset.STRATEGY, deployment.STRATEGY, statefulset.STRATEGY], ids=lambda s: s.kind)
def test_replicated_workloads(strategy: KindStrategy, name: str, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    if strategy is statefulset.STRATEGY and name == "template labels":
        # StatefulSets check the template's labels twice, as upstream does.
        expected = expected * 2
    _check(strategy, {}, mutate, expected)


@pytest.mark.parametrize(("name", "mutate", "expected"), DEPLOYMENT_CASES, ids=[c[0] for c in DEPLOYMENT_CASES])
def test_deployment(name: str, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    _check(deployment.STRATEGY, {}, mutate, expected)


@pytest.mark.parametrize(("name", "mutate", "expected"), STATEFUL_CASES, ids=[c[0] for c in STATEFUL_CASES])
def test_stateful_set(name: str, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    _check(statefulset.STRATEGY, {}, mutate, expected)


@pytest.mark.parametrize(("name", "mutate", "expected"), DAEMON_CASES, ids=[c[0] for c in DAEMON_CASES])
def test_daemon_set(name: str, mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    _check(daemonset.STRATEGY, {}, mutate, expected)


@pytest.mark.parametrize("strategy", [replicaset.STRATEGY, deployment.STRATEGY, statefulset.STRATEGY, daemonset.STRATEGY], ids=lambda s: s.kind)
def test_privileged_templates_only_where_the_server_allows_them(strategy: KindStrategy) -> None:
    """The pods a workload would make are refused up front: the template's spec is a pod's (--allow-privileged)."""
    old = created(strategy, workload_spec())
    obj = copy.deepcopy(old)
    obj["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    forbidden = [("spec.template.spec.containers[0].securityContext.privileged", FORBIDDEN)]
    assert pairs(strategy.validate_create(obj, ctx())) == forbidden
    assert pairs(strategy.validate_update(obj, old, ctx())) == forbidden
    allowed = RequestContext(feature_gates=FeatureGates(), allow_privileged=True)
    assert strategy.validate_create(obj, allowed) == []
    assert strategy.validate_update(obj, old, allowed) == []


UpdateCheck = Callable[[Obj, Obj], list[Any]]


@pytest.mark.parametrize(
    ("strategy", "field", "value"),
    [
        (replicaset.STRATEGY, "selector", {"matchLabels": {"app": "web", "v": "2"}}),
        (deployment.STRATEGY, "selector", {"matchLabels": {"app": "web", "v": "2"}}),
        (daemonset.STRATEGY, "selector", {"matchLabels": {"app": "web", "v": "2"}}),
        (statefulset.STRATEGY, "selector", {"matchLabels": {"app": "web", "v": "2"}}),
        (statefulset.STRATEGY, "serviceName", "other"),
        (statefulset.STRATEGY, "podManagementPolicy", "Parallel"),
        (statefulset.STRATEGY, "volumeClaimTemplates", [{"metadata": {"name": "data"}, "spec": {}}]),
    ],
    ids=lambda v: v.kind if isinstance(v, KindStrategy) else None,
)
def test_immutable_fields(strategy: KindStrategy, field: str, value: Any) -> None:
    old = created(strategy, workload_spec())
    new = copy.deepcopy(old)
    new["spec"][field] = value
    if field == "selector":
        new["spec"]["template"]["metadata"]["labels"]["v"] = "2"
    strategy.prepare_for_update(new, old, ctx())
    errs = strategy.validate_update(new, old, ctx())
    assert (f"spec.{field}", INVALID) in pairs(errs)
    assert any(e.detail == "field is immutable" for e in errs)


def test_mutable_stateful_set_fields() -> None:
    old = created(statefulset.STRATEGY, workload_spec())
    new = copy.deepcopy(old)
    new["spec"].update(replicas=5, minReadySeconds=3)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "pause:2"
    assert statefulset.STRATEGY.validate_update(new, old, ctx()) == []


@pytest.mark.parametrize(
    ("strategy", "status", "expected"),
    [
        (replicaset.STATUS_STRATEGY, {"replicas": 1, "readyReplicas": 2}, [("status.readyReplicas", INVALID)]),
        (replicaset.STATUS_STRATEGY, {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}, [("status.availableReplicas", INVALID)]),
        # Below zero, and so below the (unset, zero) counters that may not exceed it.
        (replicaset.STATUS_STRATEGY, {"replicas": -1},
         [("status.availableReplicas", INVALID), ("status.fullyLabeledReplicas", INVALID), ("status.readyReplicas", INVALID), ("status.replicas", INVALID)]),
        (deployment.STATUS_STRATEGY, {"replicas": 1, "updatedReplicas": 3}, [("status.updatedReplicas", INVALID)]),
        (statefulset.STATUS_STRATEGY, {"replicas": 1, "currentReplicas": 2}, [("status.currentReplicas", INVALID)]),
        (daemonset.STATUS_STRATEGY, {"numberReady": -1}, [("status.numberReady", INVALID)]),
    ],
    ids=lambda v: v.kind if isinstance(v, KindStrategy) else None,
)
def test_status(strategy: KindStrategy, status: Obj, expected: list[tuple[str, str]]) -> None:
    old = created(strategy, workload_spec())
    new = {**copy.deepcopy(old), "status": status}
    strategy.prepare_for_update(new, old, ctx())
    assert pairs(strategy.validate_update(new, old, ctx())) == expected


def test_collision_count_cannot_go_down() -> None:
    old = created(deployment.STRATEGY, workload_spec())
    old["status"] = {"collisionCount": 2}
    new = {**copy.deepcopy(old), "status": {"collisionCount": 1}}
    errs = deployment.STATUS_STRATEGY.validate_update(new, old, ctx())
    assert [(e.field, e.detail) for e in errs] == [("status.collisionCount", "cannot be decremented")]


def test_controller_revision() -> None:
    strategy = controllerrevision.STRATEGY
    ok: Obj = {"metadata": {"name": "r"}, "data": {"spec": {}}, "revision": 2}
    assert strategy.validate_create(ok, ctx()) == []
    assert pairs(strategy.validate_create({**ok, "data": None}, ctx())) == [("data", REQUIRED)]
    assert pairs(strategy.validate_create({**ok, "data": [1]}, ctx())) == [("data", REQUIRED)]
    assert pairs(strategy.validate_create({**ok, "revision": -1}, ctx())) == [("revision", INVALID)]
    assert pairs(strategy.validate_update({**ok, "data": {"spec": {"x": 1}}}, ok, ctx())) == [("data", INVALID)]
