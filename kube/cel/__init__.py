"""CEL as Kubernetes evaluates it: environments, compilation, cost estimation and evaluation.

The public API:

* ``Environment(...)`` declares variables (typed with ``INT``, ``STRING``, ``list_of``, ``map_of``...
  from this module) and libraries; ``env.compile(expr)`` parses,
  type-checks and validates an expression and returns a ``Program`` (or raises
  ``CELCompileError`` with cel-go's message);
* ``program.estimated_cost()`` is cel-go's worst-case estimate with the environment's rules;
* ``program.evaluate(activation, cost_limit=...)`` evaluates; every failure, including the
  runtime cost limit, is a ``CELRuntimeError``.

``kubernetes_environment()`` is Kubernetes' base environment (the libraries and options every
Kubernetes CEL expression gets); ``DRA_ENVIRONMENT`` adds the ``device`` variable of
resource.k8s.io selectors. ``compile_selector``/``CompiledSelector``/``DeviceView`` and
``validate_selector_expression`` are the DRA entry points the scheduler and admission use.

The interpreter is this project's own (the modules of this package): the ``cel-expr-python`` bindings of
cel-cpp were measured as the alternative but cannot host the Kubernetes libraries (no custom
value types from Python, no cost estimation or runtime cost limit, no two-variable
comprehensions, no way to add the ``sortBy`` macro).
"""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.cel.checker import (
    CheckedAST,
    CheckError,
    Declarations,
    Function,
    StructType,
    check,
    unchecked,
    validate_homogeneous_literals,
    validate_literal_arguments,
    walk,
)
from kube.cel.cost import AstNode, CallEstimate, Estimate, estimate
from kube.cel.format import check_format_call
from kube.cel.kubernetes import (
    KUBERNETES_TYPE_IDENTS,
    KUBERNETES_TYPE_VALUES,
    QUANTITY,
    Semver,
    dra_includes,
    estimate_call_cost,
    estimate_dra_includes,
    kubernetes_libraries,
    runtime_cost_rule,
)
from kube.cel.library import (
    DEFAULT_RUNTIME_COSTS,
    EXTENSION_ESTIMATORS,
    EXTENSION_RUNTIME_COSTS,
    PRECHECKED_RUNTIME_COSTS,
    STANDARD_TYPE_IDENTS,
    STANDARD_TYPE_VALUES,
    lists_extension,
    optional_library,
    sets_extension,
    standard_library,
    strings_extension,
    two_var_comprehension_library,
)
from kube.cel.parser import (
    BINDINGS_MACROS,
    LISTS_MACROS,
    OPTIONAL_MACROS,
    STANDARD_MACROS,
    TWO_VAR_MACROS,
    Call,
    CreateList,
    Issue,
    Literal,
    MacroExpander,
    ParseError,
    format_issues,
    parse,
)
from kube.cel.regex import is_valid as is_valid_regex
from kube.cel.runtime import CostLimitExceeded, Fn, Interrupted, PlanError, RuntimeConfig, Tracker, build, evaluate
from kube.cel.time import parse_duration, parse_timestamp, time_library
from kube.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    DYN,
    INT,
    LIST_K,
    OPTIONAL,
    STRING,
    UINT,
    EvalError,
    Type,
    list_of,
    map_of,
    struct,
    type_name,
    type_of,
    type_string,
)
from kube.errors import INTERNAL, FieldError, forbidden, invalid, too_long
from kube.quantity import Quantity, QuantityError

MAX_EXPRESSION_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength
MAX_COST = 1_000_000  # CELSelectorExpressionMaxCost: estimated at admission, enforced at runtime
PER_CALL_LIMIT = 1_000_000  # Kubernetes' default runtime cost limit (celconfig.PerCallLimit)
CACHE_SIZE = 256

# The types of declared variables are exported too (``Environment(libs, {"names": list_of(STRING)})``).
__all__ = [
    "BOOL",
    "BYTES",
    "DOUBLE",
    "DRA_ENVIRONMENT",
    "DYN",
    "INT",
    "MAX_COST",
    "MAX_EXPRESSION_LENGTH",
    "STRING",
    "UINT",
    "CELCompileError",
    "CELError",
    "CELRuntimeError",
    "CompiledSelector",
    "DeviceView",
    "Environment",
    "Library",
    "Program",
    "Type",
    "compile_selector",
    "kubernetes_environment",
    "list_of",
    "map_of",
    "validate_selector_expression",
]


