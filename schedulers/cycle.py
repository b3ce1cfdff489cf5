"""The scheduling cycle: which node a pod goes to, or why none fits, from the cache alone.

The cycle runs the plugins (:mod:`schedulers.plugins`) at upstream's extension points
(:mod:`schedulers.framework`):

1. *PreEnqueue*: DynamicResources resolves the pod's claims; a claim that does not exist yet, or
   that another pod is allocating right now, makes the pod wait (without retries) until that claim
   shows up or changes.
2. *PreFilter*: each plugin works out once what the pod asks (or rejects it for every node, or
   skips: its Filter is then left out of this cycle).
3. *Filter*: nodes in a rotating order (upstream's ``nextStartNodeIndex``), each through the
   filters in upstream's order until the first rejection: NodeUnschedulable, TaintToleration,
   NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity,
   DynamicResources. The search stops after ``nodes_to_find`` feasible nodes
   (100, upstream's minimum for percentageOfNodesToScore). Work that repeats across cycles is
   kept: a node's successful device search for the same claim specs (``SearchCache``, valid while
   that node's pools, the classes and the allocated state are unchanged) and its cpu/memory/pods
   verdict for the same requests.
4. *Score*: TaintToleration (PreferNoSchedule taints), NodeAffinity (preferred terms),
   PodTopologySpread and InterPodAffinity score the feasible nodes (their weighted, normalised
   sum, higher first) when the pod, the nodes or the placed pods ask for it; within equal scores,
   and for every other pod, the node order of DynamicResources decides (fewest free devices left
   after the allocation; pods without claims to allocate by the node's pod count), then the name.

The cycle writes nothing and changes no cache state: it returns a :class:`Placement`, a
:class:`ScheduleFailure` or :class:`WaitForClaims`, and the scheduler hands that on.
"""

from __future__ import annotations

from collections.abc import Callable

from kube.dra.pods import pod_priority
from kube.objects import Obj, meta
from schedulers.allocator import AllocatedState, Allocator
from schedulers.cache import SchedulerCache
from schedulers.framework import (
    NOT_HELPFUL,
    Code,
    CycleState,
    FilterPlugin,
    PlacedPodsFilterPlugin,
    Placement,
    PreBindPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScheduleFailure,
    ScorePlugin,
    Status,
    WaitForClaims,
    fit_error_message,
)
from schedulers.plugins.dynamicresources import (
    DEFAULT_FILTER_TIMEOUT,
    REASON_CLAIM_NOT_ON_NODE,
    DynamicResources,
    NodeOutcome,
    PodClaims,
    dra_state,
)
from schedulers.plugins.interpodaffinity import InterPodAffinity
from schedulers.plugins.nodeaffinity import NodeAffinity
from schedulers.plugins.nodeports import NodePorts
from schedulers.plugins.noderesources import NodeResourcesFit, pod_fit
from schedulers.plugins.nodeunschedulable import NodeUnschedulable
from schedulers.plugins.podtopologyspread import PodTopologySpread
from schedulers.plugins.tainttoleration import TaintToleration

DEFAULT_NODES_TO_FIND = 100

# A node's verdict: its first rejection (None: it fits) and what DynamicResources worked out there.
NodeVerdict = tuple[Status | None, NodeOutcome]
NodeFilter = Callable[[CycleState, Obj, Obj], NodeVerdict]
NodeScore = Callable[[CycleState, Obj, NodeOutcome], int]

__all__ = [
    "DEFAULT_FILTER_TIMEOUT",
    "DEFAULT_NODES_TO_FIND",
    "REASON_CLAIM_NOT_ON_NODE",
    "CycleState",
    "NodeFilter",
    "NodeScore",
    "NodeVerdict",
    "Placement",
    "PodClaims",
    "ScheduleFailure",
    "SchedulingCycle",
    "WaitForClaims",
]


def _split_spec_filters(filters: list[FilterPlugin]) -> tuple[tuple[str, ...], list[FilterPlugin], list[FilterPlugin]]:
    """The leading filters that read only some fields of the node's spec (``spec_fields``: a
    cordon, taints), those fields, and the other filters. The cycle asks the former only for nodes
    that have one of the fields: most nodes have neither, and it visits hundreds per pod."""
    i = 0
    while i < len(filters) and getattr(filters[i], "spec_fields", None):
        i += 1
    fields = tuple(f for p in filters[:i] for f in getattr(p, "spec_fields"))  # noqa: B009
    return fields, filters[:i], filters[i:]


