"""Worst-case cost estimation of checked CEL expressions, with cel-go's and Kubernetes' rules.

The estimate walks the macro-expanded tree exactly as cel-go's estimator does: identifiers and
selections cost 1, literals 0, list and map literals 10 and 30, calls their arguments plus a
per-function cost (string functions scale with the string's size, comprehensions multiply
the loop body by the range size). Sizes of the inputs come from the environment's size
estimator (for DRA: the declared maximum sizes of device attributes and maps).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kube.cel.checker import CheckedAST
from kube.cel.parser import ACCUMULATOR, Call, Comprehension, CreateList, CreateMap, CreateStruct, Expr, Ident, Literal, Select, is_bind
from kube.cel.types import (
    BOOL_K,
    BYTES_K,
    DOUBLE_K,
    DURATION_K,
    INT_K,
    LIST_K,
    MAP_K,
    OPAQUE_K,
    OPTIONAL_NAME,
    PARAM_K,
    STRING_K,
    STRUCT_K,
    TIMESTAMP_K,
    UINT_K,
    Type,
)

U64 = 2**64 - 1
STRING_TRAVERSAL_FACTOR = 0.1
REGEX_LENGTH_FACTOR = 0.25
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30
STRUCT_CREATE_COST = 40


def _add(x: int, y: int) -> int:
    return min(x + y, U64)


def _mul(x: int, y: int) -> int:
    return min(x * y, U64)


def _factor(x: int, f: float) -> int:
    if x > 0 and f > 0 and x > U64 / f:
        return U64
    c = math.ceil(x * f)
    return U64 if c >= 2**64 else int(c)


@dataclass(frozen=True)
class Estimate:
    """A [min, max] range of sizes or costs with cel-go's saturating arithmetic."""

    min: int
    max: int

    def __add__(self, o: Estimate) -> Estimate:
        return Estimate(_add(self.min, o.min), _add(self.max, o.max))

    def __mul__(self, o: Estimate) -> Estimate:
        return Estimate(_mul(self.min, o.min), _mul(self.max, o.max))

    def factor(self, f: float) -> Estimate:
        return Estimate(_factor(self.min, f), _factor(self.max, f))

    def union(self, o: Estimate) -> Estimate:
        return Estimate(min(self.min, o.min), max(self.max, o.max))


def fixed(n: int) -> Estimate:
    return Estimate(n, n)


UNKNOWN = Estimate(0, U64)
ZERO = Estimate(0, 0)
ONE = Estimate(1, 1)


@dataclass
class AstNode:
    """What a function cost estimator sees of an argument."""

    path: list[str] | None
    type: Type
    expr: Expr | None
    computed_size: Estimate | None


@dataclass
class CallEstimate:
    cost: Estimate
    result_size: Estimate | None = None


SizeEstimator = Callable[[AstNode], Estimate | None]
# (function name, overload id, target, args, size-of) -> estimate or None
CallEstimator = Callable[[str, str, "AstNode | None", list[AstNode], Callable[[AstNode], Estimate]], "CallEstimate | None"]


@dataclass
class _EntrySize:
    container: str  # "list" | "map"
    key: Estimate
    val: Estimate

    def union(self, other: _EntrySize | None) -> _EntrySize | None:
        if other is None:
            return None
        return _EntrySize(self.container, self.key.union(other.key), self.val.union(other.val))


@dataclass
class _Local:
    path: list[str]
    size: Estimate | None
    entry: _EntrySize | None


def _is_scalar(t: Type) -> bool:
    if t.kind in (BOOL_K, DOUBLE_K, DURATION_K, INT_K, TIMESTAMP_K, UINT_K):
        return True
    if t.kind == OPAQUE_K and t.name == OPTIONAL_NAME:
        return _is_scalar(t.params[0])
    return False


def _literal_size(e: Expr) -> Estimate | None:
    if isinstance(e, Literal):
        v = e.value
        if isinstance(v, str | bytes):
            return fixed(len(v))
        return ONE
    if isinstance(e, CreateList):
        return fixed(len(e.elements))
    if isinstance(e, CreateMap):
        return fixed(len(e.entries))
    return None


