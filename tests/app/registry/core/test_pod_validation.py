"""Pod: the spec on create and update, status writes, and the gate drop rules.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.registry.base import RequestContext
from app.registry.core.pod import STATUS_STRATEGY as POD_STATUS
from app.registry.core.pod import STRATEGY as PODS
from kube.errors import DUPLICATE, FORBIDDEN, INVALID, NOT_FOUND, NOT_SUPPORTED, REQUIRED
from kube.features import FeatureGates, Gate
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem


def make_pod(**spec: Any) -> Obj:
    """A pod as the server sees it after defaulting (the upstream docs' DRA example)."""
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod-with-gpu", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "command": ["sleep", "9999"],
                    "resources": {"claims": [{"name": "gpu"}], "requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            **spec,
        },
    }
    PODS.default(pod, ctx())
    return pod


POD_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("no containers", setitem("spec.containers", []), [("spec.containers", REQUIRED)]),
    ("bad container name", setitem("spec.containers.0.name", "Ctr"), [("spec.containers[0].name", INVALID)]),
    ("no image", setitem("spec.containers.0.image", ""), [("spec.containers[0].image", REQUIRED)]),
    ("duplicate container", lambda p: p["spec"]["containers"].append(copy.deepcopy(p["spec"]["containers"][0])), [("spec.containers[1].name", DUPLICATE)]),
    ("restart policy", setitem("spec.restartPolicy", "Sometimes"), [("spec.restartPolicy", NOT_SUPPORTED)]),
    ("dns policy", setitem("spec.dnsPolicy", "Weird"), [("spec.dnsPolicy", NOT_SUPPORTED)]),
    ("bad quantity", setitem("spec.containers.0.resources.requests", {"cpu": "lots"}), [("spec.containers[0].resources.requests[cpu]", INVALID)]),
    ("request over limit", setitem("spec.containers.0.resources.requests", {"cpu": "2"}), [("spec.containers[0].resources.requests", INVALID)]),
    ("negative quantity", setitem("spec.containers.0.resources.limits", {"memory": "-1Gi"}), [("spec.containers[0].resources.limits[memory]", INVALID)]),
    ("unknown resource", setitem("spec.containers.0.resources.limits", {"gpus": "1"}), [("spec.containers[0].resources.limits[gpus]", INVALID), ("spec.containers[0].resources.limits[gpus]", INVALID)]),
    ("claim name not a label", setitem("spec.resourceClaims.0.name", "GPU"), [("spec.resourceClaims[0].name", INVALID), ("spec.containers[0].resources.claims[0]", NOT_FOUND)]),
    ("claim both sources", setitem("spec.resourceClaims.0.resourceClaimName", "c"), [("spec.resourceClaims[0]", INVALID)]),
    ("claim no source", lambda p: p["spec"]["resourceClaims"][0].pop("resourceClaimTemplateName"), [("spec.resourceClaims[0]", INVALID)]),
    ("claim duplicate", lambda p: p["spec"]["resourceClaims"].append({"name": "gpu", "resourceClaimName": "x"}), [("spec.resourceClaims[1].name", DUPLICATE)]),
    ("claim template name", setitem("spec.resourceClaims.0.resourceClaimTemplateName", "Bad_Name"), [("spec.resourceClaims[0].resourceClaimTemplateName", INVALID)]),
    ("claim no name", setitem("spec.resourceClaims", [{"resourceClaimName": "x"}]), [("spec.resourceClaims[0].name", REQUIRED), ("spec.containers[0].resources.claims[0]", NOT_FOUND)]),
    ("container claim unknown", setitem("spec.containers.0.resources.claims", [{"name": "tpu"}]), [("spec.containers[0].resources.claims[0]", NOT_FOUND)]),
    ("container claim empty", setitem("spec.containers.0.resources.claims", [{"name": ""}]), [("spec.containers[0].resources.claims[0]", REQUIRED)]),
    ("container claim twice", setitem("spec.containers.0.resources.claims", [{"name": "gpu"}, {"name": "gpu"}]), [("spec.containers[0].resources.claims[1]", DUPLICATE)]),
    ("container claim bad request", setitem("spec.containers.0.resources.claims", [{"name": "gpu", "request": "A"}]), [("spec.containers[0].resources.claims[0].request", INVALID)]),
    ("claim after its request", setitem("spec.containers.0.resources.claims", [{"name": "gpu", "request": "a"}, {"name": "gpu"}]), [("spec.containers[0].resources.claims[1]", DUPLICATE)]),
    ("pod-level claims", setitem("spec.resources", {"claims": [{"name": "gpu"}]}), [("spec.resources.claims", FORBIDDEN)]),
    ("gate not qualified", setitem("spec.schedulingGates", [{"name": "a/b/c"}]), [("spec.schedulingGates[0]", INVALID)]),
    ("gate duplicate", setitem("spec.schedulingGates", [{"name": "example.com/g"}, {"name": "example.com/g"}]), [("spec.schedulingGates[1]", DUPLICATE)]),
    ("nodeName with gates", lambda p: p["spec"].update(nodeName="n1", schedulingGates=[{"name": "g"}]), [("spec.nodeName", FORBIDDEN)]),
    ("bad nodeName", setitem("spec.nodeName", "Node_1"), [("spec.nodeName", INVALID)]),
    ("init restart policy", setitem("spec.initContainers", [{"name": "init", "image": "busybox", "restartPolicy": "Never", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}]), [("spec.initContainers[0].restartPolicy", NOT_SUPPORTED)]),
    ("toleration operator", setitem("spec.tolerations", [{"key": "k", "operator": "Maybe"}]), [("spec.tolerations[0].operator", NOT_SUPPORTED)]),
    ("spec wrong type", setitem("spec", "x"), [("spec", INVALID)]),
    ("containers wrong type", setitem("spec.containers", {"a": 1}), [("spec.containers", INVALID)]),
]