class CELError(Exception):
    """Base class of CEL problems."""


class CELCompileError(CELError):
    """An expression that does not parse, type-check or validate, or is too expensive."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind  # "invalid", "cost" or "internal"


class CELRuntimeError(CELError):
    """Evaluation failed; the message is cel-go's, followed by the expression. ``interrupted``:
    the evaluation passed its deadline (the failure says nothing about the input)."""

    def __init__(self, expression: str, message: str, *, interrupted: bool = False, cost: int = 0) -> None:
        super().__init__(f"{message} (expression: {expression!r})")
        self.expression = expression
        self.detail = message
        self.interrupted = interrupted
        # What the evaluation had cost when it failed (cel-go reports it with the error too).
        self.cost = cost


# --- environments -------------------------------------------------------------------------------


CallEstimator = Callable[[str, str, "AstNode | None", list[AstNode], Callable[[AstNode], Estimate]], "CallEstimate | None"]
SizeEstimator = Callable[[AstNode], "Estimate | None"]


@dataclass
class Library:
    """Functions, macros and names that a library adds to an environment."""

    functions: list[Function] = field(default_factory=list)
    macros: dict[tuple[str, int, bool], MacroExpander] = field(default_factory=dict)
    type_idents: dict[str, Type] = field(default_factory=dict)
    type_values: dict[str, Type] = field(default_factory=dict)
    overload_estimators: dict[str, CallEstimator] = field(default_factory=dict)
    overload_costs: dict[str, Callable[[list[Any], Any], int]] = field(default_factory=dict)


def standard() -> Library:
    return Library(
        functions=[*standard_library(), *time_library()],
        macros=dict(STANDARD_MACROS),
        type_idents=dict(STANDARD_TYPE_IDENTS),
        type_values=dict(STANDARD_TYPE_VALUES),
    )


def strings(version: int = 2) -> Library:
    return Library(functions=strings_extension(version))


def sets() -> Library:
    ids = ("list_sets_contains_list", "list_sets_intersects_list", "list_sets_equivalent_list")
    return Library(
        functions=sets_extension(),
        overload_estimators={k: EXTENSION_ESTIMATORS[k] for k in ids},
        overload_costs={k: EXTENSION_RUNTIME_COSTS[k] for k in ids},
    )


def lists(version: int = 3) -> Library:
    estimators = {k: v for k, v in EXTENSION_ESTIMATORS.items() if not k.startswith("list_sets")} if version >= 3 else {}
    costs = {k: v for k, v in EXTENSION_RUNTIME_COSTS.items() if not k.startswith("list_sets")} if version >= 3 else {}
    return Library(
        functions=lists_extension(version),
        macros=dict(LISTS_MACROS) if version >= 2 else {},
        overload_estimators=estimators,
        overload_costs=costs,
    )


def optionals() -> Library:
    return Library(
        functions=optional_library(),
        macros=dict(OPTIONAL_MACROS),
        type_idents={"optional_type": type_of(Type(OPTIONAL.kind, OPTIONAL.name, (DYN,)))},
        type_values={"optional_type": OPTIONAL},
    )


def bindings() -> Library:
    return Library(macros=dict(BINDINGS_MACROS))


def two_var_comprehensions() -> Library:
    return Library(functions=two_var_comprehension_library(), macros=dict(TWO_VAR_MACROS))


def kubernetes() -> Library:
    return Library(functions=kubernetes_libraries(), type_idents=dict(KUBERNETES_TYPE_IDENTS), type_values=dict(KUBERNETES_TYPE_VALUES))


class Environment:
    """Declarations plus the options that decide what compiles and what evaluation costs."""

    def __init__(
        self,
        libraries: list[Library],
        variables: Mapping[str, Type] | None = None,
        structs: Mapping[str, Mapping[str, Type]] | None = None,
        container: str = "",
        *,
        homogeneous_literals: bool = False,
        literal_validators: bool = False,
        optimize: bool = False,
        size_estimator: SizeEstimator | None = None,
        call_estimator: CallEstimator | None = None,
        runtime_cost_rule: Callable[[str, str], Any] | None = None,
        presence_test_cost: int = 1,
        cost_limit: float = float("inf"),
        regex_functions: frozenset[str] = frozenset({"matches"}),
    ) -> None:
        self.libraries = libraries
        self.variables = dict(variables or {})
        decls = Declarations(container=container)
        macros: dict[tuple[str, int, bool], MacroExpander] = {}
        type_values: dict[str, Type] = {}
        overload_estimators: dict[str, CallEstimator] = {}
        overload_costs: dict[str, Callable[[list[Any], Any], int]] = {}
        for lib in libraries:
            for f in lib.functions:
                decls.add_function(f)
            macros.update(lib.macros)
            decls.variables.update(lib.type_idents)
            type_values.update(lib.type_values)
            overload_estimators.update(lib.overload_estimators)
            overload_costs.update(lib.overload_costs)
        decls.variables.update(self.variables)
        for name, fields in (structs or {}).items():
            decls.structs[name] = StructType(name, dict(fields))
        self.decls = decls
        self.macros = macros
        self.homogeneous_literals = homogeneous_literals
        self.literal_validators = literal_validators
        self.size_estimator = size_estimator
        self.call_estimator = call_estimator
        self.overload_estimators = overload_estimators
        self.presence_test_cost = presence_test_cost
        self.cost_limit = cost_limit
        self.runtime = RuntimeConfig(
            functions=decls.functions,
            container=container,
            overload_costs=overload_costs,
            call_cost_rule=runtime_cost_rule,
            default_costs=DEFAULT_RUNTIME_COSTS,
            precheck_costs=PRECHECKED_RUNTIME_COSTS,
            presence_test_cost=presence_test_cost,
            optimize=optimize,
            regex_functions=regex_functions,
            type_values=type_values,
            variables=frozenset(self.variables),
        )

    def extend(self, variables: Mapping[str, Type] | None = None, structs: Mapping[str, Mapping[str, Type]] | None = None) -> Environment:
        """This environment with more variables and object types declared: the libraries and
        options are shared, so deriving one costs little (building one from scratch costs ms)."""
        extended = copy.copy(self)
        decls = copy.copy(self.decls)
        decls.variables = {**self.decls.variables, **(variables or {})}
        decls.structs = {**self.decls.structs, **{name: StructType(name, dict(fields)) for name, fields in (structs or {}).items()}}
        extended.decls = decls
        extended.variables = {**self.variables, **(variables or {})}
        extended.runtime = dataclasses.replace(self.runtime, variables=frozenset(extended.variables))
        return extended

    def compile(self, expression: str, *, check_types: bool = True) -> Program:
        """Parse, check and plan; raises CELCompileError with cel-go's message."""
        try:
            parsed = parse(expression, self.macros)
        except ParseError as exc:
            raise CELCompileError("compilation failed: " + format_issues(expression, exc.issues)) from None
        if check_types:
            try:
                ast = check(self.decls, parsed)
            except CheckError as exc:
                raise CELCompileError("compilation failed: " + format_issues(expression, exc.issues)) from None
            issues = self.validate(ast)
            if issues:
                raise CELCompileError("compilation failed: " + format_issues(expression, issues))
        else:
            ast = unchecked(parsed)
        try:
            program, frame_size = build(ast, self.runtime)
        except PlanError as exc:
            raise CELCompileError(f"program instantiation failed: {exc}", "internal") from None
        return Program(self, expression, ast, program, frame_size)

    def validate(self, ast: CheckedAST) -> list[Issue]:
        issues: list[Issue] = []
        if self.homogeneous_literals:
            issues += validate_homogeneous_literals(ast, frozenset({"format"}))
        if "format" in self.decls.functions:
            issues += validate_format_calls(ast)
        if self.literal_validators:
            issues += validate_literal_arguments(ast, "matches", is_valid_regex)
            issues += validate_literal_arguments(ast, "duration", _valid_with(parse_duration))
            issues += validate_literal_arguments(ast, "timestamp", _valid_with(parse_timestamp))
        return issues


