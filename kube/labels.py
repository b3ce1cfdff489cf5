"""Label selectors (k8s.io/apimachinery/pkg/labels) and core/v1 NodeSelector matching.

The string parser reproduces upstream's lexer and recursive-descent parser, including its error
texts, so a bad ``labelSelector`` query parameter gets the same 400 message as from
kube-apiserver (which passes ``labels.Parse``'s error through unchanged; the
``couldn't parse the selector string "...": ...`` wrapper is added client-side by
``metav1.ParseToLabelSelector``, e.g. in kubectl).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.errors import bad_request, go_quote

# Operator spellings as upstream's selection package names them.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_UNARY_OPERATORS = (EXISTS, DOES_NOT_EXIST)
_ALL_OPERATORS = _BINARY_OPERATORS + _UNARY_OPERATORS

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)

# --- label key / value validation (content.IsLabelKey / IsLabelValue) -------------------------

_MAX_REMEMBERED_VALID = 8192


def remember_valid(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """Wrap a ``str -> problems`` rule so strings it accepted are accepted again without re-checking.

    Names, label keys and class names repeat across nearly every write; only valid strings are
    remembered (a bounded set, emptied when full), so error messages are always computed afresh.
    """
    valid: set[str] = set()

    def checked(value: str) -> list[str]:
        if value in valid:
            return []
        problems = check(value)
        if not problems:
            if len(valid) >= _MAX_REMEMBERED_VALID:
                valid.clear()
            valid.add(value)
        return problems

    checked.__doc__ = check.__doc__
    checked.__name__ = check.__name__
    return checked


_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_GO_INT_RE = re.compile("[+-]?[0-9]+")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@remember_valid
def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _byte_len(value) > 253:
        errs.append(_max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


@remember_valid
def label_key_errors(key: str) -> list[str]:
    """Problems with ``key`` as a label key (optional DNS-subdomain prefix, name ≤ 63 bytes)."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in _dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _byte_len(name) > 63:
        errs.append("name part " + _max_len_error(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


@remember_valid
def label_value_errors(value: str) -> list[str]:
    """Problems with ``value`` as a label value (empty, or a name of at most 63 bytes)."""
    errs = []
    if _byte_len(value) > 63:
        errs.append(_max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# --- Go-style error rendering -----------------------------------------------------------------


def _go_string_slice(values: Sequence[str] | None) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _invalid(path: str, rendered_value: str, detail: str) -> str:
    return f"{path}: Invalid value: {rendered_value}: {detail}"


def _aggregate(messages: list[str]) -> str:
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _child(path: str | None, name: str) -> str:
    return f"{path}.{name}" if path else name


class _RequirementError(Exception):
    """NewRequirement failures, already rendered as field errors."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(_aggregate(messages))
        self.messages = messages


def _parse_go_int64(text: str) -> int | None:
    if not _GO_INT_RE.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


# --- requirements and selectors ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ANDed term of a label selector: key, operator and values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (upstream ``Requirement.Matches``)."""
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = _parse_go_int64(labels[self.key])
            want = _parse_go_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        prefix = "!" if op == DOES_NOT_EXIST else ""
        if op in (EXISTS, DOES_NOT_EXIST):
            return prefix + self.key
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({values})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{values}"


def new_requirement(key: str, operator: str, values: Iterable[str] = (), path: str | None = None) -> Requirement:
    """Build a validated Requirement (upstream ``labels.NewRequirement``).

    Raises ApiError 400 with upstream's aggregated field errors; ``path`` prefixes field paths.
    """
    try:
        return _new_requirement(key, operator, list(values), path)
    except _RequirementError as exc:
        raise bad_request(str(exc)) from None


def _new_requirement(key: str, operator: str, values: list[str] | None, path: str | None) -> Requirement:
    vals = values or []
    errs: list[str] = []
    key_errs = label_key_errors(key)
    if key_errs:
        errs.append(_invalid(_child(path, "key"), go_quote(key), "; ".join(key_errs)))
    values_path = _child(path, "values")
    if operator in (IN, NOT_IN):
        if not vals:
            errs.append(_invalid(values_path, _go_string_slice(values),
                                 "for 'in', 'notin' operators, values set can't be empty"))
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errs.append(_invalid(values_path, _go_string_slice(values), "exact-match compatibility requires one single value"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errs.append(_invalid(values_path, _go_string_slice(values),
                                 "values set must be empty for exists and does not exist"))
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errs.append(_invalid(values_path, _go_string_slice(values),
                                 "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(vals):
            if _parse_go_int64(value) is None:
                errs.append(_invalid(f"{values_path}[{i}]", go_quote(value),
                                     "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(go_quote(op) for op in _ALL_OPERATORS)
        errs.append(f"{_child(path, 'operator')}: Unsupported value: {go_quote(operator)}: supported values: {supported}")
    for i, value in enumerate(vals):
        value_errs = label_value_errors(value)
        if value_errs:
            errs.append(_invalid(f"{values_path}[{i}][{key}]", go_quote(value), "; ".join(value_errs)))
    if errs:
        raise _RequirementError(errs)
    return Requirement(key, operator, tuple(vals))


class LabelSelector:
    """An AND of requirements; immutable. ``LabelSelector.nothing()`` matches no object."""

    __slots__ = ("_nothing", "_requirements")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        # Sorted by key like upstream, so str() is deterministic.
        self._requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = False

    @classmethod
    def nothing(cls) -> LabelSelector:
        """The selector that matches no labels (upstream ``labels.Nothing()``)."""
        selector = cls()
        selector._nothing = True
        return selector

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """The ANDed requirements, sorted by key."""
        return self._requirements

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (matches every object)."""
        return not self._nothing and not self._requirements

    @property
    def matches_nothing(self) -> bool:
        """True only for ``LabelSelector.nothing()``."""
        return self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        if self._nothing:
            return False
        have = labels or {}
        return all(r.matches(have) for r in self._requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """The single value ``key`` must have (``=``, ``==`` or a one-value ``in``), else None."""
        for r in self._requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def add(self, *requirements: Requirement) -> LabelSelector:
        """A new selector with more requirements ANDed in."""
        if self._nothing:
            return self
        return LabelSelector(self._requirements + requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self._requirements)

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self._requirements == other._requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self._requirements))


EVERYTHING = LabelSelector()


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """A selector requiring every ``key=value`` in ``labels`` (no validation, like upstream)."""
    return LabelSelector(Requirement(k, EQUALS, (v,)) for k, v in (labels or {}).items())


# --- string parser --------------------------------------------------------------------------

_ERROR, _EOS, _CLOSED_PAR, _COMMA, _NOT, _DOUBLE_EQ, _EQ, _GT, _IDENT, _IN, _LT, _NOT_EQ, _NOT_IN, _OPEN_PAR = range(14)
_TOKENS = {
    ")": _CLOSED_PAR, ",": _COMMA, "!": _NOT, "==": _DOUBLE_EQ, "=": _EQ, ">": _GT, "in": _IN,
    "<": _LT, "!=": _NOT_EQ, "notin": _NOT_IN, "(": _OPEN_PAR,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_OPERATOR_OF_TOKEN = {
    _IN: IN, _EQ: EQUALS, _DOUBLE_EQ: DOUBLE_EQUALS, _GT: GREATER_THAN, _LT: LESS_THAN,
    _NOT_IN: NOT_IN, _NOT_EQ: NOT_EQUALS,
}


class _ParseError(Exception):
    pass


def _lex(text: str) -> list[tuple[int, str]]:
    """Tokenize like upstream's Lexer; a NUL character reads as end of input there, so here too."""
    pos = 0
    n = len(text)
    items: list[tuple[int, str]] = []

    def read() -> str:
        nonlocal pos
        if pos < n:
            ch = text[pos]
            pos += 1
            return ch
        return "\0"

    while True:
        ch = read()
        while ch in _WHITESPACE:
            ch = read()
        if ch == "\0":
            items.append((_EOS, ""))
            return items
        pos -= 1
        if ch in _SPECIAL:
            buffer = ""
            last: tuple[int, str] | None = None
            while True:
                ch = read()
                if ch == "\0":
                    break
                if ch not in _SPECIAL:
                    pos -= 1
                    break
                buffer += ch
                if buffer in _TOKENS:
                    last = (_TOKENS[buffer], buffer)
                elif last is not None:
                    pos -= 1
                    break
            items.append(last if last is not None else (_ERROR, f"error expected: keyword found '{buffer}'"))
        else:
            buffer = ""
            while True:
                ch = read()
                if ch == "\0":
                    break
                if ch in _SPECIAL or ch in _WHITESPACE:
                    pos -= 1
                    break
                buffer += ch
            items.append((_TOKENS.get(buffer, _IDENT), buffer))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool) -> tuple[int, str]:
        tok, lit = self.items[self.position]
        if values and tok in (_IN, _NOT_IN):
            tok = _IDENT
        return tok, lit

    def consume(self, values: bool) -> tuple[int, str]:
        result = self.lookahead(values)
        self.position += 1
        return result

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead(True)
            if tok in (_IDENT, _NOT):
                try:
                    requirements.append(self.parse_requirement())
                except (_ParseError, _RequirementError) as exc:
                    raise _ParseError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume(True)
                if tok == _EOS:
                    return requirements
                if tok == _COMMA:
                    tok2, lit2 = self.lookahead(True)
                    if tok2 not in (_IDENT, _NOT):
                        raise _ParseError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise _ParseError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok == _EOS:
                return requirements
            else:
                raise _ParseError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, operator, [], None)
        operator = self.parse_operator()
        values = self.parse_values() if operator in (IN, NOT_IN) else self.parse_exact_value()
        return _new_requirement(key, operator, sorted(values), None)

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        tok, literal = self.consume(True)
        if tok == _NOT:
            operator = DOES_NOT_EXIST
            tok, literal = self.consume(True)
        if tok != _IDENT:
            raise _ParseError(f"found '{literal}', expected: identifier")
        key_errs = label_key_errors(literal)
        if key_errs:
            # Upstream validates here with a nil field path, hence the "<nil>" prefix.
            raise _ParseError(_invalid("<nil>", go_quote(literal), "; ".join(key_errs)))
        if self.lookahead(True)[0] in (_EOS, _COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return literal, operator

    def parse_operator(self) -> str:
        tok, lit = self.consume(False)
        operator = _OPERATOR_OF_TOKEN.get(tok)
        if operator is None:
            raise _ParseError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operator

    def parse_values(self) -> set[str]:
        tok, lit = self.consume(True)
        if tok != _OPEN_PAR:
            raise _ParseError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead(True)
        if tok in (_IDENT, _COMMA):
            values = self.parse_identifiers_list()
            if self.consume(True)[0] != _CLOSED_PAR:
                raise _ParseError(f"found '{lit}', expected: ')'")
            return values
        if tok == _CLOSED_PAR:
            self.consume(True)
            return {""}
        raise _ParseError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume(True)
            if tok == _IDENT:
                values.add(lit)
                tok2, lit2 = self.lookahead(True)
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSED_PAR:
                    return values
                raise _ParseError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:
                # Empty entries ("(,a)", "(a,,b)", "(a,)") stand for the empty value.
                if not values:
                    values.add("")
                tok2 = self.lookahead(True)[0]
                if tok2 == _CLOSED_PAR:
                    values.add("")
                    return values
                if tok2 == _COMMA:
                    values.add("")
                continue
            raise _ParseError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok = self.lookahead(True)[0]
        if tok in (_EOS, _COMMA):
            return {""}
        tok, lit = self.consume(True)
        if tok == _IDENT:
            return {lit}
        raise _ParseError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the ``labelSelector`` string syntax; errors raise ApiError 400 BadRequest."""
    try:
        return LabelSelector(_Parser(text).parse())
    except _ParseError as exc:
        raise bad_request(str(exc)) from None


# --- metav1.LabelSelector objects -----------------------------------------------------------

_LABEL_SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def selector_from_label_selector_object(obj: Mapping[str, Any] | None, nil_selects_all: bool = False) -> LabelSelector:
    """Convert a metav1.LabelSelector dict (upstream ``metav1.LabelSelectorAsSelector``).

    Like upstream, ``None`` gives ``LabelSelector.nothing()`` (the API documents "a null label
    selector matches no objects") and ``{}`` gives a selector matching everything. Fields whose
    documentation says a missing selector means "everything" pass ``nil_selects_all=True``.
    Invalid selectors raise ApiError 400 with upstream's message.
    """
    if obj is None:
        return EVERYTHING if nil_selects_all else LabelSelector.nothing()
    match_labels = obj.get("matchLabels") or {}
    match_expressions = obj.get("matchExpressions") or []
    if not match_labels and not match_expressions:
        return EVERYTHING
    requirements: list[Requirement] = []
    try:
        for key in sorted(match_labels):
            requirements.append(_new_requirement(key, EQUALS, [match_labels[key]], None))
        for expr in match_expressions:
            raw_op = expr.get("operator", "")
            operator = _LABEL_SELECTOR_OPERATORS.get(raw_op)
            if operator is None:
                raise bad_request(f"{go_quote(str(raw_op))} is not a valid label selector operator")
            values = expr.get("values")
            requirements.append(_new_requirement(expr.get("key", ""), operator,
                                                 list(values) if values else None, None))
    except _RequirementError as exc:
        raise bad_request(str(exc)) from None
    return LabelSelector(requirements)


# --- core/v1 NodeSelector ---------------------------------------------------------------------

_NODE_SELECTOR_OPERATORS = {
    "In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST, "Gt": GREATER_THAN, "Lt": LESS_THAN,
}


def _node_requirement(req: Mapping[str, Any]) -> Requirement | None:
    operator = _NODE_SELECTOR_OPERATORS.get(req.get("operator", ""))
    if operator is None:
        return None
    values = req.get("values")
    try:
        return _new_requirement(req.get("key", ""), operator, list(values) if values else None, None)
    except _RequirementError:
        return None


def node_selector_requirement_matches(requirement: Mapping[str, Any], labels: Mapping[str, str] | None) -> bool:
    """Whether node ``labels`` satisfy one NodeSelectorRequirement; an invalid one matches nothing."""
    parsed = _node_requirement(requirement)
    return parsed is not None and parsed.matches(labels or {})


def _field_requirement_matches(requirement: Mapping[str, Any], fields: Mapping[str, str]) -> bool | None:
    values = requirement.get("values") or []
    operator = requirement.get("operator")
    if operator not in ("In", "NotIn") or len(values) != 1:
        return None
    equal = fields.get(requirement.get("key", ""), "") == values[0]
    return equal if operator == "In" else not equal


def node_selector_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether one NodeSelectorTerm selects ``node``; empty or invalid terms select nothing."""
    expressions = term.get("matchExpressions") or []
    field_reqs = term.get("matchFields") or []
    if not expressions and not field_reqs:
        return False
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    parsed = [_node_requirement(expr) for expr in expressions]
    if any(r is None for r in parsed):
        return False
    name = metadata.get("name") or ""
    fields = {"metadata.name": name} if name else {}
    field_results = [_field_requirement_matches(req, fields) for req in field_reqs]
    if any(result is None for result in field_results):
        return False
    if not all(r.matches(labels) for r in parsed if r is not None):
        return False
    # Upstream only applies matchFields when the node has fields to match (a name).
    return not fields or all(field_results)


def node_selector_matches(node_selector: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """core/v1 NodeSelector semantics: terms are ORed, requirements within a term ANDed.

    matchExpressions test node labels (In, NotIn, Exists, DoesNotExist, Gt, Lt); matchFields test
    ``metadata.name`` with In/NotIn and exactly one value. Terms with invalid requirements are
    skipped like upstream's LazyErrorNodeSelector does. ``None`` means "no constraint" and matches
    every node (DRA allocation results and slices use a missing selector that way); a selector
    with no terms matches nothing.
    """
    if node_selector is None:
        return True
    return any(node_selector_term_matches(term, node) for term in node_selector.get("nodeSelectorTerms") or [])


__all__ = [
    "DOES_NOT_EXIST", "DOUBLE_EQUALS", "EQUALS", "EVERYTHING", "EXISTS", "GREATER_THAN", "IN", "LESS_THAN",
    "NOT_EQUALS", "NOT_IN", "LabelSelector", "Requirement", "go_quote", "label_key_errors",
    "label_value_errors", "new_requirement", "node_selector_matches", "node_selector_requirement_matches",
    "node_selector_term_matches", "parse_label_selector", "selector_from_label_selector_object", "selector_from_set",
]
