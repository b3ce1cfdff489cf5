"""The scheduler's cache: informers, what each node's pods use, and the claim assume cache.

Informer events are turned into queue moves here (a new pod is queued; a freed device, a new
node or slice moves the unschedulable pods back; a claim that appears or changes wakes the
pods waiting for it).

Node accounting charges every bound pod, and every pod assumed on a node while its binding is
written, to that node, so the next cycle does not hand out the same cpu, memory or pod slot.

Preemption reads the pods charged to a node (:meth:`SchedulerCache.pods_on`) and keeps
nominations: what a preemptor was promised on the node where it preempted (its cpu, memory and
pod slot, and the devices of its claims) until it is bound, deleted or nominated elsewhere;
other pods of no higher priority must not take that while the victims' devices are released.

Claims have three sources, newest first: the allocations being written right now (in flight,
owned by one pod), claims this scheduler has written and whose watch event has not arrived yet
(assumed: a newer resourceVersion wins over the informer's), and the informer's claims. Their
effective allocations make up the allocated-device state the allocator works against.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kube.client import KubeClient, resource_path
from kube.dra import podgroups
from kube.dra.extendedresources import resource_classes
from kube.dra.pods import Resources, pod_priority, pod_requests
from kube.indexer import Index
from kube.informer import Informer, object_key
from kube.labels import EVERYTHING, LabelSelector
from kube.objects import Obj
from schedulers.allocator import AllocatedState, AllocatorFeatures, ResourceIndex, SearchCache
from schedulers.extended import owned_special_claim_of
from schedulers.plugins.interpodaffinity import NAME as AFFINITY_PLUGIN
from schedulers.plugins.interpodaffinity import has_pod_affinity
from schedulers.plugins.interpodaffinity import requeue_after_add as affinity_requeue_after_add
from schedulers.plugins.interpodaffinity import requeue_after_relabel as affinity_requeue_after_relabel
from schedulers.plugins.nodeports import NAME as PORTS_PLUGIN
from schedulers.plugins.noderesources import NAME as RESOURCES_PLUGIN
from schedulers.plugins.noderesources import RequestsKey, insufficient, node_allocatable
from schedulers.plugins.podtopologyspread import NAME as SPREAD_PLUGIN
from schedulers.plugins.podtopologyspread import default_selector
from schedulers.plugins.podtopologyspread import requeue_after_add as spread_requeue_after_add
from schedulers.plugins.podtopologyspread import requeue_after_relabel as spread_requeue_after_relabel
from schedulers.plugins.tainttoleration import has_soft_taint
from schedulers.podgroups import PodGroupView
from schedulers.queue import SchedulingQueue

log = logging.getLogger("scheduler")

Key = tuple[str, str]  # (namespace, name)

RESOURCE = "resource.k8s.io"

# The plugins that register upstream's AssignedPod Delete event (a pod leaving its node frees its
# cpu, memory, pod slot and ports, and ends its affinity and spread terms). DynamicResources is
# not one: what a pod's claims hold is freed by the claim events that follow (deallocation), and
# an attempt before them only fails again and lengthens the pod's backoff.
ASSIGNED_POD_DELETE_PLUGINS = (RESOURCES_PLUGIN, PORTS_PLUGIN, AFFINITY_PLUGIN, SPREAD_PLUGIN)


@dataclass
class Nomination:
    """What a preemptor holds on the node where it preempted (upstream's nominated pod, plus
    KEP-5690's claim nomination)."""

    pod: Key
    node: str
    priority: int
    requests: Resources
    allocations: list[Mapping[str, Any]]  # the devices its unallocated claims would get there
    victim_claims: set[str]  # uids of victims' claims whose release the preemption counted on


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata``, empty when missing."""
    return obj.get("metadata") or {}


def is_pod_reference(ref: Mapping[str, Any]) -> bool:
    """Whether a ``reservedFor`` entry names a pod (rather than a workload)."""
    return not ref.get("apiGroup") and ref.get("resource") == "pods"


def _results(allocation: Mapping[str, Any]) -> Any:
    """What of an allocation takes devices (all AllocatedState counts)."""
    return (allocation.get("devices") or {}).get("results")


def _resource_version(obj: Mapping[str, Any] | None) -> int:
    try:
        return int(meta(obj or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class _NamespaceLabels(Mapping[str, Mapping[str, str]]):
    """Namespace name -> labels, read from the namespace informer (the allocator's view)."""

    def __init__(self, namespaces: Informer) -> None:
        self._namespaces = namespaces

    def __getitem__(self, name: str) -> Mapping[str, str]:
        namespace = self._namespaces.get("", name)
        if namespace is None:
            raise KeyError(name)
        return meta(namespace).get("labels") or {}

    def __iter__(self) -> Iterator[str]:
        keys = self._namespaces.keys()
        return (name for _, name in keys)

    def __len__(self) -> int:
        return len(self._namespaces.keys())


class SchedulerCache:
    """Informers and the state derived from them for one scheduler name; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        queue: SchedulingQueue[Key, Key],
        *,
        scheduler_name: str = "default-scheduler",
        features: AllocatorFeatures | None = None,
        watch_timeout_seconds: int | None = None,
    ) -> None:
        self.client = client
        self.queue = queue
        self.scheduler_name = scheduler_name
        # The scheduler names whose pods this cache follows (an observer follows several).
        self.followed: frozenset[str] = frozenset((scheduler_name,))
        self.features = features or AllocatorFeatures()
        self.index = ResourceIndex(features=self.features)
        self.search_cache = SearchCache()  # successful device searches per node, reused across cycles

        def informer(group: str, plural: str, compact: bool = False) -> Informer:
            return Informer(client, resource_path(group, "v1", plural), name=plural, watch_timeout_seconds=watch_timeout_seconds, compact=compact)

        self.pods = informer("", "pods")
        self.nodes = informer("", "nodes")
        self.claims = informer(RESOURCE, "resourceclaims")
        # Slices are the largest objects by far: kept as JSON, read only when the index prepares
        # their devices (the index keeps what it selects pools and nodes by).
        self.slices = informer(RESOURCE, "resourceslices", compact=True)
        self.classes = informer(RESOURCE, "deviceclasses")
        self.taint_rules = informer(RESOURCE, "devicetaintrules")
        # Admin access is only for namespaces with the admin-access label, checked again at allocation.
        self.namespaces = informer("", "namespaces")
        # PodTopologySpread's cluster defaults spread the pods a Service selects or a controller owns.
        self.services = informer("", "services")
        self.replication_controllers = informer("", "replicationcontrollers")
        self.replica_sets = informer("apps", "replicasets")
        self.stateful_sets = informer("apps", "statefulsets")
        self._services_by_namespace: Index[str] = Index(self.services, lambda s: [meta(s).get("namespace", "")])
        # TaintToleration scores only while some node has a PreferNoSchedule taint.
        self._soft_tainted_nodes: Index[bool] = Index(self.nodes, lambda n: (True,) if has_soft_taint(n) else ())
        self.informers = [
            self.pods, self.nodes, self.claims, self.slices, self.classes, self.taint_rules, self.namespaces,
            self.services, self.replication_controllers, self.replica_sets, self.stateful_sets,
        ]  # fmt: skip
        self.namespace_labels: Mapping[str, Mapping[str, str]] = _NamespaceLabels(self.namespaces)

        # Node accounting: pod uid -> (node, requests), for bound and assumed pods.
        self._pod_usage: dict[str, tuple[str, Resources]] = {}
        self._node_used: dict[str, Resources] = {}
        self.node_pods: dict[str, int] = {}  # node -> pods charged to it
        self._node_names: list[str] | None = None
        self._node_allocatable: dict[str, tuple[Obj, Resources]] = {}
        # node -> (allocatable, requests key, NodeResourcesFit reasons): most nodes a cycle visits
        # did not change since the last pod with the same requests, so the Fraction sums are reused.
        self._fit_memo: dict[str, tuple[Resources, RequestsKey, list[str]]] = {}
        self._binding: dict[Key, str] = {}  # assumed pods (a binding task is writing them) -> pod uid
        self._on_node: dict[str, dict[str, Key]] = {}  # node -> uid -> key of the pods charged to it
        self._with_affinity: dict[str, Key] = {}  # uid -> key of the charged pods with pod (anti-)affinity terms
        # Preemption: nominations by pod uid, and the uids nominated per node.
        self.nominations: dict[str, Nomination] = {}
        self.nominated_on: dict[str, set[str]] = {}

        # Claims: written-but-not-yet-watched versions, in-flight allocations, effective allocations.
        self._assumed_claims: dict[Key, Obj] = {}
        self._in_flight: dict[str, tuple[Mapping[str, Any], str]] = {}  # claim uid -> (allocation being written, pod uid)
        self._allocations: dict[str, Mapping[str, Any]] = {}  # claim uid -> effective allocation
        self._state: AllocatedState | None = None
        # Extended resources backed by devices: pod uid -> its special claim; resource -> class.
        self._special_claims: dict[str, Key] = {}
        self._resource_classes: dict[str, str] | None = None
        self._wire()
        # PodGroups exist only with GenericWorkload (the server does not serve them otherwise).
        self.groups: PodGroupView | None = None
        if self.features.generic_workload:
            self.groups = PodGroupView(client, self.pods, queue.claim_ready, watch_timeout_seconds=watch_timeout_seconds)
            self.informers.append(self.groups.groups)

    async def check_served(self) -> None:
        """PodGroups need GenericWorkload and a --runtime-config that serves them: without them the
        scheduler treats pods as if they named no group. DeviceTaintRules reached resource.k8s.io/v1
        after DRA did: on a cluster that serves no v1 rules (v1.34, v1.35) there are none to honour,
        as kube-scheduler there honours none with its default gates."""
        if not await self.client.serves(RESOURCE, "v1", "devicetaintrules"):
            log.warning("the server does not serve %s/v1 devicetaintrules; no device taint rule applies", RESOURCE)
            self.informers.remove(self.taint_rules)
        groups = self.groups
        if groups is not None and not await self.client.serves(podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL):
            log.warning("the server does not serve %s/%s %s; pods are scheduled without their groups", podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL)
            self.informers.remove(groups.groups)
            self.groups = None

    def _wire(self) -> None:
        self.pods.on_add(self._pod_added)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_deleted)
        self.nodes.on_add(self._node_added)
        self.nodes.on_update(self._node_updated)
        self.nodes.on_delete(self._node_deleted)
        self.claims.on_add(self._claim_added)
        self.claims.on_update(self._claim_updated)
        self.claims.on_delete(self._claim_deleted)
        self.slices.on_add(lambda s: self._slice_set(s))
        self.slices.on_update(lambda _old, s: self._slice_set(s))
        self.slices.on_delete(lambda s: self.index.remove_slice(meta(s).get("name", "")))
        self.classes.on_add(lambda c: self._class_set(c))
        self.classes.on_update(lambda _old, c: self._class_set(c))
        self.classes.on_delete(self._class_deleted)
        self.taint_rules.on_add(lambda r: self._rule_set(r))
        self.taint_rules.on_update(lambda _old, r: self._rule_set(r))
        self.taint_rules.on_delete(self._rule_deleted)
        self.namespaces.on_update(self._namespace_updated)

    # ------------------------------------------------------------------ pods

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """A pod this scheduler should place: pending, ours, not gated, not being deleted."""
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or "default-scheduler") in self.followed
            and not spec.get("schedulingGates")
            and not meta(pod).get("deletionTimestamp")
            and not _terminal(pod)
        )

    def follows(self, scheduler_name: str) -> bool:
        """Whether pods asking for ``scheduler_name`` are this cache's to place (or to explain)."""
        return scheduler_name in self.followed

    def is_binding(self, key: Key) -> bool:
        """Whether a binding task is writing this pod (its outcome decides what happens next)."""
        return key in self._binding

    def assume_pod(self, pod: Obj, node: str, requests: Resources) -> None:
        """Charge the pod to ``node`` while its binding is written."""
        uid = meta(pod).get("uid", "")
        self._charge(uid, node, requests, pod)
        self._binding[object_key(pod)] = uid

    def finish_binding(self, pod: Obj) -> None:
        """The pod is bound: it stays charged to its node, its binding task is over."""
        self._binding.pop(object_key(pod), None)

    def forget_pod(self, pod: Obj) -> None:
        """The binding failed: the pod no longer uses its node."""
        self._release(meta(pod).get("uid", ""))
        self._binding.pop(object_key(pod), None)

    def _pod_added(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self._account_bound(pod)
            self._placed_changed(None, pod)
        elif self.wants(pod):
            self.queue.add(object_key(pod), pod_priority(pod))

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        key = object_key(pod)
        if (pod.get("spec") or {}).get("nodeName"):
            if self.nominations:
                self.forget_nomination(meta(pod).get("uid", ""))
            self.queue.delete(key)
            was_counted = meta(pod).get("uid", "") in self._pod_usage
            self._account_bound(pod)
            if was_counted and _terminal(pod) and not _terminal(old):
                self._assigned_pod_left()
            elif not (old.get("spec") or {}).get("nodeName") or meta(old).get("labels") != meta(pod).get("labels"):
                self._placed_changed(old if (old.get("spec") or {}).get("nodeName") else None, pod)
            return
        if not self.wants(pod):
            self.queue.delete(key)
            return
        if key in self._binding:
            return  # our own binding is under way; its outcome decides
        if not self.wants(old) or self._relevant_change(old, pod):
            self.queue.add(key, pod_priority(pod))

    def _placed_changed(self, old: Obj | None, pod: Obj) -> None:
        """A pod was placed (``old`` None) or a placed pod's labels changed: pods that pod affinity
        or topology spread rejected may fit now (upstream's AssignedPod Add / UpdatePodLabel
        events, with its plugins' queueing hints)."""

        def may_help(key: Key) -> bool:
            target = self.pods.get(*key)
            if target is None:
                return False
            if old is None:
                return affinity_requeue_after_add(target, pod) or spread_requeue_after_add(target, pod)
            return affinity_requeue_after_relabel(target, old, pod) or spread_requeue_after_relabel(target, old, pod)

        self.queue.move_rejected_by((AFFINITY_PLUGIN, SPREAD_PLUGIN), may_help)

    @staticmethod
    def _relevant_change(old: Obj, new: Obj) -> bool:
        # Our own PodScheduled condition writes must not trigger another attempt.
        return (
            old.get("spec") != new.get("spec")
            or meta(old).get("labels") != meta(new).get("labels")
            or (old.get("status") or {}).get("resourceClaimStatuses") != (new.get("status") or {}).get("resourceClaimStatuses")
        )

    def _pod_deleted(self, pod: Obj) -> None:
        self.queue.delete(object_key(pod))
        if self.nominations and self.forget_nomination(meta(pod).get("uid", "")):
            self.queue.move_all()  # what it held is free for others
        if self._release(meta(pod).get("uid", "")):
            self._assigned_pod_left()

    def _assigned_pod_left(self) -> None:
        """A pod left its node (deleted or finished): upstream's AssignedPod Delete event, for the
        pods the plugins registered for it rejected (and preemptors waiting for their victims)."""
        self.queue.move_rejected_by(ASSIGNED_POD_DELETE_PLUGINS, lambda _key: True, unrecorded=True)

    def _account_bound(self, pod: Obj) -> None:
        uid = meta(pod).get("uid", "")
        if _terminal(pod):
            self._release(uid)
        elif uid not in self._pod_usage:
            # What the pod's claims charge counts only while the gate is on, as upstream's PodRequests.
            requests = pod_requests(pod, node_allocatable=self.features.node_allocatable_resources)
            self._charge(uid, (pod.get("spec") or {}).get("nodeName", ""), requests, pod)

    def _charge(self, uid: str, node: str, requests: Resources, pod: Obj) -> None:
        key = object_key(pod)
        self._pod_usage[uid] = (node, requests)
        self._on_node.setdefault(node, {})[uid] = key
        if has_pod_affinity(pod):
            self._with_affinity[uid] = key
        self._fit_memo.pop(node, None)
        used = self._node_used.setdefault(node, {})
        for name, amount in requests.items():
            used[name] = used.get(name, Fraction(0)) + amount
        self.node_pods[node] = self.node_pods.get(node, 0) + 1

    def _release(self, uid: str) -> bool:
        entry = self._pod_usage.pop(uid, None)
        if entry is None:
            return False
        node, requests = entry
        self._on_node.get(node, {}).pop(uid, None)
        self._with_affinity.pop(uid, None)
        self._fit_memo.pop(node, None)
        used = self._node_used.get(node, {})
        for name, amount in requests.items():
            used[name] = used.get(name, Fraction(0)) - amount
        self.node_pods[node] = self.node_pods.get(node, 1) - 1
        return True

    def pods_on(self, node: str) -> list[tuple[Obj, Resources]]:
        """The pods charged to ``node`` (bound, and assumed while their binding is written) with
        what each charges it."""
        out = []
        for uid, key in self._on_node.get(node, {}).items():
            pod = self.pods.get(*key)
            if pod is not None and meta(pod).get("uid") == uid:
                out.append((pod, self._pod_usage[uid][1]))
        return out

    def placed_pods(self) -> Iterator[tuple[Obj, str]]:
        """Every pod charged to a node, with the node's name (upstream's NodeInfo pods)."""
        get = self.pods.get
        for node, pods in self._on_node.items():
            for uid, key in pods.items():
                pod = get(*key)
                if pod is not None and meta(pod).get("uid") == uid:
                    yield pod, node

    def pods_with_affinity(self) -> list[tuple[Obj, str]]:
        """The charged pods that have pod affinity or anti-affinity terms, with their nodes."""
        out = []
        for uid, key in self._with_affinity.items():
            pod = self.pods.get(*key)
            if pod is not None and meta(pod).get("uid") == uid:
                out.append((pod, self._pod_usage[uid][0]))
        return out

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        """The node's labels, None when the node is not known."""
        node = self.nodes.get("", name)
        return None if node is None else meta(node).get("labels") or {}

    def node_objects(self) -> list[Obj]:
        """Every node, in name order."""
        get = self.nodes.get
        return [node for name in self.node_names() if (node := get("", name)) is not None]

    def default_spread_selector(self, pod: Obj) -> LabelSelector:
        """What PodTopologySpread's cluster defaults count for the pod: the selectors of the Services
        selecting it and of the controller owning it (upstream's DefaultSelector)."""
        namespace = meta(pod).get("namespace", "")
        owner = next((o for o in meta(pod).get("ownerReferences") or [] if o.get("controller")), None)
        if owner is None and not self._services_by_namespace.get(namespace):
            return EVERYTHING  # nothing selects the pod (the common case, cheaply)
        owning: Obj | None = None
        if owner is not None:
            informer = {
                ("v1", "ReplicationController"): self.replication_controllers,
                ("apps/v1", "ReplicaSet"): self.replica_sets,
                ("apps/v1", "StatefulSet"): self.stateful_sets,
            }.get((owner.get("apiVersion", ""), owner.get("kind", "")))
            owning = informer.get(namespace, owner.get("name", "")) if informer is not None else None
        return default_selector(pod, self._services_by_namespace.get(namespace), owning)

    def any_soft_tainted_node(self) -> bool:
        """Whether any node has a PreferNoSchedule taint (TaintToleration's scoring)."""
        return len(self._soft_tainted_nodes) > 0

    def node_usage(self, node: str) -> tuple[Resources, int]:
        """What the pods charged to ``node`` use, and how many they are."""
        return self._node_used.get(node, {}), self.node_pods.get(node, 0)

    # ------------------------------------------------------------------ nominations

    def nominate(self, nomination: Nomination, uid: str) -> None:
        """Hold ``nomination`` for the pod ``uid`` (replacing an earlier one)."""
        self.forget_nomination(uid)
        self.nominations[uid] = nomination
        self.nominated_on.setdefault(nomination.node, set()).add(uid)
        self._fit_memo.pop(nomination.node, None)

    def forget_nomination(self, uid: str) -> bool:
        """Drop the pod's nomination (bound, deleted, or nominated elsewhere); whether it had one."""
        nomination = self.nominations.pop(uid, None)
        if nomination is None:
            return False
        uids = self.nominated_on.get(nomination.node)
        if uids is not None:
            uids.discard(uid)
            if not uids:
                del self.nominated_on[nomination.node]
        self._fit_memo.pop(nomination.node, None)
        return True

    def nominated_for(self, node: str, pod_uid: str, priority: int) -> list[Nomination]:
        """Nominations on ``node`` a pod of ``priority`` must leave alone: other pods' of no lower priority."""
        uids = self.nominated_on.get(node)
        if not uids:
            return []
        return [n for uid in uids if uid != pod_uid and (n := self.nominations[uid]).priority >= priority]

    def claims_still_allocated(self, uids: set[str]) -> bool:
        """Whether any of these claims (a preemption's victims') still has its allocation."""
        return any(uid in self._allocations for uid in uids)

    # ------------------------------------------------------------------ nodes

    def node_names(self) -> list[str]:
        """Node names, sorted (the cycle starts at a moving offset)."""
        if self._node_names is None:
            keys = self.nodes.keys()
            self._node_names = sorted(name for _, name in keys)
        return self._node_names

    def allocatable(self, node: Obj) -> Resources:
        """The node's allocatable resources, parsed once per node object the informer holds."""
        name = meta(node).get("name", "")
        cached = self._node_allocatable.get(name)
        if cached is None or cached[0] is not node:
            cached = (node, node_allocatable(node))
            self._node_allocatable[name] = cached
        return cached[1]

    def insufficient(self, name: str, node: Obj, requests: Resources, memo_key: RequestsKey | None = None) -> list[str]:
        """NodeResourcesFit reasons for ``requests`` on ``node`` next to the pods charged to it.

        With ``memo_key`` (the requests in exact integers) the verdict is remembered until the
        node's usage or allocatable changes.
        """
        allocatable = self.allocatable(node)
        if memo_key is None:
            return insufficient(requests, self._node_used.get(name, {}), self.node_pods.get(name, 0), allocatable)
        cached = self._fit_memo.get(name)
        if cached is not None and cached[0] is allocatable and cached[1] == memo_key:
            return cached[2]
        short = insufficient(requests, self._node_used.get(name, {}), self.node_pods.get(name, 0), allocatable)
        self._fit_memo[name] = (allocatable, memo_key, short)
        return short

    def _node_added(self, node: Obj) -> None:
        self._node_names = None
        self.queue.move_all()

    def _node_updated(self, old: Obj, node: Obj) -> None:
        o_spec, n_spec = old.get("spec") or {}, node.get("spec") or {}
        if (
            meta(old).get("labels") != meta(node).get("labels")
            or o_spec.get("taints") != n_spec.get("taints")
            or o_spec.get("unschedulable") != n_spec.get("unschedulable")
            or (old.get("status") or {}).get("allocatable") != (node.get("status") or {}).get("allocatable")
        ):
            self.queue.move_all()

    def _node_deleted(self, node: Obj) -> None:
        self._node_names = None
        self._node_allocatable.pop(meta(node).get("name", ""), None)
        self.search_cache.discard(meta(node).get("name", ""))

    # ------------------------------------------------------------------ slices, classes, rules, namespaces

    def _slice_set(self, obj: Obj) -> None:
        name = meta(obj).get("name", "")
        self.index.set_slice(obj, load=lambda: self.slices.peek("", name))
        self.queue.move_all()

    def _class_set(self, obj: Obj) -> None:
        self.index.set_class(obj)
        self._resource_classes = None
        self.queue.move_all()

    def _class_deleted(self, obj: Obj) -> None:
        self.index.remove_class(meta(obj).get("name", ""))
        self._resource_classes = None

    def resource_classes(self) -> Mapping[str, str]:
        """Extended resource name -> the class that serves it with devices."""
        if self._resource_classes is None:
            self._resource_classes = resource_classes(self.classes.list())
        return self._resource_classes

    def special_claim_of(self, pod_uid: str) -> Obj | None:
        """The special claim (extended resources) created for the pod, if one exists."""
        key = self._special_claims.get(pod_uid)
        return self.claim(*key) if key is not None else None

    def _track_special_claim(self, claim: Obj, gone: bool = False) -> None:
        owner = owned_special_claim_of(claim)
        if owner is None:
            return
        if gone:
            if self._special_claims.get(owner) == object_key(claim):
                del self._special_claims[owner]
        else:
            self._special_claims[owner] = object_key(claim)

    def _rule_set(self, obj: Obj) -> None:
        self.index.set_taint_rule(obj)
        self.queue.move_all()

    def _rule_deleted(self, obj: Obj) -> None:
        self.index.remove_taint_rule(meta(obj).get("name", ""))
        self.queue.move_all()  # untainted devices may fit now

    def _namespace_updated(self, old: Obj, namespace: Obj) -> None:
        if meta(old).get("labels") != meta(namespace).get("labels"):
            self.queue.move_all()  # the admin-access label may allow a claim now

    # ------------------------------------------------------------------ claims

    def claim(self, namespace: str, name: str) -> Obj | None:
        """The newest known version of a claim: the informer's, or one this scheduler just wrote."""
        informed = self.claims.get(namespace, name)
        assumed = self._assumed_claims.get((namespace, name))
        if assumed is not None and (informed is None or _resource_version(assumed) > _resource_version(informed)):
            return assumed
        return informed

    def effective_allocation(self, claim_uid: str) -> Mapping[str, Any] | None:
        """The claim's allocation as this scheduler counts it: in flight, assumed or informed."""
        return self._allocations.get(claim_uid)

    def allocating_pod(self, claim_uid: str) -> str | None:
        """The uid of the pod whose allocation of this claim is being written, if any."""
        in_flight = self._in_flight.get(claim_uid)
        return in_flight[1] if in_flight is not None else None

    def in_flight_allocations(self) -> dict[str, Mapping[str, Any]]:
        """Claim uid -> the allocation a binding task is writing (counted as the claim's until written or dropped)."""
        return {uid: allocation for uid, (allocation, _pod_uid) in self._in_flight.items()}

    def assume_allocation(self, claim: Obj, allocation: Mapping[str, Any], pod_uid: str) -> None:
        """Count ``allocation`` as the claim's while ``pod_uid``'s binding task writes it."""
        self._in_flight[meta(claim).get("uid", "")] = (allocation, pod_uid)
        self._refresh(claim)

    def forget_allocation(self, claim: Obj, pod_uid: str) -> None:
        """Drop ``pod_uid``'s in-flight allocation of the claim (its write failed)."""
        uid = meta(claim).get("uid", "")
        in_flight = self._in_flight.get(uid)
        if in_flight is None or in_flight[1] != pod_uid:
            return
        del self._in_flight[uid]
        key = object_key(claim)
        current = self.claim(*key)
        self._refresh(current or claim, gone=current is None)
        self.queue.claim_ready(key)

    def assume_claim(self, obj: Obj) -> None:
        """A claim this scheduler wrote: newest known version until the informer catches up; its in-flight state ends."""
        key = object_key(obj)
        self._track_special_claim(obj)
        informed = self.claims.get(*key)
        if informed is None or _resource_version(obj) > _resource_version(informed):
            self._assumed_claims[key] = obj
        self._in_flight.pop(meta(obj).get("uid", ""), None)
        self._refresh(obj)
        self.queue.claim_ready(key)

    def _claim_added(self, claim: Obj) -> None:
        self._track_special_claim(claim)
        self._refresh(claim)
        self.queue.claim_ready(object_key(claim))

    def _claim_updated(self, old: Obj, claim: Obj) -> None:
        key = object_key(claim)
        assumed = self._assumed_claims.get(key)
        if assumed is not None and (_resource_version(claim) >= _resource_version(assumed) or meta(assumed).get("uid") != meta(claim).get("uid")):
            del self._assumed_claims[key]
        self._refresh(claim)
        o_status, n_status = old.get("status") or {}, claim.get("status") or {}
        freed = (o_status.get("allocation") and not n_status.get("allocation")) or len(n_status.get("reservedFor") or []) < len(
            o_status.get("reservedFor") or []
        )
        if freed:
            self.queue.move_all()
        self.queue.claim_ready(key)

    def _claim_deleted(self, claim: Obj) -> None:
        self._track_special_claim(claim, gone=True)
        self._assumed_claims.pop(object_key(claim), None)
        self._refresh(claim, gone=True)
        if (claim.get("status") or {}).get("allocation"):
            self.queue.move_all()

    def _refresh(self, claim: Obj, gone: bool = False) -> None:
        """Recompute one claim's effective allocation (in-flight, else newest known version)."""
        uid = meta(claim).get("uid", "")
        in_flight = self._in_flight.get(uid)
        allocation: Mapping[str, Any] | None
        if in_flight is not None:
            allocation = in_flight[0]
        elif gone:
            allocation = None
        else:
            current = self.claim(*object_key(claim))
            allocation = (current or {}).get("status", {}).get("allocation") if current else None
        old = self._allocations.get(uid)
        if allocation:
            self._allocations[uid] = allocation
        else:
            self._allocations.pop(uid, None)
        if old == allocation or (not old and not allocation):
            return
        if old and allocation and _results(old) == _results(allocation):
            # The same devices (the stored copy only adds fields such as allocationTimestamp):
            # the state, and every free list and search cached against it, stay valid.
            return
        if not old and self._state is not None:
            self._state.add_allocation(allocation)  # only adds: cheap incremental update
        else:
            self._state = None  # something was freed or changed: rebuild lazily

    def allocation_of(self, claim_uid: str) -> Mapping[str, Any] | None:
        """The claim's effective allocation (in flight, assumed or informed), None when it has none."""
        return self._allocations.get(claim_uid)

    def allocated_state(self) -> AllocatedState:
        """Devices taken by allocated claims (informer + assumed) and in-flight allocations."""
        if self._state is None:
            state = AllocatedState()
            for allocation in self._allocations.values():
                state.add_allocation(allocation)
            self._state = state
        return self._state
