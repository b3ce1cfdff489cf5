"""CEL parser: source text to an expression tree with cel-go's shape.

The tree is the one cel-go builds: macros are expanded into comprehensions with an ``@result``
accumulator, ``&&``/``||`` chains are balanced, and each node has an id whose source offset is
the token cel-go reports errors at. The cost estimator depends on that exact shape.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kube.cel.types import INT64_MAX, UINT64_MAX, UInt

MAX_RECURSION_DEPTH = 250
MAX_CODE_POINTS = 100_000
ACCUMULATOR = "@result"
UNUSED_ITER_VAR = "#unused"

# Each nesting level of the grammar costs a few Python frames in this recursive-descent parser
# (and the checker and planner recurse over the tree too); the grammar's own depth limit is the
# real bound, so make sure Python's limit is not reached first.
if sys.getrecursionlimit() < 10_000:
    sys.setrecursionlimit(10_000)

# --- expression tree ----------------------------------------------------------------------------


class Expr:
    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        self.id = id


class Literal(Expr):
    __slots__ = ("value",)

    def __init__(self, id: int, value: Any) -> None:
        super().__init__(id)
        self.value = value


class Ident(Expr):
    __slots__ = ("name",)

    def __init__(self, id: int, name: str) -> None:
        super().__init__(id)
        self.name = name


class Select(Expr):
    __slots__ = ("field", "operand", "test_only")

    def __init__(self, id: int, operand: Expr, field: str, test_only: bool = False) -> None:
        super().__init__(id)
        self.operand, self.field, self.test_only = operand, field, test_only


class Call(Expr):
    __slots__ = ("args", "function", "target")

    def __init__(self, id: int, function: str, target: Expr | None, args: list[Expr]) -> None:
        super().__init__(id)
        self.function, self.target, self.args = function, target, args


class CreateList(Expr):
    __slots__ = ("elements", "optional_indices")

    def __init__(self, id: int, elements: list[Expr], optional_indices: frozenset[int] = frozenset()) -> None:
        super().__init__(id)
        self.elements, self.optional_indices = elements, optional_indices


@dataclass
class MapEntry:
    id: int
    key: Expr
    value: Expr
    optional: bool = False


class CreateMap(Expr):
    __slots__ = ("entries",)

    def __init__(self, id: int, entries: list[MapEntry]) -> None:
        super().__init__(id)
        self.entries = entries


@dataclass
class FieldInit:
    id: int
    name: str
    value: Expr
    optional: bool = False


class CreateStruct(Expr):
    __slots__ = ("fields", "type_name")

    def __init__(self, id: int, type_name: str, fields: list[FieldInit]) -> None:
        super().__init__(id)
        self.type_name, self.fields = type_name, fields


class Comprehension(Expr):
    __slots__ = ("accu_init", "accu_var", "iter_range", "iter_var", "iter_var2", "loop_condition", "loop_step", "result")

    def __init__(
        self,
        id: int,
        iter_range: Expr,
        iter_var: str,
        iter_var2: str | None,
        accu_var: str,
        accu_init: Expr,
        loop_condition: Expr,
        loop_step: Expr,
        result: Expr,
    ) -> None:
        super().__init__(id)
        self.iter_range, self.iter_var, self.iter_var2 = iter_range, iter_var, iter_var2
        self.accu_var, self.accu_init = accu_var, accu_init
        self.loop_condition, self.loop_step, self.result = loop_condition, loop_step, result


def is_bind(e: Comprehension) -> bool:
    """cel.bind (and the macros built like it): an empty range and a false loop condition."""
    return (
        isinstance(e.iter_range, CreateList)
        and not e.iter_range.elements
        and isinstance(e.loop_condition, Literal)
        and e.loop_condition.value is False
        and e.accu_var != ACCUMULATOR
    )


@dataclass
class ParsedAST:
    expr: Expr
    source: str
    offsets: dict[int, int] = field(default_factory=dict)

    def location(self, id: int) -> tuple[int, int]:
        """(line, column) of an expression, both 1-based as cel-go prints them."""
        return location_of(self.source, self.offsets.get(id, -1))


def location_of(source: str, offset: int) -> tuple[int, int]:
    if offset < 0:
        return -1, -1
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


@dataclass
class Issue:
    offset: int
    message: str


class ParseError(Exception):
    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(issues[0].message if issues else "parse error")
        self.issues = issues


def format_issues(source: str, issues: list[Issue]) -> str:
    """cel-go's rendering of errors: location, message, the source line and a caret."""
    out = []
    lines = source.split("\n")
    for issue in sorted(issues, key=lambda i: i.offset):
        if issue.offset < 0:
            out.append(f"ERROR: <input>:-1:0: {issue.message}")
            continue
        line, col = location_of(source, issue.offset)
        text = lines[line - 1] if line - 1 < len(lines) else ""
        marker = "".join("\uff0e" if ord(c) > 127 else "." for c in text[: col - 1])
        out.append(f"ERROR: <input>:{line}:{col}: {issue.message}\n | {text}\n | {marker}^")
    return "\n".join(out)


