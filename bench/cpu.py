"""CPU accounting from /proc: the cores a process tree, this process and the rest of the machine used."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.common import now

# ----------------------------------------------------------------------------- CPU accounting


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, cpu seconds) for every process, from /proc."""
    tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    return table


def _tree_cpu(root: int | None, table: dict[int, tuple[int, float]]) -> float | None:
    """CPU seconds of ``root`` and all its descendants (living ones)."""
    if root is None or root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    seen: set[int] = set()
    while stack and len(seen) < 100_000:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table.get(pid, (0, 0.0))[1]
        stack.extend(children.get(pid, []))
    return total


def _machine_busy() -> float | None:
    """CPU seconds all cores spent busy since boot (/proc/stat), None if unavailable."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / float(os.sysconf("SC_CLK_TCK"))


class CpuMeter:
    """Measures CPU (in cores) used by this process, the server tree, the database tree and everything else."""

    def __init__(self, server_pid: int | None, db_pid: int | None) -> None:
        self.server_pid = server_pid
        self.db_pid = db_pid
        self._start: tuple[float, float, float | None, float | None, float | None] = (0.0, 0.0, None, None, None)

    def _sample(self) -> tuple[float, float, float | None, float | None, float | None]:
        table = _proc_table()
        return (
            now(),
            time.process_time(),
            _tree_cpu(self.server_pid, table),
            _tree_cpu(self.db_pid, table),
            _machine_busy(),
        )

    def start(self) -> None:
        """Remember the current counters."""
        self._start = self._sample()

    def stop(self) -> dict[str, float | None]:
        """Cores used by client/server/db/other processes since :meth:`start`."""
        t1, c1, s1, d1, m1 = self._sample()
        t0, c0, s0, d0, m0 = self._start
        wall = max(t1 - t0, 1e-9)

        def cores(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round((b - a) / wall, 2)

        out = {"client": cores(c0, c1), "server": cores(s0, s1), "db": cores(d0, d1)}
        busy = cores(m0, m1)
        out["other"] = None if busy is None else round(max(0.0, busy - sum(v or 0.0 for v in out.values())), 2)
        return out
