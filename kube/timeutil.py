"""Kubernetes time formats."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime

_rendered_second: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """Current time as metav1.Time renders it: RFC 3339, seconds, ``Z``."""
    global _rendered_second
    second = int(time.time())
    cached_second, text = _rendered_second
    if second != cached_second:
        # strftime costs microseconds; every write stamps a time, so render once per second.
        text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        _rendered_second = (second, text)
    return text


def now_micro() -> str:
    """Current time as metav1.MicroTime renders it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime | None:
    """Parse an RFC 3339 timestamp; None when it does not parse."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


def human_age(timestamp: str | None, now: datetime | None = None) -> str:
    """The AGE column: ``5s``, ``3m``, ``2d4h`` as kubectl prints durations."""
    if not timestamp:
        return "<unknown>"
    then = parse_time(timestamp)
    if then is None:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    return human_duration(seconds)


def human_duration(seconds: int) -> str:
    """apimachinery's HumanDuration."""
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d{h}h" if h else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        d = (hours // 24) % 365
        return f"{hours // 24 // 365}y{d}d" if d else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")
_MAX_NANOSECONDS = 1 << 63


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration such as ``1m0s``, ``300ms`` or ``-1.5h`` (time.ParseDuration);
    ValueError with Go's message (``time: invalid duration "x"``) otherwise."""
    quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    rest = text
    negative = rest[:1] == "-"
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"time: invalid duration {quoted}")
    total = 0
    while rest:
        match = _DURATION_PART.match(rest)
        assert match is not None  # every group may be empty
        whole, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not fraction:
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            unit_quoted = '"' + unit.replace("\\", "\\\\").replace('"', '\\"') + '"'
            raise ValueError(f"time: unknown unit {unit_quoted} in duration {quoted}")
        nanoseconds = int(whole or "0") * scale
        if fraction:
            nanoseconds += int(int(fraction) * scale / 10 ** len(fraction))
        total += nanoseconds
        if total > _MAX_NANOSECONDS or (total == _MAX_NANOSECONDS and not negative):
            raise ValueError(f"time: invalid duration {quoted}")
        rest = rest[match.end():]
    return (-total if negative else total) / 1e9


def duration_seconds(text: str) -> float:
    """An argparse type for upstream's duration flags (``10s``, ``1m30s``, ``0``), in seconds;
    argparse parses string defaults with it too."""
    try:
        return parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