# --- lexer --------------------------------------------------------------------------------------

_STRING_BODY = r"""
    [rR](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n\r]*"|'[^'\n\r]*')
  | (?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''|"(?:\\[\s\S]|[^"\\\n\r])*"|'(?:\\[\s\S]|[^'\\\n\r])*')
"""
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[\t \r\n\f]+|//[^\n]*)
  | (?P<bytes>[bB](?:"""
    + _STRING_BODY
    + r"""))
  | (?P<string>"""
    + _STRING_BODY
    + r""")
  | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|\d+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|\d+)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<escident>`[a-zA-Z0-9_.\-/ ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>+\-*/%!?:.,()\[\]{}])
    """,
    re.VERBOSE,
)


@dataclass
class Token:
    kind: str
    text: str
    pos: int


def _tokenize(src: str) -> list[Token]:
    toks: list[Token] = []
    pos = 0
    n = len(src)
    while pos < n:
        m = _TOKEN_RE.match(src, pos)
        if not m:
            raise ParseError([Issue(pos, f"Syntax error: token recognition error at: '{src[pos]}'")])
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(Token(kind, m.group(), pos))
        pos = m.end()
    toks.append(Token("eof", "<EOF>", n))
    return toks


_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34, "`": 96, "?": 63}


def unescape(text: str, is_bytes: bool) -> str | bytes:
    """The value of a string or bytes literal token (without the ``b`` prefix)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
    body = text[3:-3] if len(text) >= 6 and text[:3] in ('"""', "'''") else text[1:-1]
    if raw or "\\" not in body:
        return body.encode() if is_bytes else body
    out: list[int] = []  # code points for strings, byte values for bytes
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            if is_bytes:
                out.extend(ch.encode())
            else:
                out.append(ord(ch))
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("unable to unescape string, found '\\' as last character")
        c = body[i + 1]
        i += 2
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
            continue
        if c in "xXuU":
            width = {"x": 2, "X": 2, "u": 4, "U": 8}[c]
            if is_bytes and c in "uU":
                raise ValueError("unable to unescape string")
            digits = body[i : i + width]
            if len(digits) < width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("unable to unescape string")
            v = int(digits, 16)
            i += width
            if not is_bytes and (v > 0x10FFFF or 0xD800 <= v <= 0xDFFF):
                raise ValueError("invalid unicode code point")
            out.append(v)
            continue
        if c in "0123":
            digits = body[i : i + 2]
            if len(digits) < 2 or not all(d in "01234567" for d in digits):
                raise ValueError("unable to unescape octal sequence in string")
            out.append(int(c + digits, 8))
            i += 2
            continue
        raise ValueError("unable to unescape string")
    if is_bytes:
        return bytes(out)
    return "".join(map(chr, out))


# --- parser -------------------------------------------------------------------------------------

RESERVED = frozenset({
    "as", "break", "const", "continue", "else", "false", "for", "function", "if", "import", "in", "let", "loop",
    "package", "namespace", "null", "return", "true", "var", "void", "while",
})  # fmt: skip
_RELATIONS = {"<": "_<_", "<=": "_<=_", ">=": "_>=_", ">": "_>_", "==": "_==_", "!=": "_!=_", "in": "@in"}
_ADDITIVE = {"+": "_+_", "-": "_-_"}
_MULTIPLICATIVE = {"*": "_*_", "/": "_/_", "%": "_%_"}

