"""The allocator against a brute-force reference on random small inventories and claims.

Each seed builds a node with one or two pools (devices with attributes, capacity, shared
counters, taints, devices that allow multiple allocations), some devices allocated before,
and one or two claims (counts, "All", prioritized lists, admin access, tolerations, capacity
requests, matchAttribute/distinctAttribute constraints, selectors that fail on some devices).
The reference below walks every assignment in upstream's order (claims, requests,
subrequests in order, devices by pool, slice and position, combinations within a request)
with none of the allocator's supply checks, and stops at the first complete one. It keeps
upstream's one early exit, on the per-claim result limit, because that decides which
failing selectors upstream's walk reaches. The allocator
must agree on the error, on "no solution", or on the devices chosen, both with its plain
search and with its supply checks on from the first step. Half of the seeds lower the
per-claim result limit so that the limit's pruning is exercised on small inventories.

``DRA_ALLOCATOR_CASES`` sets the number of seeds (default 6000).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from schedulers.allocator import BOUND_AFTER_STEPS, Allocated, AllocatedState, AllocationError, Allocator, ResourceIndex
from schedulers.allocator import search as allocator_search
from tests.schedulers.test_allocator import DRIVER_A, NODE1, allocated_claim, claim, dclass, node, result, rslice

CASES = int(os.environ.get("DRA_ALLOCATOR_CASES", "6000"))
CHUNK = 250
REFERENCE_STEPS = 50_000  # a seed whose reference search takes longer is skipped (counted below)

# --- selectors: CEL text for the allocator, the same rule in Python for the reference -----------


class SelectorError(Exception):
    """A selector that fails at runtime on a device (CEL: no such key)."""


def _attr(dev: dict[str, Any], name: str) -> Any:
    attrs = dev.get("attributes") or {}
    if name not in attrs:
        raise SelectorError(name)
    value = attrs[name]
    return value.get("string", value.get("int"))


def _has(dev: dict[str, Any], name: str) -> bool:
    return name in (dev.get("attributes") or {})


def _memory(dev: dict[str, Any]) -> int:
    return int(((dev.get("capacity") or {}).get("memory") or {}).get("value", "0"))


ATTRS = f'device.attributes["{DRIVER_A}"]'
SAFE_SELECTORS: dict[str, Callable[[dict[str, Any]], bool]] = {
    f'"model" in {ATTRS} && {ATTRS}.model == "A"': lambda d: _has(d, "model") and _attr(d, "model") == "A",
    f'!("numa" in {ATTRS}) || {ATTRS}.numa != 2': lambda d: not _has(d, "numa") or _attr(d, "numa") != 2,
    f'"memory" in device.capacity["{DRIVER_A}"]': lambda d: "memory" in (d.get("capacity") or {}),
}
FAILING_SELECTORS: dict[str, Callable[[dict[str, Any]], bool]] = {
    f"{ATTRS}.numa == 1": lambda d: _attr(d, "numa") == 1,
    f'{ATTRS}.model == "B"': lambda d: _attr(d, "model") == "B",
}
SELECTORS = {**SAFE_SELECTORS, **FAILING_SELECTORS}
CLASSES = {
    "class-a": [f'device.driver == "{DRIVER_A}"'],
    "class-m": [f'device.driver == "{DRIVER_A}"', *list(SAFE_SELECTORS)[:1]],
    "class-f": [f'device.driver == "{DRIVER_A}"', *list(FAILING_SELECTORS)[:1]],
}
SELECTORS[f'device.driver == "{DRIVER_A}"'] = lambda d: True

# --- random inventories and claims --------------------------------------------------------------


@dataclass
class Scenario:
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    allocated: list[dict[str, Any]]
    limit: int
    classes: list[dict[str, Any]] = field(default_factory=lambda: [dclass(n, selectors=tuple(s[1:])) for n, s in CLASSES.items()])


def _device(rng: random.Random, name: str, counters: bool) -> dict[str, Any]:
    dev: dict[str, Any] = {"name": name, "attributes": {}}
    if rng.random() < 0.8:
        dev["attributes"]["model"] = {"string": rng.choice("AB")}
    if rng.random() < 0.8:
        dev["attributes"]["numa"] = {"int": rng.randrange(3)}
    shared = rng.random() < 0.2
    if shared or rng.random() < 0.5:
        dev["capacity"] = {"memory": {"value": str(rng.choice((1, 2, 4)))}}
    if shared:
        dev["allowMultipleAllocations"] = True
    if counters and rng.random() < (0.8 if shared else 0.5):
        dev["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": str(rng.randint(1, 3))}}}]
    if rng.random() < 0.12:
        taint: dict[str, Any] = {"key": rng.choice(("k1", "k2")), "effect": rng.choice(("NoSchedule", "NoExecute", "None"))}
        if rng.random() < 0.5:
            taint["value"] = rng.choice(("x", "y"))
        dev["taints"] = [taint]
    return dev


def _pools(rng: random.Random) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """Slices, and (pool, device) in the reference's order."""
    slices: list[dict[str, Any]] = []
    ordered: list[tuple[str, dict[str, Any]]] = []
    budget = rng.randint(2, 8)
    for p, pool in enumerate(("pool-a", "pool-b")[: rng.randint(1, 2)]):
        count = rng.randint(1, budget) if p == 0 else budget
        budget -= count
        if count <= 0:
            break
        counters = rng.random() < 0.4
        devices = [_device(rng, f"{pool}-dev-{i}", counters) for i in range(count)]
        ordered.extend((pool, d) for d in devices)
        if counters:
            counter_set = {"name": "cs", "counters": {"mem": {"value": str(rng.randint(3, 8))}}}
            slices.append(rslice(f"{pool}-0-counters", None, pool=pool, count=2, sharedCounters=[counter_set], nodeName=NODE1))
            slices.append(rslice(f"{pool}-1-devices", devices, pool=pool, count=2, nodeName=NODE1))
        else:
            slices.append(rslice(f"{pool}-devices", devices, pool=pool))
    return slices, ordered


