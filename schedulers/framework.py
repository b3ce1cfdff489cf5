"""The scheduling framework: plugins at upstream's extension points, their statuses, the cycle state.

Modelled on upstream's ``k8s.io/kube-scheduler/framework`` (interface.go) and
``pkg/scheduler/framework`` (types.go), in this project's words:

* A :class:`Status` is what a plugin answers: a :class:`Code` and the reasons a user reads.
  ``Unschedulable`` rejections may be fixed by preemption (removing pods); ``UnschedulableAndUnresolvable``
  ones cannot; ``Error`` stops the attempt (the pod is retried). A plugin that has nothing to say
  returns ``None`` (success), or ``Skip`` from PreFilter/PreScore to be left out of the cycle.
* The extension points, in the order a pod meets them: **PreFilter** (once per attempt: work out
  what the pod asks, or reject it for every node), **Filter** (once per node: the first
  rejection ends the node's turn), **PostFilter** (when no node fits: DynamicResources frees
  claims that pin the pod, then DefaultPreemption), **Score** (the feasible nodes, higher is
  better), **Reserve** / **Unreserve** (the placement is counted in the cache before anything is
  written, and uncounted when the binding fails) and **PreBind** (the writes before the binding).
* :class:`CycleState` carries one attempt: the pod, each plugin's PreFilter data under its name,
  the filters that did not skip, and what the last node's filters worked out.
* :func:`fit_error_message` is upstream's FitError text, ``0/N nodes are available: ...``.

The scheduling cycle (:mod:`schedulers.cycle`) stops at a node's first rejection; explanations
(:mod:`schedulers.explain`) and the what-if answers run the same plugins and collect every
reason (:meth:`FilterPlugin.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from kube.dra.pods import Resources
from kube.objects import Obj
from schedulers.extended import SpecialClaim

NOT_HELPFUL = "Preemption is not helpful for scheduling"  # preemption's reason for nodes it does not look at


class Code(IntEnum):
    """Upstream's status codes (their order and names)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


class Status:
    """A plugin's answer: a code, the reasons (what ``0/N nodes are available`` counts), the
    plugin that gave it, and for ``Error`` the exception. Immutable; plugins keep the ones they
    return often."""

    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(self, code: Code, *reasons: str, plugin: str = "", error: BaseException | None = None) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.error = error

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def as_error(cls, error: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, str(error), plugin=plugin, error=error)

    @property
    def message(self) -> str:
        """The reasons joined as upstream's ``Status.Message``."""
        return ", ".join(self.reasons)

    @property
    def rejected(self) -> bool:
        """Unschedulable, unresolvable or pending: the pod does not go there (upstream's IsRejected)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def is_error(self) -> bool:
        return self.code == Code.ERROR

    @property
    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Status) and (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        plugin = f", plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({self.code.name}, {self.message!r}{plugin})"


SKIP = Status(Code.SKIP)


@dataclass
class Placement:
    """The chosen node, and what the binder writes to bind the pod there."""

    node: str
    claims: list[Obj]  # every claim of the pod, in the order of its spec
    allocations: dict[str, Mapping[str, Any]]  # claim uid -> new allocation, for claims allocated in this cycle
    requests: Resources  # what the pod charges the node
    statuses: list[Obj]  # the pod's status.nodeAllocatableResourceClaimStatuses (KEP-5517), may be empty
    # KEP-5729: claim uid -> the PodGroup reference the claim is reserved for instead of the pod.
    group_refs: dict[str, Obj] = field(default_factory=dict)
    # (namespace, group, minCount) of a gang pod: it waits at Permit until its gang is placed.
    gang: tuple[str, str, int] | None = None
    # Extended resources served by devices: the special claim to create (in ``claims``, allocated in
    # ``allocations`` under its stand-in uid) and the pod's request mappings.
    extended: SpecialClaim | None = None
    # The attempt's cycle state: the binding cycle's plugins (Reserve, PreBind) read theirs from it.
    state: CycleState | None = None


@dataclass
class ScheduleFailure:
    """No node fits; ``message`` is the PodScheduled condition's and the event's text (as it reads
    when preemption cannot help; preemption may replace its last part)."""

    message: str
    reason: str = "Unschedulable"
    # Allocated claims that pin the pod to nodes that do not fit (upstream's PostFilter frees them).
    pinning_claims: list[Obj] = field(default_factory=list)
    # The filter's part of the message (upstream's FitError without the PostFilter's text).
    fit_message: str = ""
    # Nodes that failed only for reasons removing pods can fix (upstream's Unschedulable, not
    # UnschedulableAndUnresolvable): where preemption looks.
    potential: list[str] = field(default_factory=list)
    # Every node's status, for the preemption message of the nodes it could not use.
    node_statuses: dict[str, Status] = field(default_factory=dict)
    # A special claim an earlier attempt left behind: deleted, then the pod is tried afresh.
    stale_extended_claim: Obj | None = None
    # The plugins that rejected the pod (upstream's UnschedulablePlugins): their events requeue it.
    plugins: frozenset[str] = frozenset()


@dataclass
class WaitForClaims:
    """The pod waits (without retries) for these claims to appear or change (upstream's PreEnqueue)."""

    claims: list[tuple[str, str]]
    why: str


@dataclass
class Reason:
    """One reason a node does not take the pod, as an explanation tells it.

    ``summary`` is the same text on every node with this cause (nodes are grouped by it);
    ``details`` are this node's facts (which devices, values, claims), a few of them.
    """

    kind: str
    summary: str
    claim: str = ""
    request: str = ""
    details: list[str] = field(default_factory=list)
    alternatives: list[Reason] = field(default_factory=list)  # a prioritized list's subrequests, in order
    devices: list[tuple[str, str, str]] = field(default_factory=list)  # the devices that keep the pod out (taken, tainted, full)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.claim, self.request, self.summary, tuple(a.key for a in self.alternatives))

    def text(self) -> str:
        """The summary with where it applies (claim and request)."""
        if self.request:
            return f"claim {self.claim}, request {self.request}: {self.summary}"
        if self.claim:
            return f"claim {self.claim}: {self.summary}"
        return self.summary

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.text(), "summary": self.summary}
        if self.claim:
            out["claim"] = self.claim
        if self.request:
            out["request"] = self.request
        if self.details:
            out["details"] = list(self.details)
        if self.alternatives:
            out["alternatives"] = [a.to_dict() for a in self.alternatives]
        if self.devices:
            out["devices"] = ["/".join(d) for d in self.devices]
        return out


