"""PodTopologySpread: spread pods evenly over topology domains (upstream's PodTopologySpread).

A constraint counts the placed pods of the pod's namespace that its ``labelSelector`` selects
(plus ``matchLabelKeys``' values of the pod), terminating pods aside, per topology domain (the
nodes with one value of ``topologyKey``). Nodes count as domains only if they have every
constraint's topology key, and, by ``nodeAffinityPolicy`` (default Honor) and
``nodeTaintsPolicy`` (default Ignore), match the pod's node selection and tolerate its taints.

* *Filter* (``whenUnsatisfiable: DoNotSchedule``): placing the pod must keep the node's domain at
  most ``maxSkew`` above the least populated domain (taken as 0 while there are fewer domains
  than ``minDomains``); a node without the topology key is unresolvable. Upstream's messages:
  ``node(s) didn't match pod topology spread constraints`` (preemption may help) and ``...
  (missing required label)``.
* *Score* (``ScheduleAnyway``): fewer matching pods in the node's domains score higher, each
  constraint weighted by the log of its number of domains; normalised to 0..100.
* A pod without constraints gets the cluster defaults, as upstream's system defaulting: hostname
  (maxSkew 3) and zone (maxSkew 5), both ScheduleAnyway, over the pods selected by the Services
  that select the pod and by the ReplicaSet, ReplicationController or StatefulSet that owns it;
  none when nothing selects it. Nodes without a zone label still score by hostname then.

Preemption asks the filter with victims removed (:meth:`PodTopologySpread.without`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from kube.errors import ApiError
from kube.labels import EQUALS, LabelSelector, Requirement, selector_from_label_selector_object, selector_from_set
from kube.objects import Obj, meta
from schedulers.framework import SKIP, CycleState, ExplainContext, Reason, Status, reasons_of
from schedulers.plugins.nodeaffinity import matches_node_selector_and_affinity
from schedulers.plugins.tainttoleration import untolerated_taint

NAME = "PodTopologySpread"
KIND = "PodTopologySpreadNotSatisfied"  # an explanation's reason kind
REASON_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_CONSTRAINTS + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
WEIGHT = 2  # upstream's default profile weight
MAX_SCORE = 100
# Upstream's system default constraints (ScheduleAnyway: they only score).
SYSTEM_DEFAULTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
)

SOFT = NAME + "/soft"  # the cycle state's key of the pod's ScheduleAnyway constraints

_SKEW = Status.unschedulable(REASON_CONSTRAINTS, plugin=NAME)
_MISSING_LABEL = Status.unresolvable(REASON_MISSING_LABEL, plugin=NAME)


class Constraint:
    """One spread constraint as the scheduler counts it."""

    __slots__ = ("honor_affinity", "honor_taints", "max_skew", "min_domains", "selector", "topology_key")

    def __init__(self, raw: Mapping[str, Any], selector: LabelSelector) -> None:
        self.max_skew = int(raw.get("maxSkew") or 0)
        self.topology_key: str = raw.get("topologyKey", "")
        self.selector = selector
        self.min_domains = int(raw.get("minDomains") or 1)
        self.honor_affinity = (raw.get("nodeAffinityPolicy") or "Honor") == "Honor"
        self.honor_taints = (raw.get("nodeTaintsPolicy") or "Ignore") == "Honor"

    def includes(self, pod: Obj, node: Obj) -> bool:
        """Whether the node's pods count for this constraint (nodeAffinityPolicy, nodeTaintsPolicy)."""
        if self.honor_affinity and not matches_node_selector_and_affinity(pod, node):
            return False
        return not (self.honor_taints and untolerated_taint(pod, node) is not None)


