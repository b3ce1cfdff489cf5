"""Allocator (one per scheduling cycle): prepares the claims once and searches each node it is asked about."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import orjson

from kube.apitypes import DeviceSelector, DeviceSubRequest, ExactDeviceRequest, ResourceClaim
from kube.cel import CELCompileError, CELRuntimeError, CompiledSelector, compile_selector
from kube.features import Gate
from schedulers.allocator.claims import NotAdmin, PreparedClaim, PreparedRequest, claim_reference, untolerated
from schedulers.allocator.devices import Device, as_quantity
from schedulers.allocator.index import NodeView, ResourceIndex
from schedulers.allocator.results import (
    ADMIN_ACCESS_LABEL,
    BOUND_AFTER_STEPS,
    CANNOT_ALLOCATE,
    TIMED_OUT,
    Allocated,
    AllocationError,
    AllocationOutcome,
    AllocatorFeatures,
    PoolID,
    Unschedulable,
)
from schedulers.allocator.search import Search, SearchCache, TimedOut, found_allocation
from schedulers.allocator.state import AllocatedState


class Allocator:
    """Allocates claims on candidate nodes; build one per scheduling cycle (state is fixed)."""

    def __init__(
        self,
        index: ResourceIndex,
        allocated: AllocatedState | None = None,
        features: AllocatorFeatures | None = None,
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        share_id: Callable[[], str] | None = None,
        timeout: float | None = None,
        cache: SearchCache | None = None,
        bound_after: int = BOUND_AFTER_STEPS,
    ) -> None:
        self.index = index
        self.cache = cache
        self.bound_after = bound_after
        self.last_steps = 0  # steps of the last search (benchmarks and tests read it)
        # Upstream's filterTimeout (DRASchedulerFilterTimeout): one node's search is abandoned
        # after this many seconds, so a pathological claim cannot stall the scheduler.
        self.timeout = timeout
        # The running search's deadline: selector evaluations stop there too, as cel-go's do
        # under upstream's filter context ("operation interrupted").
        self.deadline: float | None = None
        self.allocated = allocated or AllocatedState()
        self.features = features or index.features
        # None: admission already checked the admin-access label (not re-checked here).
        self.namespace_labels = namespace_labels
        self.share_id = share_id or (lambda: str(uuid.uuid4()))
        self._prepared: dict[tuple[Any, ...], list[PreparedClaim]] = {}
        self._available: dict[PoolID, dict[tuple[str, str], Fraction]] = {}
        self._last_prepared: tuple[Sequence[Mapping[str, Any]], list[PreparedClaim]] | None = None
        self._signature: tuple[Sequence[Mapping[str, Any]], bytes | None] | None = None

    # --- preparation (node independent, cached per claim versions) ---

    def prepare(self, claims: Sequence[Mapping[str, Any]]) -> list[PreparedClaim]:
        """The claims prepared for a search (classes resolved, selectors compiled), once per
        claim versions. Raises :class:`AllocationError` for input no node can serve and
        :class:`NotAdmin` for admin access the namespace may not have."""
        last = self._last_prepared
        if last is not None and last[0] is claims and len(last[1]) == len(claims):
            return last[1]  # the same claim list for every node of a cycle
        key = tuple(
            ((c.get("metadata") or {}).get("uid"), (c.get("metadata") or {}).get("resourceVersion"), id(c)) for c in claims
        )
        cached = self._prepared.get(key)
        if cached is None:
            # The informer's JSON, typed from here on (kube/apitypes.pyi); cast for mypy only, since
            # a call of cast() would be a cost of every scheduling cycle.
            if TYPE_CHECKING:
                typed = cast("Sequence[ResourceClaim]", claims)
            else:
                typed = claims
            cached = [self._prepare_claim(c) for c in typed]
            if len(self._prepared) > 256:
                self._prepared.clear()
            self._prepared[key] = cached
        self._last_prepared = (claims, cached)
        return cached

    def _compile(self, expression: str, where: str, i: int) -> CompiledSelector:
        try:
            # Stored expressions are not re-checked against the estimated cost (upstream's
            # scheduler does not either); evaluation stops at the runtime cost limit.
            return compile_selector(expression, cost_limit=None)
        except CELCompileError as exc:
            raise AllocationError(f"{where}: selector #{i}: CEL compile error: {exc}") from None

    def _selectors(self, raw: Sequence[DeviceSelector], where: str, missing: str) -> list[CompiledSelector]:
        out = []
        for i, sel in enumerate(raw or []):
            cel = sel.get("cel") or {}
            if not cel.get("expression"):
                raise AllocationError(missing.format(i=i))
            out.append(self._compile(cel["expression"], where, i))
        return out

    def _prepare_request(
        self, claim: ResourceClaim, ref: str, raw: ExactDeviceRequest | DeviceSubRequest, parent: str, sub: str
    ) -> PreparedRequest:
        name = f"{parent}/{sub}" if sub else parent
        where = f"claim {ref}, request {name}"
        selectors = self._selectors(
            raw.get("selectors") or [], f"claim {ref}", where + ", selector #{i}: CEL expression empty (unsupported selector type?)"
        )
        # Upstream's DeviceSubRequest has no adminAccess (the server prunes one), but a subrequest's
        # is read as an exact request's is, as before the types said so.
        fields: Mapping[str, Any] = raw
        admin_access = fields.get("adminAccess")
        if admin_access is not None and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        capacity_raw = (raw.get("capacity") or {}).get("requests") or {}
        if capacity_raw and not self.features.consumable_capacity:
            raise AllocationError(f"{where}: has capacity requests, but the {Gate.DRAConsumableCapacity} feature is disabled")
        class_name = raw.get("deviceClassName") or ""
        if not class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        class_obj = self.index.classes.get(class_name)
        if class_obj is None:
            # Upstream wraps the lister's NotFound error.
            raise AllocationError(f'{where}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io "{class_name}" not found')
        class_selectors = self._selectors(
            (class_obj.get("spec") or {}).get("selectors") or [], f"class {class_name}",
            f"class {class_name}" + ": selector #{i}: CEL expression empty (unsupported selector type?)",
        )
        mode = raw.get("allocationMode") or "ExactCount"
        if mode not in ("ExactCount", "All"):
            raise AllocationError(f"{where}: unsupported count mode {mode}")
        admin = bool(admin_access)
        if admin and self.namespace_labels is not None:
            ns = (claim.get("metadata") or {}).get("namespace", "")
            if (self.namespace_labels.get(ns) or {}).get(ADMIN_ACCESS_LABEL) != "true":
                raise NotAdmin(
                    f"{where}: admin access requires the namespace {ns} to be labelled {ADMIN_ACCESS_LABEL}=\"true\""
                )
        return PreparedRequest(
            name=name, claim_ref=ref, parent=parent, sub=sub, class_name=class_name, class_obj=class_obj,
            class_selectors=class_selectors, selectors=selectors, admin=admin, all_mode=mode == "All",
            count=int(raw.get("count") or 1) if mode == "ExactCount" else 0,
            tolerations=list(raw.get("tolerations") or []),
            capacity={k: as_quantity(v) for k, v in capacity_raw.items()},
        )

    def _prepare_claim(self, claim: ResourceClaim) -> PreparedClaim:
        ref = claim_reference(claim)
        devices = (claim.get("spec") or {}).get("devices") or {}
        requests: list[PreparedRequest] = []
        fewest: int | None = 0
        for raw in devices.get("requests") or []:
            name = raw.get("name", "")
            if raw.get("firstAvailable"):
                if not self.features.prioritized_list:
                    raise AllocationError(f"claim {ref}, request {name}: has subrequests, but the {Gate.DRAPrioritizedList} feature is disabled")
                subs = [self._prepare_request(claim, ref, s, name, s.get("name", "")) for s in raw["firstAvailable"]]
                requests.append(PreparedRequest(name, ref, name, "", "", {}, [], [], False, False, 0, [], {}, subrequests=subs))
                if fewest is not None:
                    fewest = None if any(s.all_mode for s in subs) else fewest + min(s.count for s in subs)
            else:
                req = self._prepare_request(claim, ref, raw.get("exactly") or {}, name, "")
                requests.append(req)
                if fewest is not None:
                    fewest = None if req.all_mode else fewest + req.count
        constraints = []
        for c in devices.get("constraints") or []:
            if c.get("matchAttribute"):
                constraints.append((frozenset(c.get("requests") or ()), c["matchAttribute"], False))
            elif c.get("distinctAttribute"):
                constraints.append((frozenset(c.get("requests") or ()), c["distinctAttribute"], True))
            else:
                raise AllocationError("empty constraint (unsupported constraint type?)")
        has_config = bool(devices.get("config")) or any(
            (r.class_obj.get("spec") or {}).get("config") for top in requests for r in (top.subrequests or [top])
        )
        return PreparedClaim(claim, ref, requests, constraints, has_config, fewest)

    # --- per-node entry point ---

    def allocate(self, node: Mapping[str, Any], claims: Sequence[Mapping[str, Any]], allocation_timestamp: str | None = None) -> AllocationOutcome:
        """Find one allocation per claim on ``node`` (claims in pod order), or say why not.

        ``allocation_timestamp`` (RFC 3339) is written to every allocation when binding
        conditions are enabled, as upstream's PreBind does.
        """
        if not claims:
            return Allocated([])
        try:
            prepared = self.prepare(claims)
        except NotAdmin as exc:
            return Unschedulable(str(exc), reason=str(exc))
        view = self.index.node_view(node)
        node_name = (node.get("metadata") or {}).get("name", "")
        signature = self._claims_signature(claims, prepared) if self.cache is not None else None
        stamp = self.allocated.stamp(view) if signature is not None else 0
        if self.cache is not None and signature is not None:
            hit = self.cache.get(node_name, view, self.allocated, stamp, self.index.classes_version, signature)
            if hit is not None:
                if hit.found:
                    return found_allocation(hit, allocation_timestamp, self.share_id)
                return self._no_solution(prepared, view, hit.deepest)
        search = Search(self, prepared, view, node_name)
        self.deadline = search.deadline
        try:
            search.found = search.run()
        except TimedOut:
            return Unschedulable(TIMED_OUT)
        finally:
            self.deadline = None
            self.last_steps = search.steps
        if self.cache is not None and signature is not None:
            self.cache.put(node_name, view, self.allocated, stamp, self.index.classes_version, signature, search)
        if search.found:
            return found_allocation(search, allocation_timestamp, self.share_id)
        return self._no_solution(prepared, view, search.deepest)

    def probe(self, node: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> Search:
        """The search ``allocate`` would run for ``claims`` on ``node``, not run: its per-device
        checks (:class:`Search`) say which devices a request could take, with nothing taken yet.
        Raises like :meth:`prepare`."""
        return Search(self, self.prepare(claims), self.index.node_view(node), (node.get("metadata") or {}).get("name", ""))

    def _no_solution(self, claims: list[PreparedClaim], view: NodeView, deepest: tuple[int, int]) -> Unschedulable:
        """Why a search that got no further than claim/request ``deepest`` failed (details built when read)."""
        invalid = [p for p in view.pools if p.invalid]
        if invalid:
            details = "; ".join(f"{p.id[0]}/{p.id[1]}: {p.invalid}" for p in invalid)
            return Unschedulable(f"invalid resource pools were encountered: {details}")

        def explain() -> str:
            ci, ri = deepest
            if ci < 0:
                return "no claim could be processed"
            return self.explain_request(claims[ci], claims[ci].requests[ri], view)

        return Unschedulable(reason=CANNOT_ALLOCATE, details=explain)

    def _claims_signature(self, claims: Sequence[Mapping[str, Any]], prepared: list[PreparedClaim]) -> bytes | None:
        """What a search depends on besides node, state and classes: the claims' specs (once per claim list).

        None (no caching) when a request asks for admin access, whose check reads namespace labels.
        """
        cached = self._signature
        if cached is not None and cached[0] is claims:
            return cached[1]
        admin = any(r.admin for c in prepared for top in c.requests for r in (top.subrequests or [top]))
        signature = None if admin else orjson.dumps([c.get("spec") for c in claims])
        self._signature = (claims, signature)
        return signature

    def free_candidates(self, view: NodeView) -> list[Device]:
        """The node's candidates minus devices allocated exclusively before."""
        return self.allocated.free_candidates(view)

    # --- counters available per pool (depends only on the allocated state) ---

    def available_counters(self, pool_id: PoolID) -> dict[tuple[str, str], Fraction]:
        """Declared shared counters minus what allocated devices of the pool consume."""
        cached = self._available.get(pool_id)
        if cached is None:
            devices, sets = self.index.pool_counters(pool_id)
            cached = {(s, c): q.as_fraction() for s, counters in sets.items() for c, q in counters.items()}
            for dev in devices.values():
                if dev.consumes and (dev.id in self.allocated.devices or dev.id in self.allocated.shared_devices):
                    for set_name, used in dev.consumes:
                        for c, q in used.items():
                            if (set_name, c) in cached:
                                cached[(set_name, c)] -= q.as_fraction()
            self._available[pool_id] = cached
        return cached

    def explain_request(self, claim: PreparedClaim, req: PreparedRequest, view: NodeView) -> str:
        """Why a request fails on its own: matching vs. available devices."""
        if req.subrequests:
            return f"claim {claim.ref}, request {req.name}: none of the subrequests can be satisfied"
        matching = [d for d in view.candidates if self.selectable(req, d)]
        where = f"claim {claim.ref}, request {req.name}"
        if not matching:
            return f"{where}: no device matches the device class {req.class_name} and the request's selectors"
        free = [d for d in matching if req.admin or (d.allow_multiple and self.features.consumable_capacity) or d.id not in self.allocated.devices]
        tolerated = [d for d in free if not (self.features.device_taints and untolerated(d, req))]
        need = len(matching) if req.all_mode else req.count
        if len(tolerated) < need:
            noun = "device" if need == 1 else "devices"
            text = f"{where}: needs {need} {noun}, {len(tolerated)} of {len(matching)} matching devices available"
            if len(tolerated) < len(free):
                text += f" ({len(free) - len(tolerated)} with untolerated taints)"
            return text
        return f"{where}: no combination of devices satisfies all requests and constraints"

    def selectable(self, req: PreparedRequest, dev: Device) -> bool:
        """Class and request selectors (cached per request and device); errors are fatal."""
        hit = req.match.get(dev)
        if hit is not None:
            return hit
        ok = True
        if dev.binding_conditions and not self.features.binding_conditions:
            ok = False
        else:
            # Class selectors first: a device the class rejects never reaches a faulty request selector.
            for of_class, sels in ((True, req.class_selectors), (False, req.selectors)):
                for i, sel in enumerate(sels):
                    try:
                        if not dev.evaluate(sel, self.deadline):
                            ok = False
                            break
                    except CELRuntimeError as exc:
                        # Upstream's text: the class or the claim (not the request), cel-go's error alone.
                        where = f"class {req.class_name}" if of_class else f"claim {req.claim_ref}"
                        error = AllocationError(f"{where}: selector #{i}: CEL runtime error: {exc.detail}")
                        error.device = "/".join(dev.id)
                        raise error from None
                if not ok:
                    break
        req.match[dev] = ok
        return ok


def allocate_claims(
    claims: Sequence[Mapping[str, Any]],
    node: Mapping[str, Any],
    *,
    classes: Iterable[Mapping[str, Any]] = (),
    slices: Iterable[Mapping[str, Any]] = (),
    allocated_claims: Iterable[Mapping[str, Any]] = (),
    in_flight: Iterable[Mapping[str, Any]] | Mapping[str, Any] = (),
    taint_rules: Iterable[Mapping[str, Any]] = (),
    gates: Mapping[str, bool] | AllocatorFeatures | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    share_id: Callable[[], str] | None = None,
    allocation_timestamp: str | None = None,
) -> AllocationOutcome:
    """One-shot allocation (builds the index and state; use :class:`Allocator` in hot loops)."""
    features = gates if isinstance(gates, AllocatorFeatures) else AllocatorFeatures.from_gates(gates or {})
    index = ResourceIndex(slices, classes, taint_rules, features)
    state = AllocatedState.from_claims(allocated_claims, in_flight)
    return Allocator(index, state, features, namespace_labels, share_id).allocate(node, claims, allocation_timestamp)
