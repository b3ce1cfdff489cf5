"""Evaluation of checked CEL trees as Python closures, with cel-go's runtime cost tracking.

Every closure takes a frame: ``[activation, tracker, slot...]``. Local variables of
comprehensions and ``cel.bind`` live in slots assigned at planning time. Errors are
``EvalError`` exceptions, absorbed where CEL absorbs error values (``&&``, ``||``, the
comprehension loop conditions). The tracker adds up cel-go's runtime cost of each step; going
over the limit raises ``CostLimitExceeded``, which nothing absorbs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.cel.checker import CheckedAST, Function, Overload, Reference
from kube.cel.parser import (
    Call,
    Comprehension,
    CreateList,
    CreateMap,
    CreateStruct,
    Expr,
    Ident,
    Literal,
    Select,
    is_bind,
    qualified_name,
)
from kube.cel.regex import RegexError, compile_regex
from kube.cel.types import (
    ANY_K,
    BOOL_K,
    BYTES_K,
    DOUBLE_K,
    DYN_K,
    ERROR_K,
    INT_K,
    LIBRARY_TYPES,
    LIST_K,
    MAP_K,
    NULL_K,
    OPAQUE_K,
    OPTIONAL_NAME,
    PARAM_K,
    STRING_K,
    STRUCT_K,
    TYPE_K,
    UINT_K,
    BoolKey,
    EvalError,
    Optional,
    Type,
    UInt,
    map_key,
    no_such_overload,
    runtime_type,
)

Frame = list[Any]
Fn = Callable[[Frame], Any]
RuntimeCost = Callable[[list[Any], Any], int]


COST_LIMIT_MESSAGE = "operation cancelled: actual cost limit exceeded"


class CostLimitExceeded(Exception):
    """The runtime cost went over the limit (never absorbed by && / ||)."""


class Interrupted(Exception):
    """The evaluation passed its deadline."""


class PlanError(Exception):
    """The program cannot be built (cel-go: "program instantiation failed")."""


class Tracker:
    __slots__ = ("cost", "deadline", "limit")

    def __init__(self, limit: float, deadline: float | None = None) -> None:
        self.cost = 0
        self.limit = limit
        self.deadline = deadline

    def check(self) -> None:
        if self.cost > self.limit:
            raise CostLimitExceeded(COST_LIMIT_MESSAGE)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Interrupted("operation interrupted")


@dataclass
class RuntimeConfig:
    """What the planner needs from the environment."""

    functions: dict[str, Function]
    container: str = ""
    # Overload-specific cost trackers, then the environment's estimator (function, overload id,
    # args, result) -> cost or None, then cel-go's defaults.
    overload_costs: dict[str, RuntimeCost] = field(default_factory=dict)
    call_cost_rule: Callable[[str, str], RuntimeCost | int | None] | None = None
    default_costs: dict[str, RuntimeCost] = field(default_factory=dict)
    precheck_costs: dict[str, RuntimeCost] = field(default_factory=dict)
    presence_test_cost: int = 1
    optimize: bool = False
    regex_functions: frozenset[str] = frozenset()
    type_values: dict[str, Type] = field(default_factory=dict)
    variables: frozenset[str] = frozenset()

    def candidates(self, name: str) -> list[str]:
        if name.startswith("."):
            return [name[1:]]
        parts = self.container.split(".") if self.container else []
        return [".".join(parts[:i]) + "." + name for i in range(len(parts), 0, -1)] + [name]

    def lookup_function(self, name: str) -> Function | None:
        for candidate in self.candidates(name):
            fn = self.functions.get(candidate)
            if fn is not None:
                return fn
        return None


class _Err:
    """An error value held by a comprehension accumulator."""

    __slots__ = ("error",)

    def __init__(self, error: EvalError) -> None:
        self.error = error


_LAZY = object()
_UNBOUND = object()

# Go type names cel-go prints in "expected iterable type" errors.
_GO_TYPE_NAMES: dict[type, str] = {
    int: "types.Int",
    UInt: "types.Uint",
    float: "types.Double",
    bool: "types.Bool",
    str: "types.String",
    bytes: "types.Bytes",
    type(None): "types.Null",
    Optional: "*types.Optional",
    Type: "*types.Type",
}


def go_type_name(v: Any) -> str:
    name = _GO_TYPE_NAMES.get(type(v))
    if name is not None:
        return name
    go = getattr(type(v), "go_type_name", None)
    return go if isinstance(go, str) else type(v).__name__


# What a library function raises when handed a value of a kind it does not take (dyn arguments).
_IMPL_ERRORS = (TypeError, AttributeError, ValueError, KeyError, IndexError, OverflowError, ZeroDivisionError, RecursionError)
_EXACT_TYPES: dict[int, type] = {INT_K: int, UINT_K: UInt, DOUBLE_K: float, STRING_K: str, BOOL_K: bool, BYTES_K: bytes, NULL_K: type(None)}


def value_matches(t: Type, v: Any) -> bool:
    """cel-go's runtime type guard: does a value fit a parameter's type (top level only)?"""
    k = t.kind
    if k in (DYN_K, PARAM_K, ANY_K, ERROR_K):
        return True
    exact = _EXACT_TYPES.get(k)
    if exact is not None:
        return type(v) is exact
    if k == LIST_K:
        return isinstance(v, list | tuple)
    if k == MAP_K:
        return isinstance(v, dict)
    if k == TYPE_K:
        return type(v) is Type
    vt = type(v)
    if k == OPAQUE_K and t.name == OPTIONAL_NAME:
        return vt is Optional
    lib = LIBRARY_TYPES.get(vt)
    if lib is not None:
        return lib.name == t.name
    return isinstance(v, dict) and t.name == getattr(v, "cel_type_name", None)


def _overload_matches(o: Overload, values: list[Any]) -> bool:
    return len(o.args) == len(values) and all(value_matches(t, v) for t, v in zip(o.args, values, strict=True))


class Planner:
    def __init__(self, ast: CheckedAST, config: RuntimeConfig) -> None:
        self.ast = ast
        self.config = config
        self.scopes: list[dict[str, int]] = []
        self.next_slot = 2

    # -- helpers

    def lookup_local(self, name: str) -> int | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def new_slot(self) -> int:
        s = self.next_slot
        self.next_slot += 1
        return s

    def ref(self, e: Expr) -> Reference | None:
        return self.ast.refs.get(e.id)

    def plan(self, e: Expr) -> Fn:
        if isinstance(e, Literal):
            return self.constant(e.value)
        if isinstance(e, Ident):
            return self.plan_ident(e)
        if isinstance(e, Select):
            return self.plan_select(e)
        if isinstance(e, Call):
            return self.plan_call(e)
        if isinstance(e, CreateList):
            return self.plan_list(e)
        if isinstance(e, CreateMap):
            return self.plan_map(e)
        if isinstance(e, CreateStruct):
            name = e.type_name

            def struct(f: Frame) -> Any:
                raise EvalError(f"unknown type: {name}")

            return struct
        assert isinstance(e, Comprehension)
        return self.plan_comprehension(e)

    def is_constant(self, fn: Fn) -> bool:
        return getattr(fn, "cel_constant", False)

    def constant(self, value: Any) -> Fn:
        def const(f: Frame) -> Any:
            return value

        const.cel_constant = True  # type: ignore[attr-defined]
        const.cel_value = value  # type: ignore[attr-defined]
        return const

    # -- names

    def plan_ident(self, e: Ident) -> Fn:
        slot = self.lookup_local(e.name) if not e.name.startswith(".") else None
        if slot is not None:
            return self.local(slot)
        ref = self.ref(e)
        name = ref.name if ref is not None and ref.name else None
        return self.global_var(name, e.name)

    def local(self, slot: int) -> Fn:
        def local(f: Frame) -> Any:
            f[1].cost += 1
            v = f[slot]
            t = type(v)
            if t is _LazyInit or t is _Err:
                return resolve_local(f, slot)
            return v

        return local

    def global_var(self, resolved: str | None, written: str) -> Fn:
        names = [resolved] if resolved is not None else self.config.candidates(written)
        if resolved is None or resolved not in self.config.variables:
            for candidate in names:
                t = self.config.type_values.get(candidate)
                if t is not None and candidate not in self.config.variables:
                    return self.constant(t)
        if len(names) == 1:
            name = names[0]

            def var(f: Frame) -> Any:
                f[1].cost += 1
                try:
                    return f[0][name]
                except KeyError:
                    raise EvalError(f"no such attribute(s): {name}") from None

            return var

        def var_any(f: Frame) -> Any:
            f[1].cost += 1
            act = f[0]
            for n in names:
                if n in act:
                    return act[n]
            raise EvalError(f"no such attribute(s): {', '.join(names)}")

        return var_any

    def plan_select(self, e: Select) -> Fn:
        ref = self.ref(e)
        if ref is not None and ref.name and not e.test_only:
            return self.global_var(ref.name, ref.name)
        if not self.ast.types and not e.test_only:
            # Unchecked: a dotted name may still be a variable (or a type name).
            qualified = qualified_name(e)
            if qualified is not None and self.lookup_local(qualified.split(".")[0]) is None:
                names = self.config.candidates(qualified)
                if any(n in self.config.variables or n in self.config.type_values for n in names):
                    return self.global_var(None, qualified)
        operand = self.plan(e.operand)
        fname = e.field
        if e.test_only:
            presence = self.config.presence_test_cost

            def has(f: Frame) -> Any:
                obj = operand(f)
                f[1].cost += presence
                if isinstance(obj, dict):
                    return fname in obj
                if type(obj) is Optional:
                    return obj.present and isinstance(obj.value, dict) and fname in obj.value
                raise EvalError(f"invalid type for field selection: {runtime_type(obj).name}")

            return has

        def select(f: Frame) -> Any:
            obj = operand(f)
            f[1].cost += 1
            if isinstance(obj, dict):
                try:
                    return obj[fname]
                except KeyError:
                    getter = getattr(obj, "cel_missing", None)
                    if getter is not None:
                        return getter(fname)
                    raise EvalError(f"no such key: {fname}") from None
            if type(obj) is Optional:
                if not obj.present:
                    return obj
                inner = obj.value
                if isinstance(inner, dict):
                    return Optional(True, inner[fname]) if fname in inner else Optional(False)
            raise EvalError(f"type '{runtime_type(obj).name}' does not support field selection")

        return select

    # -- literals

    def plan_list(self, e: CreateList) -> Fn:
        items = [self.plan(x) for x in e.elements]
        optional = e.optional_indices
        if self.config.optimize and not optional and all(self.is_constant(i) for i in items):
            return self.constant([i.cel_value for i in items])  # type: ignore[attr-defined]
        if not optional:

            def make_list(f: Frame) -> Any:
                out = [g(f) for g in items]
                f[1].cost += 10
                return out

            return make_list

        def make_opt_list(f: Frame) -> Any:
            out = []
            for i, g in enumerate(items):
                v = g(f)
                if i in optional:
                    if type(v) is not Optional:
                        raise EvalError(f"cannot initialize optional list element from non-optional value {v}")
                    if v.present:
                        out.append(v.value)
                else:
                    out.append(v)
            f[1].cost += 10
            return out

        return make_opt_list

    def plan_map(self, e: CreateMap) -> Fn:
        entries = [(self.plan(en.key), self.plan(en.value), en.optional) for en in e.entries]
        fold = self.config.optimize and all(self.is_constant(k) and self.is_constant(v) and not o for k, v, o in entries)

        def make_map(f: Frame) -> Any:
            out: dict[Any, Any] = {}
            for kf, vf, opt in entries:
                k = kf(f)
                if type(k) not in (str, int, UInt, bool):
                    raise EvalError(f"unsupported key type: {runtime_type(k).name}")
                v = vf(f)
                key = map_key(k)
                if key in out:
                    raise EvalError(f"Failed with repeated key: {k}")
                if opt:
                    if type(v) is not Optional:
                        raise EvalError(f"cannot initialize optional entry '{k}' from non-optional value {v}")
                    if not v.present:
                        continue
                    v = v.value
                out[key] = v
            f[1].cost += 30
            return out

        if fold:
            try:
                return self.constant(make_map([{}, Tracker(float("inf"))]))
            except EvalError:
                return make_map
        return make_map

    # -- comprehensions

    def plan_comprehension(self, e: Comprehension) -> Fn:
        rng = self.plan(e.iter_range)
        accu_slot = self.new_slot()
        self.scopes.append({e.accu_var: accu_slot})
        accu_init = self.plan(e.accu_init)
        if is_bind(e):
            result = self.plan_lazy_result(e, accu_slot, accu_init)
            self.scopes.pop()
            return result
        v1 = self.new_slot()
        loop_scope = {e.iter_var: v1}
        v2 = None
        if e.iter_var2:
            v2 = self.new_slot()
            loop_scope[e.iter_var2] = v2
        self.scopes.append(loop_scope)
        cond = self.plan(e.loop_condition)
        step = self.plan(e.loop_step)
        self.scopes.pop()
        result = self.plan(e.result)
        self.scopes.pop()
        accu_reader_slot = accu_slot
        two = v2 is not None

        def fold(f: Frame) -> Any:
            coll = rng(f)
            if two:
                if isinstance(coll, dict):
                    items: Any = ((k.value if type(k) is BoolKey else k, v) for k, v in coll.items())
                elif isinstance(coll, list | tuple):
                    items = enumerate(coll)
                else:
                    raise EvalError(f"unsupported comprehension range type: {go_type_name(coll)}")
            elif isinstance(coll, dict):
                items = (k.value if type(k) is BoolKey else k for k in coll)
            elif isinstance(coll, list | tuple):
                items = coll
            else:
                raise EvalError(f"got '{go_type_name(coll)}', expected iterable type")
            f[accu_reader_slot] = _LazyInit(accu_init)
            tracker = f[1]
            for item in items:
                if two:
                    f[v1], f[v2] = item  # type: ignore[index]
                else:
                    f[v1] = item
                try:
                    c = cond(f)
                except EvalError:
                    c = True
                if c is False:
                    break
                try:
                    f[accu_reader_slot] = step(f)
                except EvalError as exc:
                    f[accu_reader_slot] = _Err(exc)
                tracker.check()
            return result(f)

        return fold

    def plan_lazy_result(self, e: Comprehension, slot: int, init: Fn) -> Fn:
        result = self.plan(e.result)

        def bind(f: Frame) -> Any:
            f[slot] = _LazyInit(init)
            return result(f)

        return bind

    # -- calls

    def plan_call(self, e: Call) -> Fn:
        ref = self.ref(e)
        name = e.function
        overload_ids: tuple[str, ...] = ()
        target = e.target
        if ref is not None:
            overload_ids = ref.overloads
            if ref.name:
                name = ref.name
            if ref.value == "namespaced":
                target = None
        elif target is not None and not self.ast.types:
            qualified = qualified_name(target)
            if qualified is not None and self.lookup_local(qualified.split(".")[0]) is None:
                fn = self.config.lookup_function(qualified + "." + name)
                if fn is not None:
                    name, target = fn.name, None
        if name in ("_&&_", "_||_"):
            return self.plan_logic(e, name == "_||_")
        if name == "_?_:_":
            return self.plan_conditional(e)
        if name in ("@not_strictly_false", "__not_strictly_false__"):
            arg = self.plan(e.args[0])

            def not_strictly_false(f: Frame) -> Any:
                try:
                    v = arg(f)
                except EvalError:
                    v = True
                f[1].cost += 1
                return v if type(v) is bool else True

            return not_strictly_false
        if name == "_?._":
            return self.plan_opt_select(e)
        if name in ("or", "orValue") and target is not None and (not overload_ids or overload_ids[0].startswith("optional_")):
            return self.plan_optional_or(e, name == "orValue")
        arg_exprs = ([target] if target is not None else []) + list(e.args)
        args = [self.plan(a) for a in arg_exprs]
        fn = self.config.functions.get(name) or self.config.lookup_function(name)
        if fn is None:
            missing = name

            def undeclared(f: Frame) -> Any:
                for a in args:
                    a(f)
                raise EvalError(f"no such overload: {missing}")

            return undeclared
        member = target is not None
        if overload_ids:
            candidates = [o for o in fn.overloads if o.id in overload_ids]
        else:
            candidates = [o for o in fn.overloads if o.member == member and len(o.args) == len(args)]
        if name == "@in" and self.config.optimize and len(args) == 2 and self.is_constant(args[1]):
            membership = self.plan_set_membership(args[0], args[1].cel_value)  # type: ignore[attr-defined]
            if membership is not None:
                return membership
        self.check_regex(name, args)
        return self.plan_dispatch(name, candidates, args, arg_exprs)

    def check_regex(self, name: str, args: list[Fn]) -> None:
        if name in self.config.regex_functions and len(args) >= 2 and self.is_constant(args[1]):
            pattern = args[1].cel_value  # type: ignore[attr-defined]
            if isinstance(pattern, str):
                try:
                    compile_regex(pattern)
                except RegexError as exc:
                    raise PlanError(str(exc)) from None

    def cost_rule(self, function: str, overload_id: str) -> RuntimeCost | int:
        """The runtime cost of a call: overload trackers, then the environment's rule, then cel-go's."""
        tracker = self.config.overload_costs.get(overload_id)
        if tracker is not None:
            return tracker
        if self.config.call_cost_rule is not None:
            rule = self.config.call_cost_rule(function, overload_id)
            if rule is not None:
                return rule
        return self.config.default_costs.get(overload_id, 1)

    def needs_guard(self, o: Overload, arg_exprs: list[Expr]) -> bool:
        """Whether the checked argument types leave room for a value the overload cannot take."""
        if not self.ast.types:
            return True
        for t, e in zip(o.args, arg_exprs, strict=True):
            if t.kind in (DYN_K, PARAM_K, ANY_K):
                continue
            static = self.ast.types.get(e.id)
            if static is None or static.kind != t.kind or static.kind in (DYN_K, PARAM_K, ERROR_K, ANY_K):
                return True
            if static.kind in (OPAQUE_K,) and static.name != t.name:
                return True
            if static.kind == STRUCT_K and static.name != t.name:
                return True
        return False

    def plan_dispatch(self, name: str, candidates: list[Overload], args: list[Fn], arg_exprs: list[Expr]) -> Fn:
        if len(candidates) == 1 and candidates[0].impl is not None:
            return self.plan_single(name, candidates[0], args, arg_exprs)
        costs = {o.id: self.cost_rule(name, o.id) for o in candidates}

        def dispatch(f: Frame) -> Any:
            values = [a(f) for a in args]
            for o in candidates:
                if o.impl is not None and _overload_matches(o, values):
                    result = _invoke(name, o.impl, values)
                    tracker = f[1]
                    c = costs[o.id]
                    tracker.cost += c if type(c) is int else c(values, result)  # type: ignore[operator]
                    if tracker.cost > tracker.limit:
                        raise CostLimitExceeded(COST_LIMIT_MESSAGE)
                    return result
            raise no_such_overload(name, *values)

        return dispatch

    def plan_single(self, name: str, o: Overload, args: list[Fn], arg_exprs: list[Expr]) -> Fn:
        impl = o.impl
        assert impl is not None
        cost = self.cost_rule(name, o.id)
        precheck = self.config.precheck_costs.get(o.id)
        guards = o.args if o.id not in _UNGUARDED and self.needs_guard(o, arg_exprs) else None
        if args and precheck is None and all(self.is_constant(a) for a in args) and name not in _CONVERSIONS:
            return self.plan_constant_call(name, impl, cost, guards, [a.cel_value for a in args])  # type: ignore[attr-defined]
        if len(args) == 1 and guards is None and precheck is None:
            (a0,) = args

            def call1(f: Frame) -> Any:
                x = a0(f)
                try:
                    result = impl(x)
                except _IMPL_ERRORS as exc:
                    raise EvalError(f"no such overload: {name}") from exc
                t = f[1]
                t.cost += cost if type(cost) is int else cost([x], result)  # type: ignore[operator]
                if t.cost > t.limit:
                    raise CostLimitExceeded(COST_LIMIT_MESSAGE)
                return result

            call = call1
        elif len(args) == 2 and guards is None and precheck is None:
            a0, a1 = args

            def call2(f: Frame) -> Any:
                x, y = a0(f), a1(f)
                try:
                    result = impl(x, y)
                except _IMPL_ERRORS as exc:
                    raise EvalError(f"no such overload: {name}") from exc
                t = f[1]
                t.cost += cost if type(cost) is int else cost([x, y], result)  # type: ignore[operator]
                if t.cost > t.limit:
                    raise CostLimitExceeded(COST_LIMIT_MESSAGE)
                return result

            call = call2
        else:

            def call(f: Frame) -> Any:
                values = [a(f) for a in args]
                tracker = f[1]
                if precheck is not None and tracker.cost + precheck(values, None) > tracker.limit:
                    raise CostLimitExceeded(COST_LIMIT_MESSAGE)
                if guards is not None and not all(value_matches(t, v) for t, v in zip(guards, values, strict=True)):
                    raise no_such_overload(name, *values)
                result = _invoke(name, impl, values)
                tracker.cost += cost if type(cost) is int else cost(values, result)  # type: ignore[operator]
                if tracker.cost > tracker.limit:
                    raise CostLimitExceeded(COST_LIMIT_MESSAGE)
                return result

        if self.config.optimize and name in _CONVERSIONS and all(self.is_constant(a) for a in args):
            try:
                return self.constant(call([{}, Tracker(float("inf"))]))
            except EvalError as exc:
                raise PlanError(str(exc)) from None
        return call

    def plan_constant_call(
        self, name: str, impl: Callable[..., Any], cost: RuntimeCost | int, guards: tuple[Type, ...] | None, values: list[Any]
    ) -> Fn:
        """A call whose arguments are all literals: computed once, charged on every evaluation
        (cel-go computes it each time; the library functions are pure, so the answer is the same)."""
        memo: list[Any] = []

        def constant_call(f: Frame) -> Any:
            if not memo:
                try:
                    if guards is not None and not all(value_matches(t, v) for t, v in zip(guards, values, strict=True)):
                        raise no_such_overload(name, *values)
                    result = _invoke(name, impl, values)
                    memo.append((result, cost if type(cost) is int else cost(values, result)))  # type: ignore[operator]
                except EvalError as exc:
                    memo.append((exc, 0))
            result, charge = memo[0]
            if isinstance(result, EvalError):
                raise result
            t = f[1]
            t.cost += charge
            if t.cost > t.limit:
                raise CostLimitExceeded(COST_LIMIT_MESSAGE)
            return result

        return constant_call

    def plan_set_membership(self, lhs: Fn, values: Any) -> Fn | None:
        if not isinstance(values, list) or not values:
            return None if not isinstance(values, list) else self.constant(False)
        if any(type(v) not in (int, UInt, float, str, bool) for v in values):
            return None
        keys = {map_key(v) for v in values}

        def member(f: Frame) -> Any:
            v = lhs(f)
            try:
                if map_key(v) in keys:
                    return True
            except TypeError:
                return False
            return False

        return member

    def plan_logic(self, e: Call, is_or: bool) -> Fn:
        left, right = (self.plan(a) for a in e.args)
        short = is_or
        name = e.function

        def logic(f: Frame) -> Any:
            err: EvalError | None = None
            try:
                a = left(f)
            except EvalError as exc:
                err = exc
            else:
                if a is short:
                    return short
                if type(a) is not bool:
                    err = no_such_overload(name, a)
            try:
                b = right(f)
            except EvalError as exc:
                if err is None:
                    err = exc
            else:
                if b is short:
                    return short
                if type(b) is not bool and err is None:
                    err = no_such_overload(name, b)
            if err is not None:
                raise err
            return not short

        return logic

    def plan_conditional(self, e: Call) -> Fn:
        c, t, o = (self.plan(a) for a in e.args)

        def conditional(f: Frame) -> Any:
            v = c(f)
            if v is True:
                return t(f)
            if v is False:
                return o(f)
            raise no_such_overload("_?_:_", v)

        return conditional

    def plan_opt_select(self, e: Call) -> Fn:
        operand = self.plan(e.args[0])
        field_expr = e.args[1]
        assert isinstance(field_expr, Literal)
        fname = field_expr.value

        def opt_select(f: Frame) -> Any:
            obj = operand(f)
            f[1].cost += 1
            if type(obj) is Optional:
                if not obj.present:
                    return obj
                obj = obj.value
            if isinstance(obj, dict):
                if fname in obj:
                    return Optional(True, obj[fname])
                return Optional(False)
            raise EvalError(f"type '{runtime_type(obj).name}' does not support field selection")

        return opt_select

    def plan_optional_or(self, e: Call, or_value: bool) -> Fn:
        assert e.target is not None
        target = self.plan(e.target)
        alt = self.plan(e.args[0])
        name = e.function

        def optional_or(f: Frame) -> Any:
            v = target(f)
            if type(v) is not Optional:
                raise no_such_overload(name, v)
            f[1].cost += 1
            if v.present:
                return v.value if or_value else v
            other = alt(f)
            if not or_value and type(other) is not Optional:
                raise no_such_overload(name, v, other)
            return other

        return optional_or


# Indexing is an attribute access in cel-go, not a guarded call: lists take whole doubles and uints.
_UNGUARDED = frozenset({"index_list", "index_map", "optional_list_index_int", "optional_map_index_value"})
_CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration", "type", "dyn"})


class _LazyInit:
    """A comprehension accumulator not yet computed: cel-go initializes it on first use."""

    __slots__ = ("init",)

    def __init__(self, init: Fn) -> None:
        self.init = init


def _invoke(name: str, impl: Callable[..., Any], values: list[Any]) -> Any:
    try:
        return impl(*values)
    except EvalError:
        raise
    except _IMPL_ERRORS as exc:
        raise EvalError(f"no such overload: {name}") from exc


def resolve_local(f: Frame, slot: int) -> Any:
    v = f[slot]
    if type(v) is _LazyInit:
        try:
            v = v.init(f)
        except EvalError as exc:
            v = _Err(exc)
        f[slot] = v
    if type(v) is _Err:
        raise v.error
    return v


def build(ast: CheckedAST, config: RuntimeConfig) -> tuple[Fn, int]:
    """Plan a checked tree; returns the program and the frame size it needs."""
    planner = Planner(ast, config)
    fn = planner.plan(ast.expr)
    return fn, planner.next_slot


def evaluate(program: Fn, frame_size: int, activation: Mapping[str, Any], tracker: Tracker) -> Any:
    frame: Frame = [None] * frame_size
    frame[0] = activation
    frame[1] = tracker
    result = program(frame)
    # Only comprehension loops are interrupted (as in cel-go); what finished in time stands.
    if tracker.cost > tracker.limit:
        raise CostLimitExceeded(COST_LIMIT_MESSAGE)
    return result
