"""Regular expressions with RE2 semantics, as cel-go's ``matches``/``find``/``findAll`` use them.

Go's regexp package and RE2 share one syntax and linear-time matching, so patterns that would
backtrack catastrophically under Python's ``re`` run in linear time here, and patterns RE2
refuses (backreferences, lookaround, possessive quantifiers) are refused. Errors are worded as
Go reports them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import re2

from kube.cel.types import EvalError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# RE2's error texts and Go's wording for the same problem.
_GO_WORDING = [
    ("missing ): ", "missing closing ): "),
    ("missing ]: ", "missing closing ]: "),
    ("bad repetition operator: ", "invalid nested repetition operator: "),
    ("invalid repetition size: ", "invalid repeat count: "),
    ("invalid perl operator: ", "invalid or unsupported Perl syntax: "),
    ("missing argument to repetition operator: ", "missing argument to repetition operator: "),
    ("invalid character class range: ", "invalid character class range: "),
    ("invalid character class: ", "invalid character class: "),
    ("invalid escape sequence: ", "invalid escape sequence: "),
    ("invalid named capture group: ", "invalid named capture group: "),
    ("unexpected ): ", "unexpected ): "),
    ("trailing \\", "trailing backslash at end of expression"),
]
# Go's regexp does not accept \C (match any byte), which RE2 does.
_ANY_BYTE = re.compile(r"(?<!\\)(?:\\\\)*\\C")


class RegexError(EvalError):
    pass


def _go_message(message: str) -> str:
    for prefix, go in _GO_WORDING:
        if message.startswith(prefix):
            rest = message[len(prefix) :]
            return f"error parsing regexp: {go}`{rest}`" if rest else f"error parsing regexp: {go}"
    return f"error parsing regexp: {message}"


@lru_cache(maxsize=512)
def _compile(pattern: str) -> Any:
    if _ANY_BYTE.search(pattern):
        raise RegexError("error parsing regexp: invalid escape sequence: `\\C`")
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else str(exc)
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RegexError(_go_message(str(detail))) from None


def compile_regex(pattern: str) -> Any:
    """A compiled RE2 pattern; raises RegexError with Go's message for invalid patterns."""
    return _compile(pattern)


def is_valid(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return True
    try:
        _compile(pattern)
    except RegexError:
        return False
    return True


def find(s: str, pattern: str) -> str:
    m = compile_regex(pattern).search(s)
    return m.group(0) if m is not None else ""


def find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's FindAllString: successive non-overlapping matches; an empty match right after the
    previous match is skipped."""
    if limit == 0:
        return []
    rx = compile_regex(pattern)
    out: list[str] = []
    pos = 0
    prev_end = -1
    n = len(s)
    while pos <= n and (limit < 0 or len(out) < limit):
        m = rx.search(s, pos)
        if m is None:
            break
        start, end = m.span()
        if end == start == prev_end:
            pos = start + 1
            continue
        out.append(m.group(0))
        prev_end = end
        pos = end if end > start else end + 1
    return out