class _Coster:
    def __init__(
        self,
        ast: CheckedAST,
        size_estimator: SizeEstimator | None,
        call_estimator: CallEstimator | None,
        overload_estimators: dict[str, CallEstimator],
        presence_test_cost: int,
    ) -> None:
        self.ast = ast
        self.size_estimator = size_estimator
        self.call_estimator = call_estimator
        self.overload_estimators = overload_estimators
        self.presence_test_cost = fixed(presence_test_cost)
        self.paths: dict[int, list[str]] = {}
        self.locals: dict[str, list[_Local]] = {}
        self.sizes: dict[int, Estimate] = {}
        self.entry_sizes: dict[int, _EntrySize] = {}

    # -- bookkeeping

    def type(self, e: Expr) -> Type:
        return self.ast.type_of(e)

    def push(self, name: str, local: _Local) -> None:
        self.locals.setdefault(name, []).append(local)

    def pop(self, name: str) -> None:
        self.locals[name].pop()

    def peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def path(self, e: Expr) -> list[str]:
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None:
                return list(local.path)
        return list(self.paths.get(e.id, []))

    def node(self, e: Expr) -> AstNode:
        path: list[str] | None = self.path(e)
        if path and path[0] in (ACCUMULATOR, "__result__"):
            path = None
        return AstNode(path, self.type(e), e, self.size(e))

    def size(self, e: Expr) -> Estimate | None:
        if e.id in self.sizes:
            return self.sizes[e.id]
        lit = _literal_size(e)
        if lit is not None:
            return lit
        if self.size_estimator is not None:
            est = self.size_estimator(AstNode(self.path(e), self.type(e), e, None))
            if est is not None:
                self.sizes[e.id] = est
                return est
        if _is_scalar(self.type(e)):
            return ONE
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def size_or_unknown(self, e: Expr | AstNode) -> Estimate:
        if isinstance(e, AstNode):
            if e.computed_size is not None:
                return e.computed_size
            if self.size_estimator is not None:
                est = self.size_estimator(e)
                if est is not None:
                    return est
            return UNKNOWN
        s = self.size(e)
        return s if s is not None else UNKNOWN

    def entry_size(self, e: Expr) -> _EntrySize | None:
        if e.id in self.entry_sizes:
            return self.entry_sizes[e.id]
        if isinstance(e, Ident):
            local = self.peek(e.name)
            if local is not None:
                return local.entry
        return None

    def set_size(self, e: Expr, size: Estimate | None) -> None:
        if size is not None:
            self.sizes[e.id] = size

    def set_entry(self, e: Expr, entry: _EntrySize | None) -> None:
        if entry is not None:
            self.entry_sizes[e.id] = entry

    def push_local(self, name: str, e: Expr) -> None:
        self.push(name, _Local(self.path(e), self.size(e), self.entry_size(e)))

    def _iter(self, name: str, rng: Expr, which: str) -> None:
        entry = self.entry_size(rng)
        container = (
            entry.container
            if entry is not None
            else ("list" if self.type(rng).kind == LIST_K else "map" if self.type(rng).kind == MAP_K else "")
        )
        if which == "single":
            size = entry.key if entry is not None else None
            sub = "@keys"
            if container == "list":
                size = entry.val if entry is not None else None
                sub = "@items"
        elif which == "key":
            size = entry.key if entry is not None else None
            sub = "@indices" if container == "list" else "@keys"
        else:
            size = entry.val if entry is not None else None
            sub = "@items" if container == "list" else "@values"
        self.push(name, _Local([*self.path(rng), sub], size, None))

    # -- the walk

    def cost(self, e: Expr | None) -> Estimate:
        if e is None:
            return ZERO
        if isinstance(e, Literal):
            return ZERO
        if isinstance(e, Ident):
            local = self.peek(e.name)
            ref = self.ast.refs.get(e.id)
            self.paths[e.id] = list(local.path) if local is not None else [ref.name if ref is not None and ref.name else e.name]
            return ONE
        if isinstance(e, Select):
            ref = self.ast.refs.get(e.id)
            if ref is not None and ref.name:  # a qualified variable name
                self.paths[e.id] = [ref.name]
                return ONE
            if e.test_only:
                return self.presence_test_cost + self.cost(e.operand)
            total = self.cost(e.operand)
            if self.type(e.operand).kind in (MAP_K, STRUCT_K, PARAM_K):
                total = total + ONE
            self.paths[e.id] = [*self.path(e.operand), e.field]
            return total
        if isinstance(e, Call):
            return self.cost_call(e)
        if isinstance(e, CreateList):
            total = ZERO
            item = Estimate(U64, 0) if e.elements else ZERO
            for x in e.elements:
                total = total + self.cost(x)
                item = item.union(self.size_or_unknown(x))
            self.set_entry(e, _EntrySize("list", ONE, item))
            return total + fixed(LIST_CREATE_COST)
        if isinstance(e, CreateMap):
            total = ZERO
            ks = Estimate(U64, 0) if e.entries else ZERO
            vs = Estimate(U64, 0) if e.entries else ZERO
            for en in e.entries:
                total = total + self.cost(en.key) + self.cost(en.value)
                ks = ks.union(self.size_or_unknown(en.key))
                vs = vs.union(self.size_or_unknown(en.value))
            self.set_entry(e, _EntrySize("map", ks, vs))
            return total + fixed(MAP_CREATE_COST)
        if isinstance(e, CreateStruct):
            total = ZERO
            for f in e.fields:
                total = total + self.cost(f.value)
            return total + fixed(STRUCT_CREATE_COST)
        assert isinstance(e, Comprehension)
        return self.cost_bind(e) if is_bind(e) else self.cost_comprehension(e)

    def cost_comprehension(self, e: Comprehension) -> Estimate:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self.push_local(e.accu_var, e.accu_init)
        if e.iter_var2:
            self._iter(e.iter_var, e.iter_range, "key")
            self._iter(e.iter_var2, e.iter_range, "value")
        else:
            self._iter(e.iter_var, e.iter_range, "single")
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        self.pop(e.iter_var)
        if e.iter_var2:
            self.pop(e.iter_var2)
        total = total + self.cost(e.result)
        self.pop(e.accu_var)
        count = self.size_or_unknown(e.iter_range)
        total = total + count * (step + loop)
        if isinstance(e.accu_init, Literal):
            self.set_size(e, self.size(e.accu_init))
        elif isinstance(e.accu_init, CreateList | CreateMap):
            self.set_size(e, count)
            self.set_entry(e, self.entry_size(e.loop_step))
        return total

    def cost_bind(self, e: Comprehension) -> Estimate:
        total = self.cost(e.iter_range) + self.cost(e.accu_init)
        self.push_local(e.accu_var, e.accu_init)
        total = total + self.cost(e.result)
        self.pop(e.accu_var)
        self.set_size(e, self.size(e.result))
        self.set_entry(e, self.entry_size(e.result))
        return total

    def cost_call(self, e: Call) -> Estimate:
        ref = self.ast.refs.get(e.id)
        namespaced = ref is not None and ref.value == "namespaced"
        function = ref.name if ref is not None and ref.name else e.function
        if function == "dyn" and len(e.args) == 1:
            arg_cost = self.cost(e.args[0])
            self.set_size(e, self.size(e.args[0]))
            self.set_entry(e, self.entry_size(e.args[0]))
            return ONE + arg_cost
        arg_costs = [self.cost(a) for a in e.args]
        arg_nodes = [self.node(a) for a in e.args]
        overloads = ref.overloads if ref is not None else ()
        if not overloads:
            return ZERO
        total = ZERO
        target: AstNode | None = None
        if e.target is not None and not namespaced:
            total = total + self.cost(e.target)
            target = self.node(e.target)
        fn_cost = Estimate(U64, 0)
        result_size: Estimate | None = None
        for ov in overloads:
            est = self.function_cost(e, function, ov, target, arg_nodes, arg_costs)
            fn_cost = fn_cost.union(est.cost)
            if est.result_size is not None:
                result_size = est.result_size if result_size is None else result_size.union(est.result_size)
            if ov == "index_list" and e.args:
                entry = self.entry_size(e.args[0])
                result_size = entry.val if entry is not None else None
                self.paths[e.id] = [*self.path(e.args[0]), "@items"]
            elif ov == "index_map" and e.args:
                entry = self.entry_size(e.args[0])
                result_size = entry.val if entry is not None else None
                self.paths[e.id] = [*self.path(e.args[0]), "@values"]
            if result_size is None:
                result_size = self.size(e)
        self.set_size(e, result_size)
        return total + fn_cost

    def function_cost(
        self, e: Call, function: str, overload: str, target: AstNode | None, args: list[AstNode], arg_costs: list[Estimate]
    ) -> CallEstimate:
        arg_sum = ZERO
        for c in arg_costs:
            arg_sum = arg_sum + c
        custom = self.overload_estimators.get(overload)
        if custom is not None:
            est = custom(function, overload, target, args, self.size_or_unknown)
            if est is not None:
                return CallEstimate(est.cost + arg_sum, est.result_size)
        if self.call_estimator is not None:
            est = self.call_estimator(function, overload, target, args, self.size_or_unknown)
            if est is not None:
                return CallEstimate(est.cost + arg_sum, est.result_size)
        so = self.size_or_unknown
        if overload == "string_format" and target is not None:
            return CallEstimate(so(target).factor(STRING_TRAVERSAL_FACTOR) + arg_sum)
        if overload == "string_to_bytes" and len(args) == 1:
            sz = so(args[0])
            return CallEstimate(sz.factor(STRING_TRAVERSAL_FACTOR) + arg_sum, Estimate(sz.min, _mul(sz.max, 4)))
        if overload == "bytes_to_string" and len(args) == 1:
            sz = so(args[0])
            return CallEstimate(sz.factor(STRING_TRAVERSAL_FACTOR) + arg_sum, Estimate(sz.min // 4, sz.max))
        if overload == "strings_quote" and len(args) == 1:
            sz = so(args[0])
            return CallEstimate(sz.factor(STRING_TRAVERSAL_FACTOR) + arg_sum, Estimate(_add(sz.min, 2), _add(_mul(sz.max, 2), 2)))
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return CallEstimate(so(args[0]).factor(STRING_TRAVERSAL_FACTOR) + arg_sum)
        if overload == "in_list" and len(args) == 2:
            return CallEstimate(so(args[1]).factor(1) + arg_sum)
        if overload == "matches_string" and target is not None and len(args) == 1:
            str_cost = (so(target) + ONE).factor(STRING_TRAVERSAL_FACTOR)
            regex_cost = so(args[0]).factor(REGEX_LENGTH_FACTOR)
            return CallEstimate(str_cost * regex_cost + arg_sum)
        if overload == "contains_string" and target is not None and len(args) == 1:
            return CallEstimate(so(target).factor(STRING_TRAVERSAL_FACTOR) * so(args[0]).factor(STRING_TRAVERSAL_FACTOR) + arg_sum)
        if overload in ("logical_or", "logical_and"):
            lhs, rhs = arg_costs
            return CallEstimate(Estimate(lhs.min, (lhs + rhs).max))
        if overload == "conditional":
            size = so(args[1]).union(so(args[2]))
            a, b = self.entry_size(e.args[1]), self.entry_size(e.args[2])
            self.set_entry(e, a.union(b) if a is not None else None)
            return CallEstimate(arg_costs[0] + arg_costs[1].union(arg_costs[2]), size)
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            result_size = so(args[0]) + so(args[1])
            a, b = self.entry_size(e.args[0]), self.entry_size(e.args[1])
            merged = a.union(b) if a is not None else None
            if merged is not None:
                self.set_entry(e, merged)
            if overload == "add_list":
                return CallEstimate(ONE + arg_sum, result_size)
            return CallEstimate(result_size.factor(STRING_TRAVERSAL_FACTOR) + arg_sum, result_size)
        if overload in _SIZE_COMPARISONS:
            lhs, rhs = so(args[0]), so(args[1])
            smallest = min(lhs.max, rhs.max)
            low = 1 if smallest > 0 else 0
            return CallEstimate(Estimate(low, smallest).factor(STRING_TRAVERSAL_FACTOR) + arg_sum)
        return CallEstimate(ONE + arg_sum)


_SIZE_COMPARISONS = frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string",
    "less_bytes", "greater_bytes", "less_equals_bytes", "greater_equals_bytes",
    "equals", "not_equals",
})  # fmt: skip


def estimate(
    ast: CheckedAST,
    size_estimator: SizeEstimator | None = None,
    call_estimator: CallEstimator | None = None,
    overload_estimators: dict[str, CallEstimator] | None = None,
    presence_test_cost: int = 1,
) -> Estimate:
    """cel-go's ``EstimateCost`` for a checked expression."""
    c = _Coster(ast, size_estimator, call_estimator, overload_estimators or {}, presence_test_cost)
    return c.cost(ast.expr)


def literal_uint(node: AstNode, default: int) -> int:
    """A literal int argument's value (negative as 0), else ``default`` (cel-go's nodeAsUintValue)."""
    v = node.expr.value if isinstance(node.expr, Literal) else None
    if type(v) is int:
        return max(v, 0)
    return default


__all__ = [
    "ONE",
    "U64",
    "UNKNOWN",
    "ZERO",
    "AstNode",
    "CallEstimate",
    "Estimate",
    "estimate",
    "fixed",
    "literal_uint",
]

# Exported kind constants some estimators need without importing kube.cel.types directly.
STRING_KIND, BYTES_KIND = STRING_K, BYTES_K
