"""resource.Quantity: parsing, exact arithmetic and canonical strings as apimachinery does them.

A quantity is held as ``mantissa * 10**exponent`` with Python ints, so every value a quantity
string can denote is exact (binary suffixes only multiply by powers of two) and no float is ever
involved. Objects are immutable; arithmetic returns new objects.

Behaviour follows k8s.io/apimachinery v1.37, including its quirks:

* parsing rounds non-zero values up (away from zero) to nano precision, caps BinarySI values at
  2**63-1, and turns BinarySI values between 0 and 1 into DecimalSI;
* a string that upstream's parse fast path considers canonical is echoed back verbatim by
  :meth:`Quantity.canonical` (``"1.441"``, ``"+5"``, ``"05"``, ``"1E3"`` stay as written), exactly
  like ``Quantity.String()``; arithmetic drops that cached spelling;
* exponents are truncated to 32 bits the way upstream stores them (``"1e4294967297"`` is ``10``).

Deliberate differences: inputs on which upstream hangs (exponents near the int32 limits) are
answered instead; a BinarySI value of 1024**7 or more keeps an ``Ei`` suffix instead of losing its
suffix; :meth:`Quantity.value` rounds negative fractions away from zero in every case and saturates
at the int64 range.
"""

from __future__ import annotations

import functools
from fractions import Fraction

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_NANO = -9
# Adding two quantities aligns their exponents by writing out 10**difference; refuse absurd ones
# rather than allocate gigabytes (upstream hangs on them).
_MAX_ALIGN = 100_000

_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIXES = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX_OF = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_OF = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# Go's strings.TrimSpace set (unicode.IsSpace); str.strip() would also drop \x1c-\x1f.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
    "\u2028\u2029\u202f\u205f\u3000"


class QuantityError(ValueError):
    """A string that is not a valid quantity; the message is upstream's error text."""


def _wrap_int32(value: int) -> int:
    return ((value + (1 << 31)) % (1 << 32)) - (1 << 31)


def _parse_go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign, ASCII digits, int64 range."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all(c in _DIGITS for c in body):
        return None
    value = int(text)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value


def _ndigits(value: int) -> int:
    return len(str(abs(value)))


def _normalize(mantissa: int, exponent: int) -> tuple[int, int]:
    if mantissa == 0:
        return 0, 0
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    return mantissa, exponent


def _round_away(mantissa: int, shift: int) -> int:
    """``mantissa / 10**shift`` rounded away from zero (shift > 0)."""
    if mantissa == 0:
        return 0
    sign = -1 if mantissa < 0 else 1
    magnitude = abs(mantissa)
    if shift > _ndigits(magnitude):
        return sign
    quotient, remainder = divmod(magnitude, 10**shift)
    return sign * (quotient + (1 if remainder else 0))


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """Split ``text`` into sign, numeric part, integer digits, fraction digits and suffix.

    Mirrors upstream's hand-written scanner, which is more lenient than the regular expression
    quoted in its error (``"-"``, ``"."`` and ``"k"`` all scan, as zero).
    """
    end = len(text)
    pos = 0
    positive = True
    if text[0] == "-":
        positive = False
        pos = 1
    elif text[0] == "+":
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, text, text[pos:], "", ""
    num = text[pos:i] or "0"
    pos = i
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        if i >= end:
            return positive, text, num, text[pos:], ""
        denom = text[pos:i]
        pos = i
    value = text[:pos]
    suffix_start = pos
    i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    raise QuantityError(ERR_FORMAT_WRONG)


def _interpret_suffix(suffix: str) -> tuple[int, int, str]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        parsed = _parse_go_int64(suffix[1:])
        if parsed is not None:
            return 10, _wrap_int32(parsed), DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def _parse_text(text: str) -> Quantity:
    if not text:
        raise QuantityError(ERR_FORMAT_WRONG)
    if text == "0":
        return Quantity._make(0, 0, DECIMAL_SI, "0")
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret_suffix(suffix)

    # Upstream's int64 fast path decides both which inputs are accepted and whether the input
    # spelling is kept as the canonical string, so its conditions are reproduced exactly.
    multiplier = 1
    if fmt == BINARY_SI:
        scale = 0
        if denom:
            precision = -1
        else:
            multiplier = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            digits = int(shifted)
            result = digits * multiplier
            if result <= _INT64_MAX:
                if not positive:
                    result = -result
                cached: str | None = None
                if fmt == BINARY_SI:
                    if exponent % 10 == 0 and digits & 0x07:
                        cached = text
                elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                    cached = text
                return Quantity._make(result, scale, fmt, cached)

    if not any(c in _DIGITS for c in value):
        raise QuantityError(ERR_NUMERIC)
    body = value.lstrip("+-")
    int_part, _, frac_part = body.partition(".")
    mantissa = int((int_part + frac_part) or "0")
    exp10 = -len(frac_part)
    if base == 10:
        exp10 += exponent
    else:
        mantissa <<= exponent
    if mantissa and exp10 < _NANO:
        mantissa = _round_away(mantissa, _NANO - exp10)
        exp10 = _NANO
    if fmt == BINARY_SI:
        if _cmp_parts(mantissa, exp10, _INT64_MAX, 0) > 0:
            mantissa, exp10 = _INT64_MAX, 0
        if mantissa and _cmp_parts(mantissa, exp10, 1, 0) < 0:
            fmt = DECIMAL_SI
    if value.startswith("-"):
        mantissa = -mantissa
    return Quantity._make(mantissa, exp10, fmt, None)


