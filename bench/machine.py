"""How busy the machine was while a benchmark ran, printed next to its figures.

A figure from a shared 2-core machine means little without the load it was taken under: the
load averages (``os.getloadavg``) at the start and the end, and the share of CPU time the
hypervisor gave to other guests meanwhile (steal, from the ``cpu`` line of ``/proc/stat``).
Every benchmark's ``main`` is wrapped in :func:`reports_machine`, which prints one line on stderr
(stdout stays the figures, machine-readable where a benchmark prints JSON there)::

    machine: load average 0.31 0.40 0.52 -> 1.92 0.81 0.63, steal 0.4% of CPU time over 62 s (/proc/stat), 2 CPUs
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

PROC_STAT = Path("/proc/stat")


def load_average() -> list[float]:
    """1/5/15-minute load averages (empty where the system has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_times(stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """(steal, total) clock ticks of all CPUs since boot from ``/proc/stat``; None where unreadable."""
    try:
        first = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already in user and nice.
    ticks = [int(x) for x in first[1:9]]
    return ticks[7], sum(ticks)


def steal_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of CPU time stolen between two :func:`cpu_times` samples, in percent."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100.0 * (after[0] - before[0]) / (after[1] - before[1]), 1)


@dataclass
class MachineLoad:
    """Load averages and steal from the moment it is made until :meth:`summary` or :meth:`line`."""

    stat: Path = PROC_STAT
    load_start: list[float] = field(default_factory=load_average)
    started: float = field(default_factory=time.monotonic)
    _times: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self._times = cpu_times(self.stat)

    def summary(self) -> dict[str, Any]:
        """The figures for a benchmark's JSON output."""
        return {
            "load_average_start": self.load_start,
            "load_average_end": load_average(),
            "steal_percent": steal_percent(self._times, cpu_times(self.stat)),
            "seconds": round(time.monotonic() - self.started, 1),
            "cpus": os.cpu_count(),
        }

    def line(self) -> str:
        s = self.summary()
        steal = "steal unknown (no /proc/stat)" if s["steal_percent"] is None else f"steal {s['steal_percent']:.1f}% of CPU time"
        start, end = (" ".join(f"{x:.2f}" for x in s[k]) or "unknown" for k in ("load_average_start", "load_average_end"))
        return f"machine: load average {start} -> {end}, {steal} over {s['seconds']:.0f} s (/proc/stat), {s['cpus']} CPUs"


def reports_machine(main: Callable[P, R]) -> Callable[P, R]:
    """Wrap a benchmark's ``main``: print the machine's load over its run when it returns or fails."""

    @functools.wraps(main)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        machine = MachineLoad()
        try:
            return main(*args, **kwargs)
        finally:
            sys.stdout.flush()
            print(machine.line(), file=sys.stderr, flush=True)

    return wrapped
