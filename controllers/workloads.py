"""What the workload controllers share (upstream's pkg/controller/controller_utils.go and
controller_ref_manager.go): expectations of their own writes, pods made from a template, slow-start
batches, the order pods are deleted in, claiming (adopting and releasing) pods by selector, and
owner references.

The controllers read pods through one informer and one index of pods by their controlling owner
(``pods_by_controller``: orphans under their namespace), as upstream's controllers share the pod
informer and its controller-UID index.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from controllers.objects import controller_owner, metadata
from kube.client import KubeClient, record_event, resource_path
from kube.dra.pods import is_pod_active, is_pod_ready, ready_since, seconds_until_available
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.labels import LabelSelector, selector_from_label_selector_object
from kube.objects import Obj
from kube.timeutil import parse_time

log = logging.getLogger("controllers")

# Upstream's limits: creates per sync (burstReplicas), the first slow-start batch, and how long
# expectations wait for the informer before a controller acts again anyway.
BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH = 1
EXPECTATIONS_TIMEOUT = 5 * 60.0
# The reason a pod's creation failed because its namespace is being deleted: not worth an event.
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}

OwnerIndexKey = tuple[str, str]


def controller_index_keys(obj: Obj) -> list[OwnerIndexKey]:
    """An object's key in ``pods_by_controller``: its controller's UID, or its namespace when it
    has none (the orphans a controller may adopt)."""
    ref = controller_owner(obj)
    if ref is not None and ref.get("uid"):
        return [("uid", str(ref["uid"]))]
    return [("orphan", str(metadata(obj).get("namespace") or ""))]


def owned_and_orphans(index: Index[OwnerIndexKey], owner: Obj) -> list[Obj]:
    """FilterPodsByOwner with orphans: the objects ``owner`` controls and the orphans of its namespace."""
    meta = metadata(owner)
    return [*index.get(("uid", str(meta.get("uid") or ""))), *index.get(("orphan", str(meta.get("namespace") or "")))]


def owner_reference(owner: Obj, api_version: str, kind: str) -> Obj:
    """The controller reference to ``owner`` its dependents carry (controller and blockOwnerDeletion)."""
    meta = metadata(owner)
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_owner(obj)
    return ref is not None and ref.get("uid") == metadata(owner).get("uid")


def parse_selector(selector: Any) -> LabelSelector | None:
    """LabelSelectorAsSelector: None for a selector that cannot be parsed (a nil one selects nothing)."""
    try:
        return selector_from_label_selector_object(selector if isinstance(selector, dict) else None)
    except ApiError:
        return None


def labels_of(obj: Obj) -> dict[str, str]:
    return dict(metadata(obj).get("labels") or {})


def pod_key(pod: Obj) -> str:
    meta = metadata(pod)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def key_of(obj: Obj) -> tuple[str, str]:
    meta = metadata(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


# ---- expectations -----------------------------------------------------------------------------


@dataclass
class _Expected:
    creations: int = 0
    deletions: int = 0
    # The pods (namespace/name) whose deletion is expected: each is observed once, as an update
    # that sets its deletionTimestamp or as its delete.
    deleting: set[str] = field(default_factory=set)
    since: float = field(default_factory=time.monotonic)


class Expectations:
    """Upstream's UIDTrackingControllerExpectations: what a controller's last sync created and
    deleted and the informer has not shown yet. A controller acts again only once they are seen
    (or after five minutes), so a lagging cache never makes it create or delete twice."""

    def __init__(self, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self.timeout = timeout
        self._by_key: dict[str, _Expected] = {}

    def satisfied(self, key: str) -> bool:
        expected = self._by_key.get(key)
        if expected is None:
            return True
        fulfilled = expected.creations <= 0 and expected.deletions <= 0
        return fulfilled or time.monotonic() - expected.since > self.timeout

    def expect(self, key: str, creations: int, pod_keys: Iterable[str] = ()) -> None:
        """SetExpectations: ``creations`` pods to appear and these pods (namespace/name) to go."""
        deleting = set(pod_keys)
        self._by_key[key] = _Expected(creations=creations, deletions=len(deleting), deleting=deleting)

    def expect_creations(self, key: str, count: int) -> None:
        self.expect(key, count)

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self.expect(key, 0, pod_keys)

    def creation_observed(self, key: str) -> None:
        expected = self._by_key.get(key)
        if expected is not None:
            expected.creations -= 1

    def deletion_observed(self, key: str, pod: str) -> None:
        expected = self._by_key.get(key)
        if expected is not None and pod in expected.deleting:
            expected.deleting.discard(pod)
            expected.deletions -= 1

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)

    def pending(self, key: str) -> tuple[int, int]:
        """(creations, deletions) still expected (for tests and logs)."""
        expected = self._by_key.get(key)
        return (expected.creations, expected.deletions) if expected is not None else (0, 0)


# ---- pods from a template ----------------------------------------------------------------------


def generate_name_prefix(owner_name: str) -> str:
    """getPodsPrefix: ``<owner>-`` (the server appends five characters; it cuts a long prefix)."""
    return f"{owner_name}-"


def pod_from_template(template: Obj, owner_ref: Obj | None, generate_name: str) -> Obj:
    """GetPodFromTemplate: the template's labels, annotations, finalizers and spec, named after the owner."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {"generateName": generate_name, "labels": dict(tmeta.get("labels") or {})}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if owner_ref is not None:
        meta["ownerReferences"] = [dict(owner_ref)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


class PodControl:
    """Creates and deletes a controller's pods, recording upstream's events on the owner."""

    def __init__(self, client: KubeClient, component: str) -> None:
        self.client = client
        self.component = component

    async def event(self, owner: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        try:
            await record_event(self.client, owner, reason, message, kind, self.component)
        except Exception as exc:  # events are best effort, as upstream's recorder
            log.debug("event not recorded", extra={"reason": reason, "error": str(exc)})

    async def create(self, namespace: str, pod: Obj, owner: Obj) -> Obj | None:
        """Create ``pod``; None when the namespace is being deleted (nothing to create there)."""
        if not pod["metadata"].get("labels"):
            raise ValueError("unable to create pods, no labels")
        try:
            created = await self.client.create(resource_path("", "v1", "pods", namespace), pod)
        except ApiError as exc:
            if _has_cause(exc, NAMESPACE_TERMINATING_CAUSE):
                return None
            await self.event(owner, "FailedCreate", f"Error creating: {exc.message}", "Warning")
            raise
        await self.event(owner, "SuccessfulCreate", f"Created pod: {metadata(created)['name']}")
        return created

    async def delete(self, namespace: str, name: str, owner: Obj) -> None:
        """Delete a pod; ApiError 404 when it is gone already (no event then)."""
        try:
            await self.client.delete(resource_path("", "v1", "pods", namespace, name))
        except ApiError as exc:
            if exc.code != 404:
                await self.event(owner, "FailedDelete", f"Error deleting: {exc.message}", "Warning")
            raise
        await self.event(owner, "SuccessfulDelete", f"Deleted pod: {name}")


def _has_cause(exc: ApiError, cause: str) -> bool:
    details = exc.details if isinstance(exc.details, dict) else {}
    return any(isinstance(c, dict) and c.get("reason") == cause for c in details.get("causes") or [])


async def slow_start_batch(count: int, call: Callable[[], Awaitable[Any]], initial: int = SLOW_START_INITIAL_BATCH) -> tuple[int, Exception | None]:
    """Call ``call`` ``count`` times in batches that double after each fully successful one (1, 2,
    4, ...), so that a failure every call would share (a quota, a bad template) costs one request,
    not ``count``. Returns how many calls succeeded and the first error (later batches are skipped)."""
    remaining, successes = count, 0
    batch = min(remaining, initial)
    while batch > 0:
        results = await asyncio.gather(*(call() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception)]
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


# ---- which pods to delete first -----------------------------------------------------------------


def _deletion_cost(pod: Obj) -> int:
    raw = (metadata(pod).get("annotations") or {}).get(POD_DELETION_COST)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def _unix(timestamp: str) -> float | None:
    parsed = parse_time(timestamp) if timestamp else None
    return parsed.timestamp() if parsed is not None else None


def _log_rank(when: float | None, now: float) -> int:
    """The base-2 logarithm of how long ago ``when`` was, in nanoseconds (-1 for the future)."""
    if when is None:
        return -1
    elapsed = (now - when) * 1e9
    return int(math.log2(elapsed)) if elapsed > 0 else -1


def _restarts(pod: Obj) -> tuple[int, int]:
    status = pod.get("status") or {}
    regular = max((int(s.get("restartCount") or 0) for s in status.get("containerStatuses") or []), default=0)
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    sidecar = max((int(s.get("restartCount") or 0) for s in status.get("initContainerStatuses") or [] if s.get("name") in sidecars), default=0)
    return regular, sidecar


def _compare_for_deletion(a: tuple[Obj, int], b: tuple[Obj, int], now: float) -> int:
    """ActivePodsWithRanks.Less as a comparison: negative when ``a`` should go first."""
    pa, ra = a
    pb, rb = b
    node_a, node_b = (pa.get("spec") or {}).get("nodeName") or "", (pb.get("spec") or {}).get("nodeName") or ""
    if node_a != node_b and (not node_a or not node_b):
        return -1 if not node_a else 1
    phase_a = _PHASE_ORDER.get((pa.get("status") or {}).get("phase") or "", 0)
    phase_b = _PHASE_ORDER.get((pb.get("status") or {}).get("phase") or "", 0)
    if phase_a != phase_b:
        return -1 if phase_a < phase_b else 1
    ready_a, ready_b = is_pod_ready(pa), is_pod_ready(pb)
    if ready_a != ready_b:
        return -1 if not ready_a else 1
    cost_a, cost_b = _deletion_cost(pa), _deletion_cost(pb)
    if cost_a != cost_b:
        return -1 if cost_a < cost_b else 1
    if ra != rb:
        return -1 if ra > rb else 1
    uid_order = -1 if str(metadata(pa).get("uid")) < str(metadata(pb).get("uid")) else 1
    if ready_a and ready_b:
        since_a, since_b = ready_since(pa), ready_since(pb)
        if since_a != since_b:
            if not since_a or not since_b:
                return -1 if not since_a else 1
            diff = _log_rank(_unix(since_a), now) - _log_rank(_unix(since_b), now)
            return uid_order if diff == 0 else (-1 if diff < 0 else 1)
    restarts_a, restarts_b = _restarts(pa), _restarts(pb)
    if restarts_a != restarts_b:
        return -1 if restarts_a > restarts_b else 1
    created_a, created_b = metadata(pa).get("creationTimestamp") or "", metadata(pb).get("creationTimestamp") or ""
    if created_a != created_b:
        if not created_a or not created_b:
            return -1 if not created_a else 1
        diff = _log_rank(_unix(created_a), now) - _log_rank(_unix(created_b), now)
        return uid_order if diff == 0 else (-1 if diff < 0 else 1)
    return 0


def pods_to_delete(pods: list[Obj], related: list[Obj], count: int, now: float | None = None) -> list[Obj]:
    """getPodsToDelete: the ``count`` pods to delete first. Unscheduled before scheduled, pending
    before running, unready before ready, cheaper (pod-deletion-cost) first, those sharing a node
    with more related pods first, then the most recently ready, most restarted, youngest."""
    if count >= len(pods):
        return list(pods)
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [(pod, on_node.get((pod.get("spec") or {}).get("nodeName") or "", 0)) for pod in pods]
    moment = time.time() if now is None else now

    def compare(a: tuple[Obj, int], b: tuple[Obj, int]) -> int:
        return _compare_for_deletion(a, b, moment)

    ranked.sort(key=functools.cmp_to_key(compare))
    return [pod for pod, _rank in ranked[:count]]


def next_availability_check(pods: Iterable[Obj], min_ready_seconds: int, now: float) -> float | None:
    """FindMinNextPodAvailabilityCheck: seconds until the next ready pod becomes available."""
    waits = [w for w in (seconds_until_available(pod, min_ready_seconds, now) for pod in pods) if w is not None]
    return min(waits) if waits else None


# ---- claiming pods --------------------------------------------------------------------------------


class Claimer:
    """Upstream's ControllerRefManager for one owner and one kind of dependent (pods, or a
    Deployment's ReplicaSets): the dependents it controls that its selector no longer matches are
    released, matching orphans adopted (once a fresh read of the owner shows it is not being
    deleted), by strategic merge patches with the dependent's UID as precondition."""

    def __init__(
        self,
        client: KubeClient,
        owner: Obj,
        owner_ref: Obj,
        selector: LabelSelector,
        fresh_owner: Callable[[], Awaitable[Obj | None]],
        path_of: Callable[[Obj], str] | None = None,
        finalizers: list[str] | None = None,
    ) -> None:
        self.client = client
        self.owner = owner
        self.owner_ref = owner_ref
        self.selector = selector
        self._fresh_owner = fresh_owner
        self._path_of = path_of or _pod_path
        # Finalizers added with the owner reference on adoption and removed with it on release
        # (the Job controller's tracking finalizer).
        self._finalizers = list(finalizers or [])
        self._can_adopt: bool | None = None

    async def can_adopt(self) -> bool:
        if self._can_adopt is None:
            fresh = await self._fresh_owner()
            self._can_adopt = fresh is not None and metadata(fresh).get("uid") == metadata(self.owner).get("uid") and not metadata(fresh).get("deletionTimestamp")
        return self._can_adopt

    async def claim(self, objects: Iterable[Obj], match: Callable[[Obj], bool] | None = None) -> list[Obj]:
        """The dependents this owner controls after adopting and releasing; patch failures other
        than a dependent gone or invalid are raised once every dependent had its turn."""
        claimed: list[Obj] = []
        failures: list[ApiError] = []
        owner_meta = metadata(self.owner)
        for obj in objects:
            matches = self.selector.matches(labels_of(obj)) and (match is None or match(obj))
            ref = controller_owner(obj)
            try:
                if ref is not None:
                    if ref.get("uid") != owner_meta.get("uid"):
                        continue
                    if matches:
                        claimed.append(obj)
                    elif not owner_meta.get("deletionTimestamp"):
                        release: Obj = {"ownerReferences": [{"$patch": "delete", "uid": owner_meta["uid"]}]}
                        if self._finalizers:
                            release["$deleteFromPrimitiveList/finalizers"] = self._finalizers
                        await self._patch(obj, release)
                    continue
                if owner_meta.get("deletionTimestamp") or not matches or metadata(obj).get("deletionTimestamp"):
                    continue
                if metadata(obj).get("namespace") != owner_meta.get("namespace"):
                    continue
                if not await self.can_adopt():
                    continue
                adopt: Obj = {"ownerReferences": [self.owner_ref]}
                if self._finalizers:
                    adopt["finalizers"] = self._finalizers
                adopted = await self._patch(obj, adopt)
                if adopted is not None:
                    claimed.append(adopted)
            except ApiError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]
        return claimed

    async def _patch(self, obj: Obj, meta: Obj) -> Obj | None:
        """A strategic merge patch of the dependent's metadata with its UID; None when it is gone."""
        try:
            return await self.client.patch(self._path_of(obj), {"metadata": {**meta, "uid": metadata(obj)["uid"]}}, patch_type="strategic")
        except ApiError as exc:
            if exc.code in (404, 422):  # gone, or (releasing) invalid: nothing to do, as upstream
                return None
            raise


def _pod_path(pod: Obj) -> str:
    meta = metadata(pod)
    return resource_path("", "v1", "pods", meta.get("namespace"), meta["name"])


# ---- hashes -----------------------------------------------------------------------------------------

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each character mapped onto the consonants and digits of generated names."""
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in text)


def compute_hash(template: Any, collision_count: int | None = None) -> str:
    """controller.ComputeHash: FNV-1a (32 bits) of the template, and of the collision count when
    there is one, as a short safe string (upstream hashes Go's dump of the struct; this one hashes
    the template's canonical JSON, so the values differ from upstream's, the form does not)."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\0\0\0\0"
    return safe_encode(str(fnv32(data, alternate=True)))


def fnv32(data: bytes, alternate: bool = False) -> int:
    """The 32-bit FNV-1 hash of ``data`` (FNV-1a with ``alternate``), as Go's hash/fnv computes it."""
    value = 0x811C9DC5
    prime, mask = 0x01000193, 0xFFFFFFFF
    for byte in data:
        # FNV-1a mixes the byte in before multiplying, FNV-1 after.
        value = ((value ^ byte) * prime) & mask if alternate else ((value * prime) & mask) ^ byte
    return value


class ControllerOwners:
    """A workload kind's objects as owners of their dependents (pods, or a Deployment's
    ReplicaSets): the owner a dependent's controller reference names (resolveControllerRef), and
    the owners whose selector matches an orphan (getPodReplicaSets and its kin)."""

    def __init__(self, informer: Informer, kind: str) -> None:
        self.informer = informer
        self.kind = kind
        self.by_namespace: Index[str] = Index(informer, lambda obj: [str(metadata(obj).get("namespace") or "")])

    def owner_of(self, dependent: Obj, ref: Obj | None = None) -> Obj | None:
        return resolve_controller(self.informer, str(metadata(dependent).get("namespace") or ""), ref if ref is not None else controller_owner(dependent), self.kind)

    def matching(self, dependent: Obj) -> list[Obj]:
        """The namespace's owners with a non-empty selector matching the dependent's labels."""
        found = []
        for owner in self.by_namespace.get(str(metadata(dependent).get("namespace") or "")):
            selector = parse_selector((owner.get("spec") or {}).get("selector"))
            if selector is not None and not selector.empty and selector.matches(labels_of(dependent)):
                found.append(owner)
        return found


def resolve_controller(informer: Informer, namespace: str, ref: Obj | None, kind: str) -> Obj | None:
    """resolveControllerRef: the cached owner a controller reference of ``kind`` names, when its UID matches."""
    if ref is None or ref.get("kind") != kind:
        return None
    owner = informer.get(namespace, str(ref.get("name") or ""))
    if owner is None or metadata(owner).get("uid") != ref.get("uid"):
        return None
    return owner