def constraints_of(pod: Mapping[str, Any], raw: Iterable[Mapping[str, Any]], action: str, selector: LabelSelector | None = None) -> list[Constraint]:
    """The pod's constraints with ``whenUnsatisfiable == action``, their selectors with the pod's
    ``matchLabelKeys`` values merged in (``selector``, when given, is the defaults' selector)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    out = []
    for c in raw:
        if (c.get("whenUnsatisfiable") or "DoNotSchedule") != action:
            continue
        chosen = selector if selector is not None else selector_from_label_selector_object(c.get("labelSelector"))
        keys = [(k, labels[k]) for k in c.get("matchLabelKeys") or [] if k in labels]
        if keys and not chosen.matches_nothing:
            chosen = chosen.add(*(Requirement(k, EQUALS, (v,)) for k, v in keys))
        out.append(Constraint(c, chosen))
    return out


class SpreadCache(Protocol):
    """What this plugin reads of the scheduler's cache."""

    def placed_pods(self) -> Iterable[tuple[Obj, str]]: ...

    def node_objects(self) -> Iterable[Obj]: ...

    def default_spread_selector(self, pod: Obj) -> LabelSelector: ...


class SpreadState:
    """PreFilter's matching pods per domain for each DoNotSchedule constraint."""

    __slots__ = ("constraints", "counts", "minimums")

    def __init__(self, constraints: list[Constraint]) -> None:
        self.constraints = constraints
        self.counts: list[dict[str, int]] = [{} for _ in constraints]  # per constraint: domain value -> matching pods
        self.minimums: list[int] = []

    def settle(self) -> None:
        """The global minimum per constraint (0 while there are fewer domains than minDomains)."""
        self.minimums = [min(counts.values()) if len(counts) >= c.min_domains and counts else 0 for c, counts in zip(self.constraints, self.counts, strict=True)]

    def copy(self) -> SpreadState:
        other = SpreadState(self.constraints)
        other.counts = [dict(c) for c in self.counts]
        other.minimums = list(self.minimums)
        return other


class ScoreState:
    """PreScore's domains, weights and counts for each ScheduleAnyway (or default) constraint."""

    __slots__ = ("constraints", "domain_counts", "ignored", "node_counts", "weights")

    def __init__(self, constraints: list[Constraint]) -> None:
        self.constraints = constraints
        self.ignored: set[str] = set()
        self.domain_counts: list[dict[str, int]] = [{} for _ in constraints]
        self.node_counts: list[dict[str, int]] = [{} for _ in constraints]  # hostname constraints: per node
        self.weights: list[float] = []


def _matching_per_node(pods: Iterable[tuple[Obj, str]], namespace: str, constraints: Sequence[Constraint]) -> list[dict[str, int]]:
    """Per constraint, node -> the placed pods of ``namespace`` its selector matches (not terminating)."""
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for placed, node in pods:
        placed_meta = placed.get("metadata") or {}
        if placed_meta.get("deletionTimestamp") or placed_meta.get("namespace", "") != namespace:
            continue
        labels = placed_meta.get("labels") or {}
        for i, c in enumerate(constraints):
            if c.selector.matches(labels):
                counts[i][node] = counts[i].get(node, 0) + 1
    return counts


def _has_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


