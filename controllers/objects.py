"""What the controllers share about plain objects: index keys, owner references, and reads and
writes that tolerate a lagging informer cache."""

from __future__ import annotations

from kube.client import KubeClient
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj
from kube.objects import meta as metadata

ObjectKey = tuple[str, str]


def group_of(api_version: str) -> str:
    """The API group of ``group/version`` ("" for the core group's ``v1``)."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


# ---- index keys -----------------------------------------------------------------------


def pod_claim_names(pod: Obj) -> list[str]:
    """Names of the ResourceClaims a pod references: direct names, and generated names from its status."""
    spec = pod.get("spec") or {}
    generated = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    names = []
    for entry in spec.get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or (generated.get(entry.get("name")) if entry.get("resourceClaimTemplateName") else None)
        if name:
            names.append(str(name))
    return names


def pod_claim_keys(pod: Obj) -> list[ObjectKey]:
    """(namespace, claim name) for every claim the pod references."""
    namespace = str(metadata(pod).get("namespace") or "")
    return [(namespace, name) for name in pod_claim_names(pod)]


def pod_template_keys(pod: Obj) -> list[ObjectKey]:
    """(namespace, template name) for every ResourceClaimTemplate the pod references."""
    namespace = str(metadata(pod).get("namespace") or "")
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    return [(namespace, str(e["resourceClaimTemplateName"])) for e in entries if e.get("resourceClaimTemplateName")]


def owner_uids(obj: Obj) -> list[str]:
    """UIDs of every owner in metadata.ownerReferences."""
    return [str(ref["uid"]) for ref in metadata(obj).get("ownerReferences") or [] if ref.get("uid")]


def reserved_uids(claim: Obj) -> list[str]:
    """UIDs of every consumer in a claim's status.reservedFor."""
    return [str(ref["uid"]) for ref in (claim.get("status") or {}).get("reservedFor") or [] if ref.get("uid")]


def controller_owner(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in metadata(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


# ---- reads and writes ------------------------------------------------------------------


async def get_live(client: KubeClient, informer: Informer | None, path: str, namespace: str, name: str, uid: str) -> Obj | None:
    """The object with this ``uid`` (any, when empty): from the cache, or from the server when the
    cache does not have it (it may lag behind); None when it is gone."""
    if informer is not None:
        cached = informer.get(namespace, name)
        if cached is not None and (not uid or metadata(cached).get("uid") == uid):
            return cached
    try:
        obj = await client.get(path)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise
    return obj if not uid or metadata(obj).get("uid") == uid else None


async def set_finalizers(client: KubeClient, path: str, obj: Obj, finalizers: list[str]) -> Obj | None:
    """Write metadata.finalizers with a resourceVersion precondition: the object written (as it
    was, when it is gone), or None on a conflict."""
    patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": metadata(obj)["resourceVersion"]}}
    try:
        return await client.patch(path, patch)
    except ApiError as exc:
        if exc.code == 409:
            return None
        if exc.code == 404:
            return obj
        raise
