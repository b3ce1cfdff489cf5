"""Table-driven validation tests for ObjectMeta and the core kinds (Pod, Node, Namespace, Lease, Event).

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from app.registry.base import RequestContext
from app.registry.coordination.lease import STRATEGY as LEASES
from app.registry.core.event import STRATEGY as EVENTS
from app.registry.core.namespace import STATUS_STRATEGY as NAMESPACE_STATUS
from app.registry.core.namespace import STRATEGY as NAMESPACES
from app.registry.core.node import STATUS_STRATEGY as NODE_STATUS
from app.registry.core.node import STRATEGY as NODES
from app.registry.core.pod import STATUS_STRATEGY as POD_STATUS
from app.registry.core.pod import STRATEGY as PODS
from app.registry.objectmeta import (
    validate_object_meta,
    validate_object_meta_update,
    validate_qualified_name,
)
from kube.errors import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    FieldError,
)
from kube.features import FeatureGates

Obj = dict[str, Any]
Mutation = Callable[[Obj], object]


def ctx(**gates: bool) -> RequestContext:
    return RequestContext(feature_gates=FeatureGates(gates))


def pairs(errs: list[FieldError]) -> list[tuple[str, str]]:
    return sorted((e.field, e.reason) for e in errs)


def mutated(base: Obj, mutate: Mutation) -> Obj:
    obj = copy.deepcopy(base)
    mutate(obj)
    return obj


def setitem(path: str, value: Any) -> Mutation:
    """A mutation that sets a dotted path (list indexes as numbers) to ``value``."""
    def apply(obj: Obj) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = obj
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return apply


# ---------------------------------------------------------------------------------------------
# ObjectMeta
# ---------------------------------------------------------------------------------------------

META_BASE: Obj = {
    "metadata": {
        "name": "web",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "web"},
        "annotations": {"example.com/note": "hello"},
        "finalizers": ["example.com/cleanup", "kubernetes"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", "controller": True},
        ],
    }
}

META_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("bad name", setitem("metadata.name", "Web_1"), [("metadata.name", INVALID)]),
    ("long name", setitem("metadata.name", "a" * 254), [("metadata.name", INVALID)]),
    ("no name", lambda o: o["metadata"].pop("name"), [("metadata.name", REQUIRED)]),
    ("bad generateName", lambda o: (o["metadata"].pop("name"), o["metadata"].update(generateName="Bad_")), [("metadata.generateName", INVALID)]),
    ("name wrong type", setitem("metadata.name", 5), [("metadata.name", INVALID), ("metadata.name", REQUIRED)]),
    ("no namespace", lambda o: o["metadata"].pop("namespace"), [("metadata.namespace", REQUIRED)]),
    ("bad namespace", setitem("metadata.namespace", "Not.A.Label"), [("metadata.namespace", INVALID)]),
    ("negative generation", setitem("metadata.generation", -1), [("metadata.generation", INVALID)]),
    ("bad label key", setitem("metadata.labels", {"a/b/c": "x"}), [("metadata.labels", INVALID)]),
    ("bad label value", setitem("metadata.labels", {"k": "-bad-"}), [("metadata.labels", INVALID)]),
    ("labels wrong type", setitem("metadata.labels", ["x"]), [("metadata.labels", INVALID)]),
    ("bad annotation key", setitem("metadata.annotations", {"-x": "y"}), [("metadata.annotations", INVALID)]),
    ("annotations too big", setitem("metadata.annotations", {"k": "x" * (256 * 1024)}), [("metadata.annotations", TOO_LONG)]),
    ("bad finalizer", setitem("metadata.finalizers", ["a/b/c"]), [("metadata.finalizers", INVALID)]),
    ("finalizer without domain", setitem("metadata.finalizers", ["cleanup"]), [("metadata.finalizers[0]", INVALID)]),
    ("orphan and foreground", setitem("metadata.finalizers", ["orphan", "foregroundDeletion"]), [("metadata.finalizers", INVALID)]),
    ("finalizers wrong type", setitem("metadata.finalizers", "x"), [("metadata.finalizers", INVALID)]),
    (
        "owner ref missing fields",
        setitem("metadata.ownerReferences", [{"apiVersion": "", "kind": "", "name": "", "uid": ""}]),
        [
            ("metadata.ownerReferences.apiVersion", INVALID),
            ("metadata.ownerReferences.kind", INVALID),
            ("metadata.ownerReferences.name", INVALID),
            ("metadata.ownerReferences.uid", INVALID),
        ],
    ),
    (
        "two controllers",
        setitem("metadata.ownerReferences", [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True},
        ]),
        [("metadata.ownerReferences", INVALID)],
    ),
    (
        "event owner",
        setitem("metadata.ownerReferences", [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]),
        [("metadata.ownerReferences", INVALID)],
    ),
    ("managed fields operation", setitem("metadata.managedFields", [{"operation": "Patch"}]), [("metadata.managedFields[0].operation", INVALID)]),
    ("metadata wrong type", setitem("metadata", "x"), [("metadata", INVALID)]),
]


def test_valid_object_meta() -> None:
    assert validate_object_meta(copy.deepcopy(META_BASE), True, "subdomain") == []
    generated = {"metadata": {"generateName": "web-", "namespace": "default"}}
    assert validate_object_meta(generated, True, "subdomain") == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_invalid_object_meta(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(validate_object_meta(mutated(META_BASE, mutate), True, "subdomain")) == sorted(expected)


def test_object_meta_messages() -> None:
    errs = validate_object_meta(mutated(META_BASE, setitem("metadata.finalizers", ["cleanup"])), True, "subdomain")
    assert str(errs[0]) == (
        'metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified'
    )
    errs = validate_object_meta({"metadata": {"name": "n", "namespace": "x"}}, False, "subdomain")
    assert [str(e) for e in errs] == ["metadata.namespace: Forbidden: not allowed on this type"]
    # Lease and Event skip core's finalizer rule.
    assert validate_object_meta(mutated(META_BASE, setitem("metadata.finalizers", ["cleanup"])), True, "subdomain", kube_finalizers=False) == []


def test_qualified_name_messages() -> None:
    assert [e.detail for e in validate_qualified_name("a/b/c", "x")] == [
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]


META_UPDATE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("name", setitem("metadata.name", "other"), [("metadata.name", INVALID)]),
    ("namespace", setitem("metadata.namespace", "other"), [("metadata.namespace", INVALID)]),
    ("uid", setitem("metadata.uid", "u2"), [("metadata.uid", INVALID)]),
    ("creationTimestamp", setitem("metadata.creationTimestamp", "2030-01-01T00:00:00Z"), [("metadata.creationTimestamp", INVALID)]),
    ("generation decremented", setitem("metadata.generation", 1), [("metadata.generation", INVALID)]),
    ("bad label", setitem("metadata.labels", {"k": "-"}), [("metadata.labels", INVALID)]),
    ("kube finalizer", setitem("metadata.finalizers", ["x"]), [("metadata.finalizers[0]", INVALID)]),
]


def _stored_meta() -> Obj:
    obj = copy.deepcopy(META_BASE)
    obj["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z", generation=2, resourceVersion="5")
    return obj


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in META_UPDATE_CASES], ids=[c[0] for c in META_UPDATE_CASES])
def test_invalid_object_meta_update(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    old = _stored_meta()
    assert pairs(validate_object_meta_update(mutated(old, mutate), old)) == sorted(expected)


def test_object_meta_update_messages() -> None:
    old = _stored_meta()
    assert validate_object_meta_update(copy.deepcopy(old), old) == []
    errs = validate_object_meta_update(mutated(old, setitem("metadata.name", "other")), old)
    assert str(errs[0]) == 'metadata.name: Invalid value: "other": field is immutable'
    old["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    new = mutated(old, setitem("metadata.finalizers", ["example.com/cleanup", "kubernetes", "example.com/new"]))
    assert [str(e) for e in validate_object_meta_update(new, old)] == [
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/new"}'
    ]


# ---------------------------------------------------------------------------------------------
# Pod
# ---------------------------------------------------------------------------------------------


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
    gates._values["DynamicResourceAllocation"] = False  # type: ignore[attr-defined]
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


# ---------------------------------------------------------------------------------------------
# Node
# ---------------------------------------------------------------------------------------------

NODE: Obj = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "spec": {"taints": [{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"], "providerID": "sim://node-1"},
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/gpu": "2"},
        "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110"},
        "declaredFeatures": ["DRANodeAllocatableResources"],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}

NODE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("negative capacity", setitem("status.capacity.cpu", "-1"), [("status.capacity.cpu", INVALID)]),
    ("unparsable allocatable", setitem("status.allocatable.memory", "lots"), [("status.allocatable.memory", INVALID)]),
    ("fractional pods", setitem("status.capacity.pods", "1.5"), [("status.capacity.pods", INVALID)]),
    ("fractional extended resource", lambda n: n["status"]["capacity"].update({"example.com/gpu": "0.5"}), [("status.capacity.example.com/gpu", INVALID)]),
    ("quantity wrong type", setitem("status.capacity.cpu", True), [("status.capacity.cpu", INVALID)]),
    ("capacity wrong type", setitem("status.capacity", ["8"]), [("status.capacity", INVALID)]),
    ("duplicate feature", setitem("status.declaredFeatures", ["A", "A"]), [("status.declaredFeatures[1]", DUPLICATE)]),
    ("empty feature", setitem("status.declaredFeatures", [""]), [("status.declaredFeatures[0]", REQUIRED)]),
    ("feature wrong type", setitem("status.declaredFeatures", [1]), [("status.declaredFeatures[0]", INVALID)]),
    ("features wrong type", setitem("status.declaredFeatures", "A"), [("status.declaredFeatures", INVALID)]),
    ("taint effect", setitem("spec.taints.0.effect", "Sometimes"), [("metadata.taints[0].effect", NOT_SUPPORTED)]),
    ("taint no effect", setitem("spec.taints.0.effect", ""), [("metadata.taints[0].effect", REQUIRED)]),
    ("taint key", setitem("spec.taints.0.key", "a/b/c"), [("metadata.taints[0].key", INVALID)]),
    ("taint value", setitem("spec.taints.0.value", "-x-"), [("metadata.taints[0].value", INVALID)]),
    ("duplicate taint", lambda n: n["spec"]["taints"].append(dict(n["spec"]["taints"][0])), [("metadata.taints[1]", DUPLICATE)]),
    ("spec wrong type", setitem("spec", 1), [("spec", INVALID)]),
]


def test_valid_node() -> None:
    assert NODES.validate_create(copy.deepcopy(NODE), ctx()) == []
    assert NODES.validate_update(copy.deepcopy(NODE), NODE, ctx()) == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_invalid_node(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NODES.validate_create(mutated(NODE, mutate), ctx())) == sorted(expected)


NODE_UPDATE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("podCIDRs", setitem("spec.podCIDRs", ["10.0.1.0/24"]), [("spec.podCIDRs", FORBIDDEN)]),
    ("providerID", setitem("spec.providerID", "sim://other"), [("spec.providerID", FORBIDDEN)]),
    ("duplicate address", lambda n: n["status"]["addresses"].append(dict(n["status"]["addresses"][0])), [("status.addresses[1]", DUPLICATE)]),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NODE_UPDATE_CASES], ids=[c[0] for c in NODE_UPDATE_CASES])
def test_invalid_node_update(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NODES.validate_update(mutated(NODE, mutate), NODE, ctx())) == sorted(expected)
    assert pairs(NODE_STATUS.validate_update(mutated(NODE, mutate), NODE, ctx())) == sorted(expected)


# ---------------------------------------------------------------------------------------------
# Namespace
# ---------------------------------------------------------------------------------------------

NAMESPACE: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

NAMESPACE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("finalizer without domain", setitem("spec.finalizers", ["cleanup"]), [("spec.finalizers", INVALID)]),
    ("finalizer three parts", setitem("spec.finalizers", ["a/b/c"]), [("spec.finalizers", INVALID)]),
    ("finalizer bad prefix", setitem("spec.finalizers", ["Bad_Domain/x"]), [("spec.finalizers", INVALID)]),
    ("finalizer bad name", setitem("spec.finalizers", ["example.com/-x"]), [("spec.finalizers", INVALID)]),
    # An empty name part is both empty and off the regex: two messages, as upstream.
    ("finalizer empty name", setitem("spec.finalizers", ["example.com/"]), [("spec.finalizers", INVALID)] * 2),
    ("finalizer empty", setitem("spec.finalizers", [""]), [("spec.finalizers", INVALID)] * 3),
    ("two bad finalizers", setitem("spec.finalizers", ["x", "y"]), [("spec.finalizers", INVALID), ("spec.finalizers", INVALID)]),
    ("finalizer long", setitem("spec.finalizers", ["example.com/" + "a" * 64]), [("spec.finalizers", INVALID)]),
    ("finalizers wrong type", setitem("spec.finalizers", "kubernetes"), [("spec.finalizers", INVALID)]),
    ("finalizer wrong type", setitem("spec.finalizers", [1]), [("spec.finalizers", INVALID)]),
    ("spec wrong type", setitem("spec", []), [("spec", INVALID)]),
    ("prefix empty", setitem("spec.finalizers", ["/x"]), [("spec.finalizers", INVALID)]),
    ("uppercase unqualified", setitem("spec.finalizers", ["Kubernetes"]), [("spec.finalizers", INVALID)]),
    ("space", setitem("spec.finalizers", ["example.com/a b"]), [("spec.finalizers", INVALID)]),
    ("long prefix", setitem("spec.finalizers", ["a" * 254 + "/x"]), [("spec.finalizers", INVALID)]),
]


def test_valid_namespace() -> None:
    assert NAMESPACES.validate_create(copy.deepcopy(NAMESPACE), ctx()) == []
    assert NAMESPACES.validate_create(mutated(NAMESPACE, setitem("spec.finalizers", ["example.com/x", "orphan"])), ctx()) == []
    assert validate_object_meta(NAMESPACE, False, NAMESPACES.name_rule) == []
    assert pairs(validate_object_meta(mutated(NAMESPACE, setitem("metadata.name", "a.b")), False, NAMESPACES.name_rule)) == [("metadata.name", INVALID)]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES])
def test_invalid_namespace(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NAMESPACES.validate_create(mutated(NAMESPACE, mutate), ctx())) == sorted(expected)


def test_namespace_status_phase() -> None:
    bad = mutated(NAMESPACE, setitem("status.phase", "Terminating"))
    assert [str(e) for e in NAMESPACE_STATUS.validate_update(bad, NAMESPACE, ctx())] == [
        "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
    ]
    deleting = mutated(NAMESPACE, setitem("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"))
    assert pairs(NAMESPACE_STATUS.validate_update(deleting, NAMESPACE, ctx())) == [("status.Phase", INVALID)]


# ---------------------------------------------------------------------------------------------
# Lease
# ---------------------------------------------------------------------------------------------

LEASE: Obj = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
    "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0},
}

LEASE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("zero duration", setitem("spec.leaseDurationSeconds", 0), [("spec.leaseDurationSeconds", INVALID)]),
    ("negative duration", setitem("spec.leaseDurationSeconds", -5), [("spec.leaseDurationSeconds", INVALID)]),
    ("duration wrong type", setitem("spec.leaseDurationSeconds", "40"), [("spec.leaseDurationSeconds", INVALID)]),
    ("duration bool", setitem("spec.leaseDurationSeconds", True), [("spec.leaseDurationSeconds", INVALID)]),
    ("negative transitions", setitem("spec.leaseTransitions", -1), [("spec.leaseTransitions", INVALID)]),
    ("transitions wrong type", setitem("spec.leaseTransitions", 1.5), [("spec.leaseTransitions", INVALID)]),
    ("unknown strategy", setitem("spec.strategy", "Newest"), [("spec.strategy.strategy", NOT_SUPPORTED)]),
    ("bad qualified strategy", setitem("spec.strategy", "example.com/-x"), [("spec.strategy.strategy", INVALID)]),
    ("strategy three parts", setitem("spec.strategy", "a/b/c"), [("spec.strategy.strategy", INVALID)]),
    ("strategy wrong type", setitem("spec.strategy", 1), [("spec.strategy", INVALID), ("spec.strategy.strategy", NOT_SUPPORTED)]),
    ("preferred holder without strategy", setitem("spec.preferredHolder", "node-2"), [("spec.preferredHolder", FORBIDDEN)]),
    ("holder wrong type", setitem("spec.holderIdentity", 7), [("spec.holderIdentity", INVALID)]),
    ("renewTime wrong type", setitem("spec.renewTime", 7), [("spec.renewTime", INVALID)]),
    ("acquireTime wrong type", setitem("spec.acquireTime", []), [("spec.acquireTime", INVALID)]),
    ("spec wrong type", setitem("spec", "x"), [("spec", INVALID)]),
    ("two problems", lambda o: o["spec"].update(leaseDurationSeconds=0, leaseTransitions=-1), [("spec.leaseDurationSeconds", INVALID), ("spec.leaseTransitions", INVALID)]),
]


def test_valid_lease() -> None:
    assert LEASES.validate_create(copy.deepcopy(LEASE), ctx()) == []
    coordinated = mutated(LEASE, lambda o: o["spec"].update(strategy="OldestEmulationVersion", preferredHolder="node-2"))
    assert LEASES.validate_update(coordinated, LEASE, ctx()) == []
    assert LEASES.object_meta_kube_finalizers is False


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in LEASE_CASES], ids=[c[0] for c in LEASE_CASES])
def test_invalid_lease(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(LEASES.validate_create(mutated(LEASE, mutate), ctx())) == sorted(expected)
    assert pairs(LEASES.validate_update(mutated(LEASE, mutate), LEASE, ctx())) == sorted(expected)


# ---------------------------------------------------------------------------------------------
# Event (legacy core/v1 rules)
# ---------------------------------------------------------------------------------------------

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
    ("new style no controller", lambda e: e.update({**NEW_STYLE, "reportingComponent": ""}), [("reportingController", REQUIRED), ("reportingController", INVALID), ("reportingController", INVALID)]),
    ("new style bad controller", lambda e: e.update({**NEW_STYLE, "reportingComponent": "a/b/c"}), [("reportingController", INVALID)]),
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