MacroExpander = Callable[["_Parser", int, Expr | None, list[Expr]], Expr | None]


class _MacroError(Exception):
    def __init__(self, id: int, message: str) -> None:
        super().__init__(message)
        self.id = id
        self.message = message


class _Parser:
    def __init__(self, src: str, macros: dict[tuple[str, int, bool], MacroExpander], optional_syntax: bool) -> None:
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0
        self.next_id = 1
        self.offsets: dict[int, int] = {}
        self.macros = macros
        self.optional_syntax = optional_syntax
        self.depth: dict[str, int] = {}
        self.issues: list[Issue] = []

    # -- helpers

    def new_id(self, offset: int) -> int:
        id = self.next_id
        self.next_id += 1
        self.offsets[id] = offset
        return id

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        tok = self.toks[self.i]
        return tok.text == text and tok.kind in ("op", "ident")

    def take(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.peek()
        if not self.at(text):
            self.fail(tok, f"mismatched input '{tok.text}' expecting '{text}'")
        return self.take()

    def fail(self, tok: Token, message: str) -> None:
        raise ParseError([Issue(tok.pos, "Syntax error: " + message)])

    def enter(self, rule: str) -> None:
        d = self.depth.get(rule, 0) + 1
        self.depth[rule] = d
        if d > MAX_RECURSION_DEPTH:
            raise ParseError([Issue(-1, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")])

    def leave(self, rule: str, levels: int = 1) -> None:
        self.depth[rule] -= levels

    # -- grammar

    def parse(self) -> Expr:
        e = self.expr()
        tok = self.peek()
        if tok.kind != "eof":
            self.fail(tok, f"extraneous input '{tok.text}' expecting <EOF>")
        return e

    def expr(self) -> Expr:
        self.enter("expr")
        try:
            cond = self.logical("conditionalOr", "||", "_||_", lambda: self.logical("conditionalAnd", "&&", "_&&_", self.relation))
            if not self.at("?"):
                return cond
            op = self.take()
            op_id = self.new_id(op.pos)
            then = self.logical("conditionalOr", "||", "_||_", lambda: self.logical("conditionalAnd", "&&", "_&&_", self.relation))
            self.expect(":")
            other = self.expr()
            return self.global_call(op_id, "_?_:_", [cond, then, other])
        finally:
            self.leave("expr")

    def logical(self, rule: str, op_text: str, function: str, operand: Callable[[], Expr]) -> Expr:
        self.enter(rule)
        try:
            terms = [operand()]
            ops: list[int] = []
            while self.at(op_text):
                ops.append(self.new_id(self.take().pos))
                terms.append(operand())
            if len(terms) == 1:
                return terms[0]
            return self._balanced(function, terms, ops, 0, len(ops) - 1)
        finally:
            self.leave(rule)

    def _balanced(self, function: str, terms: list[Expr], ops: list[int], lo: int, hi: int) -> Expr:
        mid = (lo + hi + 1) // 2
        left = terms[mid] if mid == lo else self._balanced(function, terms, ops, lo, mid - 1)
        right = terms[mid + 1] if mid == hi else self._balanced(function, terms, ops, mid + 1, hi)
        return Call(ops[mid], function, None, [left, right])

    def relation(self) -> Expr:
        return self._binary("relation", _RELATIONS, self.additive)

    def additive(self) -> Expr:
        return self._binary("calc", _ADDITIVE, self.multiplicative)

    def multiplicative(self) -> Expr:
        # The grammar has one rule (calc) for both levels: only its operators nest here.
        return self._binary("calc", _MULTIPLICATIVE, self.unary, entry=False)

    def _binary(self, rule: str, table: dict[str, str], operand: Callable[[], Expr], entry: bool = True) -> Expr:
        levels = 0
        if entry:
            self.enter(rule)
            levels = 1
        try:
            node = operand()
            while True:
                tok = self.peek()
                fn = table.get(tok.text) if tok.kind in ("op", "ident") else None
                if fn is None or (tok.text == "in" and tok.kind != "ident"):
                    return node
                self.take()
                self.enter(rule)  # each application of a left-recursive rule nests one level
                levels += 1
                op_id = self.new_id(tok.pos)
                node = self.global_call(op_id, fn, [node, operand()])
        finally:
            self.leave(rule, levels)

    def unary(self) -> Expr:
        self.enter("unary")
        try:
            tok = self.peek()
            if tok.kind == "op" and tok.text in ("!", "-"):
                ops = []
                while self.peek().kind == "op" and self.peek().text == tok.text:
                    ops.append(self.take())
                if tok.text == "-" and self.peek().kind in ("int", "float"):
                    # The literal takes the last '-' as its sign (so -9223372036854775808 parses).
                    sign = ops.pop()
                    operand = self.member(self.literal(self.take(), sign))
                else:
                    operand = self.member()
                if len(ops) % 2 == 0:
                    return operand
                op_id = self.new_id(ops[0].pos)
                return self.global_call(op_id, "!_" if tok.text == "!" else "-_", [operand])
            return self.member()
        finally:
            self.leave("unary")

    def member(self, node: Expr | None = None) -> Expr:
        self.enter("member")
        levels = 1
        try:
            if node is None:
                node = self.primary()
            while True:
                tok = self.peek()
                if tok.kind != "op" or tok.text not in (".", "["):
                    return node
                self.enter("member")
                levels += 1
                self.take()
                if tok.text == ".":
                    optional = False
                    if self.at("?"):
                        optional = True
                        self.take()
                    name_tok = self.take()
                    if name_tok.kind == "escident":
                        name = name_tok.text[1:-1]
                    elif name_tok.kind == "ident":
                        name = name_tok.text
                    else:
                        self.fail(name_tok, f"mismatched input '{name_tok.text}' expecting IDENTIFIER")
                    if not optional and name_tok.kind == "ident" and self.at("("):
                        open_tok = self.take()
                        op_id = self.new_id(open_tok.pos)
                        args = self.expr_list(")")
                        node = self.receiver_call(op_id, name, node, args)
                        continue
                    if optional:
                        if not self.optional_syntax:
                            raise ParseError([Issue(tok.pos, "unsupported syntax '.?'")])
                        op_id = self.new_id(tok.pos)
                        node = Call(op_id, "_?._", None, [node, Literal(self.new_id(name_tok.pos), name)])
                    else:
                        node = Select(self.new_id(tok.pos), node, name)
                else:
                    optional = False
                    if self.at("?"):
                        optional = True
                        self.take()
                        if not self.optional_syntax:
                            raise ParseError([Issue(tok.pos, "unsupported syntax '[?'")])
                    op_id = self.new_id(tok.pos)
                    index = self.expr()
                    self.expect("]")
                    node = self.global_call(op_id, "_[?_]" if optional else "_[_]", [node, index])
        finally:
            self.leave("member", levels)

    def expr_list(self, close: str) -> list[Expr]:
        out: list[Expr] = []
        if self.at(close):
            self.take()
            return out
        while True:
            out.append(self.expr())
            if self.at(close):
                self.take()
                return out
            tok = self.peek()
            if not self.at(","):
                self.fail(
                    tok,
                    f"mismatched input '{tok.text}' expecting {{')', ','}}"
                    if close == ")"
                    else f"mismatched input '{tok.text}' expecting {{'{close}', ','}}",
                )
            self.take()

    def primary(self) -> Expr:
        self.enter("primary")
        try:
            tok = self.take()
            if tok.kind == "ident" or (tok.kind == "op" and tok.text == "."):
                return self.ident_or_call(tok)
            if tok.kind == "op":
                if tok.text == "(":
                    e = self.expr()
                    self.expect(")")
                    return e
                if tok.text == "[":
                    return self.create_list(tok)
                if tok.text == "{":
                    return self.create_map(tok)
            if tok.kind in ("int", "uint", "float", "string", "bytes"):
                return self.literal(tok)
            if tok.kind == "eof":
                self.fail(
                    tok,
                    "mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
                )
            self.fail(
                tok,
                f"extraneous input '{tok.text}' expecting {{'[', '{{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}}",
            )
            raise AssertionError  # unreachable
        finally:
            self.leave("primary")

    def ident_or_call(self, tok: Token) -> Expr:
        leading_dot = ""
        if tok.kind == "op":  # '.' IDENT
            leading_dot = "."
            tok = self.take()
            if tok.kind != "ident":
                self.fail(tok, f"mismatched input '{tok.text}' expecting IDENTIFIER")
        if tok.text in ("true", "false", "null") and not leading_dot:
            return Literal(self.new_id(tok.pos), None if tok.text == "null" else tok.text == "true")
        # Message construction: IDENT ('.' IDENT)* '{'
        k = 0
        while self.peek(k).text == "." and self.peek(k + 1).kind == "ident":
            k += 2
        if self.peek(k).text == "{" and self.peek(k).kind == "op":
            names = [tok.text]
            for _ in range(k // 2):
                self.take()
                names.append(self.take().text)
            open_tok = self.take()
            return self.create_struct(open_tok, leading_dot + ".".join(names))
        name = tok.text
        if name in RESERVED:
            raise ParseError([Issue(tok.pos, f"reserved identifier: {name}")])
        if self.at("("):
            open_tok = self.take()
            op_id = self.new_id(open_tok.pos)
            return self.global_call(op_id, leading_dot + name, self.expr_list(")"))
        return Ident(self.new_id(tok.pos), leading_dot + name)

    def optional_marker(self) -> bool:
        """An optional entry's leading '?' (only with optional syntax enabled)."""
        if not self.at("?"):
            return False
        q = self.take()
        if not self.optional_syntax:
            raise ParseError([Issue(q.pos, "unsupported syntax '?'")])
        return True

    def separator(self, close: str) -> None:
        """After an entry: a comma, or the closing bracket (left for the caller)."""
        if self.at(","):
            self.take()
        elif not self.at(close):
            tok = self.peek()
            self.fail(tok, f"mismatched input '{tok.text}' expecting {{'{close}', ','}}")

    def create_list(self, open_tok: Token) -> Expr:
        list_id = self.new_id(open_tok.pos)
        elements: list[Expr] = []
        optionals: set[int] = set()
        while not self.at("]"):
            if self.optional_marker():
                optionals.add(len(elements))
            elements.append(self.expr())
            self.separator("]")
        self.take()
        return CreateList(list_id, elements, frozenset(optionals))

    def create_map(self, open_tok: Token) -> Expr:
        map_id = self.new_id(open_tok.pos)
        entries: list[MapEntry] = []
        while not self.at("}"):
            optional = self.optional_marker()
            key = self.expr()
            colon = self.expect(":")
            value = self.expr()
            entries.append(MapEntry(self.new_id(colon.pos), key, value, optional))
            self.separator("}")
        self.take()
        return CreateMap(map_id, entries)

    def create_struct(self, open_tok: Token, type_name: str) -> Expr:
        struct_id = self.new_id(open_tok.pos)
        fields: list[FieldInit] = []
        while not self.at("}"):
            optional = self.optional_marker()
            name_tok = self.take()
            if name_tok.kind not in ("ident", "escident"):
                self.fail(name_tok, f"mismatched input '{name_tok.text}' expecting IDENTIFIER")
            name = name_tok.text[1:-1] if name_tok.kind == "escident" else name_tok.text
            colon = self.expect(":")
            value = self.expr()
            fields.append(FieldInit(self.new_id(colon.pos), name, value, optional))
            self.separator("}")
        self.take()
        return CreateStruct(struct_id, type_name, fields)

    def literal(self, tok: Token, sign: Token | None = None) -> Expr:
        start = sign.pos if sign is not None else tok.pos
        text = tok.text
        try:
            if tok.kind == "string":
                return Literal(self.new_id(start), unescape(text, False))
            if tok.kind == "bytes":
                return Literal(self.new_id(start), unescape(text[1:], True))
        except ValueError as exc:
            raise ParseError([Issue(tok.pos, str(exc))]) from None
        if tok.kind == "float":
            value = float(text)
            return Literal(self.new_id(start), -value if sign is not None else value)
        if tok.kind == "uint":
            digits = text[:-1]
            v = int(digits, 16) if digits.startswith("0x") else int(digits)
            if v > UINT64_MAX:
                raise ParseError([Issue(start, "invalid uint literal")])
            return Literal(self.new_id(start), UInt(v))
        v = int(text, 16) if text.startswith("0x") else int(text)
        if sign is not None:
            v = -v
        if not -(2**63) <= v <= INT64_MAX:
            raise ParseError([Issue(start, "invalid int literal")])
        return Literal(self.new_id(start), v)

    # -- macros

    def global_call(self, id: int, function: str, args: list[Expr]) -> Expr:
        return self._call_or_macro(id, function, None, args)

    def receiver_call(self, id: int, function: str, target: Expr, args: list[Expr]) -> Expr:
        return self._call_or_macro(id, function, target, args)

    def _call_or_macro(self, id: int, function: str, target: Expr | None, args: list[Expr]) -> Expr:
        expander = self.macros.get((function, len(args), target is not None))
        if expander is not None:
            try:
                expanded = expander(self, id, target, args)
            except _MacroError as exc:
                raise ParseError([Issue(self.offsets.get(exc.id, self.offsets.get(id, -1)), exc.message)]) from None
            if expanded is not None:
                return expanded
        return Call(id, function, target, args)

    def macro_id(self, call_id: int) -> int:
        return self.new_id(self.offsets.get(call_id, -1))

    def copy(self, e: Expr, call_id: int) -> Expr:
        """A deep copy with fresh ids (macros that use an expression twice)."""
        nid = self.new_id(self.offsets.get(e.id, -1))
        if isinstance(e, Literal):
            return Literal(nid, e.value)
        if isinstance(e, Ident):
            return Ident(nid, e.name)
        if isinstance(e, Select):
            return Select(nid, self.copy(e.operand, call_id), e.field, e.test_only)
        if isinstance(e, Call):
            target = self.copy(e.target, call_id) if e.target is not None else None
            return Call(nid, e.function, target, [self.copy(a, call_id) for a in e.args])
        if isinstance(e, CreateList):
            return CreateList(nid, [self.copy(x, call_id) for x in e.elements], e.optional_indices)
        if isinstance(e, CreateMap):
            return CreateMap(
                nid,
                [
                    MapEntry(
                        self.new_id(self.offsets.get(en.id, -1)), self.copy(en.key, call_id), self.copy(en.value, call_id), en.optional
                    )
                    for en in e.entries
                ],
            )
        if isinstance(e, CreateStruct):
            return CreateStruct(
                nid,
                e.type_name,
                [FieldInit(self.new_id(self.offsets.get(f.id, -1)), f.name, self.copy(f.value, call_id), f.optional) for f in e.fields],
            )
        assert isinstance(e, Comprehension)
        return Comprehension(
            nid, self.copy(e.iter_range, call_id), e.iter_var, e.iter_var2, e.accu_var, self.copy(e.accu_init, call_id),
            self.copy(e.loop_condition, call_id), self.copy(e.loop_step, call_id), self.copy(e.result, call_id),
        )  # fmt: skip


def qualified_name(e: Expr) -> str | None:
    """``a.b.c`` for a chain of field selections on an identifier (not presence tests), else None."""
    parts: list[str] = []
    while isinstance(e, Select):
        if e.test_only:
            return None
        parts.append(e.field)
        e = e.operand
    if isinstance(e, Ident):
        parts.append(e.name)
        return ".".join(reversed(parts))
    return None


def _ident_name(e: Expr) -> str | None:
    return e.name if isinstance(e, Ident) else None


def _accu(p: _Parser, cid: int) -> Ident:
    return Ident(p.macro_id(cid), ACCUMULATOR)


def _iter_var(e: Expr, message: str = "argument must be a simple name") -> str:
    name = _ident_name(e)
    if name is None:
        raise _MacroError(e.id, message)
    if name in (ACCUMULATOR, "__result__"):
        raise _MacroError(e.id, "iteration variable overwrites accumulator variable")
    return name


def _quantifier(kind: str, two: bool) -> MacroExpander:
    def expand(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
        assert target is not None
        v1 = _iter_var(args[0])
        v2 = None
        if two:
            v2 = _iter_var(args[1])
            if v1 == v2:
                raise _MacroError(args[1].id, f"duplicate variable name: {v1}")
        pred = args[-1]
        m = p.macro_id
        if kind == "all":
            init: Expr = Literal(m(cid), True)
            cond: Expr = Call(m(cid), "@not_strictly_false", None, [_accu(p, cid)])
            step: Expr = Call(m(cid), "_&&_", None, [_accu(p, cid), pred])
            result: Expr = _accu(p, cid)
        elif kind == "exists":
            init = Literal(m(cid), False)
            cond = Call(m(cid), "@not_strictly_false", None, [Call(m(cid), "!_", None, [_accu(p, cid)])])
            step = Call(m(cid), "_||_", None, [_accu(p, cid), pred])
            result = _accu(p, cid)
        else:
            init = Literal(m(cid), 0)
            cond = Literal(m(cid), True)
            step = Call(m(cid), "_?_:_", None, [pred, Call(m(cid), "_+_", None, [_accu(p, cid), Literal(m(cid), 1)]), _accu(p, cid)])
            result = Call(m(cid), "_==_", None, [_accu(p, cid), Literal(m(cid), 1)])
        return Comprehension(m(cid), target, v1, v2, ACCUMULATOR, init, cond, step, result)

    return expand


def _map_macro(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
    assert target is not None
    v = _iter_var(args[0], "argument is not an identifier")
    fn = args[-1]
    m = p.macro_id
    step: Expr = Call(m(cid), "_+_", None, [_accu(p, cid), CreateList(m(cid), [fn])])
    if len(args) == 3:
        step = Call(m(cid), "_?_:_", None, [args[1], step, _accu(p, cid)])
    return Comprehension(m(cid), target, v, None, ACCUMULATOR, CreateList(m(cid), []), Literal(m(cid), True), step, _accu(p, cid))


def _filter_macro(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
    assert target is not None
    v = _iter_var(args[0], "argument is not an identifier")
    m = p.macro_id
    step: Expr = Call(m(cid), "_+_", None, [_accu(p, cid), CreateList(m(cid), [args[0]])])
    step = Call(m(cid), "_?_:_", None, [args[1], step, _accu(p, cid)])
    return Comprehension(m(cid), target, v, None, ACCUMULATOR, CreateList(m(cid), []), Literal(m(cid), True), step, _accu(p, cid))


def _has_macro(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
    arg = args[0]
    if isinstance(arg, Select):
        return Select(p.macro_id(cid), arg.operand, arg.field, test_only=True)
    raise _MacroError(arg.id, "invalid argument to has() macro")


def _transform(kind: str) -> MacroExpander:
    def expand(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
        assert target is not None
        v1 = _iter_var(args[0])
        v2 = _iter_var(args[1])
        if v1 == v2:
            raise _MacroError(args[1].id, f"duplicate variable name: {v1}")
        m = p.macro_id
        transform = args[-1]
        step: Expr
        if kind == "list":
            step = Call(m(cid), "_+_", None, [_accu(p, cid), CreateList(m(cid), [transform])])
            init: Expr = CreateList(m(cid), [])
        elif kind == "map":
            step = Call(m(cid), "cel.@mapInsert", None, [_accu(p, cid), Ident(m(cid), v1), transform])
            init = CreateMap(m(cid), [])
        else:
            step = Call(m(cid), "cel.@mapInsert", None, [_accu(p, cid), transform])
            init = CreateMap(m(cid), [])
        if len(args) == 4:
            step = Call(m(cid), "_?_:_", None, [args[2], step, _accu(p, cid)])
        return Comprehension(m(cid), target, v1, v2, ACCUMULATOR, init, Literal(m(cid), True), step, _accu(p, cid))

    return expand


def _is_namespace(target: Expr | None, name: str) -> bool:
    return isinstance(target, Ident) and target.name == name


def _bind_macro(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr | None:
    if not _is_namespace(target, "cel"):
        return None
    name = _ident_name(args[0])
    if name is None:
        raise _MacroError(args[0].id, "cel.bind() variable names must be simple identifiers")
    m = p.macro_id
    return Comprehension(
        m(cid), CreateList(m(cid), []), UNUSED_ITER_VAR, None, name, args[1], Literal(m(cid), False), Ident(m(cid), name), args[2]
    )


def _opt_map(flat: bool) -> MacroExpander:
    def expand(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
        assert target is not None
        name = _ident_name(args[0])
        if name is None:
            which = "optFlatMap" if flat else "optMap"
            raise _MacroError(args[0].id, f"{which}() variable name must be a simple identifier")
        m = p.macro_id
        value = Call(m(cid), "value", p.copy(target, cid), [])
        body: Expr = Comprehension(
            m(cid), CreateList(m(cid), []), UNUSED_ITER_VAR, None, name, value, Literal(m(cid), False), Ident(m(cid), name), args[1]
        )
        if not flat:
            body = Call(m(cid), "optional.of", None, [body])
        has_value = Call(m(cid), "hasValue", target, [])
        return Call(m(cid), "_?_:_", None, [has_value, body, Call(m(cid), "optional.none", None, [])])

    return expand


_SORTBY_VAR = "@__sortBy_input__"


def _sort_by(p: _Parser, cid: int, target: Expr | None, args: list[Expr]) -> Expr:
    assert target is not None
    if not isinstance(target, CreateList | Select | Ident | Comprehension | Call):
        raise _MacroError(target.id, "sortBy can only be applied to a list, identifier, comprehension, call or select expression")
    m = p.macro_id
    mapped = _map_macro(p, cid, Ident(m(cid), _SORTBY_VAR), args)
    call = Call(m(cid), "@sortByAssociatedKeys", Ident(m(cid), _SORTBY_VAR), [mapped])
    return Comprehension(
        m(cid), CreateList(m(cid), []), UNUSED_ITER_VAR, None, _SORTBY_VAR, target, Literal(m(cid), False), Ident(m(cid), _SORTBY_VAR), call
    )


STANDARD_MACROS: dict[tuple[str, int, bool], MacroExpander] = {
    ("has", 1, False): _has_macro,
    ("all", 2, True): _quantifier("all", False),
    ("exists", 2, True): _quantifier("exists", False),
    ("exists_one", 2, True): _quantifier("exists_one", False),
    ("existsOne", 2, True): _quantifier("exists_one", False),
    ("map", 2, True): _map_macro,
    ("map", 3, True): _map_macro,
    ("filter", 2, True): _filter_macro,
}
BINDINGS_MACROS: dict[tuple[str, int, bool], MacroExpander] = {("bind", 3, True): _bind_macro}
OPTIONAL_MACROS: dict[tuple[str, int, bool], MacroExpander] = {
    ("optMap", 2, True): _opt_map(False),
    ("optFlatMap", 2, True): _opt_map(True),
}
TWO_VAR_MACROS: dict[tuple[str, int, bool], MacroExpander] = {
    ("all", 3, True): _quantifier("all", True),
    ("exists", 3, True): _quantifier("exists", True),
    ("existsOne", 3, True): _quantifier("exists_one", True),
    ("exists_one", 3, True): _quantifier("exists_one", True),
    ("transformList", 3, True): _transform("list"),
    ("transformList", 4, True): _transform("list"),
    ("transformMap", 3, True): _transform("map"),
    ("transformMap", 4, True): _transform("map"),
    ("transformMapEntry", 3, True): _transform("entry"),
    ("transformMapEntry", 4, True): _transform("entry"),
}
LISTS_MACROS: dict[tuple[str, int, bool], MacroExpander] = {("sortBy", 2, True): _sort_by}


def parse(source: str, macros: dict[tuple[str, int, bool], MacroExpander], optional_syntax: bool = True) -> ParsedAST:
    """Parse ``source``; raises ParseError with cel-go's messages."""
    if len(source) > MAX_CODE_POINTS:
        raise ParseError([Issue(-1, f"expression code point size exceeds limit: size: {len(source)}, limit {MAX_CODE_POINTS}")])
    p = _Parser(source, macros, optional_syntax)
    expr = p.parse()
    return ParsedAST(expr, source, p.offsets)
