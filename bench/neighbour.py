"""A busy neighbour for benchmarks that measure how the programs fare beside one: processes that
keep the CPUs busy in short bursts and a disk writer, for at most a given time.

The disk writer does what a neighbouring database, build or test suite does to the disk the
programs' files are on: buffered writes of ``disk_mib`` MiB then an fsync, over and over (the page
cache fills, then drains in one long flush), and beside it small synchronous writes (8 KiB and a
fdatasync each, as a database commits). Each process ends by itself at its deadline, so a
benchmark that is killed leaves none behind for long.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

# Work in 2-ms bursts with 1-ms sleeps between, as a test suite's servers, workers and clients do:
# a process that wakes up often competes with every short wakeup of the programs measured, where a
# process that never sleeps is preempted by them (the scheduler favours tasks that wake).
_BURST = """
import sys, time
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    burst = time.perf_counter() + 0.002
    while time.perf_counter() < burst:
        pass
    time.sleep(0.001)
"""

_BULK = """
import os, sys, time
deadline, path, chunks = time.monotonic() + float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
block = os.urandom(4 << 20)
while time.monotonic() < deadline:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for _ in range(chunks):
        os.write(fd, block)
        if time.monotonic() >= deadline:
            break
    os.fsync(fd)
    os.close(fd)
"""

_SYNC = """
import os, sys, time
deadline, path = time.monotonic() + float(sys.argv[1]), sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
page = os.urandom(8192)
written = 0
while time.monotonic() < deadline:
    os.pwrite(fd, page, (written % 1024) * 8192)
    os.fdatasync(fd)
    written += 1
"""


class Neighbour:
    """``with Neighbour(seconds=300):`` runs the load inside the block (and ``seconds`` at most)."""

    def __init__(self, *, seconds: float, cpus: int | None = None, disk_mib: int = 1024, directory: Path | None = None) -> None:
        self.seconds = seconds
        # Eight busy processes a core by default: a run queue as long as a test suite's on 2 cores.
        self.cpus = cpus if cpus is not None else 8 * (os.cpu_count() or 1)
        self.disk_mib = disk_mib
        self.directory = directory
        self._tmp: Path | None = None
        self._processes: list[subprocess.Popen[bytes]] = []

    def describe(self) -> str:
        disk = f"a disk writer ({self.disk_mib} MiB buffered then fsync, in a loop) and 8-KiB fdatasync writes" if self.disk_mib else "no disk writer"
        return f"{self.cpus} busy process{'' if self.cpus == 1 else 'es'} (2-ms bursts, 1-ms sleeps), {disk}"

    def __enter__(self) -> Neighbour:
        # On the file system of the benchmark's own files (the temp dir), so its flushes are theirs to wait behind.
        self._tmp = Path(tempfile.mkdtemp(prefix="bench-neighbour-", dir=self.directory))
        limit = str(self.seconds)
        commands = [[_BURST, limit] for _ in range(self.cpus)]
        if self.disk_mib:
            commands += [[_BULK, limit, str(self._tmp / "bulk"), str(max(1, self.disk_mib // 4))], [_SYNC, limit, str(self._tmp / "sync")]]
        try:
            for code, *args in commands:
                self._processes.append(subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in self._processes:
            process.kill()
        for process in self._processes:
            process.wait()
        self._processes = []
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __exit__(self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None) -> None:
        self.stop()

    def warm_up(self, seconds: float = 3.0) -> None:
        """Let the writer fill the page cache before the first measurement."""
        time.sleep(seconds)
