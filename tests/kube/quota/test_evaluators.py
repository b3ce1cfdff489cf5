"""What objects use of quotas, per evaluator, as upstream's evaluators count it
(pkg/quota/v1/evaluator/core: pods.go, services.go, persistent_volume_claims.go, resource_claims.go)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kube.dra.claims import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from kube.objects import Obj
from kube.quota.evaluators import (
    CREATE,
    UPDATE,
    Evaluator,
    PersistentVolumeClaimEvaluator,
    PodEvaluator,
    ResourceClaimEvaluator,
    ServiceEvaluator,
    calculate_usage,
    new_registry,
    pod_usage,
)
from kube.quota.resources import to_api

NS = "ns"
GPU = "example.com/gpu"


class FakeObjects:
    """``Objects`` over a list of (group, resource, object)."""

    def __init__(self, *entries: tuple[str, str, Obj]) -> None:
        self.entries = list(entries)

    def add(self, group: str, resource: str, obj: Obj) -> None:
        self.entries.append((group, resource, obj))

    def list(self, group: str, resource: str, namespace: str | None) -> Iterable[Obj]:
        return [o for g, r, o in self.entries if (g, r) == (group, resource) and (namespace is None or o["metadata"].get("namespace") == namespace)]

    def get(self, group: str, resource: str, namespace: str, name: str) -> Obj | None:
        found = [o for o in self.list(group, resource, namespace) if o["metadata"]["name"] == name]
        return found[0] if found else None


def container(name: str = "main", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any) -> Obj:
    resources: Obj = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "i", "resources": resources, **extra}


def pod(*containers: Obj, init: list[Obj] | None = None, name: str = "p", uid: str = "pod-uid", **spec: Any) -> Obj:
    body: Obj = {"containers": list(containers) or [container()], **spec}
    if init is not None:
        body["initContainers"] = init
    return {"metadata": {"name": name, "namespace": NS, "uid": uid}, "spec": body}


def quota(hard: dict[str, str], used: dict[str, str] | None = None, scopes: list[str] | None = None, selector: list[Obj] | None = None) -> Obj:
    spec: Obj = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return {"metadata": {"name": "q", "namespace": NS}, "spec": spec, "status": {"hard": hard, "used": used if used is not None else dict.fromkeys(hard, "0")}}


# ---- pods -------------------------------------------------------------------------------------


def test_a_pod_counts_its_effective_requests_and_limits() -> None:
    p = pod(
        container("a", {"cpu": "250m", "memory": "1Gi", "hugepages-2Mi": "4Mi", GPU: "1"}, {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi", GPU: "1"}),
        container("b", {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "1G"}),
        init=[container("setup", {"cpu": "2"}, {"cpu": "2"})],
        overhead={"cpu": "100m"},
    )  # fmt: skip
    assert to_api(pod_usage(p)) == {
        "count/pods": "1", "pods": "1",
        # The containers add up to 500m, the init container alone asks for 2; the overhead comes on top.
        "cpu": "2100m", "requests.cpu": "2100m", "limits.cpu": "2100m",
        "memory": "2Gi", "requests.memory": "2Gi", "limits.memory": "1Gi",
        "ephemeral-storage": "1G", "requests.ephemeral-storage": "1G",
        "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi",
        f"requests.{GPU}": "1",
    }  # fmt: skip


def test_sidecars_count_beside_everything_after_them() -> None:
    # Upstream's e2e pod: a sidecar and the main container each hold the resource; the other init
    # containers run alone or beside the sidecar and reuse it.
    res = {GPU: "1", "deviceclass.resource.kubernetes.io/gpu": "1"}
    p = pod(
        container("main", res, res),
        init=[container("init", res, res), container("sidecar", res, res, restartPolicy="Always"), container("init-1", res, res)],
    )
    used = to_api(pod_usage(p))
    assert used[f"requests.{GPU}"] == used["requests.deviceclass.resource.kubernetes.io/gpu"] == "2"


def test_pod_level_resources_replace_the_containers() -> None:
    p = pod(container("a", {"cpu": "1"}), resources={"requests": {"cpu": "3"}, "limits": {"cpu": "4"}})
    used = to_api(pod_usage(p))
    assert (used["requests.cpu"], used["limits.cpu"]) == ("3", "4")


def test_finished_or_long_deleted_pods_count_only_as_objects() -> None:
    p = pod(container("a", {"cpu": "1"}))
    assert to_api(pod_usage({**p, "status": {"phase": "Succeeded"}})) == {"count/pods": "1"}
    gone = datetime.now(UTC) - timedelta(seconds=60)
    deleted = {**p, "metadata": {**p["metadata"], "deletionTimestamp": gone.strftime("%Y-%m-%dT%H:%M:%SZ"), "deletionGracePeriodSeconds": 30}}
    assert to_api(pod_usage(deleted)) == {"count/pods": "1"}
    deleted["metadata"]["deletionGracePeriodSeconds"] = 3600
    assert to_api(pod_usage(deleted))["requests.cpu"] == "1"


def test_a_quota_on_cpu_or_memory_needs_every_container_to_say_what_it_asks() -> None:
    evaluator = PodEvaluator(FakeObjects())
    p = pod(container("a", {"cpu": "1"}), container("b"), init=[container("c", limits={"memory": "1Gi"})])
    required = evaluator.matching_resources(["requests.cpu", "limits.memory", "pods", "requests.storage"])
    assert required == ["limits.memory", "pods", "requests.cpu"]
    assert evaluator.constraints(required, p) == "must specify limits.memory for: a,b; requests.cpu for: b,c"
    assert evaluator.constraints(["pods", "requests.storage"], p) is None
    assert evaluator.constraints(required, pod(container("a"), resources={"requests": {"cpu": "1"}})) is None


@pytest.mark.parametrize(
    ("selector", "spec", "matches"),
    [
        ({"scopeName": "Terminating", "operator": "Exists"}, {"activeDeadlineSeconds": 10}, True),
        ({"scopeName": "Terminating", "operator": "Exists"}, {}, False),
        ({"scopeName": "NotTerminating", "operator": "Exists"}, {}, True),
        ({"scopeName": "BestEffort", "operator": "Exists"}, {}, True),
        ({"scopeName": "NotBestEffort", "operator": "Exists"}, {"containers": [container("a", {"cpu": "1"})]}, True),
        ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}, {"priorityClassName": "high"}, True),
        ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}, {}, False),
        ({"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}, {}, True),
        ({"scopeName": "PriorityClass", "operator": "DoesNotExist"}, {"priorityClassName": "low"}, False),
        ({"scopeName": "PriorityClass", "operator": "Exists"}, {"priorityClassName": "low"}, True),
        ({"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"},
         {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"namespaceSelector": {}, "topologyKey": "k"}}]}}}, True),
        ({"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}, {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}]}}}, False),
    ],
)  # fmt: skip
def test_pod_scopes(selector: Obj, spec: Obj, matches: bool) -> None:
    assert PodEvaluator(FakeObjects()).matches_scope(selector, pod(**spec)) is matches


def test_pods_are_judged_on_create_and_when_their_scope_changes() -> None:
    evaluator = PodEvaluator(FakeObjects())
    assert evaluator.handles(CREATE, "", pod(), None)
    assert not evaluator.handles(UPDATE, "", pod(), pod())
    assert evaluator.handles(UPDATE, "", pod(activeDeadlineSeconds=5), pod())
    assert not evaluator.handles(CREATE, "binding", pod(), None)
    assert not evaluator.handles(UPDATE, "status", pod(), pod())


# ---- services, volume claims, object counts --------------------------------------------------


def test_services_count_node_ports_and_load_balancers() -> None:
    evaluator = ServiceEvaluator(FakeObjects())
    ports = [{"port": 80, "nodePort": 30000}, {"port": 81}]
    assert to_api(evaluator.usage({"metadata": {}, "spec": {"type": "ClusterIP", "ports": ports}})) == {
        "count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "0"}  # fmt: skip
    assert to_api(evaluator.usage({"metadata": {}, "spec": {"type": "NodePort", "ports": ports}}))["services.nodeports"] == "2"
    balancer = to_api(evaluator.usage({"metadata": {}, "spec": {"type": "LoadBalancer", "ports": ports, "allocateLoadBalancerNodePorts": False}}))
    assert (balancer["services.loadbalancers"], balancer["services.nodeports"]) == ("1", "1")


def test_volume_claims_count_storage_per_class_rounded_up_to_whole_bytes() -> None:
    evaluator = PersistentVolumeClaimEvaluator(FakeObjects())
    claim = {"metadata": {}, "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1500m"}}}, "status": {"allocatedResources": {"storage": "1Gi"}}}
    assert to_api(evaluator.usage(claim)) == {
        "count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "1Gi",
        "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "fast.storageclass.storage.k8s.io/requests.storage": "1Gi",
    }  # fmt: skip
    assert to_api(evaluator.usage({"metadata": {}, "spec": {"resources": {"requests": {"storage": "1500m"}}}}))["requests.storage"] == "2"
    assert evaluator.matching_resources(["fast.storageclass.storage.k8s.io/requests.storage", "count/persistentvolumeclaims", "pods"]) == [
        "count/persistentvolumeclaims", "fast.storageclass.storage.k8s.io/requests.storage"]  # fmt: skip
    assert evaluator.matches_scope({"scopeName": "VolumeAttributesClass", "operator": "In", "values": ["gold"]}, {"spec": {"volumeAttributesClassName": "gold"}})


def test_other_resources_count_one_per_object_and_only_on_create() -> None:
    registry = new_registry(FakeObjects())
    secrets = registry.get("", "secrets")
    assert secrets is not None and secrets.matching_resources(["secrets", "count/secrets", "pods"]) == ["count/secrets", "secrets"]
    deployments = registry.get_or_count("apps", "deployments")
    assert deployments.matching_resources(["count/deployments.apps", "count/deployments"]) == ["count/deployments.apps"]
    assert deployments.handles(CREATE, "", {}, None) and not deployments.handles(UPDATE, "", {}, {}) and not deployments.handles(CREATE, "scale", {}, None)
    # Object counts take no scopes: a scoped quota never limits them.
    assert not deployments.matches(quota({"count/deployments.apps": "1"}, scopes=["BestEffort"]), {})
    assert deployments.matches(quota({"count/deployments.apps": "1"}), {})


# ---- resource claims --------------------------------------------------------------------------


def claim(*requests: Obj, name: str = "c", annotations: dict[str, str] | None = None, owner: Obj | None = None, created: str = "2026-01-01T00:00:00Z") -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "creationTimestamp": created}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [owner]
    return {"metadata": meta, "spec": {"devices": {"requests": list(requests)}}}


def exactly(name: str, klass: str, count: int = 1, mode: str = "ExactCount", **extra: Any) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": klass, "allocationMode": mode, "count": count, **extra}}


def device_class(name: str, resource: str | None = None) -> Obj:
    spec: Obj = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}


def test_claims_count_devices_per_class() -> None:
    evaluator = ResourceClaimEvaluator(FakeObjects())
    c = claim(
        exactly("a", "gpu", 2),
        exactly("b", "gpu", 1, adminAccess=True),  # admin access counts too
        exactly("c", "nic", mode="All"),  # as many as a claim can get
        exactly("d", "fpga", mode="Sometime"),  # a mode this version does not know counts for nothing
        {"name": "e", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 4},
            {"name": "small", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
            {"name": "other", "deviceClassName": "nic", "allocationMode": "ExactCount", "count": 2},
        ]},
    )  # fmt: skip
    assert to_api(evaluator.usage(c)) == {
        "count/resourceclaims.resource.k8s.io": "1",
        # 2 + 1, and the most any alternative could get: 4.
        "gpu.deviceclass.resource.k8s.io/devices": "7",
        "nic.deviceclass.resource.k8s.io/devices": "34",
        "fpga.deviceclass.resource.k8s.io/devices": "0",
        # Every class's devices count by its implicit extended resource name too (when any are asked for).
        "requests.deviceclass.resource.kubernetes.io/gpu": "7",
        "requests.deviceclass.resource.kubernetes.io/nic": "34",
    }


def test_claims_count_extended_resource_names_only_for_classes_that_serve_them() -> None:
    objects = FakeObjects(("resource.k8s.io", "deviceclasses", device_class("gpu", GPU)), ("resource.k8s.io", "deviceclasses", device_class("nic")))
    evaluator = ResourceClaimEvaluator(objects)
    names = [f"requests.{GPU}", "requests.deviceclass.resource.kubernetes.io/gpu", "requests.deviceclass.resource.kubernetes.io/nic",
             "requests.example.com/other", "gpu.deviceclass.resource.k8s.io/devices", "count/resourceclaims.resource.k8s.io", "requests.cpu"]  # fmt: skip
    # An implicit name counts for claims only when its class has an explicit one too (upstream's rule).
    assert evaluator.matching_resources(names) == [
        "count/resourceclaims.resource.k8s.io", "gpu.deviceclass.resource.k8s.io/devices",
        "requests.deviceclass.resource.kubernetes.io/gpu", "requests.deviceclass.resource.kubernetes.io/nic", f"requests.{GPU}",
    ]  # fmt: skip
    assert to_api(evaluator.usage(claim(exactly("a", "gpu", 2), exactly("b", "nic")))) == {
        "count/resourceclaims.resource.k8s.io": "1",
        "gpu.deviceclass.resource.k8s.io/devices": "2", "nic.deviceclass.resource.k8s.io/devices": "1",
        f"requests.{GPU}": "2", "requests.deviceclass.resource.kubernetes.io/gpu": "2", "requests.deviceclass.resource.kubernetes.io/nic": "1",
    }  # fmt: skip


def _e2e_objects() -> tuple[FakeObjects, Obj]:
    """Upstream's e2e "must run a pod with extended resource with resource quota": a class serving
    an extended resource, a pod asking for it by both names in a sidecar and its main container
    (and in init containers that reuse them), the scheduler's claim for the pod, and a claim of
    the same class used by a second pod."""
    objects = FakeObjects(("resource.k8s.io", "deviceclasses", device_class("gpu", GPU)))
    res = {GPU: "1", "deviceclass.resource.kubernetes.io/gpu": "1"}
    first = pod(
        container("main", res, res),
        init=[container("init", res, res), container("sidecar", res, res, restartPolicy="Always"), container("init-1", res, res)],
        name="first", uid="first-uid",
    )
    objects.add("", "pods", first)
    objects.add("", "pods", pod(container("main"), name="second", uid="second-uid"))
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "first", "uid": "first-uid", "controller": True}
    special = claim(*(exactly(f"container-{i}-request-{j}", "gpu") for i in (1, 3) for j in (0, 1)), name="first-extended-resources-x",
                    annotations={EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}, owner=owner)  # fmt: skip
    objects.add("resource.k8s.io", "resourceclaims", special)
    objects.add("resource.k8s.io", "resourceclaims", claim(exactly("r", "gpu"), name="external"))
    return objects, special


def test_the_upstream_e2e_pod_with_extended_resources_uses_five_of_each() -> None:
    objects, special = _e2e_objects()
    hard = {"count/resourceclaims.resource.k8s.io": "10", f"requests.{GPU}": "10",
            "requests.deviceclass.resource.kubernetes.io/gpu": "10", "gpu.deviceclass.resource.k8s.io/devices": "10"}  # fmt: skip
    used, errors = calculate_usage(NS, quota(hard), new_registry(objects))
    assert errors == []
    assert to_api(used) == {"count/resourceclaims.resource.k8s.io": "2", "gpu.deviceclass.resource.k8s.io/devices": "5",
                            "requests.deviceclass.resource.kubernetes.io/gpu": "5", f"requests.{GPU}": "5"}  # fmt: skip
    # The scheduler's claim counts only the devices the pod does not count already.
    assert to_api(ResourceClaimEvaluator(objects).usage(special))[f"requests.{GPU}"] == "2"


def test_only_the_pods_first_or_named_claim_is_relieved_of_what_the_pod_counts() -> None:
    objects, special = _e2e_objects()
    evaluator = ResourceClaimEvaluator(objects)
    earlier = {**special, "metadata": {**special["metadata"], "name": "a-earlier", "creationTimestamp": "2025-01-01T00:00:00Z"}}
    objects.add("resource.k8s.io", "resourceclaims", earlier)
    assert to_api(evaluator.usage(special))[f"requests.{GPU}"] == "4"
    # A pod that names its claim relieves that one, whatever else it owns.
    first = objects.get("", "pods", NS, "first")
    assert first is not None
    first["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": special["metadata"]["name"], "requestMappings": []}}
    assert to_api(evaluator.usage(special))[f"requests.{GPU}"] == "2"
    assert to_api(evaluator.usage(earlier))[f"requests.{GPU}"] == "4"
    # A claim whose owner is another pod by the same name (another uid) is not relieved.
    first["metadata"]["uid"] = "recreated"
    assert to_api(evaluator.usage(special))[f"requests.{GPU}"] == "4"


# ---- usage of a namespace ----------------------------------------------------------------------


def test_a_namespace_uses_zero_of_what_nothing_uses_and_scopes_select_what_counts() -> None:
    objects = FakeObjects(
        ("", "pods", pod(container("a", {"cpu": "1"}), name="a", activeDeadlineSeconds=5)),
        ("", "pods", pod(container("b", {"cpu": "2"}), name="b")),
        ("", "pods", {**pod(container("c", {"cpu": "4"}), name="c"), "status": {"phase": "Failed"}}),
        ("", "secrets", {"metadata": {"name": "s", "namespace": NS}}),
        ("", "secrets", {"metadata": {"name": "s", "namespace": "elsewhere"}}),
    )
    registry = new_registry(objects)
    used, _ = calculate_usage(NS, quota({"pods": "10", "count/pods": "10", "requests.cpu": "10", "secrets": "5", "requests.storage": "1", "example.com/thing": "1"}), registry)
    # Failed pods count only as objects; nothing counts example.com/thing (no evaluator: left out).
    assert to_api(used) == {"count/pods": "3", "pods": "2", "requests.cpu": "3", "requests.storage": "0", "secrets": "1"}
    scoped, _ = calculate_usage(NS, quota({"pods": "10", "requests.cpu": "10"}, scopes=["NotTerminating"]), registry)
    assert to_api(scoped) == {"pods": "1", "requests.cpu": "2"}


def test_an_evaluator_that_cannot_count_leaves_its_names_out_and_says_why() -> None:
    class Broken(Evaluator):
        def usage_stats(self, namespace: str, names: list[str], selectors: list[Obj]) -> dict[str, Any]:
            raise LookupError("not watched")

    objects = FakeObjects()
    registry = new_registry(objects)
    registry._evaluators[("", "secrets")] = Broken(objects, "", "secrets", ("secrets",))
    used, errors = calculate_usage(NS, quota({"secrets": "1", "configmaps": "1"}), registry)
    assert to_api(used) == {"configmaps": "0"}
    assert [str(e) for e in errors] == ["not watched"]