@functools.lru_cache(maxsize=8192)
def _parse_cached(text: str) -> Quantity:
    return _parse_text(text.strip(_GO_SPACE))


def _cmp_parts(m1: int, e1: int, m2: int, e2: int) -> int:
    """Compare ``m1*10**e1`` with ``m2*10**e2`` without writing out huge powers of ten."""
    s1 = (m1 > 0) - (m1 < 0)
    s2 = (m2 > 0) - (m2 < 0)
    if s1 != s2 or s1 == 0:
        return (s1 > s2) - (s1 < s2)
    if e1 == e2:
        return (m1 > m2) - (m1 < m2)
    if abs(e1 - e2) > 40:
        adj1 = e1 + _ndigits(m1)
        adj2 = e2 + _ndigits(m2)
        if adj1 != adj2:
            return s1 if adj1 > adj2 else -s1
    low = min(e1, e2)
    a = m1 * 10 ** (e1 - low)
    b = m2 * 10 ** (e2 - low)
    return (a > b) - (a < b)


class Quantity:
    """An immutable resource.Quantity."""

    __slots__ = ("_cached", "_e", "_format", "_m")

    _m: int
    _e: int
    _format: str
    _cached: str | None

    def __init__(self, value: int = 0, fmt: str = DECIMAL_SI) -> None:
        """An integer quantity, like upstream's ``NewQuantity(value, format)``."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("Quantity() takes an int; use Quantity.parse() for strings")
        self._m, self._e = _normalize(value, 0)
        self._format = fmt
        self._cached = None

    @classmethod
    def _make(cls, mantissa: int, exponent: int, fmt: str, cached: str | None = None) -> Quantity:
        q = object.__new__(cls)
        q._m, q._e = _normalize(mantissa, exponent)
        q._format = fmt
        q._cached = cached
        return q

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | int | float) -> Quantity:
        """Parse a quantity as the API server decodes it from JSON (surrounding spaces ignored).

        An int is parsed from its decimal text, as a JSON number would be. A float is parsed from
        ``repr()``, which may differ from the JSON text it came from (``1e3`` arrives as ``1000.0``);
        decode JSON with ``parse_float=str`` to keep the original spelling.
        """
        if isinstance(text, str):
            return _parse_cached(text)
        if isinstance(text, bool):
            raise QuantityError(ERR_FORMAT_WRONG)
        if isinstance(text, int):
            return _parse_cached(str(text))
        if isinstance(text, float):
            if text != text or text in (float("inf"), float("-inf")):
                raise QuantityError(ERR_FORMAT_WRONG)
            return _parse_cached(repr(text))
        raise QuantityError(ERR_FORMAT_WRONG)

    @classmethod
    def from_milli(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        """``value / 1000`` (upstream ``NewMilliQuantity``)."""
        return cls._make(value, -3, fmt)

    @classmethod
    def from_scaled(cls, value: int, scale: int) -> Quantity:
        """``value * 10**scale`` in DecimalSI (upstream ``NewScaledQuantity``)."""
        return cls._make(value, scale, DECIMAL_SI)

    # --- accessors ----------------------------------------------------------------------------

    @property
    def format(self) -> str:
        """The suffix family the quantity is printed in: DecimalSI, BinarySI or DecimalExponent."""
        return self._format

    @property
    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._m > 0) - (self._m < 0)

    def is_zero(self) -> bool:
        """Whether the value is zero."""
        return self._m == 0

    def as_fraction(self) -> Fraction:
        """The exact value as a Fraction (writes out 10**exponent, so keep exponents sane)."""
        if self._e >= 0:
            return Fraction(self._m * 10**self._e)
        return Fraction(self._m, 10**-self._e)

    def scaled_value(self, scale: int) -> int:
        """``value / 10**scale`` rounded away from zero, saturated to the int64 range."""
        if self._m == 0:
            return 0
        exponent = self._e - scale
        if exponent < 0:
            return _round_away(self._m, -exponent)
        if exponent >= 19:
            return _INT64_MAX if self._m > 0 else _INT64_MIN
        return max(_INT64_MIN, min(_INT64_MAX, self._m * 10**exponent))

    def value(self) -> int:
        """The value rounded away from zero to an integer (upstream ``Value()``)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """``value * 1000`` rounded away from zero (upstream ``MilliValue()``)."""
        return self.scaled_value(-3)

    # --- formatting ---------------------------------------------------------------------------

    def canonical(self) -> str:
        """The string upstream serializes this quantity as (``Quantity.String()``)."""
        if self._cached is not None:
            return self._cached
        return self._canonical_uncached()

    def _canonical_uncached(self) -> str:
        m, e = self._m, self._e
        if m == 0:
            return "0"
        sign = "-" if m < 0 else ""
        m = abs(m)
        fmt = self._format
        if fmt == BINARY_SI:
            if _cmp_parts(m, e, 1024, 0) < 0 or e < 0:
                # Small or fractional BinarySI values print as DecimalSI so no precision is lost.
                fmt = DECIMAL_SI
            else:
                n = m * 10**e
                power = 0
                while power < 6 and n % 1024 == 0:
                    n //= 1024
                    power += 1
                return f"{sign}{n}{_BINARY_SUFFIX_OF[power]}"
        elif fmt != DECIMAL_SI:
            fmt = DECIMAL_EXPONENT
        rem = e % 3
        if rem:
            m *= 10**rem
            e -= rem
        if fmt == DECIMAL_SI:
            suffix = _DECIMAL_SUFFIX_OF.get(e)
            if suffix is None:
                suffix = f"e{e}"
        else:
            suffix = f"e{e}" if e else ""
        return f"{sign}{m}{suffix}"

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r}, {self._format})"

    # --- comparison ---------------------------------------------------------------------------

    @staticmethod
    def _coerce(other: object) -> Quantity | None:
        if isinstance(other, Quantity):
            return other
        if isinstance(other, int) and not isinstance(other, bool):
            return Quantity(other)
        return None

    def compare(self, other: Quantity | int) -> int:
        """-1, 0 or 1 as self is less than, equal to or greater than other (upstream ``Cmp``)."""
        o = self._coerce(other)
        if o is None:
            raise TypeError(f"cannot compare Quantity with {type(other).__name__}")
        return _cmp_parts(self._m, self._e, o._m, o._e)

    def __eq__(self, other: object) -> bool:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._m == o._m and self._e == o._e

    def __hash__(self) -> int:
        if 0 <= self._e <= 30:
            return hash(self._m * 10**self._e)
        return hash((self._m, self._e))

    def __lt__(self, other: Quantity | int) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: Quantity | int) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: Quantity | int) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: Quantity | int) -> bool:
        return self.compare(other) >= 0

    def __bool__(self) -> bool:
        return self._m != 0

    # --- arithmetic ---------------------------------------------------------------------------

    def _combine(self, other: Quantity, negate: bool) -> Quantity:
        om = -other._m if negate else other._m
        # Upstream: adding to (or subtracting from) zero adopts the other operand's format.
        fmt = other._format if self._m == 0 else self._format
        if om == 0:
            return Quantity._make(self._m, self._e, fmt)
        if self._m == 0:
            return Quantity._make(om, other._e, fmt)
        low = min(self._e, other._e)
        if max(self._e, other._e) - low > _MAX_ALIGN:
            raise OverflowError("quantities too far apart in magnitude to add exactly")
        total = self._m * 10 ** (self._e - low) + om * 10 ** (other._e - low)
        return Quantity._make(total, low, fmt)

    def __add__(self, other: Quantity | int) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._combine(o, negate=False)

    def __radd__(self, other: int) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o._combine(self, negate=False)

    def __sub__(self, other: Quantity | int) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self._combine(o, negate=True)

    def __rsub__(self, other: int) -> Quantity:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o._combine(self, negate=True)

    def __mul__(self, factor: int) -> Quantity:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity._make(self._m * factor, self._e, self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._m, self._e, self._format)

    def __abs__(self) -> Quantity:
        return Quantity._make(abs(self._m), self._e, self._format)

    def with_format(self, fmt: str) -> Quantity:
        """The same value printed in another format."""
        return Quantity._make(self._m, self._e, fmt)


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a quantity; raises QuantityError (a ValueError) with upstream's message."""
    return Quantity.parse(text)


def parse_quantity_or_none(text: object) -> Quantity | None:
    """Parse a quantity, or return None when ``text`` is missing or not a valid quantity."""
    if not isinstance(text, str | int | float) or isinstance(text, bool):
        return None
    try:
        return Quantity.parse(text)
    except QuantityError:
        return None


def canonicalize(text: str | int | float) -> str:
    """The string the API server stores for a quantity field given as ``text``."""
    return Quantity.parse(text).canonical()


ZERO = Quantity(0)
