"""Field selectors (k8s.io/apimachinery/pkg/fields): ``a=b,c!=d`` with backslash escaping.

Parse errors carry upstream's text, which kube-apiserver returns unchanged as a 400 BadRequest.
Which fields a kind supports is the server's business; it reports unknown ones with
:func:`unsupported_field_error` (kinds with a field-label conversion function, e.g. Pod,
ResourceSlice) or :func:`unknown_field_error` (kinds without one: metadata.name/namespace only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from kube.errors import ApiError, bad_request

EQUALS = "="
NOT_EQUALS = "!="
# "==" is checked before "=" so that "a==b" does not leave "=b" as the value.
_TERM_OPERATORS = ("!=", "==", "=")


def escape_value(value: str) -> str:
    """Escape ``\\``, ``,`` and ``=`` for use as a field selector value (upstream ``EscapeValue``)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(text: str) -> str:
    """Undo :func:`escape_value`; raises ApiError 400 on bad escapes or bare ``,``/``=``."""
    if not any(c in text for c in "\\,="):
        return text
    out: list[str] = []
    in_slash = False
    for ch in text:
        if in_slash:
            if ch not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            # Upstream formats the rune with %v, i.e. as its code point number.
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas not preceded by a backslash escape; escapes stay in the terms."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The first operator occurrence splits the term; the field name has no escaping."""
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


class FieldSelector:
    """An AND of ``field=value`` / ``field!=value`` terms; immutable."""

    __slots__ = ("_terms",)

    def __init__(self, requirements: list[tuple[str, str, str]] | None = None) -> None:
        self._terms: tuple[tuple[str, str, str], ...] = tuple(requirements or ())

    @property
    def requirements(self) -> list[tuple[str, str, str]]:
        """``(field, operator, value)`` triples; operator is ``"="`` or ``"!="``."""
        return list(self._terms)

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self._terms

    def fields(self) -> set[str]:
        """The field names the selector refers to."""
        return {field for field, _, _ in self._terms}

    def matches(self, get: Callable[[str], str]) -> bool:
        """Whether an object matches; ``get(field)`` returns the field's value ("" if unset)."""
        return all((get(field) == value) == (op == EQUALS) for field, op, value in self._terms)

    def matches_fields(self, fields: Mapping[str, str]) -> bool:
        """:meth:`matches` over a dict of field values (missing fields read as "")."""
        return self.matches(lambda name: fields.get(name, ""))

    def exact_value(self, field: str) -> str | None:
        """The value a ``field=value`` term requires (upstream ``RequiresExactMatch``), else None."""
        for name, op, value in self._terms:
            if name == field and op == EQUALS:
                return value
        return None

    def transform(self, fn: Callable[[str, str], tuple[str, str]]) -> FieldSelector:
        """Rewrite each (field, value); a term mapped to ("", "") is dropped, as upstream does."""
        terms = []
        for field, op, value in self._terms:
            new_field, new_value = fn(field, value)
            if new_field or new_value:
                terms.append((new_field, op, new_value))
        return FieldSelector(terms)

    def __str__(self) -> str:
        return ",".join(f"{field}{op}{escape_value(value)}" for field, op, value in self._terms)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._terms == other._terms

    def __hash__(self) -> int:
        return hash(self._terms)


EVERYTHING = FieldSelector()


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the ``fieldSelector`` syntax (upstream ``fields.ParseSelector``).

    Terms are sorted (as raw text) like upstream, so ``str()`` of the result is canonical.
    Errors raise ApiError 400 BadRequest with upstream's message.
    """
    terms: list[tuple[str, str, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw_value = split
        terms.append((field, NOT_EQUALS if op == NOT_EQUALS else EQUALS, unescape_value(raw_value)))
    return FieldSelector(terms)


def one_term_selector(field: str, value: str) -> FieldSelector:
    """``field=value`` without parsing (upstream ``OneTermEqualSelector``)."""
    return FieldSelector([(field, EQUALS, value)])


def unsupported_field_error(field: str, gvk: str | None = None) -> ApiError:
    """400 for a field a kind's field-label conversion rejects.

    Core kinds say ``field label not supported: X``; resource.k8s.io's ResourceSlice names its
    kind: pass ``gvk="resource.k8s.io/v1, Kind=ResourceSlice"``.
    """
    if gvk:
        return bad_request(f"field label not supported for {gvk}: {field}")
    return bad_request(f"field label not supported: {field}")


def unknown_field_error(field: str) -> ApiError:
    """400 for kinds without a conversion function (only metadata.name/namespace allowed)."""
    quoted = json.dumps(field, ensure_ascii=False)
    return bad_request(f'{quoted} is not a known field selector: only "metadata.name", "metadata.namespace"')
