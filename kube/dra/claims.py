"""Writing a ResourceClaim's ``status.devices``: the one status field kubelets and drivers share;
and the claim the scheduler makes for a pod's extended resources backed by devices."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.objects import Obj

# Marks the claim the scheduler creates for a pod's extended resources served by devices.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def extended_resource_claim_name(pod: Obj) -> str | None:
    """The name of the pod's claim for extended resources (``status.extendedResourceClaimStatus``)."""
    name = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    return str(name) if name else None


def claim_path(namespace: str, name: str, subresource: str | None = None) -> str:
    return resource_path("resource.k8s.io", "v1", "resourceclaims", namespace, name, subresource)


async def update_device_status(
    client: KubeClient,
    namespace: str,
    name: str,
    compute: Callable[[Obj], Sequence[Mapping[str, Any]] | None],
    claim: Obj | None = None,
    *,
    attempts: int = 5,
) -> None:
    """PATCH ``status.devices`` to ``compute(claim)`` (None: nothing to change) under the claim's
    resourceVersion, re-reading the claim after a conflict. ``claim``: the copy last seen (read
    when None). A claim that is gone needs nothing."""
    for _attempt in range(attempts):
        if claim is None:
            try:
                claim = await client.get(claim_path(namespace, name))
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
        devices = compute(claim)
        if devices is None:
            return
        patch = {"metadata": {"resourceVersion": (claim.get("metadata") or {}).get("resourceVersion")}, "status": {"devices": devices or None}}
        try:
            await client.patch(claim_path(namespace, name, "status"), patch)
            return
        except ApiError as exc:
            if exc.code == 404:
                return
            if exc.code != 409:
                raise
        claim = None
    raise RuntimeError(f"could not update status.devices of ResourceClaim {namespace}/{name}: too many conflicts")
