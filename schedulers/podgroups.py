"""PodGroups in the scheduler (GenericWorkload; their claims with DRAWorkloadResourceClaims).

The scheduler watches PodGroups and indexes the pods that name each one. A pod of a group waits
(like upstream's PreEnqueue) until its PodGroup exists and, for a gang, until at least
``minCount`` active pods name the group. After a gang pod's placement is reserved it waits at
*Permit* until ``minCount`` pods of its group are placed (assumed or bound); then they all go on to
bind. A gang that does not come together within the permit timeout releases what it reserved and
its pods are tried again.

The pods of one group may share the allocation of a group claim that another member is writing
(``in_flight_member``): the group is the claim's one consumer, however many pods it has.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import httpx

from kube.client import KubeClient, resource_path
from kube.dra import podgroups
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer, object_key
from kube.objects import Obj
from kube.tasks import wait_for
from kube.timeutil import now_rfc3339

Key = tuple[str, str]

GANG_PERMIT_TIMEOUT = 60.0
# The reasons of PodGroupInitiallyScheduled (upstream's condition of a group's first scheduling).
SCHEDULED, UNSCHEDULABLE, SCHEDULER_ERROR = "Scheduled", "Unschedulable", "SchedulerError"

log = logging.getLogger("scheduler")


def wait_key(namespace: str, group: str) -> Key:
    """What a pod waiting for its group waits on in the scheduling queue (never a claim's name)."""
    return (namespace, f"<podgroup {group}>")


def _member_key(pod: Obj) -> list[Key]:
    name = podgroups.pod_group_name(pod)
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    if name is None or phase in ("Succeeded", "Failed"):
        return []
    return [(object_key(pod)[0], name)]


class PodGroupView:
    """The PodGroups, their active pods, and the gangs waiting at Permit."""

    def __init__(self, client: KubeClient, pods: Informer, wake: Callable[[Key], None], *, watch_timeout_seconds: int | None = None) -> None:
        self.groups = Informer(
            client, resource_path(podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL), name="podgroups", watch_timeout_seconds=watch_timeout_seconds
        )
        self.members: Index[Key] = Index(pods, _member_key)
        self._client = client
        self._wake = wake
        # The last PodGroupInitiallyScheduled (status, reason, message) written per group, so
        # every member's outcome does not become a write.
        self._written: dict[Key, tuple[str, str, str]] = {}
        self._placed: dict[Key, asyncio.Event] = {}
        self.groups.on_add(self._group_event)
        self.groups.on_update(lambda _old, new: self._group_event(new))
        self.groups.on_delete(self._group_event)
        # After the index (registered above): a new member may complete a gang.
        pods.on_add(self._member_event)
        pods.on_update(lambda _old, new: self._member_event(new))
        pods.on_delete(self._member_event)

    def _group_event(self, group: Obj) -> None:
        namespace, name = object_key(group)
        self._wake(wait_key(namespace, name))

    def _member_event(self, pod: Obj) -> None:
        name = podgroups.pod_group_name(pod)
        if name is not None:
            namespace = object_key(pod)[0]
            self._wake(wait_key(namespace, name))
            self.placed((namespace, name))

    def group(self, namespace: str, name: str) -> Obj | None:
        return self.groups.get(namespace, name)

    def member_uids(self, namespace: str, name: str) -> set[str]:
        return {str((p.get("metadata") or {}).get("uid") or "") for p in self.members.get((namespace, name))}

    def placed_count(self, namespace: str, name: str, binding: Callable[[Key], bool]) -> int:
        """Active members bound to a node or being bound by this scheduler."""
        return sum(1 for p in self.members.get((namespace, name)) if (p.get("spec") or {}).get("nodeName") or binding(object_key(p)))

    # ---- Permit ----------------------------------------------------------------------------

    def placed(self, group: Key) -> None:
        """A member of ``group`` was placed (or changed): the gang's waiters look again."""
        event = self._placed.pop(group, None)
        if event is not None:
            event.set()

    async def permit(self, group: Key, min_count: int, count: Callable[[], int], timeout: float = GANG_PERMIT_TIMEOUT) -> bool:
        """Wait until ``count()`` reaches ``min_count``; False when the timeout comes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while count() < min_count:
            left = deadline - loop.time()
            if left <= 0:
                return False
            event = self._placed.setdefault(group, asyncio.Event())
            try:
                await wait_for(event.wait(), left)
            except TimeoutError:
                return count() >= min_count
        return True

    # ---- PodGroupInitiallyScheduled -------------------------------------------------------

    async def report(self, group: Key, scheduled: bool, reason: str, message: str = "") -> None:
        """Record the group's first scheduling outcome as upstream's scheduler does: True
        (reason Scheduled) once its pods are placed; False (Unschedulable or SchedulerError,
        with the pod's message) while they cannot be. A True condition is final: later outcomes
        never turn it back to False. Written with a strategic merge patch keyed by ``type``."""
        namespace, name = group
        obj = self.groups.get(namespace, name)
        if obj is None:
            return
        status = "True" if scheduled else "False"
        existing = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == podgroups.INITIALLY_SCHEDULED), None)
        if existing is not None and existing.get("status") == "True" and not scheduled:
            return
        generation = (obj.get("metadata") or {}).get("generation")
        wanted = (status, reason, message)
        current = None if existing is None else (existing.get("status"), existing.get("reason"), existing.get("message", ""))
        if current == wanted and existing is not None and existing.get("observedGeneration") == generation:
            return
        if self._written.get(group) == wanted:
            return
        self._written[group] = wanted
        transition = existing.get("lastTransitionTime") if existing is not None and existing.get("status") == status else None
        condition: Obj = {
            "type": podgroups.INITIALLY_SCHEDULED, "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": transition or now_rfc3339(),
        }
        path = resource_path(podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL, namespace, name, "status")
        try:
            await self._client.patch(path, {"status": {"conditions": [condition]}}, patch_type="strategic")
        except (ApiError, httpx.HTTPError, OSError) as exc:
            self._written.pop(group, None)
            log.info("could not update PodGroup status", extra={"podGroup": f"{namespace}/{name}", "error": str(exc)})