class PodTopologySpread:
    """The plugin; see the module docstring."""

    name = NAME
    weight = WEIGHT

    def __init__(self, cache: SpreadCache, system_defaults: bool = True) -> None:
        self.cache = cache
        self.system_defaults = system_defaults

    def _constraints(self, pod: Obj, action: str) -> list[Constraint]:
        explicit = (pod.get("spec") or {}).get("topologySpreadConstraints")
        if explicit:
            return constraints_of(pod, explicit, action)
        if not self.system_defaults or action != "ScheduleAnyway":
            return []
        selector = self.cache.default_spread_selector(pod)
        return constraints_of(pod, SYSTEM_DEFAULTS, action, selector) if not selector.empty else []

    def may_score(self, state: CycleState, pod: Obj) -> bool:
        """Whether the pod has soft constraints (its own, or the cluster defaults) to score by;
        they are kept for ``pre_score``."""
        try:
            constraints = self._constraints(pod, "ScheduleAnyway")
        except ApiError:
            return True  # pre_score says what is wrong
        if constraints:
            state.write(SOFT, constraints)
        return bool(constraints)

    # --- PreFilter ---

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        if not (pod.get("spec") or {}).get("topologySpreadConstraints"):
            return SKIP  # defaults only score
        try:
            constraints = self._constraints(pod, "DoNotSchedule")
        except ApiError as exc:
            return Status.as_error(exc, plugin=NAME)
        if not constraints:
            return SKIP
        s = SpreadState(constraints)
        per_node = _matching_per_node(self.cache.placed_pods(), meta(pod).get("namespace", ""), constraints)
        for node in self.cache.node_objects():
            labels = meta(node).get("labels") or {}
            if not _has_keys(labels, constraints):
                continue
            name = meta(node).get("name", "")
            for i, c in enumerate(constraints):
                if c.includes(pod, node):
                    value = labels[c.topology_key]
                    s.counts[i][value] = s.counts[i].get(value, 0) + per_node[i].get(name, 0)
        s.settle()
        state.write(NAME, s)
        return None

    def without(self, state: CycleState, removed: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``removed`` (placed pods and their Node objects) were gone (preemption's
        RemovePod); call it on a copy of the cycle state."""
        self._shift(state, removed, -1)

    def adding(self, state: CycleState, added: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``added`` (pods nominated to the given Node objects) were placed there
        (AddPod); call it on a copy of the cycle state."""
        self._shift(state, added, 1)

    def _shift(self, state: CycleState, pods: Iterable[tuple[Obj, Obj]], delta: int) -> None:
        s: SpreadState | None = state.data.get(NAME)
        if s is None:
            return
        s = s.copy()
        pod = state.pod
        namespace = meta(pod).get("namespace", "")
        for placed, node in pods:
            labels = meta(node).get("labels") or {}
            if meta(placed).get("namespace", "") != namespace or not _has_keys(labels, s.constraints):
                continue
            placed_labels = meta(placed).get("labels") or {}
            for i, c in enumerate(s.constraints):
                if c.selector.matches(placed_labels) and c.includes(pod, node):
                    value = labels[c.topology_key]
                    s.counts[i][value] = s.counts[i].get(value, 0) + delta
        s.settle()
        state.data[NAME] = s

    # --- Filter ---

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        s: SpreadState = state.data[NAME]
        labels = (node.get("metadata") or {}).get("labels") or {}
        pod_labels = (pod.get("metadata") or {}).get("labels") or {}
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return _MISSING_LABEL
            own = 1 if c.selector.matches(pod_labels) else 0
            if s.counts[i].get(value, 0) + own - s.minimums[i] > c.max_skew:
                return _SKEW
        return None

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        status = self.filter(state, pod, node)
        return reasons_of(status, KIND) if status is not None else []

    # --- Score ---

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[Obj]) -> Status | None:
        constraints: list[Constraint] | None = state.data.get(SOFT)
        if constraints is None:
            try:
                constraints = self._constraints(pod, "ScheduleAnyway")
            except ApiError as exc:
                return Status.as_error(exc, plugin=NAME)
        if not constraints or not nodes:
            return SKIP
        s = ScoreState(constraints)
        # Nodes without every topology key are not scored, except under the cluster defaults
        # (nodes without a zone still spread by hostname).
        require_all = bool((pod.get("spec") or {}).get("topologySpreadConstraints")) or not self.system_defaults
        sizes = [0] * len(constraints)
        for node in nodes:
            labels = meta(node).get("labels") or {}
            if require_all and not _has_keys(labels, constraints):
                s.ignored.add(meta(node).get("name", ""))
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != HOSTNAME and c.topology_key in labels and labels[c.topology_key] not in s.domain_counts[i]:
                    s.domain_counts[i][labels[c.topology_key]] = 0
                    sizes[i] += 1
        for i, c in enumerate(constraints):
            size = len(nodes) - len(s.ignored) if c.topology_key == HOSTNAME else sizes[i]
            s.weights.append(math.log(size + 2))
        per_node = _matching_per_node(self.cache.placed_pods(), meta(pod).get("namespace", ""), constraints)
        for node in self.cache.node_objects():
            labels = meta(node).get("labels") or {}
            if require_all and not _has_keys(labels, constraints):
                continue
            name = meta(node).get("name", "")
            for i, c in enumerate(constraints):
                if c.topology_key not in labels or not c.includes(pod, node):
                    continue
                if c.topology_key == HOSTNAME:
                    s.node_counts[i][name] = per_node[i].get(name, 0)
                elif labels[c.topology_key] in s.domain_counts[i]:
                    s.domain_counts[i][labels[c.topology_key]] += per_node[i].get(name, 0)
        state.write(NAME + "/score", s)
        return None

    def score(self, state: CycleState, pod: Obj, node: Obj) -> int:
        s: ScoreState = state.data[NAME + "/score"]
        name = meta(node).get("name", "")
        if name in s.ignored:
            return 0
        labels = meta(node).get("labels") or {}
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            count = s.node_counts[i].get(name, 0) if c.topology_key == HOSTNAME else s.domain_counts[i].get(value, 0)
            total += count * s.weights[i] + (c.max_skew - 1)
        return _round(total)

    def normalize(self, state: CycleState, names: Sequence[str], scores: list[int]) -> list[int]:
        """Fewer matching pods, higher score: ``100 * (max + min - s) / max`` (ignored nodes 0)."""
        s: ScoreState = state.data[NAME + "/score"]
        counted = [score for name, score in zip(names, scores, strict=True) if name not in s.ignored]
        if not counted:
            return [0] * len(scores)
        low, high = min(counted), max(counted)
        out = []
        for name, score in zip(names, scores, strict=True):
            if name in s.ignored:
                out.append(0)
            elif high == 0:
                out.append(MAX_SCORE)
            else:
                out.append(MAX_SCORE * (high + low - score) // high)
        return out


def _round(value: float) -> int:
    """Go's math.Round: half away from zero."""
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def default_selector(pod: Obj, services: Iterable[Obj], owner: Obj | None) -> LabelSelector:
    """Upstream's DefaultSelector: the selectors of the Services that select the pod, and of its
    owning ReplicationController, ReplicaSet or StatefulSet (``owner``), ANDed."""
    labels = meta(pod).get("labels") or {}
    merged: dict[str, str] = {}
    for service in services:
        wanted = (service.get("spec") or {}).get("selector")
        if wanted is None:
            continue  # a nil selector selects nothing
        if all(labels.get(k) == v for k, v in wanted.items()):
            merged.update(wanted)
    if owner is None:
        return selector_from_set(merged)
    kind = owner.get("kind")
    spec = owner.get("spec") or {}
    if kind == "ReplicationController":
        merged.update(spec.get("selector") or {})
        return selector_from_set(merged)
    selector = selector_from_set(merged)
    try:
        other = selector_from_label_selector_object(spec.get("selector"))
    except ApiError:
        return selector
    if other.matches_nothing:
        return selector
    return selector.add(*other.requirements)


# --- queueing hints (upstream's isSchedulableAfterAssignedPodChange) ---


def _hard_constraints(target: Obj) -> list[Constraint]:
    return constraints_of(target, (target.get("spec") or {}).get("topologySpreadConstraints") or [], "DoNotSchedule")


def requeue_after_add(target: Obj, placed: Obj) -> bool:
    """Whether a pod placed now may let ``target`` (rejected by this plugin) fit: same namespace,
    and a constraint of the target selects it."""
    if meta(placed).get("namespace", "") != meta(target).get("namespace", ""):
        return False
    try:
        labels = meta(placed).get("labels") or {}
        return any(c.selector.matches(labels) for c in _hard_constraints(target))
    except ApiError:
        return True


def requeue_after_relabel(target: Obj, old: Obj, new: Obj) -> bool:
    """Whether a placed pod's new labels change what one of the target's constraints counts."""
    if meta(new).get("namespace", "") != meta(target).get("namespace", ""):
        return False
    try:
        before, after = meta(old).get("labels") or {}, meta(new).get("labels") or {}
        return any(c.selector.matches(before) != c.selector.matches(after) for c in _hard_constraints(target))
    except ApiError:
        return True
