"""Int-or-string values (apimachinery's intstr): an integer, or a percentage such as ``"25%"``,
as rolling updates size their surge and unavailability. The server validates them, the
controllers scale them: both read them here."""

from __future__ import annotations

import math
import re
from typing import Any

PERCENT = re.compile(r"^[0-9]+%$")


def is_int(value: Any) -> bool:
    """A JSON integer (bool is not one, although Python thinks so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def percent(value: Any) -> int | None:
    """The number of a well-formed percentage (``"25%"`` -> 25), else None."""
    return int(value[:-1]) if isinstance(value, str) and PERCENT.match(value) else None


def int_or_percent_value(value: Any) -> int:
    """getIntOrPercentValue: a percentage's number, an integer itself; 0 for anything else."""
    number = percent(value)
    if number is not None:
        return number
    return int(value) if is_int(value) else 0


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """GetScaledValueFromIntOrPercent: an integer itself, a percentage of ``total`` rounded up or
    down (0 for a malformed value, which validation refuses before it gets here)."""
    number = percent(value)
    if number is not None:
        exact = number * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value) if is_int(value) else 0
