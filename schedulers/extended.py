"""Extended resources backed by devices (DRAExtendedResource): the scheduler's side.

A container that asks for an extended resource (``example.com/gpu: 2``) that a DeviceClass names
in ``spec.extendedResourceName``, or for ``deviceclass.resource.kubernetes.io/<class>``, gets
devices of that class on a node that does not advertise the resource in its allocatable (a node
that does serves it the device-plugin way, counted by the node fit). The scheduler then makes a
claim for the pod, the *special claim*: one request per container and resource, named
``container-<index>-request-<index of the resource among the container's sorted requests>``,
owned by the pod and marked with ``kube.dra.claims.EXTENDED_RESOURCE_CLAIM_ANNOTATION``. It lives in memory
under :data:`IN_MEMORY_NAME` until the binder creates it (``<pod>-extended-resources-<random>``),
allocates it, and records ``pod.status.extendedResourceClaimStatus`` (which container's resource
maps to which request, and the claim's name) before the binding.

Init containers that run to completion before the others may reuse the devices of the
long-running containers that come after them; of the requests they still need, only the largest
is made, and all of them map to it.

Which class serves a resource is ``kube.dra.extendedresources``' rule, which resource quota shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.dra.claims import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from kube.dra.extendedresources import is_dra_extended_resource_name
from kube.dra.pods import Resources, pod_requests
from kube.objects import Obj

IN_MEMORY_NAME = "<extended-resources>"  # not a valid object name, so never an existing claim's
STALE_CLAIM = "cannot schedule extended resource claim"


def names_extended_resources(pod: Mapping[str, Any]) -> bool:
    """Whether a container of the pod names a domain-prefixed resource (a cheap first look, before
    :func:`extended_requests` works the requests out)."""
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                if any("/" in name for name in resources.get(kind) or ()):
                    return True
    return False


def extended_requests(pod: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, int]:
    """The pod's requests of extended resources some class serves (whole units, none zero)."""
    out: dict[str, int] = {}
    for name, amount in pod_requests(pod, node_allocatable=False).items():
        if amount > 0 and name in mapping and is_dra_extended_resource_name(name):
            out[name] = int(amount)
    return out


def needed_on_node(extended: Mapping[str, int], allocatable: Resources) -> dict[str, int]:
    """The resources the node must serve with devices: those it does not advertise (or advertises as 0)."""
    return {name: amount for name, amount in extended.items() if not allocatable.get(name)}


def find_special_claim(pod: Mapping[str, Any], claims: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The special claim an earlier attempt created for this pod, if any."""
    meta = pod.get("metadata") or {}
    for claim in claims:
        if owned_special_claim_of(claim) == meta.get("uid"):
            return claim
    return None


def owned_special_claim_of(claim: Mapping[str, Any]) -> str | None:
    """The uid of the pod a special claim belongs to, None for any other claim."""
    meta = claim.get("metadata") or {}
    if (meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return None
    for owner in meta.get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") == "Pod":
            return str(owner.get("uid", ""))
    return None


@dataclass
class SpecialClaim:
    """The special claim as it would be created for one node, and the pod status entry that goes with it."""

    claim: Obj
    mappings: list[Obj]  # pod.status.extendedResourceClaimStatus.requestMappings


def _container_request(index: int, container: Mapping[str, Any], resource: str, class_name: str, reusable: list[Obj | None]) -> tuple[Obj | None, list[Obj]]:
    requests = (container.get("resources") or {}).get("requests") or {}
    if resource not in requests:
        return None, []
    try:
        wanted = int(str(requests[resource]))
    except ValueError:
        return None, []  # not a whole number: extended resources are counted in units
    if wanted <= 0:
        return None, []
    name = container.get("name", "")
    mappings: list[Obj] = []
    have = 0
    for other in reusable:
        if other is None:
            continue
        have += other["exactly"]["count"]
        mappings.append({"containerName": name, "resourceName": resource, "requestName": other["name"]})
        if have >= wanted:
            return None, mappings
    request_name = f"container-{index}-request-{sorted(requests).index(resource)}"
    request = {"name": request_name, "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": wanted - have}}
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return request, mappings


def requests_and_mappings(pod: Mapping[str, Any], needed: Mapping[str, int], mapping: Mapping[str, str]) -> tuple[list[Obj], list[Obj]]:
    """The special claim's device requests (sorted by name) and the container mappings."""
    spec = pod.get("spec") or {}
    inits = list(spec.get("initContainers") or [])
    containers = [*inits, *(spec.get("containers") or [])]
    long_lived = [i for i, c in enumerate(containers) if i >= len(inits) or c.get("restartPolicy") == "Always"]
    short_lived = [i for i in range(len(inits)) if i not in long_lived]
    requests: list[Obj] = []
    mappings: list[Obj] = []
    for resource in sorted(needed):
        class_name = mapping.get(resource)
        if class_name is None:
            continue
        long_requests: list[Obj | None] = [None] * len(containers)
        long_mappings: list[Obj] = []
        for i in long_lived:
            long_requests[i], found = _container_request(i, containers[i], resource, class_name, [])
            long_mappings += found
        largest: Obj | None = None
        short_names: set[str] = set()
        short_mappings: list[Obj] = []
        for i in short_lived:
            request, found = _container_request(i, containers[i], resource, class_name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings += found
        if largest is not None and len(short_names) > 1:
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


def special_claim(pod: Mapping[str, Any], needed: Mapping[str, int], mapping: Mapping[str, str]) -> SpecialClaim:
    """The in-memory special claim for ``needed`` (its uid is a stand-in until it is created)."""
    meta = pod.get("metadata") or {}
    requests, mappings = requests_and_mappings(pod, needed, mapping)
    claim: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": IN_MEMORY_NAME,
            "namespace": meta.get("namespace", ""),
            "uid": f"{IN_MEMORY_NAME}{meta.get('uid', '')}",
            "generateName": f"{meta.get('name', '')}-extended-resources-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta.get("name", ""), "uid": meta.get("uid", ""), "controller": True}],
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": requests}},
    }
    return SpecialClaim(claim, mappings)


def is_in_memory(claim: Mapping[str, Any]) -> bool:
    return (claim.get("metadata") or {}).get("name") == IN_MEMORY_NAME