class SchedulingCycle:
    """Filter and score the nodes for one pod at a time; see the module docstring."""

    def __init__(
        self,
        cache: SchedulerCache,
        *,
        nodes_to_find: int = DEFAULT_NODES_TO_FIND,
        filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT,
    ) -> None:
        self.cache = cache
        self.features = cache.features
        self.nodes_to_find = max(1, nodes_to_find)
        self._next_start = 0
        # The plugins, in the order their filters run.
        self.dynamic_resources = DynamicResources(cache, filter_timeout)
        node_affinity, node_resources, taints = NodeAffinity(), NodeResourcesFit(cache), TaintToleration(cache)
        self.pod_topology_spread = PodTopologySpread(cache)
        self.inter_pod_affinity = InterPodAffinity(cache)
        ports, spread, affinity = NodePorts(cache), self.pod_topology_spread, self.inter_pod_affinity
        self.filter_plugins: list[FilterPlugin] = [
            NodeUnschedulable(), taints, node_affinity, ports, node_resources, spread, affinity, self.dynamic_resources,
        ]  # fmt: skip
        self.pre_filter_plugins: list[PreFilterPlugin] = [node_affinity, ports, node_resources, spread, affinity, self.dynamic_resources]
        # Upstream's default profile's order and weights (TaintToleration 3, the others 2).
        self.score_plugins: list[ScorePlugin] = [taints, node_affinity, spread, affinity]
        # The binding cycle's plugins (upstream's default profile has VolumeBinding first, not served here).
        self.reserve_plugins: list[ReservePlugin] = [self.dynamic_resources]
        self.pre_bind_plugins: list[PreBindPlugin] = [self.dynamic_resources]
        # The filters that read the pods placed on nodes: preemption asks them without its victims.
        self.placed_pods_filters: list[PlacedPodsFilterPlugin] = [ports, spread, affinity]
        # The per-node checks a walk calls (replace_node_checks may put others in their place).
        self._filter: NodeFilter = self.check_node
        self._score: NodeScore = self.dynamic_resources.node_order

    @property
    def filter_timeout(self) -> float | None:
        """How long one node's device search may take (upstream's filterTimeout)."""
        return self.dynamic_resources.filter_timeout

    @filter_timeout.setter
    def filter_timeout(self, value: float | None) -> None:
        self.dynamic_resources.filter_timeout = value

    def replace_node_checks(self, node_filter: NodeFilter, node_score: NodeScore) -> tuple[NodeFilter, NodeScore]:
        """Walk the nodes of this cycle with ``node_filter`` and ``node_score`` instead of its own
        (a what-if copy that remembers verdicts between copies of a pod); returns the two they
        replace, which they may call."""
        replaced = self._filter, self._score
        self._filter, self._score = node_filter, node_score
        return replaced

    def walk_start(self, count: int) -> int:
        """Where the next walk over ``count`` nodes starts (the rotating start, in node order)."""
        return self._next_start % count if count else 0

    def walked(self, start: int, visited: int, count: int) -> None:
        """A walk from ``start`` visited ``visited`` of ``count`` nodes: the next one starts after them."""
        self._next_start = (start + visited) % count if count else 0

    # --- PreEnqueue and PreFilter ---

    def begin(self, pod: Obj) -> CycleState | Status | WaitForClaims:
        """The cycle state after PreEnqueue and PreFilter, what the pod waits for, or the PreFilter
        rejection (a status whose message says why no node can be looked at)."""
        state = CycleState(pod)
        waiting = self.dynamic_resources.pre_enqueue(state, pod)
        if waiting is not None:
            return waiting
        skipped: list[object] = []
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if status is None:
                continue
            if status.is_skip:
                skipped.append(plugin)
                continue
            return status
        state.filters = [p for p in self.filter_plugins if not any(p is s for s in skipped)]
        state.spec_fields, spec_filters, others = _split_spec_filters(state.filters)
        state.spec_filters = [p.filter for p in spec_filters]
        # A plugin may hand the cycle a per-node check made for this attempt (node_filter).
        state.run_filters = [p.node_filter(state) if hasattr(p, "node_filter") else p.filter for p in others]
        state.scorers = [p for p in self.score_plugins if p.may_score(state, pod)]
        state.reservers, state.pre_binders = self.reserve_plugins, self.pre_bind_plugins
        return state

    def prepare(self, pod: Obj) -> CycleState | ScheduleFailure | WaitForClaims:
        """The pod's cycle state, or why no node can be looked at (yet).

        A PreFilter rejection is upstream's FitError with the PreFilter's message in place of the
        nodes' reasons; every node then has that status, so PostFilter (preemption) finds no node
        it could help, and says so."""
        state = self.begin(pod)
        if isinstance(state, WaitForClaims):
            return state
        total = len(self.cache.node_names())
        if not total:
            # Upstream's ErrNoNodesAvailable: unresolvable, before PreFilter, without PostFilter.
            return ScheduleFailure(fit_error_message(0, {}))
        if isinstance(state, Status):
            if state.is_error:
                return ScheduleFailure(f'running PreFilter plugin "{state.plugin}": {state.message}', reason="SchedulerError")
            fit_message = f"0/{total} nodes are available: {state.message}."
            message = f"{fit_message} preemption: 0/{total} nodes are available: {total} {NOT_HELPFUL}."
            return ScheduleFailure(message, fit_message=fit_message, plugins=frozenset((state.plugin,)))
        return state

    def allocator(self, state: AllocatedState | None = None) -> Allocator:
        """An allocator against the cache's allocated state, or against ``state`` (a what-if, not cached)."""
        return self.dynamic_resources.allocator(state)

    def resolve_claims(self, pod: Obj) -> PodClaims | WaitForClaims | str:
        """The pod's claims, a reason to wait for some of them, or an unschedulable message."""
        return self.dynamic_resources.resolve_claims(pod)

    # --- Filter ---

    def check_node(self, state: CycleState, pod: Obj, node: Obj) -> NodeVerdict:
        """The node's first rejection by the cycle's filters (None: it fits) and what
        DynamicResources worked out there; with the pods nominated to the node first (see
        :meth:`with_nominated`)."""
        if self.cache.nominated_on and meta(node).get("name", "") in self.cache.nominated_on:
            status = self.with_nominated(state, pod, node)
            if status is not None:
                return status, None
        return self.run_filters(state, pod, node), state.result

    def run_filters(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        """One pass of the filters over ``node``, to the first rejection (None: it fits)."""
        state.result = None
        spec = node.get("spec")
        if spec and any(spec.get(f) for f in state.spec_fields):
            for run in state.spec_filters:
                status = run(state, pod, node)
                if status is not None:
                    return status
        for run in state.run_filters:
            status = run(state, pod, node)
            if status is not None:
                return status
        return None

    def nominated_pods(self, pod: Obj, node: Obj) -> list[tuple[Obj, Obj]]:
        """The pods nominated to ``node`` (preemptors waiting for their victims to go) that ``pod``
        must count as placed there: other pods of no lower priority; each with ``node``."""
        held = self.cache.nominated_for(meta(node).get("name", ""), meta(pod).get("uid", ""), pod_priority(pod))
        return [(nominated, node) for n in held if (nominated := self.cache.pods.get(*n.pod)) is not None]

    def with_nominated(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        """Upstream's filtering with nominated pods: the filters over ``node`` as if the pods
        nominated there (:meth:`nominated_pods`) were placed, for the filters that read placed pods
        (pod affinity, topology spread, host ports; resources and devices count nominations in
        every pass). The node must also pass without them, which the caller's own pass checks:
        a pod whose affinity only a nominated pod satisfies does not go there yet."""
        trial = self.nominated_state(state, pod, node)
        return None if trial is None else self.run_filters(trial, pod, node)

    def nominated_state(self, state: CycleState, pod: Obj, node: Obj) -> CycleState | None:
        """A copy of ``state`` that counts the pods nominated to ``node`` as placed there, for the
        filters that read placed pods (None: no such filter runs, or nothing is nominated there).
        The explanation runs its filters over it too, so both say the same of that node."""
        active = [p for p in self.placed_pods_filters if any(p is f for f in state.filters)]
        if not active:
            return None
        added = self.nominated_pods(pod, node)
        if not added:
            return None
        trial = state.copy()
        for plugin in active:
            plugin.adding(trial, added)
        return trial

    # --- the whole cycle ---


    def schedule(self, pod: Obj) -> Placement | ScheduleFailure | WaitForClaims:
        """One cycle: the node the pod should go to, why none fits, or which claims it waits for."""
        state = self.prepare(pod)
        if not isinstance(state, CycleState):
            return state
        names = self.cache.node_names()
        reasons: dict[str, int] = {}
        node_statuses: dict[str, Status] = {}
        best: tuple[int, str, NodeOutcome] | None = None
        fitting: list[tuple[int, str, Obj, NodeOutcome]] = []  # (node order, name, node, result), to score
        scoring = bool(state.scorers)
        feasible = 0
        n = len(names)
        start = self.walk_start(n)
        processed = 0
        claim_mismatch = False
        get_node = self.cache.nodes.get
        check, score_of = self._filter, self._score
        # The node's filters are run here, not through check_node, when nothing replaced it: a
        # call less per node (the cycle visits hundreds per pod).
        runners = state.run_filters if check == self.check_node else None
        spec_fields, spec_runners = state.spec_fields, state.spec_filters
        nominated_on = self.cache.nominated_on  # nodes with nominated pods (rarely any)
        for i in range(n):
            processed += 1
            name = names[(start + i) % n]
            node = get_node("", name)
            if node is None:
                continue
            if runners is not None:
                status = self.with_nominated(state, pod, node) if nominated_on and name in nominated_on else None
                if status is None and spec_fields:
                    spec = node.get("spec")
                    if spec:
                        for field_name in spec_fields:
                            if spec.get(field_name):
                                for run in spec_runners:
                                    status = run(state, pod, node)
                                    if status is not None:
                                        break
                                break
                if status is None:
                    for run in runners:
                        status = run(state, pod, node)
                        if status is not None:
                            break
                result = state.result if status is None else None  # DynamicResources, the last filter, sets it
            else:
                status, result = check(state, pod, node)
            if status is not None:
                if status.is_error:
                    # Upstream's Filter returns an Error status for a broken claim or class, which
                    # aborts the cycle with reason SchedulerError. It then retries on a backoff; the
                    # pod waits here for a claim, class or slice event instead, which upstream's own
                    # comment names as the nicer behaviour.
                    return ScheduleFailure(f'running "{status.plugin}" filter plugin: {status.message}', reason="SchedulerError")
                for reason in status.reasons:  # upstream's FitError counts every reason of a node's status
                    reasons[reason] = reasons.get(reason, 0) + 1
                claim_mismatch = claim_mismatch or status is self.dynamic_resources.not_on_node
                node_statuses[name] = status
                continue
            feasible += 1
            score = score_of(state, node, result)
            if scoring:
                fitting.append((score, name, node, result))
            if best is None or (score, name) < (best[0], best[1]):
                best = (score, name, result)
            if feasible >= self.nodes_to_find:
                break
        self.walked(start, processed, n)
        if best is None:
            return self.failure(state, n, reasons, node_statuses, claim_mismatch)
        if len(fitting) > 1:
            chosen = self.prioritize(state, pod, fitting)
            if chosen is not None:
                best = (0, chosen[1], chosen[3])
        _, node_name, result = best
        return self.dynamic_resources.placement(state, pod, node_name, result, pod_fit(state).requests)

    # --- Score ---

    def prioritize(self, state: CycleState, pod: Obj, fitting: list[tuple[int, str, Obj, NodeOutcome]]) -> tuple[int, str, Obj, NodeOutcome] | None:
        """The feasible node with the highest sum of the score plugins' weighted, normalised
        scores, ties by the node order (then name); None when every score plugin skips (the node
        order alone decides)."""
        nodes = [entry[2] for entry in fitting]
        names = [entry[1] for entry in fitting]
        totals = [0] * len(fitting)
        scored = False
        for plugin in state.scorers:
            status = plugin.pre_score(state, pod, nodes)
            if status is not None:
                if status.is_skip:
                    continue
                return None  # an error scoring: the node order decides, as without scores
            scored = True
            raw = [plugin.score(state, pod, node) for node in nodes]
            for i, value in enumerate(plugin.normalize(state, names, raw)):
                totals[i] += plugin.weight * value
        if not scored:
            return None
        return min(zip(totals, fitting, strict=True), key=lambda e: (-e[0], e[1][0], e[1][1]))[1]

    def depends_on_placements(self, state: CycleState) -> bool:
        """Whether the pod's verdict on a node can change when pods are placed on other nodes (pod
        affinity, topology spread), so a node's verdict may not be remembered between pods."""
        return state.has(self.inter_pod_affinity.name) or state.has(self.pod_topology_spread.name) or bool(state.scorers)

    def failure(self, state: CycleState, total: int, reasons: dict[str, int], node_statuses: dict[str, Status], claim_mismatch: bool) -> ScheduleFailure:
        """Upstream's FitError for a cycle no node passed, and what PostFilter needs."""
        dra = dra_state(state) if state.has(self.dynamic_resources.name) else None
        return ScheduleFailure(
            fit_error_message(total, reasons),
            plugins=frozenset(s.plugin for s in node_statuses.values()),
            pinning_claims=dra.claims.allocated if claim_mismatch and dra is not None else [],
            fit_message=fit_error_message(total, reasons, preemption=False),
            potential=[name for name, status in node_statuses.items() if status.code == Code.UNSCHEDULABLE],
            node_statuses=node_statuses,
            stale_extended_claim=dra.stale if dra is not None else None,
        )
