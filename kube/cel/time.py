"""CEL timestamps and durations (standard library), with Go's parsing and printing."""

from __future__ import annotations

import datetime
import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kube.cel.checker import Function
from kube.cel.library import fn, ov
from kube.cel.types import BOOL, DURATION, INT, LIBRARY_TYPES, STRING, TIMESTAMP, EvalError

NANOS = 1_000_000_000
_DURATION_MAX = 2**63 - 1
# Timestamps CEL allows: years 0001 to 9999.
_TS_MIN = -62135596800 * NANOS
_TS_MAX = 253402300799 * NANOS + NANOS - 1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class Duration:
    __slots__ = ("nanos",)
    go_type_name = "types.Duration"

    def __init__(self, nanos: int) -> None:
        if not -_DURATION_MAX - 1 <= nanos <= _DURATION_MAX:
            raise EvalError("duration overflow")
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(("duration", self.nanos))

    def cel_compare(self, other: Duration) -> int:
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def cel_is_zero(self) -> bool:
        return self.nanos == 0

    def cel_string(self) -> str:
        sign = "-" if self.nanos < 0 else ""
        secs, frac = divmod(abs(self.nanos), NANOS)
        text = str(secs)
        if frac:
            text += "." + f"{frac:09d}".rstrip("0")
        return sign + text + "s"

    def __add__(self, other: Duration) -> Duration:
        return Duration(self.nanos + other.nanos)

    def __repr__(self) -> str:
        return f"duration({self.cel_string()!r})"


class Timestamp:
    __slots__ = ("nanos",)
    go_type_name = "types.Timestamp"

    def __init__(self, nanos: int) -> None:
        if not _TS_MIN <= nanos <= _TS_MAX:
            raise EvalError("timestamp overflow")
        self.nanos = nanos

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(("timestamp", self.nanos))

    def cel_compare(self, other: Timestamp) -> int:
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def cel_is_zero(self) -> bool:
        return self.nanos == 0

    def datetime(self, tz: datetime.tzinfo = datetime.UTC) -> datetime.datetime:
        secs, _ = divmod(self.nanos, NANOS)
        return (_EPOCH + datetime.timedelta(seconds=secs)).astimezone(tz)

    def cel_string(self) -> str:
        secs, frac = divmod(self.nanos, NANOS)
        text = (_EPOCH + datetime.timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
        if frac:
            text += "." + f"{frac:09d}".rstrip("0")
        return text + "Z"

    def __repr__(self) -> str:
        return f"timestamp({self.cel_string()!r})"


LIBRARY_TYPES[Duration] = DURATION
LIBRARY_TYPES[Timestamp] = TIMESTAMP

_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": NANOS, "m": 60 * NANOS, "h": 3600 * NANOS}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> Duration:
    """Go's time.ParseDuration."""
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return Duration(0)
    if not s:
        raise EvalError(f'time: invalid duration "{text}"')
    total = 0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise EvalError(f'time: invalid duration "{text}"')
        number, unit = m.group(1), m.group(2)
        whole, _, frac = number.partition(".")
        value = int(whole or "0") * _UNITS[unit]
        if frac:
            value += int(frac) * _UNITS[unit] // 10 ** len(frac)
        total += value
        pos = m.end()
    if total > 2**63 - (0 if neg else 1):
        raise EvalError(f'time: invalid duration "{text}"')
    return Duration(-total if neg else total)


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})\Z")


def parse_timestamp(text: str) -> Timestamp:
    m = _RFC3339.match(text)
    if not m:
        raise EvalError("type conversion error from 'string' to 'google.protobuf.Timestamp'")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    try:
        dt = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    except ValueError:
        raise EvalError("type conversion error from 'string' to 'google.protobuf.Timestamp'") from None
    offset = m.group(8)
    delta = 0
    if offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            raise EvalError("type conversion error from 'string' to 'google.protobuf.Timestamp'")
        delta = sign * (oh * 3600 + om * 60)
    secs = int((dt - _EPOCH).total_seconds()) - delta
    nanos = int((frac + "000000000")[:9]) if frac else 0
    return Timestamp(secs * NANOS + nanos)