def validate_format_calls(ast: CheckedAST) -> list[Issue]:
    """cel-go's string format validator: literal format strings with literal argument lists."""
    issues = []
    for e, _ in walk(ast.expr):
        if not (isinstance(e, Call) and e.function == "format" and e.target is not None and len(e.args) == 1):
            continue
        ref = ast.refs.get(e.id)
        if ref is not None and "string_format" not in ref.overloads:
            continue
        if not (isinstance(e.target, Literal) and isinstance(e.target.value, str) and isinstance(e.args[0], CreateList)):
            continue
        problem = check_format_call(e.target.value, e.args[0].elements, ast.type_of)
        if problem is not None:
            blame, message = problem
            issues.append(Issue(ast.parsed.offsets.get(blame if blame is not None else e.id, -1), message))
    return issues


def _valid_with(parser: Callable[[str], Any]) -> Callable[[Any], bool]:
    def valid(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        try:
            parser(value)
        except EvalError:
            return False
        return True

    return valid


class Program:
    """A compiled expression of an environment."""

    def __init__(self, env: Environment, expression: str, ast: CheckedAST, program: Fn, frame_size: int) -> None:
        self.env = env
        self.expression = expression
        self.ast = ast
        self._program = program
        self._frame_size = frame_size
        self._cost: Estimate | None = None

    @property
    def output_type(self) -> Type:
        return self.ast.output_type

    def estimated_cost(self) -> Estimate:
        """cel-go's worst-case cost estimate (min, max) with the environment's estimators."""
        if self._cost is None:
            self._cost = estimate(
                self.ast,
                self.env.size_estimator,
                self.env.call_estimator,
                self.env.overload_estimators,
                self.env.presence_test_cost,
            )
        return self._cost

    def evaluate(self, activation: Mapping[str, Any], *, cost_limit: float | None = None, deadline: float | None = None) -> Any:
        return self.evaluate_with_cost(activation, cost_limit=cost_limit, deadline=deadline)[0]

    def evaluate_with_cost(
        self, activation: Mapping[str, Any], *, cost_limit: float | None = None, deadline: float | None = None
    ) -> tuple[Any, int]:
        """The value and cel-go's actual cost; every failure is a CELRuntimeError."""
        tracker = Tracker(self.env.cost_limit if cost_limit is None else cost_limit, deadline)
        try:
            return evaluate(self._program, self._frame_size, activation, tracker), tracker.cost
        except Interrupted as exc:
            raise CELRuntimeError(self.expression, str(exc), interrupted=True, cost=tracker.cost) from None
        except (EvalError, CostLimitExceeded) as exc:
            raise CELRuntimeError(self.expression, str(exc), cost=tracker.cost) from None
        except RecursionError:
            raise CELRuntimeError(self.expression, "expression recursion limit exceeded", cost=tracker.cost) from None
        except Exception as exc:  # a library defect must not escape as a non-CEL error
            raise CELRuntimeError(self.expression, f"internal error: {type(exc).__name__}: {exc}", cost=tracker.cost) from None


def kubernetes_environment(
    variables: Mapping[str, Type] | None = None,
    structs: Mapping[str, Mapping[str, Type]] | None = None,
    extra: list[Library] | None = None,
    size_estimator: SizeEstimator | None = None,
    call_estimator: CallEstimator | None = None,
    cost_limit: float = PER_CALL_LIMIT,
) -> Environment:
    """Kubernetes' base CEL environment: the standard library, the strings (v2), sets, lists (v3),
    two-variable comprehension and optional extensions, the Kubernetes libraries, homogeneous
    aggregate literals, literal validation, cross-type numeric comparisons, the optimizer and
    Kubernetes' cost rules (presence tests are free)."""

    def calls(
        function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Callable[[AstNode], Estimate]
    ) -> CallEstimate | None:
        if call_estimator is not None:
            est = call_estimator(function, overload, target, args, size)
            if est is not None:
                return est
        return estimate_call_cost(function, overload, target, args, size)

    return Environment(
        [standard(), strings(2), sets(), lists(3), two_var_comprehensions(), optionals(), kubernetes(), *(extra or [])],
        variables,
        structs,
        homogeneous_literals=True,
        literal_validators=True,
        optimize=True,
        size_estimator=size_estimator,
        call_estimator=calls,
        runtime_cost_rule=runtime_cost_rule,
        presence_test_cost=0,
        cost_limit=cost_limit,
        regex_functions=frozenset({"matches", "find", "findAll"}),
    )


# --- DRA -----------------------------------------------------------------------------------------

DEVICE_TYPE = struct("kubernetes.DRADevice")
_ATTRIBUTES_INNER = map_of(STRING, DYN)
_CAPACITY_INNER = map_of(STRING, QUANTITY)
DEVICE_FIELDS = {
    "driver": STRING,
    "allowMultipleAllocations": BOOL,
    "attributes": map_of(STRING, _ATTRIBUTES_INNER),
    "capacity": map_of(STRING, _CAPACITY_INNER),
}

_ATTR_VALUE_MAX = 64  # max(DeviceAttributeMaxValueLength, ResourceSliceMaxAttributeValuesPerDevice)
_MAP_MAX = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
_DOMAIN_MAX = 63  # DeviceMaxDomainLength
_ID_MAX = 32  # DeviceMaxIDLength
_DRIVER_MAX = 63  # DriverNameMaxLength


@dataclass
class _SizeNode:
    max: int
    fields: dict[str, _SizeNode] = field(default_factory=dict)
    keys: _SizeNode | None = None
    elems: _SizeNode | None = None


_ATTR_NODE = _SizeNode(_ATTR_VALUE_MAX)
_DEVICE_SIZES = _SizeNode(
    0,
    fields={
        "driver": _SizeNode(_DRIVER_MAX),
        "allowMultipleAllocations": _SizeNode(1),
        "attributes": _SizeNode(
            _MAP_MAX, keys=_SizeNode(_DOMAIN_MAX), elems=_SizeNode(_MAP_MAX, keys=_SizeNode(_ID_MAX), elems=_ATTR_NODE)
        ),
        "capacity": _SizeNode(
            _MAP_MAX, keys=_SizeNode(_DOMAIN_MAX), elems=_SizeNode(_MAP_MAX, keys=_SizeNode(_ID_MAX), elems=_SizeNode(0))
        ),
    },
)


def _dra_size(node: AstNode) -> Estimate | None:
    """Sizes of what ``device`` holds, from the limits upstream declares for it."""
    path = node.path
    if not path or path[0] != "device":
        return None
    current = _DEVICE_SIZES
    for name in path[1:]:
        if name in ("@items", "@values"):
            if current.elems is None:
                return None
            current = current.elems
        elif name == "@keys":
            if current.keys is None:
                return None
            current = current.keys
        elif name in current.fields:
            current = current.fields[name]
        elif current.elems is _ATTR_NODE:
            current = _ATTR_NODE
        else:
            return None
    return Estimate(0, current.max)


def _dra_calls(
    function: str, overload: str, target: AstNode | None, args: list[AstNode], size: Callable[[AstNode], Estimate]
) -> CallEstimate | None:
    if function == "includes" and overload == "dra_includes_dyn_dyn":
        return estimate_dra_includes(function, overload, target, args, size)
    return None


DRA_ENVIRONMENT = kubernetes_environment(
    variables={"device": DEVICE_TYPE},
    structs={DEVICE_TYPE.name: DEVICE_FIELDS},
    extra=[bindings(), Library(functions=[dra_includes()])],
    size_estimator=_dra_size,
    call_estimator=_dra_calls,
    cost_limit=MAX_COST,
)


class _DefaultingMap(dict[str, Any]):
    """device.attributes / device.capacity: an unknown domain reads as an empty map."""

    def cel_missing(self, key: Any) -> dict[str, Any]:
        return {}


class DeviceView(dict[str, Any]):
    """The ``device`` variable, built once per device from an allocation-style device dict.

    Build it once and pass it to many ``evaluate`` calls (the scheduler evaluates several
    selectors per device); a plain dict is converted on every call. An attribute whose value
    cannot be used (no value of a known kind, an invalid version) makes every evaluation fail,
    as upstream's conversion of the device does.
    """

    cel_type_name = DEVICE_TYPE.name

    def __init__(self, device: Mapping[str, Any]) -> None:
        super().__init__()
        driver = device.get("driver", "")
        self.problem: str | None = None
        self["driver"] = driver
        self["attributes"] = _group(device.get("attributes") or {}, driver, self._attribute_value)
        self["capacity"] = _group(device.get("capacity") or {}, driver, _capacity_value)
        self["allowMultipleAllocations"] = bool(device.get("allowMultipleAllocations"))

    def _attribute_value(self, name: str, value: Any) -> Any:
        if not (isinstance(value, dict) and _is_typed_value(value)):
            return value
        for key in ("int", "bool", "string"):
            if value.get(key) is not None:
                return value[key]
        try:
            if value.get("version") is not None:
                return Semver(value["version"])
            for key in ("ints", "bools", "strings"):
                if value.get(key) is not None:
                    return list(value[key])
            if value.get("versions") is not None:
                return [Semver(v) for v in value["versions"]]
        except EvalError as exc:
            self.problem = self.problem or f"attribute {name}: parse semantic version: {exc}"
            return None
        self.problem = self.problem or f"attribute {name}: unsupported attribute value"
        return None


def _group(values: Mapping[str, Any], driver: str, convert: Callable[[str, Any], Any]) -> _DefaultingMap:
    """Grouped (domain -> name -> value) input is kept; flat qualified names are grouped."""
    out = _DefaultingMap()
    for key, value in values.items():
        if isinstance(value, dict) and "/" not in key and not _is_typed_value(value):
            out.setdefault(key, {}).update({k: convert(f"{key}/{k}", v) for k, v in value.items()})
            continue
        domain, sep, name = key.partition("/")
        if not sep:
            domain, name = driver, key
        out.setdefault(domain, {})[name] = convert(key, value)
    return out


def _is_typed_value(value: Mapping[str, Any]) -> bool:
    return bool(value.keys() & {"int", "bool", "string", "version", "ints", "bools", "strings", "versions", "value"})


def _capacity_value(name: str, value: Any) -> Any:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    try:
        return Quantity.parse(value)
    except (QuantityError, ValueError, TypeError):
        return Quantity(0)


class CompiledSelector:
    """A checked DRA expression: its result type, estimated worst-case cost and program."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.expression = program.expression
        self.result_type = type_string(program.output_type)
        self.max_cost = program.estimated_cost().max

    def evaluate(self, device: Mapping[str, Any], *, cost_limit: float | None = None, deadline: float | None = None) -> bool:
        """Whether the device matches; errors (including the cost limit) are CELRuntimeError."""
        value = self.evaluate_value(device, cost_limit=cost_limit, deadline=deadline)
        if not isinstance(value, bool):
            raise CELRuntimeError(self.expression, f"CEL result of type {type_name(value)} could not be converted to bool")
        return value

    def evaluate_value(self, device: Mapping[str, Any], *, cost_limit: float | None = None, deadline: float | None = None) -> Any:
        """Evaluate without requiring a bool (derived attributes)."""
        view = device if isinstance(device, DeviceView) else DeviceView(device)
        if view.problem is not None:
            raise CELRuntimeError(self.expression, view.problem)
        return self.program.evaluate({"device": view}, cost_limit=cost_limit, deadline=deadline)


_cache: OrderedDict[tuple[str, str], CompiledSelector | CELCompileError] = OrderedDict()

_DERIVED_SCALARS = {"bool", "int", "string", "dyn", "kubernetes.Semver"}


def check_result_type(program: Program, result_type: str) -> None:
    t = program.output_type
    if result_type == "bool":
        if t != BOOL and t != DYN:
            raise CELCompileError(f"must evaluate to bool or the unknown type, not {type_string(t)}")
        return
    # A derived attribute: a primitive scalar, or a list of them.
    inner = t.params[0] if t.kind == LIST_K and t.params else t
    if inner.name not in _DERIVED_SCALARS or (inner is not t and inner.kind == LIST_K):
        raise CELCompileError(
            "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these scalars, not " + type_string(t)
        )


def compile_expression(expression: str, result_type: str = "bool", cost_limit: int | None = MAX_COST) -> CompiledSelector:
    """Compile a DRA expression (``bool`` selectors; ``any`` for derived attributes).

    ``cost_limit`` bounds the estimated cost (admission's check); ``None`` skips it."""
    key = (expression, result_type)
    cached = _cache.get(key)
    if cached is None:
        try:
            program = DRA_ENVIRONMENT.compile(expression)
            check_result_type(program, result_type)
            cached = CompiledSelector(program)
        except CELCompileError as exc:
            cached = exc
        _cache[key] = cached
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    if isinstance(cached, CELCompileError):
        raise cached
    if cost_limit is not None and cached.max_cost > cost_limit:
        raise CELCompileError("too complex, exceeds cost limit", "cost")
    return cached


def compile_selector(expression: str, *, cost_limit: int | None = MAX_COST) -> CompiledSelector:
    """A device selector: must evaluate to bool. ``cost_limit=None`` compiles what is stored as
    upstream's scheduler does: the estimate is admission's business, the runtime limit still applies."""
    return compile_expression(expression, "bool", cost_limit)


def validate_selector_expression(expression: str, path: str, result_type: str = "bool") -> list[FieldError]:
    """Admission check of a DRA CEL expression: length, compile errors, estimated cost."""
    if len(expression.encode()) > MAX_EXPRESSION_LENGTH:
        return [too_long(path, MAX_EXPRESSION_LENGTH)]
    try:
        compile_expression(expression, result_type)
    except CELCompileError as exc:
        if exc.kind == "cost":
            return [forbidden(path, "too complex, exceeds cost limit")]
        if exc.kind == "internal":
            return [FieldError(INTERNAL, path, str(exc))]
        return [invalid(path, expression, str(exc))]
    return []
