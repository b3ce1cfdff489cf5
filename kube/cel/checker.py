"""CEL type checker: resolves names and overloads and types every node as cel-go does.

Declarations (variables, functions with their overloads, object types) come from the
environment; the result is a type per node id and, for calls and resolved names, a reference
(overload ids or the variable's qualified name) that the cost estimator and the planner use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kube.cel.parser import (
    Call,
    Comprehension,
    CreateList,
    CreateMap,
    CreateStruct,
    Expr,
    Ident,
    Issue,
    Literal,
    ParsedAST,
    Select,
    qualified_name,
)
from kube.cel.types import (
    ANY_K,
    BOOL,
    BOOL_K,
    BYTES,
    BYTES_K,
    DOUBLE,
    DOUBLE_K,
    DURATION_K,
    DYN,
    DYN_K,
    ERROR,
    ERROR_K,
    INT,
    INT_K,
    LIST_K,
    MAP_K,
    NULL,
    NULL_K,
    OPAQUE_K,
    OPTIONAL_NAME,
    PARAM_K,
    STRING,
    STRING_K,
    STRUCT_K,
    TIMESTAMP_K,
    TYPE_K,
    UINT,
    UINT_K,
    Type,
    UInt,
    format_signature,
    format_type,
    list_of,
    map_of,
    optional_of,
)

# --- declarations ------------------------------------------------------------------------------


@dataclass
class Overload:
    """One signature of a function. ``impl`` takes the evaluated arguments (target first)."""

    id: str
    args: tuple[Type, ...]
    result: Type
    member: bool = False
    impl: Callable[..., Any] | None = None

    @property
    def type_params(self) -> set[str]:
        out: set[str] = set()

        def walk(t: Type) -> None:
            if t.kind == PARAM_K:
                out.add(t.name)
            for p in t.params:
                walk(p)

        for t in (*self.args, self.result):
            walk(t)
        return out


@dataclass
class Function:
    name: str
    overloads: list[Overload] = field(default_factory=list)


@dataclass
class StructType:
    name: str
    fields: dict[str, Type]


@dataclass
class Declarations:
    """What the checker resolves names against."""

    variables: dict[str, Type] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    structs: dict[str, StructType] = field(default_factory=dict)
    container: str = ""
    disabled_overloads: frozenset[str] = frozenset()

    def add_function(self, fn: Function) -> None:
        existing = self.functions.get(fn.name)
        if existing is None:
            self.functions[fn.name] = Function(fn.name, list(fn.overloads))
        else:
            known = {o.id for o in existing.overloads}
            existing.overloads.extend(o for o in fn.overloads if o.id not in known)

    def candidates(self, name: str) -> list[str]:
        """Names to try for ``name`` in the container, most qualified first (cel-go order)."""
        if name.startswith("."):
            return [name[1:]]
        out = []
        parts = self.container.split(".") if self.container else []
        for i in range(len(parts), 0, -1):
            out.append(".".join(parts[:i]) + "." + name)
        out.append(name)
        return out


@dataclass
class Reference:
    """What a node resolved to: a variable (name) or a call (the matching overload ids)."""

    name: str = ""
    overloads: tuple[str, ...] = ()
    value: Any = None


@dataclass
class CheckedAST:
    parsed: ParsedAST
    types: dict[int, Type]
    refs: dict[int, Reference]

    @property
    def expr(self) -> Expr:
        return self.parsed.expr

    def type_of(self, e: Expr) -> Type:
        return self.types.get(e.id, DYN)

    @property
    def output_type(self) -> Type:
        return self.type_of(self.parsed.expr)


class CheckError(Exception):
    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(issues[0].message)
        self.issues = issues


# --- type relations (cel-go's checker/types.go semantics) --------------------------------------


def _is_dyn(t: Type) -> bool:
    return t.kind in (DYN_K, ANY_K)


def _is_dyn_or_error(t: Type) -> bool:
    return t.kind in (DYN_K, ANY_K, ERROR_K)


def _is_optional(t: Type) -> bool:
    return t.kind == OPAQUE_K and t.name == OPTIONAL_NAME


def unwrap_optional(t: Type) -> tuple[Type, bool]:
    if _is_optional(t):
        return t.params[0], True
    return t, False


class Mapping:
    """Type-parameter substitutions found so far during unification."""

    def __init__(self, subs: dict[str, Type] | None = None) -> None:
        self.subs: dict[str, Type] = dict(subs or {})

    def copy(self) -> Mapping:
        return Mapping(self.subs)

    def find(self, t: Type) -> Type | None:
        if t.kind != PARAM_K:
            return None
        return self.subs.get(t.name)


def _less_specific(t1: Type, t2: Type) -> bool:
    k1, k2 = t1.kind, t2.kind
    if _is_dyn(t1) or k1 == PARAM_K:
        return True
    if _is_dyn(t2) or k2 == PARAM_K:
        return False
    if k1 != k2:
        return False
    if k1 == OPAQUE_K:
        return (
            t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    if k1 == LIST_K:
        return _less_specific(t1.params[0], t2.params[0])
    if k1 == MAP_K:
        return _less_specific(t1.params[0], t2.params[0]) and _less_specific(t1.params[1], t2.params[1])
    if k1 == TYPE_K:
        return True
    return t1 == t2


def most_general(t1: Type, t2: Type) -> Type:
    return t1 if _less_specific(t1, t2) else t2


def _not_referenced_in(m: Mapping, t: Type, within: Type) -> bool:
    if t == within:
        return False
    if within.kind == PARAM_K:
        sub = m.find(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    if within.kind in (OPAQUE_K, LIST_K, MAP_K, TYPE_K):
        return all(_not_referenced_in(m, t, p) for p in within.params)
    return True


def _valid_substitution(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    if t1.kind == t2.kind and t1 == t2:
        return True, True
    sub = m.find(t2)
    if sub is not None:
        if t1.kind == sub.kind and t1 == sub:
            return True, True
        if _assignable(m, t1, sub):
            new = most_general(t1, sub)
            if _not_referenced_in(m, t2, new):
                m.subs[t2.name] = new
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m.subs[t2.name] = t1
        return True, False
    return False, False


def _nullable(t: Type) -> bool:
    return t.kind in (OPAQUE_K, STRUCT_K, ANY_K, DURATION_K, TIMESTAMP_K, NULL_K)


def _assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """Whether a value of type t2 may be used where t1 is expected (t1 is the parameter)."""
    k1, k2 = t1.kind, t2.kind
    if k2 == PARAM_K:
        valid, has_sub = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if k1 == PARAM_K:
        valid, _ = _valid_substitution(m, t2, t1)
        return valid
    if _is_dyn_or_error(t1) or _is_dyn_or_error(t2):
        return True
    if k1 == NULL_K:
        return _nullable(t2)
    if k2 == NULL_K:
        return _nullable(t1)
    if k1 in (BOOL_K, BYTES_K, DOUBLE_K, INT_K, STRING_K, UINT_K, ANY_K, DURATION_K, TIMESTAMP_K, STRUCT_K):
        return t1 == t2
    if k1 == TYPE_K:
        return k2 == TYPE_K
    if k1 in (OPAQUE_K, LIST_K, MAP_K):
        return (
            k1 == k2
            and t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    return False


def substitute(m: Mapping, t: Type, params_to_dyn: bool) -> Type:
    sub = m.find(t)
    if sub is not None:
        return substitute(m, sub, params_to_dyn)
    if params_to_dyn and t.kind == PARAM_K:
        return DYN
    if t.params:
        return Type(t.kind, t.name, tuple(substitute(m, p, params_to_dyn) for p in t.params))
    return t


def _fresh(t: Type, renames: dict[str, Type]) -> Type:
    if t.kind == PARAM_K:
        return renames.get(t.name, t)
    if t.params:
        return Type(t.kind, t.name, tuple(_fresh(p, renames) for p in t.params))
    return t


# --- the checker -------------------------------------------------------------------------------


_LITERAL_TYPES: dict[type, Type] = {bool: BOOL, int: INT, UInt: UINT, float: DOUBLE, str: STRING, bytes: BYTES, type(None): NULL}


class _Checker:
    def __init__(self, decls: Declarations, parsed: ParsedAST) -> None:
        self.decls = decls
        self.parsed = parsed
        self.types: dict[int, Type] = {}
        self.refs: dict[int, Reference] = {}
        self.mapping = Mapping()
        self.scopes: list[dict[str, Type]] = []
        self.issues: list[Issue] = []
        self.fresh_counter = 0

    def error(self, id: int, message: str) -> None:
        self.issues.append(Issue(self.parsed.offsets.get(id, -1), message))

    def set_type(self, e: Expr, t: Type) -> None:
        self.types[e.id] = t

    def type(self, e: Expr) -> Type:
        return self.types.get(e.id, ERROR)

    def assignable(self, t1: Type, t2: Type) -> bool:
        m = self.mapping.copy()
        if _assignable(m, t1, t2):
            self.mapping = m
            return True
        return False

    def assignable_list(self, l1: list[Type], l2: list[Type]) -> bool:
        if len(l1) != len(l2):
            return False
        m = self.mapping.copy()
        for a, b in zip(l1, l2, strict=True):
            if not _assignable(m, a, b):
                return False
        self.mapping = m
        return True

    def new_type_var(self) -> Type:
        self.fresh_counter += 1
        return Type(PARAM_K, f"_var{self.fresh_counter - 1}")

    # -- name resolution

    def lookup_local(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def resolve_ident(self, name: str) -> tuple[str, Type] | None:
        if not name.startswith("."):
            local = self.lookup_local(name)
            if local is not None:
                return name, local
        for candidate in self.decls.candidates(name):
            t = self.decls.variables.get(candidate)
            if t is not None:
                return candidate, t
        return None

    def resolve_function(self, name: str) -> Function | None:
        for candidate in self.decls.candidates(name):
            fn = self.decls.functions.get(candidate)
            if fn is not None:
                return fn
        return None

    # -- checking

    def check(self, e: Expr) -> None:
        if isinstance(e, Literal):
            self.set_type(e, _LITERAL_TYPES[type(e.value)])
        elif isinstance(e, Ident):
            self.check_ident(e)
        elif isinstance(e, Select):
            self.check_select(e)
        elif isinstance(e, Call):
            self.check_call(e)
        elif isinstance(e, CreateList):
            self.check_list(e)
        elif isinstance(e, CreateMap):
            self.check_map(e)
        elif isinstance(e, CreateStruct):
            self.check_struct(e)
        else:
            assert isinstance(e, Comprehension)
            self.check_comprehension(e)

    def check_ident(self, e: Ident) -> None:
        found = self.resolve_ident(e.name)
        if found is not None:
            self.set_type(e, found[1])
            self.refs[e.id] = Reference(name=found[0])
            return
        self.set_type(e, ERROR)
        self.error(e.id, f"undeclared reference to '{e.name}' (in container '{self.decls.container}')")

    def check_select(self, e: Select) -> None:
        name = qualified_name(e)
        if name is not None:
            root = name.split(".", 1)[0]
            if self.lookup_local(root) is None or name.startswith("."):
                for candidate in self.decls.candidates(name):
                    t = self.decls.variables.get(candidate)
                    if t is not None:
                        self.set_type(e, t)
                        self.refs[e.id] = Reference(name=candidate)
                        return
        result = self.check_select_field(e, e.operand, e.field, False)
        if e.test_only:
            result = BOOL
        self.set_type(e, substitute(self.mapping, result, False))

    def check_select_field(self, e: Expr, operand: Expr, field: str, optional: bool) -> Type:
        self.check(operand)
        operand_type = substitute(self.mapping, self.type(operand), False)
        target, is_opt = unwrap_optional(operand_type)
        result = ERROR
        if target.kind == MAP_K:
            result = target.params[1]
        elif target.kind == STRUCT_K:
            st = self.decls.structs.get(target.name)
            if st is None:
                self.error(e.id, f"unexpected failed resolution of '{target.name}'")
            elif field in st.fields:
                result = st.fields[field]
            else:
                self.error(e.id, f"undefined field '{field}'")
        elif target.kind == PARAM_K:
            self.assignable(DYN, target)
            result = DYN
        else:
            if not _is_dyn_or_error(target):
                self.error(e.id, f"type '{format_type(target)}' does not support field selection")
            result = DYN
        if is_opt or optional:
            return optional_of(result)
        return result

    def check_call(self, e: Call) -> None:
        if e.function == "_?._":
            self.check_opt_select(e)
            return
        for a in e.args:
            self.check(a)
        if e.target is None:
            fn = self.resolve_function(e.function)
            if fn is None:
                self.error(e.id, f"undeclared reference to '{e.function}' (in container '{self.decls.container}')")
                self.set_type(e, ERROR)
                return
            self.resolve_overload(e, fn, None)
            return
        qualified = qualified_name(e.target)
        if qualified is not None:
            fn = self.resolve_function(qualified + "." + e.function)
            if fn is not None:
                self.refs[e.id] = Reference(name=fn.name)
                self.resolve_overload(e, fn, None, namespaced=True)
                return
        self.check(e.target)
        fn = self.resolve_function(e.function)
        if fn is not None:
            self.resolve_overload(e, fn, e.target)
            return
        self.set_type(e, ERROR)
        self.error(e.id, f"undeclared reference to '{e.function}' (in container '{self.decls.container}')")

    def check_opt_select(self, e: Call) -> None:
        operand, field_expr = e.args
        assert isinstance(field_expr, Literal) and isinstance(field_expr.value, str)
        result = self.check_select_field(e, operand, field_expr.value, True)
        self.set_type(e, substitute(self.mapping, result, False))
        self.refs[e.id] = Reference(name="_?._", overloads=("select_optional_field",))

    def resolve_overload(self, e: Call, fn: Function, target: Expr | None, namespaced: bool = False) -> None:
        arg_types = ([self.type(target)] if target is not None else []) + [self.type(a) for a in e.args]
        result: Type | None = None
        matched: list[str] = []
        for ov in fn.overloads:
            if ov.id in self.decls.disabled_overloads:
                continue
            if (target is None) == ov.member:
                continue
            if fn.name in ("_&&_", "_||_"):
                ok = True
                for a, t in zip(e.args, arg_types, strict=True):
                    if not self.assignable(t, BOOL):
                        self.error(a.id, f"expected type 'bool' but found '{format_type(t)}'")
                        ok = False
                if not ok:
                    self.set_type(e, ERROR)
                    return
                self.set_type(e, BOOL)
                self.refs[e.id] = Reference(name=fn.name, overloads=(ov.id,))
                return
            params = ov.type_params
            args, res = list(ov.args), ov.result
            if params:
                renames = {p: self.new_type_var() for p in sorted(params)}
                args = [_fresh(t, renames) for t in args]
                res = _fresh(res, renames)
            if self.assignable_list(arg_types, args):
                matched.append(ov.id)
                fn_result = substitute(self.mapping, res, False)
                if result is None:
                    result = fn_result
                elif not _is_dyn(result) and fn_result != result:
                    result = DYN
        if result is None:
            shown = [substitute(self.mapping, t, True) for t in arg_types]
            self.error(e.id, f"found no matching overload for '{fn.name}' applied to '{format_signature(shown, target is not None)}'")
            self.set_type(e, ERROR)
            return
        self.set_type(e, result)
        self.refs[e.id] = Reference(name=fn.name, overloads=tuple(matched), value="namespaced" if namespaced else None)

    def join_types(self, e: Expr, previous: Type | None, current: Type) -> Type:
        if previous is None:
            return current
        if self.assignable(previous, current):
            return most_general(previous, current)
        return DYN

    def check_list(self, e: CreateList) -> None:
        elem: Type | None = None
        for i, x in enumerate(e.elements):
            self.check(x)
            t = self.type(x)
            if i in e.optional_indices:
                t, is_opt = unwrap_optional(t)
                if not is_opt and not _is_dyn(t):
                    self.error(x.id, f"expected type '{format_type(optional_of(t))}' but found '{format_type(t)}'")
            elem = self.join_types(x, elem, t)
        self.set_type(e, list_of(elem if elem is not None else self.new_type_var()))

    def check_map(self, e: CreateMap) -> None:
        kt: Type | None = None
        vt: Type | None = None
        for entry in e.entries:
            self.check(entry.key)
            kt = self.join_types(entry.key, kt, self.type(entry.key))
            self.check(entry.value)
            t = self.type(entry.value)
            if entry.optional:
                t, is_opt = unwrap_optional(t)
                if not is_opt and not _is_dyn(t):
                    self.error(entry.value.id, f"expected type '{format_type(optional_of(t))}' but found '{format_type(t)}'")
            vt = self.join_types(entry.value, vt, t)
        if kt is None or vt is None:
            kt, vt = self.new_type_var(), self.new_type_var()
        self.set_type(e, map_of(kt, vt))

    def check_struct(self, e: CreateStruct) -> None:
        for candidate in self.decls.candidates(e.type_name):
            st = self.decls.structs.get(candidate)
            if st is not None:
                break
        else:
            self.error(e.id, f"undeclared reference to '{e.type_name}' (in container '{self.decls.container}')")
            self.set_type(e, ERROR)
            for f in e.fields:
                self.check(f.value)
            return
        self.refs[e.id] = Reference(name=st.name)
        self.set_type(e, Type(STRUCT_K, st.name))
        for f in e.fields:
            self.check(f.value)
            ft = st.fields.get(f.name)
            if ft is None:
                self.error(f.id, f"undefined field '{f.name}'")
                continue
            vt = self.type(f.value)
            if f.optional:
                vt, _ = unwrap_optional(vt)
            if not self.assignable(ft, vt):
                self.error(f.id, f"expected type of field '{f.name}' is '{format_type(ft)}' but provided type is '{format_type(vt)}'")

    def check_comprehension(self, e: Comprehension) -> None:
        self.check(e.iter_range)
        self.check(e.accu_init)
        range_type = substitute(self.mapping, self.type(e.iter_range), False)
        accu_type = self.type(e.accu_init)
        self.scopes.append({e.accu_var: accu_type})
        var2: Type | None = None
        if range_type.kind == LIST_K:
            var1 = range_type.params[0]
            if e.iter_var2:
                var1, var2 = INT, range_type.params[0]
        elif range_type.kind == MAP_K:
            var1 = range_type.params[0]
            if e.iter_var2:
                var2 = range_type.params[1]
        elif range_type.kind in (DYN_K, ERROR_K, PARAM_K, ANY_K):
            self.assignable(DYN, range_type)
            var1 = DYN
            var2 = DYN if e.iter_var2 else None
        else:
            self.error(
                e.iter_range.id,
                f"expression of type '{format_type(range_type)}' cannot be range of a comprehension (must be list, map, or dynamic)",
            )
            var1 = ERROR
            var2 = ERROR if e.iter_var2 else None
        loop_scope = {e.iter_var: var1}
        if e.iter_var2:
            assert var2 is not None
            loop_scope[e.iter_var2] = var2
        self.scopes.append(loop_scope)
        self.check(e.loop_condition)
        self.assert_type(e.loop_condition, BOOL)
        self.check(e.loop_step)
        self.assert_type(e.loop_step, accu_type)
        self.scopes.pop()
        self.check(e.result)
        self.scopes.pop()
        self.set_type(e, substitute(self.mapping, self.type(e.result), False))

    def assert_type(self, e: Expr, t: Type) -> None:
        if not self.assignable(t, self.type(e)):
            self.error(e.id, f"expected type '{format_type(t)}' but found '{format_type(self.type(e))}'")


def _finalize(types: dict[int, Type], mapping: Mapping) -> dict[int, Type]:
    return {k: substitute(mapping, t, True) for k, t in types.items()}


def check(decls: Declarations, parsed: ParsedAST) -> CheckedAST:
    """Type-check; raises CheckError with every issue found (cel-go reports them all)."""
    c = _Checker(decls, parsed)
    c.check(parsed.expr)
    if c.issues:
        raise CheckError(c.issues)
    return CheckedAST(parsed, _finalize(c.types, c.mapping), c.refs)


def unchecked(parsed: ParsedAST) -> CheckedAST:
    """An AST without type information (evaluation with the checker disabled)."""
    return CheckedAST(parsed, {}, {})


# --- validators run after checking (cel-go ASTValidators) -------------------------------------


def walk(e: Expr, parents: tuple[Expr, ...] = ()) -> Any:
    """Yield (node, ancestors) for every node."""
    yield e, parents
    inner = (*parents, e)
    if isinstance(e, Select):
        yield from walk(e.operand, inner)
    elif isinstance(e, Call):
        if e.target is not None:
            yield from walk(e.target, inner)
        for a in e.args:
            yield from walk(a, inner)
    elif isinstance(e, CreateList):
        for x in e.elements:
            yield from walk(x, inner)
    elif isinstance(e, CreateMap):
        for en in e.entries:
            yield from walk(en.key, inner)
            yield from walk(en.value, inner)
    elif isinstance(e, CreateStruct):
        for f in e.fields:
            yield from walk(f.value, inner)
    elif isinstance(e, Comprehension):
        for sub in (e.iter_range, e.accu_init, e.loop_condition, e.loop_step, e.result):
            yield from walk(sub, inner)


def _equivalent(a: Type, b: Type) -> bool:
    if a.kind == PARAM_K or b.kind == PARAM_K:
        return a.kind == b.kind and a.name == b.name
    return a == b


def validate_homogeneous_literals(ast: CheckedAST, exempt_functions: frozenset[str]) -> list[Issue]:
    issues: list[Issue] = []
    for e, parents in walk(ast.expr):
        if not isinstance(e, CreateList | CreateMap):
            continue
        if any(isinstance(p, Call) and p.function in exempt_functions for p in parents):
            continue
        if isinstance(e, CreateList):
            first: Type | None = None
            for i, x in enumerate(e.elements):
                t = ast.type_of(x)
                if i in e.optional_indices and t.params:
                    t = t.params[0]
                if first is None:
                    first = t
                elif not _equivalent(first, t):
                    issues.append(
                        Issue(ast.parsed.offsets.get(x.id, -1), f"expected type '{format_type(first)}' but found '{format_type(t)}'")
                    )
                    break
        else:
            kt: Type | None = None
            vt: Type | None = None
            for en in e.entries:
                k, v = ast.type_of(en.key), ast.type_of(en.value)
                if en.optional and v.params:
                    v = v.params[0]
                if kt is None or vt is None:
                    kt, vt = k, v
                    continue
                if not _equivalent(kt, k):
                    issues.append(
                        Issue(ast.parsed.offsets.get(en.key.id, -1), f"expected type '{format_type(kt)}' but found '{format_type(k)}'")
                    )
                if not _equivalent(vt, v):
                    issues.append(
                        Issue(ast.parsed.offsets.get(en.value.id, -1), f"expected type '{format_type(vt)}' but found '{format_type(v)}'")
                    )
    return issues


def validate_literal_arguments(ast: CheckedAST, function: str, valid: Callable[[Any], bool]) -> list[Issue]:
    """cel-go's format validators: a literal first argument of ``function`` must be valid."""
    issues = []
    for e, _ in walk(ast.expr):
        if isinstance(e, Call) and e.function == function and e.args:
            arg = e.args[0]
            if isinstance(arg, Literal) and not valid(arg.value):
                issues.append(Issue(ast.parsed.offsets.get(arg.id, -1), f"invalid {function} argument"))
    return issues