def _tz(name: str) -> datetime.tzinfo:
    m = re.fullmatch(r"([+-]?)(\d{1,2}):(\d{2})", name)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return datetime.timezone(sign * datetime.timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise EvalError(f"unknown time zone {name}") from None


def _getter(part: str) -> Any:
    def get(ts: Timestamp, tz: str = "UTC") -> int:
        dt = ts.datetime(_tz(tz))
        if part == "year":
            return dt.year
        if part == "month":
            return dt.month - 1
        if part == "day_of_year":
            return dt.timetuple().tm_yday - 1
        if part == "day_of_month":
            return dt.day - 1
        if part == "date":
            return dt.day
        if part == "day_of_week":
            return (dt.weekday() + 1) % 7
        if part == "hours":
            return dt.hour
        if part == "minutes":
            return dt.minute
        if part == "seconds":
            return dt.second
        return (ts.nanos % NANOS) // 1_000_000

    return get


def _ts_add(ts: Timestamp, d: Duration) -> Timestamp:
    return Timestamp(ts.nanos + d.nanos)


def time_library() -> list[Function]:
    t, d = TIMESTAMP, DURATION
    getters = [
        ("getFullYear", "year", "timestamp_to_year"),
        ("getMonth", "month", "timestamp_to_month"),
        ("getDayOfYear", "day_of_year", "timestamp_to_day_of_year"),
        ("getDayOfMonth", "day_of_month", "timestamp_to_day_of_month"),
        ("getDate", "date", "timestamp_to_day_of_month_1_based"),
        ("getDayOfWeek", "day_of_week", "timestamp_to_day_of_week"),
    ]
    out = [
        fn("timestamp", ov("timestamp_to_timestamp", (t,), t, lambda v: v), ov("string_to_timestamp", (STRING,), t, parse_timestamp),
           ov("int64_to_timestamp", (INT,), t, lambda v: Timestamp(v * NANOS))),
        fn("duration", ov("duration_to_duration", (d,), d, lambda v: v), ov("string_to_duration", (STRING,), d, parse_duration)),
        fn("_+_", ov("add_timestamp_duration", (t, d), t, _ts_add), ov("add_duration_timestamp", (d, t), t, lambda a, b: _ts_add(b, a)),
           ov("add_duration_duration", (d, d), d, lambda a, b: Duration(a.nanos + b.nanos))),
        fn("_-_", ov("subtract_timestamp_timestamp", (t, t), d, lambda a, b: Duration(a.nanos - b.nanos)),
           ov("subtract_timestamp_duration", (t, d), t, lambda a, b: Timestamp(a.nanos - b.nanos)),
           ov("subtract_duration_duration", (d, d), d, lambda a, b: Duration(a.nanos - b.nanos))),
        fn("int", ov("timestamp_to_int64", (t,), INT, lambda v: v.nanos // NANOS), ov("duration_to_int64", (d,), INT, lambda v: v.nanos)),
        fn("string", ov("timestamp_to_string", (t,), STRING, lambda v: v.cel_string()), ov("duration_to_string", (d,), STRING, lambda v: v.cel_string())),
    ]  # fmt: skip
    for name, part, oid in getters:
        g = _getter(part)
        out.append(fn(name, ov(oid, (t,), INT, g, member=True), ov(f"{oid}_with_tz", (t, STRING), INT, g, member=True)))
    for name, part, oid, unit in (
        ("getHours", "hours", "timestamp_to_hours", 3600 * NANOS),
        ("getMinutes", "minutes", "timestamp_to_minutes", 60 * NANOS),
        ("getSeconds", "seconds", "timestamp_to_seconds", NANOS),
        ("getMilliseconds", "milliseconds", "timestamp_to_milliseconds", 1_000_000),
    ):
        g = _getter(part)
        tz_id = "timestamp_to_seconds_tz" if part == "seconds" else f"{oid}_with_tz"
        duration_id = "duration_to_" + part
        out.append(
            fn(
                name,
                ov(oid, (t,), INT, g, member=True),
                ov(tz_id, (t, STRING), INT, g, member=True),
                ov(duration_id, (d,), INT, (lambda u: lambda v: int(v.nanos / u))(unit), member=True),
            )
        )
    for rel, op in (("less", "_<_"), ("less_equals", "_<=_"), ("greater", "_>_"), ("greater_equals", "_>=_")):
        from kube.cel.library import _relation

        test = {"less": lambda c: c < 0, "less_equals": lambda c: c <= 0, "greater": lambda c: c > 0, "greater_equals": lambda c: c >= 0}[
            rel
        ]
        out.append(
            fn(op, ov(f"{rel}_timestamp", (t, t), BOOL, _relation(op, test)), ov(f"{rel}_duration", (d, d), BOOL, _relation(op, test)))
        )
    return out
