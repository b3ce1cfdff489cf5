"""Whether a starting process is getting anywhere, for waits bounded by its progress rather than by
a fixed time: a busy machine slows a start down (a server's imports, migrations and bootstrap
objects took over a minute beside a full test suite on two cores), it does not stop it. A process
that neither writes a log line nor spends CPU time for a while is stuck, whatever the machine."""

from __future__ import annotations

import os
from pathlib import Path

# How long a starting process may show no progress before a wait gives up on it, and the bound on
# the whole wait however it progresses (below pytest-timeout's 300 s a test, which a fixture's
# start counts against).
STALL_LIMIT = 60.0
START_TIMEOUT = 180.0


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) process ``pid`` has spent, from /proc; None where unreadable."""
    try:
        # The command name, in parentheses, may hold spaces: the fields that follow it are counted.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Progress:
    """Samples a process's log size and CPU time: :meth:`moved` says whether either changed since
    the previous sample."""

    def __init__(self, pid: int, log_path: Path | None) -> None:
        self.pid = pid
        self.log_path = log_path
        self._last: tuple[int, float | None] = (-1, None)

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size if self.log_path is not None else 0
        except OSError:
            return 0

    def moved(self) -> bool:
        sample = (self._log_size(), cpu_seconds(self.pid))
        moved = sample != self._last
        self._last = sample
        return moved

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the log, each indented, after a newline ("" without a log)."""
        if self.log_path is None:
            return ""
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 8192))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "".join(f"\n    {line}" for line in text.splitlines()[-lines:])