@dataclass
class ExplainContext:
    """What an explanation gives the plugins besides the cycle state: the reasons the plugins
    before them found on this node, and the device diagnosis (None when the pod needs no devices).

    ``explain_devices(node, claims)`` says why ``claims`` cannot be allocated on ``node`` (empty
    when they can); it raises ``AllocationError`` for claims no node can serve."""

    earlier: list[Reason]
    explain_devices: Callable[[Obj, list[Obj]], list[Reason]] | None = None


class CycleState:
    """One scheduling attempt of one pod (upstream's CycleState).

    ``data`` holds each plugin's PreFilter (and PreScore) results under the plugin's name;
    ``filters`` the plugins whose PreFilter did not skip, in order (``spec_filters`` and
    ``run_filters`` what the cycle calls per node); ``result`` what the last node's filters worked out for the placement (the
    DynamicResources plugin's allocation: that filter, the last, sets it on every node it lets
    through; None when it skipped).
    """

    __slots__ = ("data", "filters", "pod", "pre_binders", "reservers", "result", "run_filters", "scorers", "spec_fields", "spec_filters")

    def __init__(self, pod: Obj) -> None:
        self.pod = pod
        self.data: dict[str, Any] = {}
        self.filters: list[FilterPlugin] = []
        self.run_filters: list[Callable[[CycleState, Obj, Obj], Status | None]] = []
        # The leading filters that read only these fields of a node's spec: asked only when it has one.
        self.spec_fields: tuple[str, ...] = ()
        self.spec_filters: list[Callable[[CycleState, Obj, Obj], Status | None]] = []
        self.scorers: list[ScorePlugin] = []
        # The binding cycle's plugins for this attempt, in order.
        self.reservers: list[ReservePlugin] = []
        self.pre_binders: list[PreBindPlugin] = []
        self.result: Any = None

    def copy(self) -> CycleState:
        """A copy whose plugin data may be replaced (preemption's what-if per node); the data
        objects themselves are shared, so a plugin replaces its entry rather than changing it."""
        other = CycleState(self.pod)
        other.data = dict(self.data)
        other.filters, other.run_filters, other.scorers = self.filters, self.run_filters, self.scorers
        other.spec_fields, other.spec_filters = self.spec_fields, self.spec_filters
        other.reservers, other.pre_binders = self.reservers, self.pre_binders
        return other

    def read(self, key: str) -> Any:
        """A plugin's data (KeyError when that plugin skipped)."""
        return self.data[key]

    def write(self, key: str, value: Any) -> None:
        self.data[key] = value

    def has(self, key: str) -> bool:
        return key in self.data


class Plugin(Protocol):
    """Every plugin has upstream's name."""

    name: str


class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        """Work out what the pod asks (into ``state``); reject it for every node; or ``SKIP``
        (then its Filter is not called this cycle)."""


class FilterPlugin(Plugin, Protocol):
    """Two optional members make the hot path cheaper: ``spec_fields`` (a tuple of node spec
    fields, for a filter that reads nothing else of the node: the cycle does not call it for
    nodes without them) and ``node_filter(state)`` (the callable the cycle should use per node
    this attempt, when the plugin has one made for the pod)."""

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        """Whether the pod fits ``node`` (None) or why not."""

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        """Every reason this plugin has against ``node``, with the node's facts (empty: it fits)."""


