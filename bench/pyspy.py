"""py-spy profiles of benchmark processes, recorded while a phase runs and summed up as tables.

``record`` starts ``py-spy record`` (raw collapsed stacks, ``--gil``: only samples that hold the
interpreter, i.e. the Python work a process does) on named processes; ``stop`` ends them (py-spy
writes its file on SIGINT); ``summary`` reads one file back: the share of samples whose innermost
frame is in each function, and in each source file (site-packages collapsed to the package), so a
profile names where a process spends its time without a flame graph viewer.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from devtools.server import REPO_ROOT

# "function (path/to/file.py:123)"; py-spy writes frames so, separated by ";", then " <count>".
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def py_spy() -> Path | None:
    """The py-spy beside this interpreter (``pip install py-spy`` into the venv), or None."""
    path = Path(sys.executable).with_name("py-spy")
    return path if path.exists() else None


@dataclass
class Recording:
    name: str
    path: Path
    process: subprocess.Popen[bytes]


def record(directory: Path, phase: str, pids: dict[str, int], rate: int = 100) -> list[Recording]:
    """Start py-spy on every named pid: ``<directory>/<phase>-<name>.txt``. Empty when py-spy is missing."""
    binary = py_spy()
    if binary is None:
        print("py-spy not found beside the interpreter: .venv/bin/pip install py-spy", file=sys.stderr)
        return []
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, pid in pids.items():
        path = directory / f"{phase}-{name}.txt"
        command = [str(binary), "record", "--gil", "--nonblocking", "-p", str(pid), "-r", str(rate), "--format", "raw", "-o", str(path)]
        out.append(Recording(name, path, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return out


def stop(recordings: list[Recording], timeout: float = 60.0) -> None:
    for r in recordings:
        if r.process.poll() is None:
            r.process.send_signal(signal.SIGINT)
    for r in recordings:
        try:
            r.process.wait(timeout)
        except subprocess.TimeoutExpired:
            r.process.kill()
            r.process.wait()


def _where(file: str) -> str:
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    root = str(REPO_ROOT) + "/"
    if file.startswith(root):
        return file[len(root) :]
    if "/lib/python3" in file:
        return "stdlib " + file.rsplit("/", 1)[-1]
    return file


def summary(path: Path, top: int = 12) -> dict[str, object]:
    """Samples in all, and the ``top`` functions and files by share of samples (innermost frame)."""
    functions: Counter[str] = Counter()
    files: Counter[str] = Counter()
    total = 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"samples": 0, "functions": [], "files": []}
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        leaf = stack.rsplit(";", 1)[-1]
        match = _FRAME.match(leaf)
        func, file = (match.group("func"), match.group("file")) if match else (leaf, "?")
        where = _where(file)
        functions[f"{func} ({where})"] += count
        files[where] += count
        total += count
    share = 100.0 / total if total else 0.0
    return {
        "samples": total,
        "functions": [(name, round(n * share, 1)) for name, n in functions.most_common(top)],
        "files": [(name, round(n * share, 1)) for name, n in files.most_common(top)],
    }
