"""The ResourceQuota controller (upstream's resourcequota controller): keeps each quota's status
current. ``status.hard`` is a copy of ``spec.hard``; ``status.used`` is what the namespace's
objects use of each limited resource that an evaluator counts (``kube.quota.evaluators``), zero
for what nothing uses yet. Admission (in the API server) adds each new object's use as it is
created; this controller counts everything again:

- at once for a new quota, or one whose limits changed, or one whose status lacks a use an
  evaluator could count (a queue of their own, so new quotas do not wait behind a resync);
- for the quotas of a namespace when one of its objects that a quota counts is deleted, or
  changes in a way that changes what it uses (a pod that finishes or changes scope, a service
  that changes type, a volume claim whose storage or attributes class changed): replenishment;
- every ``--resource-quota-sync-period`` for every quota.

It watches the quotas, pods, ResourceClaims and DeviceClasses always (pods and claims shared with
the claim controller), and any other resource a quota counts (services, volume claims, secrets,
``count/<resource>.<group>`` of anything the server serves) from the first time a quota names it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Iterable

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer, run_with_informers
from kube.objects import Obj, meta, spec, status
from kube.quota import resources
from kube.quota.evaluators import (
    IGNORED_RESOURCES,
    Registry,
    calculate_usage,
    charged,
    is_terminating,
    new_registry,
)
from kube.quota.resources import ResourceList
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("resourcequota-controller")

Key = tuple[str, str]  # (namespace, name) of a quota
GroupResource = tuple[str, str]

# Upstream's defaults: --resource-quota-sync-period 5m, --concurrent-resource-quota-syncs 5.
DEFAULT_SYNC_PERIOD = 300.0
DEFAULT_WORKERS = 5
# How often discovery is asked again for a resource a quota counts that the server did not list.
DISCOVERY_PERIOD = 30.0
# How long a sync waits for a newly started informer's first list.
MONITOR_SYNC_TIMEOUT = 60.0
# Verbs a resource must serve for quota to count it.
QUOTABLE_VERBS = frozenset({"create", "list", "watch", "delete"})


class NotWatched(LookupError):
    """A resource the controller has no informer for."""


class InformerObjects:
    """``kube.quota.evaluators.Objects`` over the controller's informers, namespaced lists through
    an index by namespace."""

    def __init__(self) -> None:
        self._watched: dict[GroupResource, tuple[Informer, Index[str]]] = {}

    def watch(self, group: str, resource: str, informer: Informer) -> None:
        """Serve ``group``/``resource`` from ``informer`` (before it starts: the index learns from its events)."""
        self._watched[(group, resource)] = (informer, Index(informer, lambda obj: [str(meta(obj).get("namespace") or "")]))

    def watches(self, group: str, resource: str) -> bool:
        return (group, resource) in self._watched

    def informer(self, group: str, resource: str) -> Informer:
        return self._watched[(group, resource)][0]

    def list(self, group: str, resource: str, namespace: str | None) -> list[Obj]:
        found = self._watched.get((group, resource))
        if found is None:
            raise NotWatched(f"{resource}.{group} is not watched" if group else f"{resource} is not watched")
        informer, by_namespace = found
        return informer.list() if namespace is None else by_namespace.get(namespace)

    def get(self, group: str, resource: str, namespace: str, name: str) -> Obj | None:
        found = self._watched.get((group, resource))
        return found[0].get(namespace, name) if found is not None else None


def _service_type(service: Obj) -> str:
    kind = spec(service).get("type")
    return str(kind) if kind in ("NodePort", "LoadBalancer") else ""


def _storage_or_classes(claim: Obj) -> tuple[object, ...]:
    claim_status, claim_spec = status(claim), spec(claim)
    names = {claim_spec.get("volumeAttributesClassName"), claim_status.get("currentVolumeAttributesClassName")}
    names.add((claim_status.get("modifyVolumeStatus") or {}).get("targetVolumeAttributesClassName"))
    return (str((claim_status.get("allocatedResources") or {}).get("storage")), frozenset(n for n in names if n))


def changes_use(group: str, resource: str, old: Obj, new: Obj) -> bool:
    """Whether an update can change what an object uses (upstream's update filter; creates are
    charged by admission, so only deletes and these count again)."""
    if (group, resource) == ("", "pods"):
        return is_terminating(old) != is_terminating(new) or (charged(old) and not charged(new))
    if (group, resource) == ("", "services"):
        return _service_type(old) != _service_type(new)
    if (group, resource) == ("", "persistentvolumeclaims"):
        return _storage_or_classes(old) != _storage_or_classes(new)
    return False


def parse_count_name(name: str) -> GroupResource | None:
    """``count/<resource>[.<group>]`` -> (group, resource)."""
    if not name.startswith("count/"):
        return None
    resource, _, group = name[len("count/") :].partition(".")
    return (group, resource) if resource else None


class ResourceQuotaController:
    """Informers for quotas and device classes (pods and claims are the claim controller's), a
    work queue of quotas and one of quotas that lack a use, and informers started on demand for
    the other resources quotas count."""

    def __init__(
        self, client: KubeClient, *, pods: Informer, claims: Informer, sync_period: float = DEFAULT_SYNC_PERIOD, workers: int = DEFAULT_WORKERS
    ) -> None:  # fmt: skip
        self.client = client
        self.sync_period = sync_period
        self.workers = workers
        self.quotas = Informer(client, resource_path("", "v1", "resourcequotas"), name="resourcequotas")
        self.classes = Informer(client, resource_path("resource.k8s.io", "v1", "deviceclasses"), name="deviceclasses")
        self.objects = InformerObjects()
        for (group, plural), informer in {("", "resourcequotas"): self.quotas, ("", "pods"): pods, ("resource.k8s.io", "resourceclaims"): claims}.items():
            self.objects.watch(group, plural, informer)
            self._replenish_on_changes(group, plural, informer)
        self.objects.watch("resource.k8s.io", "deviceclasses", self.classes)
        self.registry: Registry = new_registry(self.objects)
        self.informers = [self.quotas, self.classes]
        self.queue: WorkQueue[Key] = WorkQueue()
        self.missing_usage: WorkQueue[Key] = WorkQueue()
        self.quotas.on_add(self._quota_added)
        self.quotas.on_update(self._quota_updated)
        self.quotas.on_delete(lambda quota: self.queue.add(_key(quota)))
        self._monitors: list[Informer] = []  # started on demand, stopped with the term
        self._monitor_lock = asyncio.Lock()
        self._discovered: dict[GroupResource, str] = {}  # quotable (group, resource) -> its preferred version
        self._discovered_at = -DISCOVERY_PERIOD

    # ---- events ---------------------------------------------------------------------------

    def _quota_added(self, quota: Obj) -> None:
        if not resources.equals(resources.parse_list(spec(quota).get("hard")), resources.parse_list(status(quota).get("hard"))):
            self.missing_usage.add(_key(quota))
            return
        used = status(quota).get("used") or {}
        for name in status(quota).get("hard") or {}:
            if name not in used and any(e.matching_resources([name]) for e in self.registry.evaluators()):
                self.missing_usage.add(_key(quota))
                return
        self.queue.add(_key(quota))

    def _quota_updated(self, old: Obj, new: Obj) -> None:
        # The controller's own status writes come back as updates: only new limits count again.
        if not resources.equals(resources.parse_list(spec(old).get("hard")), resources.parse_list(spec(new).get("hard"))):
            self._quota_added(new)

    def _replenish_on_changes(self, group: str, plural: str, informer: Informer) -> None:
        informer.on_update(lambda old, new: self._replenish(group, plural, new) if changes_use(group, plural, old, new) else None)
        informer.on_delete(lambda obj: self._replenish(group, plural, obj))

    def _replenish(self, group: str, plural: str, obj: Obj) -> None:
        """Count again the quotas of the object's namespace that count its resource."""
        evaluator = self.registry.get(group, plural)
        if evaluator is None:
            return
        for quota in self.objects.list("", "resourcequotas", str(meta(obj).get("namespace") or "")):
            if evaluator.matching_resources(status(quota).get("hard") or {}):
                self.queue.add(_key(quota))

    # ---- running --------------------------------------------------------------------------

    async def process(self) -> None:
        """Keep the quotas' status current until cancelled (the shared informers are started by the caller)."""
        try:
            await run_with_informers(
                self.informers,
                self.queue.run(self.sync, self.workers, log_failures(log)),
                self.missing_usage.run(self.sync, self.workers, log_failures(log)),
                self._resync_forever(),
            )
        finally:
            for informer in self._monitors:
                await informer.stop()

    async def _resync_forever(self) -> None:
        if self.sync_period <= 0:
            log.info("periodic quota resync disabled")
            return
        while True:
            await asyncio.sleep(self.sync_period)
            for quota in self.quotas.list():
                self.queue.add(_key(quota))

    async def sync(self, key: Key) -> bool:
        namespace, name = key
        quota = self.quotas.get(namespace, name)
        if quota is None:
            return True
        await self._watch_counted(spec(quota).get("hard") or {})
        hard = resources.parse_list(spec(quota).get("hard"))
        old_hard = resources.parse_list(status(quota).get("hard"))
        old_used = resources.parse_list(status(quota).get("used"))
        counted, errors = calculate_usage(namespace, quota, self.registry)
        used = resources.mask({**old_used, **counted}, hard)
        dirty = status(quota).get("hard") is None or status(quota).get("used") is None
        if dirty or not resources.equals(hard, old_hard) or not resources.equals(used, old_used):
            await self._write_status(quota, hard, used)
        if errors:
            raise errors[0]
        return True

    async def _write_status(self, quota: Obj, hard: ResourceList, used: ResourceList) -> None:
        body = copy.deepcopy(quota)
        body["status"] = {"hard": resources.to_api(hard), "used": resources.to_api(used)}
        path = resource_path("", "v1", "resourcequotas", meta(quota).get("namespace"), meta(quota).get("name"), "status")
        try:
            await self.client.update(path, body)
        except ApiError as exc:
            if exc.code == 404:
                return  # deleted meanwhile
            raise  # a conflict: the informer will bring the newer quota, and the key comes back

    # ---- resources counted on demand ------------------------------------------------------

    async def _watch_counted(self, hard: Iterable[str]) -> None:
        """Start informers for the resources the names in ``hard`` count that are not watched yet
        (and that the server serves), and wait for their first list."""
        wanted: set[GroupResource] = set()
        for name in hard:
            counted_by = {(e.group, e.resource) for e in self.registry.evaluators() if e.matching_resources([name])}
            if not counted_by:
                found = parse_count_name(name)
                if found is None or found in IGNORED_RESOURCES:
                    continue
                counted_by = {found}
            wanted.update(gr for gr in counted_by if not self.objects.watches(*gr))
        if not wanted:
            return
        async with self._monitor_lock:
            started = [self._monitor(gr) for gr in sorted(wanted) if not self.objects.watches(*gr) and await self._quotable(gr)]
            for informer in started:
                await informer.wait_synced(MONITOR_SYNC_TIMEOUT)

    def _monitor(self, group_resource: GroupResource) -> Informer:
        group, plural = group_resource
        self.registry.get_or_count(group, plural)
        informer = Informer(self.client, resource_path(group, self._discovered[group_resource], plural), name=f"{plural}.{group}" if group else plural)
        self.objects.watch(group, plural, informer)
        self._replenish_on_changes(group, plural, informer)
        self._monitors.append(informer)
        informer.start()
        log.info("counting a resource for quotas", extra={"resource": informer.name})
        return informer

    async def _quotable(self, group_resource: GroupResource) -> bool:
        """Whether the server serves the resource with the verbs quota needs (discovery, asked
        again at most every DISCOVERY_PERIOD seconds for a resource it did not list)."""
        if group_resource in self._discovered:
            return True
        if time.monotonic() - self._discovered_at >= DISCOVERY_PERIOD:
            self._discovered_at = time.monotonic()
            try:
                self._discovered = await discover_quotable(self.client)
            except ApiError as exc:
                log.warning("discovery failed", extra={"error": str(exc)})
        return group_resource in self._discovered


async def discover_quotable(client: KubeClient) -> dict[GroupResource, str]:
    """Every namespaced resource the server serves with create, list, watch and delete, in its
    group's preferred version."""
    versions: list[tuple[str, str]] = [("", "v1")]
    groups = await client.get("/apis")
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred:
            versions.append((str(group.get("name") or ""), str(preferred)))
    found: dict[GroupResource, str] = {}
    for group, version in versions:
        listing = await client.get(f"/apis/{group}/{version}" if group else f"/api/{version}")
        for entry in listing.get("resources") or []:
            name = str(entry.get("name") or "")
            if "/" in name or not entry.get("namespaced") or not QUOTABLE_VERBS.issubset(entry.get("verbs") or ()):
                continue
            found.setdefault((group, name), version)
    return found


def _key(quota: Obj) -> Key:
    return str(meta(quota).get("namespace") or ""), str(meta(quota).get("name") or "")