class PlacedPodsFilterPlugin(FilterPlugin, Protocol):
    """A filter that reads the pods placed on nodes (host ports, pod affinity, topology spread):
    preemption asks it again without its victims (upstream's PreFilterExtensions.RemovePod), and
    the cycle asks it on a node with the pods nominated there as if they were placed (AddPod)."""

    def without(self, state: CycleState, removed: Iterable[tuple[Obj, Obj]]) -> None:
        """Replace this plugin's data in ``state`` (a copy) as if ``removed`` (placed pods, each
        with its Node object) were gone."""

    def adding(self, state: CycleState, added: Iterable[tuple[Obj, Obj]]) -> None:
        """Replace this plugin's data in ``state`` (a copy) as if ``added`` (pods, each with the
        Node object it is nominated to) were placed there."""


class ScorePlugin(Plugin, Protocol):
    """Upstream's Score with its NormalizeScore: ``pre_score`` over the feasible nodes (SKIP leaves
    it out), a raw score per feasible node, then ``normalize`` to 0..100 over all of them (``names``
    the nodes', in the same order); the cycle sums ``weight`` times that. Higher is better."""

    weight: int

    def may_score(self, state: CycleState, pod: Obj) -> bool:
        """After PreFilter: whether ``pre_score`` might not skip (the cycle keeps the feasible
        nodes for scoring only then; every other pod goes by the node order alone)."""

    def pre_score(self, state: CycleState, pod: Obj, nodes: Sequence[Obj]) -> Status | None: ...

    def score(self, state: CycleState, pod: Obj, node: Obj) -> int: ...

    def normalize(self, state: CycleState, names: Sequence[str], scores: list[int]) -> list[int]: ...


MAX_NODE_SCORE = 100  # upstream's MaxNodeScore: what a normalised score reaches


def default_normalize(scores: Sequence[int], reverse: bool = False) -> list[int]:
    """Upstream's DefaultNormalizeScore: scale ``[0, max]`` to ``[0, 100]`` (integer division);
    ``reverse`` for raw scores where less is better (100 minus that). All zeros stay zeros, or all
    become 100 when reversed."""
    highest = max(scores, default=0)
    if highest == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(scores)
    scaled = [MAX_NODE_SCORE * s // highest for s in scores]
    return [MAX_NODE_SCORE - s for s in scaled] if reverse else scaled


class ReservePlugin(Plugin, Protocol):
    """Upstream's Reserve with its Unreserve: the placement counted in memory before the binding
    task writes anything, and uncounted when a later step fails. Upstream's Unreserve also undoes
    on the server what the plugin wrote; that half is :meth:`release`, which is left out when the
    scheduler loses its leadership mid-binding (the next leader finishes or undoes the writes)."""

    def reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        """Take what the pod gets on ``node`` in the cache (None), or refuse the placement."""

    def unreserve(self, state: CycleState, pod: Obj, node: str) -> None:
        """Undo :meth:`reserve` in the cache; idempotent, called in reverse order of the plugins."""

    async def release(self, state: CycleState, pod: Obj, node: str) -> None:
        """Undo on the server what this plugin's PreBind wrote (after :meth:`unreserve`)."""


class PreBindPlugin(Plugin, Protocol):
    """Upstream's PreBind: the writes before the pod is bound, in the binding task."""

    async def pre_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        """None to go on; ``Unschedulable`` to try the pod again; ``Error`` to try it again and say
        why on the pod (``running PreBind plugin "<name>": <message>``)."""


def reasons_of(status: Status, kind: str) -> list[Reason]:
    """An explanation's reasons for a status, one per reason, without node facts."""
    return [Reason(kind, r) for r in status.reasons]


def fit_error_message(total_nodes: int, reasons: Mapping[str, int], preemption: bool = True) -> str:
    """Upstream's FitError text: ``0/N nodes are available: <count> <reason>, ... .`` (sorted)."""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    message = f"0/{total_nodes} nodes are available: {', '.join(parts)}."
    if preemption:
        message += f" preemption: 0/{total_nodes} nodes are available: {total_nodes} {NOT_HELPFUL}."
    return message


def histogram_message(total: int, reasons: Iterable[str]) -> str:
    """``0/N nodes are available: <count> <reason>, ... .`` over the given per-node reasons."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return f"0/{total} nodes are available: {', '.join(sorted(f'{n} {r}' for r, n in counts.items()))}."


__all__ = [
    "MAX_NODE_SCORE",
    "NOT_HELPFUL",
    "SKIP",
    "Code",
    "CycleState",
    "ExplainContext",
    "FilterPlugin",
    "Placement",
    "Plugin",
    "PreBindPlugin",
    "PreFilterPlugin",
    "Reason",
    "ReservePlugin",
    "ScheduleFailure",
    "ScorePlugin",
    "Status",
    "WaitForClaims",
    "default_normalize",
    "fit_error_message",
    "histogram_message",
    "reasons_of",
]
