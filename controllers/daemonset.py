"""The DaemonSet controller (upstream's pkg/controller/daemon): one pod per eligible node.

A node is eligible when the template's nodeName (if any) is the node's, its nodeSelector and
required node affinity match the node, and every NoSchedule and NoExecute taint of the node is
tolerated by the template's tolerations plus those every daemon pod gets (not-ready and
unreachable NoExecute; disk-, memory- and pid-pressure and unschedulable NoSchedule;
network-unavailable for host-network pods). A node with an untolerated NoSchedule taint keeps
the pod it has; an untolerated NoExecute taint removes it. Each pod is made from the template with
a required node affinity on the node's ``metadata.name`` (the scheduler binds it), the
``controller-revision-hash`` and ``pod-template-generation`` labels, and those tolerations.

Each template is recorded as a ControllerRevision (``<ds>-<hash>``, its data the template as a
replacing patch); a RollingUpdate replaces old pods node by node within maxUnavailable (deleting
first) or maxSurge (creating first), OnDelete only when they are deleted; revisions beyond
revisionHistoryLimit that no pod uses are deleted. Failed pods are deleted with a per-node
back-off, extra pods on a node deleted (the oldest stays). The status counts desired, current,
misscheduled, ready, up-to-date, available and unavailable pods.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from controllers import history
from controllers.objects import controller_owner, metadata
from controllers.workloads import (
    BURST_REPLICAS,
    Claimer,
    ControllerOwners,
    Expectations,
    OwnerIndexKey,
    PodControl,
    compute_hash,
    key_of,
    owned_and_orphans,
    owner_reference,
    parse_selector,
    pod_from_template,
    slow_start_batch,
)
from kube.client import KubeClient, resource_path
from kube.dra.pods import is_pod_available, is_pod_ready
from kube.dra.tolerations import tolerations_tolerate
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.intstr import scaled_value
from kube.labels import node_selector_matches
from kube.objects import Obj
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("daemon-set-controller")

GROUP, VERSION, KIND, PLURAL = "apps", "v1", "DaemonSet", "daemonsets"
COMPONENT = "daemonset-controller"
GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
STATUS_UPDATE_RETRIES = 1
FAILED_POD_BACKOFF = 1.0
MAX_FAILED_POD_BACKOFF = 15 * 60.0
# The tolerations every daemon pod gets (AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}


def daemonset_path(namespace: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, namespace, name or None, subresource)


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _pod_spec(ds: Obj) -> Obj:
    return (_spec(ds).get("template") or {}).get("spec") or {}


# ---- node eligibility ------------------------------------------------------------------------------


def add_daemon_tolerations(pod_spec: Obj) -> None:
    """AddOrUpdateDaemonPodTolerations: a toleration of the same key, operator and effect is replaced."""
    tolerations: list[Obj] = list(pod_spec.get("tolerations") or [])
    wanted = [*DAEMON_TOLERATIONS, *([HOST_NETWORK_TOLERATION] if pod_spec.get("hostNetwork") else [])]
    for toleration in wanted:
        same = [i for i, t in enumerate(tolerations) if (t.get("key"), t.get("operator") or "Equal", t.get("effect")) == (toleration["key"], "Exists", toleration["effect"])]
        if same:
            tolerations[same[0]] = dict(toleration)
        else:
            tolerations.append(dict(toleration))
    pod_spec["tolerations"] = tolerations


def daemon_tolerations(ds: Obj) -> list[Obj]:
    spec = copy.deepcopy(_pod_spec(ds))
    add_daemon_tolerations(spec)
    return list(spec["tolerations"])


def _matches_node(pod_spec: Obj, node: Obj) -> bool:
    """The required node affinity: nodeSelector and required node affinity terms."""
    labels = metadata(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return required is None or node_selector_matches(required, node)


def _untolerated(node: Obj, tolerations: list[Obj], effects: tuple[str, ...]) -> bool:
    return any(t.get("effect") in effects and not tolerations_tolerate(tolerations, t) for t in _spec(node).get("taints") or [])


def should_run(node: Obj, ds: Obj, tolerations: list[Obj] | None = None) -> tuple[bool, bool]:
    """nodeShouldRunDaemonPod: (whether the node should run a daemon pod, whether one it has may stay)."""
    pod_spec = _pod_spec(ds)
    if pod_spec.get("nodeName") not in (None, "", metadata(node).get("name")):
        return False, False
    if not _matches_node(pod_spec, node):
        return False, False
    tolerations = daemon_tolerations(ds) if tolerations is None else tolerations
    if _untolerated(node, tolerations, ("NoSchedule", "NoExecute")):
        return False, not _untolerated(node, tolerations, ("NoExecute",))
    return True, True


def with_node_affinity(pod_spec: Obj, node_name: str) -> None:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the pod may only go to this node (by its name)."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    else:
        required["nodeSelectorTerms"] = [term]


def target_node(pod: Obj) -> str | None:
    """GetTargetNodeName: the pod's node, or the one its node affinity names."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expression in term.get("matchFields") or []:
            if expression.get("key") == "metadata.name" and expression.get("operator") == "In":
                values = expression.get("values") or []
                return str(values[0]) if len(values) == 1 else None
    return None