def test_valid_pod() -> None:
    assert PODS.validate_create(make_pod(), ctx()) == []
    gated = make_pod(schedulingGates=[{"name": "example.com/wait"}])
    assert PODS.validate_create(gated, ctx()) == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_invalid_pod(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(PODS.validate_create(mutated(make_pod(), mutate), ctx())) == sorted(expected)


def test_pod_messages() -> None:
    errs = PODS.validate_create(mutated(make_pod(), setitem("spec.containers.0.resources.claims", [{"name": "tpu"}])), ctx())
    assert str(errs[0]) == 'spec.containers[0].resources.claims[0]: Not found: "tpu": must be one of the names in pod.spec.resourceClaims: gpu'
    errs = PODS.validate_create(mutated(make_pod(), setitem("spec.resourceClaims", [])), ctx())
    assert str(errs[0]).endswith("must be one of the names in pod.spec.resourceClaims which is empty")
    errs = PODS.validate_create(mutated(make_pod(), setitem("spec.resourceClaims.0.resourceClaimName", "c")), ctx())
    assert errs[0].detail == "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
    errs = PODS.validate_create(mutated(make_pod(), setitem("spec.containers.0.resources.requests", {"cpu": "2"})), ctx())
    assert str(errs[0]) == 'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'


def test_privileged_containers_only_where_the_server_allows_them() -> None:
    """kube-apiserver's --allow-privileged (default false): every container kind is checked, on
    create and update; privileged: false is always fine."""
    privileged = {"privileged": True}
    pod = make_pod(initContainers=[{"name": "init", "image": "busybox", "securityContext": privileged}])
    pod["spec"]["containers"][0]["securityContext"] = privileged
    PODS.default(pod, ctx())
    errs = PODS.validate_create(pod, ctx())
    assert [str(e) for e in errs] == [
        "spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy",
        "spec.initContainers[0].securityContext.privileged: Forbidden: disallowed by cluster policy",
    ]
    assert PODS.validate_update(pod, pod, ctx()) == errs
    allowed = RequestContext(feature_gates=FeatureGates(), allow_privileged=True)
    assert PODS.validate_create(pod, allowed) == []
    assert PODS.validate_update(pod, pod, allowed) == []
    unprivileged = mutated(make_pod(), setitem("spec.containers.0.securityContext", {"privileged": False}))
    assert PODS.validate_create(unprivileged, ctx()) == []


POD_UPDATE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("change claims", setitem("spec.resourceClaims.0.resourceClaimTemplateName", "other"), [("spec", FORBIDDEN)]),
    ("set nodeName", setitem("spec.nodeName", "node-1"), [("spec", FORBIDDEN)]),
    ("add gate", lambda p: p["spec"]["schedulingGates"].append({"name": "example.com/new"}), [("spec.schedulingGates[1].name", FORBIDDEN)]),
    ("add container", lambda p: p["spec"]["containers"].append({"name": "b", "image": "x", "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}), [("spec.containers", FORBIDDEN)]),
    ("clear image", setitem("spec.containers.0.image", ""), [("spec.containers[0].image", REQUIRED), ("spec.containers[0].image", REQUIRED)]),
    ("raise deadline", setitem("spec.activeDeadlineSeconds", 100), [("spec.activeDeadlineSeconds", INVALID)]),
    ("change toleration", setitem("spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]), [("spec.tolerations", FORBIDDEN)]),
    ("change gated nodeSelector", setitem("spec.nodeSelector", {"zone": "b"}), [("spec.nodeSelector", INVALID)]),
]


def _stored_pod() -> Obj:
    pod = make_pod(
        schedulingGates=[{"name": "example.com/wait"}],
        activeDeadlineSeconds=50,
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
        nodeSelector={"zone": "a"},
    )
    return pod


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in POD_UPDATE_CASES], ids=[c[0] for c in POD_UPDATE_CASES])
def test_invalid_pod_update(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    old = _stored_pod()
    assert pairs(PODS.validate_update(mutated(old, mutate), old, ctx())) == sorted(expected)


def test_allowed_pod_updates() -> None:
    old = _stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "ubuntu:24.04"
    new["spec"]["activeDeadlineSeconds"] = 10
    new["spec"]["schedulingGates"] = []
    new["spec"]["tolerations"].append({"key": "x", "operator": "Exists"})
    new["spec"]["nodeSelector"]["rack"] = "r1"
    assert PODS.validate_update(new, old, ctx()) == []
    errs = PODS.validate_update(mutated(old, setitem("spec.nodeName", "n")), old, ctx())
    assert errs[0].detail.startswith(
        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
    )
    errs = PODS.validate_update(mutated(old, lambda p: p["spec"]["schedulingGates"].append({"name": "g2"})), old, ctx())
    assert str(errs[0]) == "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'g2'"


def _running_pod() -> Obj:
    pod = make_pod(nodeName="node-1")
    pod["status"] = {"phase": "Pending"}
    return pod


POD_STATUS_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("status unknown claim", setitem("status.resourceClaimStatuses", [{"name": "tpu", "resourceClaimName": "x"}]), [("status.resourceClaimStatuses[0].name", INVALID)]),
    ("status duplicate claim", setitem("status.resourceClaimStatuses", [{"name": "gpu"}, {"name": "gpu"}]), [("status.resourceClaimStatuses[1].name", DUPLICATE)]),
    ("status bad claim name", setitem("status.resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "Bad_"}]), [("status.resourceClaimStatuses[0].name", INVALID)]),
    ("negative observedGeneration", setitem("status.observedGeneration", -1), [("status.observedGeneration", INVALID)]),
    ("bad custom condition", setitem("status.conditions", [{"type": "a/b/c", "status": "True"}]), [("status.conditions[0].Type", INVALID)]),
    ("nominated node", setitem("status.nominatedNodeName", "Bad_Node"), [("status.nominatedNodeName", INVALID)]),
    (
        "node allocatable status",
        setitem("status.nodeAllocatableResourceClaimStatuses", [
            {"resourceClaimName": "", "containers": ["ghost"], "mapping": [{"name": "nvidia.com/gpu", "quantity": "1"}], "overhead": [{"name": "memory"}]},
        ]),
        [
            ("status.nodeAllocatableResourceClaimStatuses[0].containers[0]", NOT_FOUND),
            ("status.nodeAllocatableResourceClaimStatuses[0].mapping[0].name", INVALID),
            ("status.nodeAllocatableResourceClaimStatuses[0].overhead[0]", REQUIRED),
            ("status.nodeAllocatableResourceClaimStatuses[0].resourceClaimName", REQUIRED),
        ],
    ),
    (
        "node allocatable quantities",
        setitem("status.nodeAllocatableResourceClaimStatuses", [
            {"resourceClaimName": "c1", "mapping": [{"name": "cpu", "quantity": "-1"}], "overhead": [{"name": "memory", "perPod": "x"}]},
            {"resourceClaimName": "c1"},
        ]),
        [
            ("status.nodeAllocatableResourceClaimStatuses[0].mapping[0].quantity", INVALID),
            ("status.nodeAllocatableResourceClaimStatuses[0].overhead[0].perPod", INVALID),
            ("status.nodeAllocatableResourceClaimStatuses[1].resourceClaimName", DUPLICATE),
        ],
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in POD_STATUS_CASES], ids=[c[0] for c in POD_STATUS_CASES])
def test_invalid_pod_status(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    old = _running_pod()
    assert pairs(POD_STATUS.validate_update(mutated(old, mutate), old, ctx())) == sorted(expected)


def test_valid_pod_status() -> None:
    old = _running_pod()
    new = copy.deepcopy(old)
    new["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "pod-with-gpu-gpu-x7k2p"}]
    new["status"]["nodeAllocatableResourceClaimStatuses"] = [
        {
            "resourceClaimName": "pod-with-gpu-gpu-x7k2p",
            "containers": ["ctr"],
            "mapping": [{"name": "memory", "quantity": "4Gi"}],
            "overhead": [{"name": "cpu", "perPod": "100m", "perContainer": "50m"}],
        }
    ]
    assert POD_STATUS.validate_update(new, old, ctx()) == []


# ---- gate drop rules ------------------------------------------------------------------------------

NODE_ALLOC = [{"resourceClaimName": "c1", "mapping": [{"name": "memory", "quantity": "1Gi"}]}]


def test_node_allocatable_status_dropped_when_gate_off() -> None:
    old = _running_pod()
    new = mutated(old, setitem("status.nodeAllocatableResourceClaimStatuses", NODE_ALLOC))
    PODS.drop_disabled_fields(new, old, ctx())
    assert "nodeAllocatableResourceClaimStatuses" not in new["status"]


def test_node_allocatable_status_kept_when_gate_on() -> None:
    old = _running_pod()
    new = mutated(old, setitem("status.nodeAllocatableResourceClaimStatuses", NODE_ALLOC))
    PODS.drop_disabled_fields(new, old, ctx(DRANodeAllocatableResources=True))
    assert new["status"]["nodeAllocatableResourceClaimStatuses"] == NODE_ALLOC


def test_node_allocatable_status_kept_when_old_uses_it() -> None:
    old = mutated(_running_pod(), setitem("status.nodeAllocatableResourceClaimStatuses", NODE_ALLOC))
    new = copy.deepcopy(old)
    new["status"]["nodeAllocatableResourceClaimStatuses"][0]["mapping"][0]["quantity"] = "2Gi"
    PODS.drop_disabled_fields(new, old, ctx())
    assert new["status"]["nodeAllocatableResourceClaimStatuses"][0]["mapping"][0]["quantity"] == "2Gi"


def test_node_allocatable_status_dropped_on_create_when_gate_off() -> None:
    pod = mutated(_running_pod(), setitem("status.nodeAllocatableResourceClaimStatuses", NODE_ALLOC))
    PODS.drop_disabled_fields(pod, None, ctx())
    assert "nodeAllocatableResourceClaimStatuses" not in pod["status"]


def test_resource_claim_status_follows_old_spec() -> None:
    # DynamicResourceAllocation is locked on in v1.37; the rule is exercised with the gate forced off.
    gates = FeatureGates()
    gates._values[Gate.DynamicResourceAllocation] = False  # type: ignore[attr-defined]
    off = RequestContext(feature_gates=gates)
    status = [{"name": "gpu", "resourceClaimName": "x"}]
    old = _running_pod()
    new = mutated(old, setitem("status.resourceClaimStatuses", status))
    PODS.drop_disabled_fields(new, old, off)
    assert new["status"]["resourceClaimStatuses"] == status  # old spec has resourceClaims
    fresh = make_pod()
    PODS.drop_disabled_fields(fresh, None, off)
    assert "resourceClaims" not in fresh["spec"]
    assert "claims" not in fresh["spec"]["containers"][0]["resources"]
    # On (the v1.37 default) nothing is dropped.
    kept = make_pod()
    PODS.drop_disabled_fields(kept, None, ctx())
    assert kept["spec"]["resourceClaims"]


def test_extended_resource_status_and_scheduling_group() -> None:
    pod = mutated(_running_pod(), setitem("spec.schedulingGroup", {"podGroupName": "g"}))
    pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "x", "requestMappings": []}
    PODS.drop_disabled_fields(pod, None, ctx())
    assert "schedulingGroup" not in pod["spec"]  # GenericWorkload is off by default
    assert "extendedResourceClaimStatus" in pod["status"]  # DRAExtendedResource is on
