"""PodGroups and their resource claims (KEP-5729, gate DRAWorkloadResourceClaims): the rules the
claim controller, the scheduler and the kubelet simulator apply alike.

A pod belongs to the PodGroup its ``spec.schedulingGroup.podGroupName`` names, in its own
namespace. A pod claim entry uses the group's claim when it matches a PodGroup claim exactly (same
name, same resourceClaimName, same resourceClaimTemplateName); otherwise it is the pod's own claim.
A claim the group uses is reserved for the PodGroup (one ``status.reservedFor`` entry), and any pod
naming that group may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube.objects import Obj

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "podgroups"
KIND = "PodGroup"
PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
# The gang-scheduling condition a PodGroup gets once its minimum has been scheduled together.
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


def pod_group_name(pod: Mapping[str, Any]) -> str | None:
    """The name of the PodGroup the pod belongs to, if any."""
    group = (pod.get("spec") or {}).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, dict) else None
    return name if isinstance(name, str) and name else None


def group_claims(group: Mapping[str, Any] | None) -> dict[str, Obj]:
    """The group's ``spec.resourceClaims`` by name."""
    claims = ((group or {}).get("spec") or {}).get("resourceClaims") or []
    return {c["name"]: c for c in claims if isinstance(c, dict) and c.get("name")}


def matching_group_claim(entry: Mapping[str, Any], group: Mapping[str, Any] | None) -> Obj | None:
    """The group's claim this pod claim entry uses: one with the same name and the same source."""
    found = group_claims(group).get(str(entry.get("name") or ""))
    if found is None:
        return None
    same = all(found.get(key) == entry.get(key) for key in ("resourceClaimName", "resourceClaimTemplateName"))
    return found if same else None


def group_claim_name(group_claim: Mapping[str, Any], group: Mapping[str, Any]) -> str | None:
    """The ResourceClaim a group claim stands for: the named one, or the one generated from the
    template (``status.resourceClaimStatuses``); None while the controller has not made it yet."""
    if group_claim.get("resourceClaimName"):
        return str(group_claim["resourceClaimName"])
    for status in (group.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == group_claim.get("name"):
            name = status.get("resourceClaimName")
            return str(name) if name else None
    return None


def group_reference(group: Mapping[str, Any]) -> Obj:
    """The ``status.reservedFor`` entry that reserves a claim for the group."""
    meta = group.get("metadata") or {}
    return {"apiGroup": GROUP, "resource": PLURAL, "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def is_group_reference(ref: Mapping[str, Any]) -> bool:
    return ref.get("apiGroup") == GROUP and ref.get("resource") == PLURAL


def reserved_for_pod_group(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the claim is reserved for the pod's group (by name, as the kubelet checks)."""
    name = pod_group_name(pod)
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return name is not None and any(is_group_reference(r) and r.get("name") == name for r in reserved)


def owned_by_pod_group(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether a generated claim was made for the pod's group (its controller owner is that PodGroup)."""
    name = pod_group_name(pod)
    owners = (claim.get("metadata") or {}).get("ownerReferences") or []
    return name is not None and any(
        o.get("controller") and o.get("kind") == KIND and str(o.get("apiVersion", "")).startswith(f"{GROUP}/") and o.get("name") == name
        for o in owners
    )


def gang_min_count(group: Mapping[str, Any] | None) -> int:
    """The gang's minimum (``schedulingPolicy.gang.minCount``), 0 for a basic group."""
    gang = (((group or {}).get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    count = gang.get("minCount") if isinstance(gang, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else 0