def _by_creation(pod: Obj) -> tuple[bool, str, str]:
    """podByCreationTimestampAndPhase: scheduled first, then the oldest, then by name."""
    meta = metadata(pod)
    return (not (pod.get("spec") or {}).get("nodeName"), str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


def template_generation(ds: Obj) -> str | None:
    value = (metadata(ds).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    return str(value) if value is not None else None


def is_updated(pod: Obj, revision_hash: str, generation: str | None) -> bool:
    """IsPodUpdated: the pod carries the current revision's hash or template generation."""
    labels = metadata(pod).get("labels") or {}
    return bool((revision_hash and labels.get(history.HASH_LABEL) == revision_hash) or (generation is not None and labels.get(GENERATION_LABEL) == generation))


def revision_data(ds: Obj) -> Obj:
    """getPatch: the template as a patch that replaces it, the data of a DaemonSet's revision."""
    template = copy.deepcopy(_spec(ds).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


# ---- the controller -------------------------------------------------------------------------------


class DaemonSetController:
    """Informer handlers queue DaemonSets; ``process()`` syncs them until cancelled."""

    def __init__(
        self, client: KubeClient, *, pods: Informer, pods_by_controller: Index[OwnerIndexKey], workers: int = 4, watch_timeout_seconds: int | None = None
    ) -> None:
        self.client = client
        self.workers = workers
        self.pods = pods
        self.pods_by_controller = pods_by_controller
        kw: Any = {"watch_timeout_seconds": watch_timeout_seconds}
        self.daemon_sets = Informer(client, resource_path(GROUP, VERSION, PLURAL), name=PLURAL, **kw)
        self.nodes = Informer(client, resource_path("", "v1", "nodes"), name="nodes", **kw)
        self.revisions = Informer(client, history.revisions_path(""), name="controllerrevisions", **kw)
        self.owners = ControllerOwners(self.daemon_sets, KIND)
        self.revisions_by_namespace: Index[str] = Index(self.revisions, lambda r: [str(metadata(r).get("namespace") or "")])
        self.expectations = Expectations()
        self.failed_backoff: dict[str, tuple[float, float]] = {}  # key -> (delay, last failure handled)
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.pod_control = PodControl(client, COMPONENT)
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        return [self.daemon_sets, self.nodes, self.revisions, self.pods]

    # ---- event handlers --------------------------------------------------------------------------

    def _wire(self) -> None:
        self.daemon_sets.on_add(self.enqueue)
        self.daemon_sets.on_update(lambda _old, new: self.enqueue(new))
        self.daemon_sets.on_delete(self._ds_deleted)
        self.pods.on_add(self._pod_added)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_deleted)
        self.nodes.on_add(self._node_changed)
        self.nodes.on_update(self._node_updated)
        self.revisions.on_add(self._revision_changed)
        self.revisions.on_update(lambda _old, new: self._revision_changed(new))
        self.revisions.on_delete(self._revision_changed)

    def enqueue(self, ds: Obj) -> None:
        self.queue.add(key_of(ds))

    def _ds_deleted(self, ds: Obj) -> None:
        self.expectations.forget("/".join(key_of(ds)))
        self.enqueue(ds)

    def _pod_added(self, pod: Obj) -> None:
        if metadata(pod).get("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        ref = controller_owner(pod)
        if ref is not None:
            ds = self.owners.owner_of(pod, ref)
            if ds is not None:
                self.expectations.creation_observed("/".join(key_of(ds)))
                self.enqueue(ds)
            return
        for ds in self.owners.matching(pod):
            self.enqueue(ds)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        if metadata(new).get("deletionTimestamp"):
            self._pod_deleted(new)
            return
        old_ref, new_ref = controller_owner(old), controller_owner(new)
        if old_ref != new_ref and old_ref is not None:
            previous = self.owners.owner_of(old, old_ref)
            if previous is not None:
                self.enqueue(previous)
        if new_ref is not None:
            ds = self.owners.owner_of(new, new_ref)
            if ds is None:
                return
            self.enqueue(ds)
            min_ready = int(_spec(ds).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(new):
                self.queue.add_after(key_of(ds), float(min_ready))
            return
        if (metadata(old).get("labels") or {}) != (metadata(new).get("labels") or {}) or old_ref != new_ref:
            for ds in self.owners.matching(new):
                self.enqueue(ds)

    def _pod_deleted(self, pod: Obj) -> None:
        ds = self.owners.owner_of(pod)
        if ds is None:
            return
        self.expectations.deletion_observed("/".join(key_of(ds)), "/".join(key_of(pod)))
        self.enqueue(ds)

    def _node_changed(self, node: Obj) -> None:
        for ds in self.daemon_sets.list():
            self.enqueue(ds)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        """shouldIgnoreNodeUpdate: only labels and taints can change where daemon pods run."""
        if (metadata(old).get("labels"), _spec(old).get("taints")) == (metadata(new).get("labels"), _spec(new).get("taints")):
            return
        for ds in self.daemon_sets.list():
            if should_run(old, ds) != should_run(new, ds):
                self.enqueue(ds)

    def _revision_changed(self, revision: Obj) -> None:
        ds = self.owners.owner_of(revision)
        if ds is not None:
            self.enqueue(ds)

    # ---- running ----------------------------------------------------------------------------------

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        """syncDaemonSet."""
        key = f"{namespace}/{name}"
        cached = self.daemon_sets.get(namespace, name)
        if cached is None:
            self.expectations.forget(key)
            return True
        ds = copy.deepcopy(cached)
        if _spec(ds).get("selector") == {}:
            await self.pod_control.event(self._owner(ds), "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is required.", "Warning")
            return True
        if metadata(ds).get("deletionTimestamp"):
            return True
        nodes = self.nodes.list()
        current, old = await self.construct_history(ds)
        revision_hash = str((metadata(current).get("labels") or {}).get(history.HASH_LABEL) or "")
        if not self.expectations.satisfied(key):
            await self.update_status(ds, nodes, revision_hash, observe_generation=False)
            return True
        error: Exception | None = None
        try:
            await self.manage(ds, nodes, revision_hash)
            if self.expectations.satisfied(key) and (_spec(ds).get("updateStrategy") or {}).get("type") == "RollingUpdate":
                await self.rolling_update(ds, nodes, revision_hash)
            await self.cleanup_history(ds, old)
        except ApiError as exc:
            error = exc
        await self.update_status(ds, nodes, revision_hash, observe_generation=True)
        if error is not None:
            raise error
        return True

    def _owner(self, ds: Obj) -> Obj:
        return {**ds, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}

    async def _fresh(self, ds: Obj) -> Obj | None:
        namespace, name = key_of(ds)
        try:
            return await self.client.get(daemonset_path(namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def daemon_pods(self, ds: Obj) -> list[Obj]:
        """getDaemonPods: the pods the DaemonSet controls or adopts."""
        selector = parse_selector(_spec(ds).get("selector"))
        if selector is None:
            return []
        claimer = Claimer(self.client, ds, owner_reference(ds, f"{GROUP}/{VERSION}", KIND), selector, lambda: self._fresh(ds))
        return await claimer.claim(owned_and_orphans(self.pods_by_controller, ds))

    async def pods_by_node(self, ds: Obj, include_deleted_terminal: bool = False) -> dict[str, list[Obj]]:
        """getNodesToDaemonPods."""
        result: dict[str, list[Obj]] = {}
        for pod in await self.daemon_pods(ds):
            phase = (pod.get("status") or {}).get("phase")
            if not include_deleted_terminal and phase in ("Succeeded", "Failed") and metadata(pod).get("deletionTimestamp"):
                continue
            node = target_node(pod)
            if node is not None:
                result.setdefault(node, []).append(pod)
        return result

    # ---- history ----------------------------------------------------------------------------------

    async def construct_history(self, ds: Obj) -> tuple[Obj, list[Obj]]:
        """constructHistory: the current revision (made or renumbered) and the old ones."""
        revisions = await history.controlled_revisions(self.client, self.revisions_by_namespace, ds, f"{GROUP}/{VERSION}", KIND, lambda: self._fresh(ds))
        data = revision_data(ds)
        current = [r for r in revisions if r.get("data") == data]
        old = [r for r in revisions if r.get("data") != data]
        number = history.max_revision(old) + 1
        if not current:
            return await self.snapshot(ds, number), old
        keep = max(current, key=history.revision_number)
        for duplicate in current:
            if duplicate is not keep:
                await history.delete_revision(self.client, duplicate)
        if history.revision_number(keep) < number:
            keep = await history.update_revision_number(self.client, keep, number)
        return keep, old

    async def snapshot(self, ds: Obj, number: int) -> Obj:
        """snapshot: a new revision of the template, named after its hash."""
        meta = metadata(ds)
        namespace = str(meta.get("namespace") or "")
        collision = (ds.get("status") or {}).get("collisionCount")
        revision_hash = compute_hash(_spec(ds).get("template") or {}, collision)
        name = f"{meta['name']}-{revision_hash}"
        template_labels = ((_spec(ds).get("template") or {}).get("metadata") or {}).get("labels") or {}
        revision: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": name, "namespace": namespace, "labels": {**template_labels, history.HASH_LABEL: revision_hash},
                "ownerReferences": [owner_reference(ds, f"{GROUP}/{VERSION}", KIND)],
                **({"annotations": dict(meta["annotations"])} if meta.get("annotations") else {}),
            },
            "data": revision_data(ds),
            "revision": number,
        }  # fmt: skip
        try:
            return await self.client.create(history.revisions_path(namespace), revision)
        except ApiError as exc:
            if exc.code != 409 or exc.reason != "AlreadyExists":
                raise
        existing = await self.client.get(history.revisions_path(namespace, name))
        if existing.get("data") == revision["data"]:
            return existing
        # Another template hashed alike: count the collision, and make the revision again next time.
        fresh = await self._fresh(ds)
        if fresh is None:
            raise ApiError(404, "NotFound", f"daemonset {namespace}/{meta['name']} is gone")
        if (fresh.get("status") or {}).get("collisionCount") != collision:
            raise ApiError(409, "Conflict", f"found a stale collision count of DaemonSet {meta['name']!r} while processing; will retry until it is updated")
        status = {**(fresh.get("status") or {}), "collisionCount": int(collision or 0) + 1}
        await self.client.update(daemonset_path(namespace, str(meta["name"]), "status"), {**fresh, "status": status})
        raise ApiError(409, "AlreadyExists", f"controllerrevisions.apps {name!r} already exists with other data")

    async def cleanup_history(self, ds: Obj, old: list[Obj]) -> None:
        """cleanupHistory: the oldest revisions beyond revisionHistoryLimit that no pod uses."""
        extra = len(old) - int(_spec(ds).get("revisionHistoryLimit") or 0)
        if extra <= 0:
            return
        live = {(metadata(p).get("labels") or {}).get(history.HASH_LABEL) for pods in (await self.pods_by_node(ds, True)).values() for p in pods}
        for revision in sorted(old, key=history.revision_number):
            if extra <= 0:
                break
            if (metadata(revision).get("labels") or {}).get(history.HASH_LABEL) in live:
                continue
            await history.delete_revision(self.client, revision)
            extra -= 1

    # ---- pods ---------------------------------------------------------------------------------------

    async def manage(self, ds: Obj, nodes: list[Obj], revision_hash: str) -> None:
        """manage: the pods each node should have."""
        by_node = await self.pods_by_node(ds)
        tolerations = daemon_tolerations(ds)
        need: list[str] = []
        doomed: list[Obj] = []
        for node in nodes:
            more, less = self.pods_for_node(node, by_node, ds, revision_hash, tolerations)
            need.extend(more)
            doomed.extend(less)
        running = {metadata(n).get("name") for n in nodes}
        # Unscheduled pods for nodes that are gone: nothing else deletes them.
        for node_name, pods in by_node.items():
            if node_name not in running:
                doomed.extend(p for p in pods if not (p.get("spec") or {}).get("nodeName"))
        await self.sync_nodes(ds, doomed, need, revision_hash)

    def pods_for_node(self, node: Obj, by_node: dict[str, list[Obj]], ds: Obj, revision_hash: str, tolerations: list[Obj]) -> tuple[list[str], list[Obj]]:
        """podsShouldBeOnNode: (nodes needing a pod, pods to delete) for one node."""
        name = str(metadata(node).get("name"))
        run, keep = should_run(node, ds, tolerations)
        pods = by_node.get(name)
        if run and not pods:
            return [name], []
        if keep and pods:
            doomed: list[Obj] = []
            running: list[Obj] = []
            for pod in pods:
                if metadata(pod).get("deletionTimestamp"):
                    continue
                phase = (pod.get("status") or {}).get("phase")
                if phase == "Failed":
                    backoff_key = f"{metadata(ds).get('uid')}/{(ds.get('status') or {}).get('observedGeneration', 0)}/{name}"
                    wait = self._in_backoff(backoff_key)
                    if wait is not None:
                        self.queue.add_after(key_of(ds), wait)
                        continue
                    doomed.append(pod)
                elif phase == "Succeeded":
                    doomed.append(pod)
                else:
                    running.append(pod)
            surge = _surge_count(ds, 1) > 0
            running.sort(key=_by_creation)
            if not surge:
                return [], doomed + running[1:]
            if len(running) <= 1:
                return ([name] if not running and run else []), doomed
            newest_new = next((p for p in running if (metadata(p).get("labels") or {}).get(history.HASH_LABEL) == revision_hash), None)
            oldest_old = next((p for p in running if (metadata(p).get("labels") or {}).get(history.HASH_LABEL) != revision_hash), None)
            doomed += [p for p in running if p is not newest_new and p is not oldest_old]
            if newest_new is not None and oldest_old is not None:
                min_ready = int(_spec(ds).get("minReadySeconds") or 0)
                if not is_pod_ready(oldest_old) or is_pod_available(newest_new, min_ready, time.time()):
                    doomed.append(oldest_old)
            return [], doomed
        if not keep and pods:
            return [], [p for p in pods if not metadata(p).get("deletionTimestamp")]
        return [], []

    def _in_backoff(self, key: str) -> float | None:
        """The failed-pod back-off of one node: seconds left, or None (and the next delay doubles)."""
        now = time.monotonic()
        delay, since = self.failed_backoff.get(key, (0.0, 0.0))
        if delay and now - since < delay:
            return delay - (now - since)
        self.failed_backoff[key] = (min(max(delay * 2, FAILED_POD_BACKOFF), MAX_FAILED_POD_BACKOFF), now)
        return None

    async def sync_nodes(self, ds: Obj, doomed: list[Obj], need: list[str], revision_hash: str) -> None:
        """syncNodes: create pods for the nodes needing one (slow start), delete the doomed ones."""
        key = "/".join(key_of(ds))
        need, doomed = need[:BURST_REPLICAS], doomed[:BURST_REPLICAS]
        self.expectations.expect(key, len(need), ["/".join(key_of(p)) for p in doomed])
        namespace = str(metadata(ds).get("namespace") or "")
        template = copy.deepcopy(_spec(ds).get("template") or {})
        add_daemon_tolerations(template.setdefault("spec", {}))
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        generation = template_generation(ds)
        if generation is not None:
            labels[GENERATION_LABEL] = generation
        if revision_hash:
            labels[history.HASH_LABEL] = revision_hash
        ref = owner_reference(ds, f"{GROUP}/{VERSION}", KIND)
        owner = self._owner(ds)
        pending = list(need)

        async def create() -> None:
            node = pending.pop(0)
            pod_template = copy.deepcopy(template)
            with_node_affinity(pod_template["spec"], node)
            await self.pod_control.create(namespace, pod_from_template(pod_template, ref, f"{metadata(ds)['name']}-"), owner)

        successes, error = await slow_start_batch(len(need), create)
        for _ in range(len(need) - successes):
            self.expectations.creation_observed(key)
        errors: list[Exception] = [error] if error is not None else []
        for pod in doomed:
            try:
                await self.pod_control.delete(namespace, str(metadata(pod)["name"]), owner)
            except ApiError as exc:
                self.expectations.deletion_observed(key, "/".join(key_of(pod)))
                if exc.code != 404:
                    errors.append(exc)
        if errors:
            raise errors[0]

    async def rolling_update(self, ds: Obj, nodes: list[Obj], revision_hash: str) -> None:
        """rollingUpdate: old pods replaced within maxUnavailable (delete first) or maxSurge (create first)."""
        by_node = await self.pods_by_node(ds)
        tolerations = daemon_tolerations(ds)
        wanted = [n for n in nodes if should_run(n, ds, tolerations)[0]]
        for node in wanted:
            by_node.setdefault(str(metadata(node).get("name")), [])
        desired = len(wanted)
        max_surge = _surge_count(ds, desired)
        max_unavailable = _unavailable_count(ds, desired)
        if desired > 0 and max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1
        min_ready = int(_spec(ds).get("minReadySeconds") or 0)
        now = time.time()
        generation = template_generation(ds)
        nodes_by_name = {str(metadata(n).get("name")): n for n in nodes}
        if max_surge == 0:
            unavailable = 0
            replace: list[Obj] = []
            candidates: list[Obj] = []
            for pods in by_node.values():
                new, old, ok = _updated_on_node(pods, revision_hash, generation)
                if not ok or (new is None) == (old is None):
                    unavailable += 1
                elif new is not None:
                    if not is_pod_available(new, min_ready, now):
                        unavailable += 1
                elif old is not None:
                    if not is_pod_available(old, min_ready, now):
                        replace.append(old)
                        unavailable += 1
                    elif unavailable < max_unavailable:
                        candidates.append(old)
            room = min(max(max_unavailable - unavailable, 0), len(candidates))
            await self.sync_nodes(ds, replace + candidates[:room], [], revision_hash)
            return
        doomed: list[Obj] = []
        should_not_run: list[Obj] = []
        candidates_new: list[str] = []
        allowed_new: list[str] = []
        surge = available = 0
        for node_name, pods in by_node.items():
            new, old, ok = _updated_on_node(pods, revision_hash, generation)
            if not ok:
                surge += 1
                continue
            current = old if old is not None else new
            if current is not None and is_pod_available(current, min_ready, now):
                available += 1
            if old is None:
                continue
            node_obj = nodes_by_name.get(node_name)
            runs = node_obj is not None and should_run(node_obj, ds, tolerations)[0]
            if new is None:
                if not is_pod_available(old, min_ready, now):
                    if not runs:
                        doomed.append(old)
                    else:
                        allowed_new.append(node_name)
                elif not runs:
                    should_not_run.append(old)
                elif surge < max_surge:
                    candidates_new.append(node_name)
            elif not is_pod_available(new, min_ready, now):
                surge += 1
            else:
                doomed.append(old)
        deletable = min(max(available - desired, 0), len(should_not_run))
        doomed += should_not_run[:deletable]
        room = min(max(max_surge - surge, 0), len(candidates_new))
        await self.sync_nodes(ds, doomed, allowed_new + candidates_new[:room], revision_hash)

    # ---- status -----------------------------------------------------------------------------------------

    async def update_status(self, ds: Obj, nodes: list[Obj], revision_hash: str, observe_generation: bool) -> None:
        """updateDaemonSetStatus: the counts, written when they changed (once more after a conflict)."""
        by_node = await self.pods_by_node(ds)
        tolerations = daemon_tolerations(ds)
        min_ready = int(_spec(ds).get("minReadySeconds") or 0)
        now = time.time()
        generation = template_generation(ds)
        desired = current = misscheduled = ready = updated = available = 0
        for node in nodes:
            run, _keep = should_run(node, ds, tolerations)
            pods = sorted(by_node.get(str(metadata(node).get("name")), []), key=_by_creation)
            if not run:
                misscheduled += 1 if pods else 0
                continue
            desired += 1
            if not pods:
                continue
            current += 1
            pod = pods[0]
            if is_pod_ready(pod):
                ready += 1
                if is_pod_available(pod, min_ready, now):
                    available += 1
            if is_updated(pod, revision_hash, generation):
                updated += 1
        counts = {
            "desiredNumberScheduled": desired, "currentNumberScheduled": current, "numberMisscheduled": misscheduled, "numberReady": ready,
            "updatedNumberScheduled": updated, "numberAvailable": available, "numberUnavailable": desired - available,
        }  # fmt: skip
        status = ds.get("status") or {}
        generation_seen = int(status.get("observedGeneration") or 0) >= int(metadata(ds).get("generation") or 0)
        if all(int(status.get(k) or 0) == v for k, v in counts.items()) and generation_seen:
            return
        namespace, name = key_of(ds)
        current_ds = ds
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            new_status = {**(current_ds.get("status") or {}), **counts}
            if observe_generation:
                new_status["observedGeneration"] = metadata(ds).get("generation")
            try:
                await self.client.update(daemonset_path(namespace, name, "status"), {**self._owner(current_ds), "status": new_status})
                break
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409 or attempt == STATUS_UPDATE_RETRIES:
                    raise
            fresh = await self._fresh(ds)
            if fresh is None:
                return
            current_ds = fresh
        if min_ready > 0 and ready != available:
            self.queue.add_after((namespace, name), float(min_ready))


def _updated_on_node(pods: list[Obj], revision_hash: str, generation: str | None) -> tuple[Obj | None, Obj | None, bool]:
    """findUpdatedPodsOnNode: (the updated pod, the old one, whether there is at most one of each)."""
    new = old = None
    for pod in pods:
        if metadata(pod).get("deletionTimestamp"):
            continue
        if is_updated(pod, revision_hash, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def _rolling(ds: Obj) -> Obj | None:
    strategy = _spec(ds).get("updateStrategy") or {}
    return strategy.get("rollingUpdate") if strategy.get("type") == "RollingUpdate" else None


def _surge_count(ds: Obj, desired: int) -> int:
    rolling = _rolling(ds)
    return scaled_value(rolling.get("maxSurge"), desired, round_up=True) if rolling and rolling.get("maxSurge") is not None else 0


def _unavailable_count(ds: Obj, desired: int) -> int:
    rolling = _rolling(ds)
    return scaled_value(rolling.get("maxUnavailable"), desired, round_up=True) if rolling else 0

