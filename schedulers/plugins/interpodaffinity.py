"""InterPodAffinity: where the pod may go given the pods already placed (upstream's InterPodAffinity).

A pod affinity term selects pods (``labelSelector`` over the pods of ``namespaces`` or of the
namespaces ``namespaceSelector`` picks; the pod's own namespace when neither is given) and names a
node label (``topologyKey``): a topology domain is every node with the same value of that label.

* *Filter*: with required **affinity** the node's domain (of every term) must hold a pod that
  matches all the terms (or, when no pod anywhere does, the pod must match its own terms: the
  first of a group); with required **anti-affinity** the node's domain of each term must hold no
  matching pod; and no pod already placed may have a required anti-affinity term that matches
  the pod within the node's domain. Messages and statuses are upstream's: ``node(s) didn't match
  pod affinity rules`` (unresolvable), ``node(s) didn't match pod anti-affinity rules`` and
  ``node(s) didn't satisfy existing pods anti-affinity rules`` (both may be fixed by preemption).
* *Score*: preferred terms of the pod (and, towards it, of the pods placed: their preferred
  terms, and their required affinity terms with weight 1) add or take their weight in the domains
  of the matching pods; normalised to 0..100 over the feasible nodes.

``matchLabelKeys`` and ``mismatchLabelKeys`` are in the term's selector already: the API server
merges them with the pod's label values when it creates the pod (``kube.dra.pods.
merge_pod_affinity_label_keys``), and the scheduler reads the selector as stored, as upstream's.
Preemption asks the filter with victims removed (:meth:`InterPodAffinity.without`), as upstream's
RemovePod does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from kube.errors import ApiError
from kube.informer import object_key
from kube.labels import LabelSelector, selector_from_label_selector_object
from kube.objects import Obj, meta
from schedulers.framework import SKIP, CycleState, ExplainContext, Reason, Status, reasons_of

log = logging.getLogger("scheduler")

NAME = "InterPodAffinity"
KIND = "PodAffinityNotSatisfied"  # an explanation's reason kind
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
WEIGHT = 2  # upstream's default profile weight
HARD_POD_AFFINITY_WEIGHT = 1  # upstream's InterPodAffinityArgs default
MAX_SCORE = 100

_AFFINITY = Status.unresolvable(REASON_AFFINITY, plugin=NAME)
_ANTI_AFFINITY = Status.unschedulable(REASON_ANTI_AFFINITY, plugin=NAME)
_EXISTING_ANTI_AFFINITY = Status.unschedulable(REASON_EXISTING_ANTI_AFFINITY, plugin=NAME)

Pair = tuple[str, str]  # (topology key, value)


class AffinityTerm:
    """A pod affinity term as the scheduler matches it (upstream's framework.AffinityTerm)."""

    __slots__ = ("namespace_selector", "namespaces", "selector", "topology_key")

    def __init__(self, namespaces: frozenset[str], namespace_selector: LabelSelector, selector: LabelSelector, topology_key: str) -> None:
        self.namespaces = namespaces
        self.namespace_selector = namespace_selector
        self.selector = selector
        self.topology_key = topology_key

    def matches(self, pod: Mapping[str, Any], namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether ``pod`` (whose namespace has ``namespace_labels``) is one the term selects."""
        pod_meta = pod.get("metadata") or {}
        if pod_meta.get("namespace", "") in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(pod_meta.get("labels") or {})
        return False


class PodTerms:
    """A pod's parsed terms: required affinity and anti-affinity, preferred ones with weights."""

    __slots__ = ("affinity", "anti_affinity", "preferred_affinity", "preferred_anti_affinity")

    def __init__(self, pod: Mapping[str, Any]) -> None:
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        pod_affinity = affinity.get("podAffinity") or {}
        pod_anti_affinity = affinity.get("podAntiAffinity") or {}
        self.affinity = [_term(pod, t) for t in pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []]
        self.anti_affinity = [_term(pod, t) for t in pod_anti_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []]
        self.preferred_affinity = [(int(w.get("weight") or 0), _term(pod, w.get("podAffinityTerm") or {})) for w in pod_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        self.preferred_anti_affinity = [
            (int(w.get("weight") or 0), _term(pod, w.get("podAffinityTerm") or {})) for w in pod_anti_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]


def has_pod_affinity(pod: Mapping[str, Any]) -> bool:
    """Whether the pod has any pod affinity or anti-affinity term (upstream's PodsWithAffinity)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def _term(pod: Mapping[str, Any], term: Mapping[str, Any]) -> AffinityTerm:
    pod_meta = pod.get("metadata") or {}
    # matchLabelKeys and mismatchLabelKeys are in the selector already: the API server merged them
    # when it created the pod (the what-if's pods too, by its dry run), with the labels of then.
    raw_selector = term.get("labelSelector")
    namespaces = term.get("namespaces") or []
    namespace_selector = term.get("namespaceSelector")
    if not namespaces and namespace_selector is None:
        namespaces = [pod_meta.get("namespace", "")]
    return AffinityTerm(
        frozenset(namespaces),
        selector_from_label_selector_object(namespace_selector),
        selector_from_label_selector_object(raw_selector),
        term.get("topologyKey", ""),
    )


def _resolved(term: AffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
    """An incoming pod's term with its namespace selector turned into the namespaces it picks now
    (upstream's mergeAffinityTermNamespacesIfNotEmpty; an empty selector still means all)."""
    if term.namespace_selector.empty:
        return term
    picked = {name for name, labels in namespace_labels.items() if term.namespace_selector.matches(labels)}
    return AffinityTerm(term.namespaces | picked, LabelSelector.nothing(), term.selector, term.topology_key)


def incoming_terms(pod: Mapping[str, Any], namespace_labels: Mapping[str, Mapping[str, str]]) -> PodTerms:
    """The pod's terms with their namespace selectors resolved against the namespaces there are."""
    terms = PodTerms(pod)
    if any(not t.namespace_selector.empty for t in _all(terms)):
        terms.affinity = [_resolved(t, namespace_labels) for t in terms.affinity]
        terms.anti_affinity = [_resolved(t, namespace_labels) for t in terms.anti_affinity]
        terms.preferred_affinity = [(w, _resolved(t, namespace_labels)) for w, t in terms.preferred_affinity]
        terms.preferred_anti_affinity = [(w, _resolved(t, namespace_labels)) for w, t in terms.preferred_anti_affinity]
    return terms


def _all(terms: PodTerms) -> list[AffinityTerm]:
    return [*terms.affinity, *terms.anti_affinity, *(t for _, t in terms.preferred_affinity), *(t for _, t in terms.preferred_anti_affinity)]


class PlacedPods(Protocol):
    """What this plugin reads of the scheduler's cache."""

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    def placed_pods(self) -> Iterable[tuple[Obj, str]]: ...

    def pods_with_affinity(self) -> Iterable[tuple[Obj, str]]: ...

    def node_labels(self, name: str) -> Mapping[str, str] | None: ...


class AffinityState:
    """PreFilter's counts of placed pods per topology domain (``(key, value)``), and PreScore's
    weights per domain."""

    __slots__ = ("affinity_counts", "anti_counts", "existing_anti", "filtering", "namespace_labels", "pod", "scores", "self_match", "terms")

    def __init__(self, pod: Obj, terms: PodTerms, namespace_labels: Mapping[str, str]) -> None:
        self.pod = pod
        self.terms = terms
        self.namespace_labels = namespace_labels  # of the pod's namespace
        self.existing_anti: dict[Pair, int] = {}  # domains where placed pods' anti-affinity rejects the pod
        self.affinity_counts: dict[Pair, int] = {}  # domains with pods matching all the pod's affinity terms
        self.anti_counts: dict[Pair, int] = {}  # domains with pods matching one of its anti-affinity terms
        self.self_match = bool(terms.affinity) and all(t.matches(pod, None) for t in terms.affinity)
        self.filtering = False  # the filter has something to check
        self.scores: dict[str, dict[str, int]] = {}  # topology key -> value -> weight

    def copy(self) -> AffinityState:
        other = AffinityState.__new__(AffinityState)
        other.pod, other.terms, other.namespace_labels = self.pod, self.terms, self.namespace_labels
        other.existing_anti, other.affinity_counts, other.anti_counts = dict(self.existing_anti), dict(self.affinity_counts), dict(self.anti_counts)
        other.self_match, other.filtering, other.scores = self.self_match, self.filtering, self.scores
        return other

    def count(self, placed: Obj, terms: PodTerms, node_labels: Mapping[str, str], delta: int) -> None:
        """Account a placed pod (``terms`` are its own) on a node with ``node_labels``, ``delta``
        times (upstream's updateWithPod: 1 to add, -1 to remove)."""
        for term in terms.anti_affinity:
            if term.topology_key in node_labels and term.matches(self.pod, self.namespace_labels):
                _add(self.existing_anti, (term.topology_key, node_labels[term.topology_key]), delta)
        own = self.terms
        if own.affinity and all(t.matches(placed, None) for t in own.affinity):
            for term in own.affinity:
                if term.topology_key in node_labels:
                    _add(self.affinity_counts, (term.topology_key, node_labels[term.topology_key]), delta)
        for term in own.anti_affinity:
            if term.topology_key in node_labels and term.matches(placed, None):
                _add(self.anti_counts, (term.topology_key, node_labels[term.topology_key]), delta)


def _add(counts: dict[Pair, int], pair: Pair, delta: int) -> None:
    value = counts.get(pair, 0) + delta
    if value:
        counts[pair] = value
    else:
        counts.pop(pair, None)


class InterPodAffinity:
    """The plugin; see the module docstring."""

    name = NAME
    weight = WEIGHT

    def __init__(self, cache: PlacedPods) -> None:
        self.cache = cache
        self._terms: dict[str, tuple[Obj, PodTerms]] = {}  # uid -> (pod object, its parsed terms)

    def terms_of(self, pod: Obj) -> PodTerms:
        """A placed pod's terms, parsed once per pod object (none when they do not parse: the API
        server validates them, so only a pod it did not check could have such terms)."""
        uid = meta(pod).get("uid", "")
        known = self._terms.get(uid)
        if known is None or known[0] is not pod:
            if len(self._terms) > 50_000:
                self._terms.clear()
            try:
                terms = PodTerms(pod)
            except ApiError as exc:
                log.warning("ignoring the pod affinity terms of a placed pod", extra={"pod": "/".join(object_key(pod)), "error": str(exc)})
                terms = PodTerms({})
            known = self._terms[uid] = (pod, terms)
        return known[1]

    # --- PreFilter ---

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        cache = self.cache
        with_affinity = list(cache.pods_with_affinity())
        if not has_pod_affinity(pod) and not with_affinity:
            return SKIP  # nothing to filter, nothing to score: the common case costs this much
        namespace = meta(pod).get("namespace", "")
        try:
            terms = incoming_terms(pod, cache.namespace_labels)
        except ApiError as exc:
            return Status.unresolvable(f"parsing pod: {exc}", plugin=NAME)
        placed_terms = [(placed, node, self.terms_of(placed)) for placed, node in with_affinity]
        s = AffinityState(pod, terms, cache.namespace_labels.get(namespace) or {})
        labels_of: dict[str, Mapping[str, str] | None] = {}

        def node_labels(node: str) -> Mapping[str, str] | None:
            if node not in labels_of:
                labels_of[node] = cache.node_labels(node)
            return labels_of[node]

        # Existing pods' required anti-affinity terms that select the incoming pod.
        for _placed, node, their in placed_terms:
            if their.anti_affinity and (labels := node_labels(node)) is not None:
                for term in their.anti_affinity:
                    if term.topology_key in labels and term.matches(pod, s.namespace_labels):
                        _add(s.existing_anti, (term.topology_key, labels[term.topology_key]), 1)
        if terms.affinity or terms.anti_affinity:
            for placed, node in cache.placed_pods():
                labels = node_labels(node)
                if labels is None:
                    continue
                if terms.affinity and all(t.matches(placed, None) for t in terms.affinity):
                    for term in terms.affinity:
                        if term.topology_key in labels:
                            _add(s.affinity_counts, (term.topology_key, labels[term.topology_key]), 1)
                for term in terms.anti_affinity:
                    if term.topology_key in labels and term.matches(placed, None):
                        _add(s.anti_counts, (term.topology_key, labels[term.topology_key]), 1)
        s.filtering = bool(s.existing_anti or terms.affinity or terms.anti_affinity)
        state.write(NAME, s)
        return None if s.filtering else SKIP

    def without(self, state: CycleState, removed: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``removed`` (placed pods and their Node objects) were gone (preemption's
        RemovePod); call it on a copy of the cycle state."""
        self._shift(state, removed, -1)

    def adding(self, state: CycleState, added: Iterable[tuple[Obj, Obj]]) -> None:
        """The state as if ``added`` (pods nominated to the given Node objects) were placed there
        (AddPod); call it on a copy of the cycle state."""
        self._shift(state, added, 1)

    def _shift(self, state: CycleState, pods: Iterable[tuple[Obj, Obj]], delta: int) -> None:
        s: AffinityState | None = state.data.get(NAME)
        if s is None:
            return
        s = s.copy()
        for placed, node in pods:
            s.count(placed, self.terms_of(placed), meta(node).get("labels") or {}, delta)
        state.data[NAME] = s

    # --- Filter ---

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        s: AffinityState = state.data[NAME]
        labels = (node.get("metadata") or {}).get("labels") or {}
        terms = s.terms
        if terms.affinity:
            found = True
            for term in terms.affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    return _AFFINITY  # every topology label must be there, for the first of a group too
                if s.affinity_counts.get((term.topology_key, value), 0) <= 0:
                    found = False
            # No matching pod in the node's domains: only the first pod of a group (no match anywhere) that matches itself.
            if not found and not (not s.affinity_counts and s.self_match):
                return _AFFINITY
        if s.anti_counts:
            for term in terms.anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and s.anti_counts.get((term.topology_key, value), 0) > 0:
                    return _ANTI_AFFINITY
        if s.existing_anti:
            for (key, value), count in s.existing_anti.items():
                if count > 0 and labels.get(key) == value:
                    return _EXISTING_ANTI_AFFINITY
        return None

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        status = self.filter(state, pod, node)
        return reasons_of(status, KIND) if status is not None else []

    # --- Score ---

    def may_score(self, state: CycleState, pod: Obj) -> bool:
        return state.has(NAME)  # the pod or a placed pod has affinity terms

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[Obj]) -> Status | None:
        cache = self.cache
        s: AffinityState | None = state.data.get(NAME)
        if s is None:
            return SKIP  # neither the pod nor a placed pod has affinity terms
        terms = s.terms
        # Without preferred terms of its own, only placed pods with affinity terms can score.
        pods = cache.placed_pods() if terms.preferred_affinity or terms.preferred_anti_affinity else cache.pods_with_affinity()
        scores: dict[str, dict[str, int]] = {}

        def add(term: AffinityTerm, weight: int, labels: Mapping[str, str]) -> None:
            value = labels.get(term.topology_key)
            if value is not None:
                per_key = scores.setdefault(term.topology_key, {})
                per_key[value] = per_key.get(value, 0) + weight

        for placed, node in pods:
            labels = cache.node_labels(node)
            if not labels:
                continue
            for weight, term in terms.preferred_affinity:
                if term.matches(placed, None):
                    add(term, weight, labels)
            for weight, term in terms.preferred_anti_affinity:
                if term.matches(placed, None):
                    add(term, -weight, labels)
            if not has_pod_affinity(placed):
                continue
            their = self.terms_of(placed)
            for term in their.affinity:
                if term.matches(pod, s.namespace_labels):
                    add(term, HARD_POD_AFFINITY_WEIGHT, labels)
            for weight, term in their.preferred_affinity:
                if term.matches(pod, s.namespace_labels):
                    add(term, weight, labels)
            for weight, term in their.preferred_anti_affinity:
                if term.matches(pod, s.namespace_labels):
                    add(term, -weight, labels)
        if not scores:
            return SKIP
        s.scores = scores
        return None

    def score(self, state: CycleState, pod: Obj, node: Obj) -> int:
        s: AffinityState = state.data[NAME]
        labels = (node.get("metadata") or {}).get("labels") or {}
        return sum(values.get(labels[key], 0) for key, values in s.scores.items() if key in labels)

    def normalize(self, state: CycleState, names: Sequence[str], scores: list[int]) -> list[int]:
        low, high = min(scores), max(scores)
        if high == low:
            return [0] * len(scores)
        return [int(MAX_SCORE * (s - low) / (high - low)) for s in scores]


# --- queueing hints (upstream's isSchedulableAfterAssignedPodChange) ---


def _matches_all(terms: Sequence[AffinityTerm], pod: Obj) -> bool:
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def requeue_after_add(target: Obj, placed: Obj) -> bool:
    """Whether a pod placed now may let ``target`` (rejected by this plugin) fit: it matches all
    of the target's affinity terms."""
    try:
        return _matches_all(PodTerms(target).affinity, placed)
    except ApiError:
        return True


def requeue_after_relabel(target: Obj, old: Obj, new: Obj) -> bool:
    """Whether a placed pod's new labels may let ``target`` fit: it now matches all the target's
    affinity terms, or no longer matches one of its anti-affinity terms."""
    try:
        terms = PodTerms(target)
    except ApiError:
        return True
    if not _matches_all(terms.affinity, old) and _matches_all(terms.affinity, new):
        return True
    return any(t.matches(old, None) for t in terms.anti_affinity) and not any(t.matches(new, None) for t in terms.anti_affinity)