def _exactly(rng: random.Random, sub: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": rng.choices(list(CLASSES), (12, 6, 1))[0]}
    if rng.random() < 0.1:
        body["allocationMode"] = "All"
    else:
        body["allocationMode"] = "ExactCount"
        body["count"] = rng.choices((1, 2, 3, 4), (8, 4, 2, 1))[0]
    if rng.random() < 0.3:
        body["selectors"] = [{"cel": {"expression": rng.choices(list(SELECTORS), [4] * len(SAFE_SELECTORS) + [1] * len(FAILING_SELECTORS) + [4])[0]}}]
    if not sub and rng.random() < 0.1:
        body["adminAccess"] = True
    if rng.random() < 0.3:
        body["tolerations"] = [rng.choice((
            {"key": "k1", "operator": "Exists"},
            {"key": "k2", "operator": "Equal", "value": "x"},
            {"key": "k1", "operator": "Exists", "effect": "NoExecute"},
            {"operator": "Exists"},
        ))]
    if rng.random() < 0.12:
        body["capacity"] = {"requests": {"memory": str(rng.randint(1, 2))}}
    return body


def _claim(rng: random.Random, name: str) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    names: list[str] = []
    for r in range(rng.choices((1, 2, 3), (3, 2, 1))[0]):
        req_name = f"req-{r}"
        names.append(req_name)
        if rng.random() < 0.3:
            subs = [{"name": f"sub-{s}", **_exactly(rng, sub=True)} for s in range(rng.randint(1, 3))]
            names.extend(f"{req_name}/{s['name']}" for s in subs)
            requests.append({"name": req_name, "firstAvailable": subs})
        else:
            requests.append({"name": req_name, "exactly": _exactly(rng, sub=False)})
    constraints = []
    for _ in range(rng.choice((0, 0, 1, 2))):
        kind = rng.choice(("matchAttribute", "distinctAttribute"))
        c: dict[str, Any] = {kind: f"{DRIVER_A}/{rng.choice(('model', 'numa'))}"}
        if rng.random() < 0.5:
            c["requests"] = rng.sample(names, rng.randint(1, min(2, len(names))))
        constraints.append(c)
    return claim(name, *requests, constraints=constraints or None)


def scenario(seed: int) -> tuple[Scenario, list[tuple[str, dict[str, Any]]]]:
    rng = random.Random(seed)
    slices, ordered = _pools(rng)
    allocated = []
    for i, (pool, dev) in enumerate(ordered):
        roll = rng.random()
        if dev.get("allowMultipleAllocations"):
            if roll < 0.3:
                allocated.append(allocated_claim(f"old-{i}", result("req-0", dev["name"], pool, shareID=f"s{i}", consumedCapacity={"memory": "1"})))
        elif roll < 0.1:
            allocated.append(allocated_claim(f"old-{i}", result("req-0", dev["name"], pool)))
    claims = [_claim(rng, f"claim-{c}") for c in range(rng.choice((1, 1, 2)))]
    limit = allocator_search.MAX_RESULTS
    if not seed % 2:
        # Around what the claims need at least ("All" counted as every device), mostly enough.
        fewest = max(
            sum(min(len(ordered) if r.get("allocationMode") == "All" else r["count"] for r in (top.get("firstAvailable") or [top["exactly"]]))
                for top in c["spec"]["devices"]["requests"])
            for c in claims
        )
        limit = rng.randint(fewest, fewest + 2) if rng.random() < 0.8 else rng.randint(1, fewest)
    return Scenario(slices, claims, allocated, limit), ordered


# --- the reference --------------------------------------------------------------------------------


class ReferenceError(Exception):
    """What the reference reports where the allocator raises AllocationError."""


class TooLong(Exception):
    """The reference ran past REFERENCE_STEPS."""


Walk = Generator[None, None, bool]  # yields per solution, returns "over the result limit"


@dataclass
class Candidate:
    pool: str
    dev: dict[str, Any]

    @property
    def id(self) -> tuple[str, str]:
        return self.pool, self.dev["name"]

    @property
    def path(self) -> str:
        return f"{DRIVER_A}/{self.pool}/{self.dev['name']}"


@dataclass
class Req:
    claim: int
    ref: str
    name: str  # as in results
    parent: str
    sub: str
    body: dict[str, Any]

    @property
    def all_mode(self) -> bool:
        return self.body.get("allocationMode") == "All"

    @property
    def admin(self) -> bool:
        return bool(self.body.get("adminAccess"))


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint["effect"]:
            continue
        if tol.get("key") and tol["key"] != taint["key"]:
            continue
        if tol.get("operator") == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


class Reference:
    """Upstream's allocation walk, written out plainly: every prefix in order, first complete one wins."""

    def __init__(self, sc: Scenario, ordered: list[tuple[str, dict[str, Any]]]) -> None:
        self.sc = sc
        self.candidates = [Candidate(p, d) for p, d in ordered]
        self.steps = 0
        self.exclusive: set[tuple[str, str]] = set()
        self.shared_used: dict[tuple[str, str], int] = {}  # memory taken by earlier shares
        for c in sc.allocated:
            for r in c["status"]["allocation"]["devices"]["results"]:
                key = (r["pool"], r["device"])
                if r.get("shareID"):
                    self.shared_used[key] = self.shared_used.get(key, 0) + int((r.get("consumedCapacity") or {}).get("memory", "0"))
                else:
                    self.exclusive.add(key)
        self.counters: dict[str, int] = {}
        for s in sc.slices:
            for cs in s["spec"].get("sharedCounters") or []:
                self.counters[s["spec"]["pool"]["name"]] = int(cs["counters"]["mem"]["value"])
        for cand in self.candidates:
            if cand.id in self.exclusive or cand.id in self.shared_used:
                self.counters[cand.pool] = self.counters.get(cand.pool, 0) - self._counter_use(cand)
        # search state
        self.allocating: dict[tuple[str, str], set[int]] = {}
        self.pending: dict[tuple[str, str], int] = {}  # memory of shares taken in this search
        self.shares: dict[tuple[str, str], int] = {}
        self.used: dict[str, int] = {}
        self.picks: list[list[tuple[Req, Candidate, int | None]]] = [[] for _ in sc.claims]
        self.matched: list[list[dict[str, Any]]] = []  # per claim: one entry per constraint
        self.requests: list[list[list[Req]]] = []  # claim -> request -> alternatives
        for ci, c in enumerate(sc.claims):
            ref = f"default/{c['metadata']['name']}"
            per_claim = []
            for raw in c["spec"]["devices"]["requests"]:
                if raw.get("firstAvailable"):
                    per_claim.append([Req(ci, ref, f"{raw['name']}/{s['name']}", raw["name"], s["name"], s) for s in raw["firstAvailable"]])
                else:
                    per_claim.append([Req(ci, ref, raw["name"], raw["name"], "", raw["exactly"])])
            self.requests.append(per_claim)
            self.matched.append([{"con": con, "values": []} for con in c["spec"]["devices"].get("constraints") or []])

    @staticmethod
    def _counter_use(cand: Candidate) -> int:
        return sum(int(c["counters"]["mem"]["value"]) for c in cand.dev.get("consumesCounters") or [])

    # --- per device ---

    def selectable(self, req: Req) -> Callable[[Candidate], bool]:
        def check(cand: Candidate) -> bool:
            for i, expr in enumerate(CLASSES[req.body["deviceClassName"]]):
                if not self._evaluate(expr, cand, f"class {req.body['deviceClassName']}: selector #{i}"):
                    return False
            for i, sel in enumerate(req.body.get("selectors") or []):
                if not self._evaluate(sel["cel"]["expression"], cand, f"claim {req.ref}: selector #{i}"):
                    return False
            return True

        return check

    @staticmethod
    def _evaluate(expr: str, cand: Candidate, where: str) -> bool:
        try:
            return SELECTORS[expr](cand.dev)
        except SelectorError:
            raise ReferenceError(f"{where} on device {cand.path}") from None

    def consumption(self, req: Req, cand: Candidate) -> int | bool | None:
        """Memory a share takes (int), None for an exclusive device that fits, False if it does not fit."""
        requested = ((req.body.get("capacity") or {}).get("requests") or {}).get("memory")
        capacity = cand.dev.get("capacity")
        if requested is not None and not capacity:
            return False
        if not cand.dev.get("allowMultipleAllocations"):
            return None if requested is None or int(requested) <= _memory(cand.dev) else False
        amount = int(requested) if requested is not None else _memory(cand.dev)
        if amount + self.shared_used.get(cand.id, 0) + self.pending.get(cand.id, 0) > _memory(cand.dev):
            return False
        return amount

    def in_use(self, req: Req, cand: Candidate) -> bool:
        users = self.allocating.get(cand.id, set())
        if req.admin:
            return req.claim in users
        return cand.id in self.exclusive or bool(users)

    def take(self, req: Req, cand: Candidate, must: bool) -> Callable[[], None] | None:
        shared = bool(cand.dev.get("allowMultipleAllocations"))
        amount = self.consumption(req, cand)
        if amount is False:
            return None
        counter = 0
        if cand.dev.get("consumesCounters") and not (shared and (cand.id in self.shared_used or self.shares.get(cand.id))):
            counter = self._counter_use(cand)
            if self.counters.get(cand.pool, 0) - self.used.get(cand.pool, 0) < counter:
                return None
        for t in cand.dev.get("taints") or []:
            if t["effect"] in ("NoSchedule", "NoExecute") and not _tolerated(t, req.body.get("tolerations") or []):
                return None
        added: list[dict[str, Any]] = []
        for m in self.matched[req.claim]:
            con = m["con"]
            scope = con.get("requests") or []
            if scope and req.parent not in scope and req.name not in scope:
                continue
            attribute = (con.get("matchAttribute") or con.get("distinctAttribute")).split("/", 1)[1]
            value = _attr(cand.dev, attribute) if _has(cand.dev, attribute) else None
            ok = value is not None and (value not in m["values"] if "distinctAttribute" in con else not m["values"] or m["values"][0] == value)
            if not ok:
                for earlier in added:
                    earlier["values"].pop()
                if must:
                    raise ReferenceError(
                        f"claim {req.ref}, request {req.name}: cannot add device {cand.path} because a claim constraint would not be satisfied"
                    )
                return None
            m["values"].append(value)
            added.append(m)
        self.used[cand.pool] = self.used.get(cand.pool, 0) + counter
        if shared:
            self.shares[cand.id] = self.shares.get(cand.id, 0) + 1
            self.pending[cand.id] = self.pending.get(cand.id, 0) + int(amount or 0)
        else:
            self.allocating.setdefault(cand.id, set()).add(req.claim)
        self.picks[req.claim].append((req, cand, int(amount or 0) if shared else None))

        def undo() -> None:
            self.picks[req.claim].pop()
            if shared:
                self.shares[cand.id] -= 1
                self.pending[cand.id] -= int(amount or 0)
            else:
                self.allocating[cand.id].discard(req.claim)
            self.used[cand.pool] -= counter
            for m in added:
                m["values"].pop()

        return undo

    # --- the walk ---

    def all_devices(self, req: Req) -> list[Candidate]:
        check = self.selectable(req)
        return [c for c in self.candidates if check(c) and self.consumption(req, c) is not False]

    def solve(self) -> list[list[dict[str, Any]]] | None:
        # Validation in upstream's order: per claim, each request's "All" devices, then the limit.
        self.fixed: dict[int, list[Candidate]] = {}
        for ci, per_claim in enumerate(self.requests):
            fewest = 0
            for alternatives in per_claim:
                needs = []
                for req in alternatives:
                    if req.all_mode:
                        self.fixed[id(req)] = self.all_devices(req)
                        needs.append(len(self.fixed[id(req)]))
                    else:
                        needs.append(req.body["count"])
                fewest += min(needs)
            if fewest > self.sc.limit:
                raise ReferenceError(f"claim default/{self.sc.claims[ci]['metadata']['name']}: number of requested devices {fewest} exceeds the claim limit of {self.sc.limit}")
        for _ in self.walk(0, 0):
            return [
                [{"request": req.name, "pool": cand.pool, "device": cand.dev["name"], "admin": req.admin, "share": memory} for req, cand, memory in picks]
                for picks in self.picks
            ]
        return None

    def walk(self, ci: int, ri: int) -> Walk:
        """Yields once per complete assignment (the state holds it while suspended).

        Returns True when every way on exceeds the claim's result limit: upstream then stops
        trying other devices for the requests before (which decides what errors it runs into).
        """
        self.steps += 1
        if self.steps > REFERENCE_STEPS:
            raise TooLong
        if ci == len(self.requests):
            yield None
            return False
        if ri == len(self.requests[ci]):
            yield from self.walk(ci + 1, 0)
            return False
        alternatives = self.requests[ci][ri]
        if not alternatives[0].sub:
            return (yield from self.devices(alternatives[0], ri, 0, 0))
        exceeded = True
        for req in alternatives:
            exceeded = (yield from self.devices(req, ri, 0, 0)) and exceeded
        return exceeded

    def devices(self, req: Req, ri: int, di: int, start: int) -> Walk:
        ci = req.claim
        if req.all_mode:
            fixed = self.fixed[id(req)]
            if not fixed:
                return False
            need = len(fixed)
        else:
            need = req.body["count"]
        if di == need:
            return (yield from self.walk(ci, ri + 1))
        if len(self.picks[ci]) + need - di > self.sc.limit:
            return True
        if req.all_mode:
            cand = fixed[di]
            if self.in_use(req, cand):
                return False
            undo = self.take(req, cand, must=True)
            if undo is None:
                return False
            exceeded = yield from self.devices(req, ri, di + 1, 0)
            undo()
            return exceeded
        check = self.selectable(req)
        for pos in range(start, len(self.candidates)):
            cand = self.candidates[pos]
            if self.in_use(req, cand) or not check(cand):
                continue
            undo = self.take(req, cand, must=False)
            if undo is None:
                continue
            exceeded = yield from self.devices(req, ri, di + 1, pos + 1)
            undo()
            if exceeded:
                return True
        return False


# --- the comparison -------------------------------------------------------------------------------


def _ours(sc: Scenario, bound_after: int) -> list[list[dict[str, Any]]] | str | None:
    index = ResourceIndex(sc.slices, sc.classes)
    state = AllocatedState.from_claims(sc.allocated)
    shares = itertools.count()
    allocator = Allocator(index, state, share_id=lambda: f"share-{next(shares)}", bound_after=bound_after)
    try:
        outcome = allocator.allocate(node(), sc.claims)
    except AllocationError as exc:
        text = str(exc).split(": CEL runtime error")[0]
        return f"{text} on device {exc.device}" if exc.device else text
    if not isinstance(outcome, Allocated):
        return None
    out = []
    for allocation in outcome.allocations:
        out.append([
            {"request": r["request"], "pool": r["pool"], "device": r["device"], "admin": bool(r.get("adminAccess")),
             "share": int((r.get("consumedCapacity") or {}).get("memory", "0")) if r.get("shareID") else None}
            for r in allocation["devices"]["results"]
        ])
    return out


def _reference(sc: Scenario, ordered: list[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]] | str | None:
    try:
        return Reference(sc, ordered).solve()
    except ReferenceError as exc:
        return str(exc)


@pytest.mark.parametrize("first", range(0, CASES, CHUNK))
def test_allocator_agrees_with_reference(first: int, monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = 0
    for seed in range(first, min(first + CHUNK, CASES)):
        sc, ordered = scenario(seed)
        monkeypatch.setattr(allocator_search, "MAX_RESULTS", sc.limit)
        try:
            expect = _reference(sc, ordered)
        except TooLong:
            skipped += 1
            continue
        for bound_after in (BOUND_AFTER_STEPS, 0):
            got = _ours(sc, bound_after)
            assert got == expect, f"seed {seed} (bound_after={bound_after}): allocator {got!r}, reference {expect!r}"
    assert skipped <= CHUNK // 50, f"{skipped} seeds from {first} too large for the reference"
