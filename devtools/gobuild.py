"""Building the Go programs the interop tests and benchmarks run (``interop/``): each is built once
per content of its module (its ``.go`` files, ``go.mod`` and ``go.sum``) and Go version, into the
git-ignored ``.gobin/``, and rebuilt only when one of those changes. Concurrent builders (pytest-xdist
workers) wait for one another on a lock file instead of building twice.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INTEROP = REPO / "interop"
GO_BIN_DIR = REPO / ".gobin"


class GoMissing(RuntimeError):
    """No Go toolchain on this machine."""


@functools.cache
def go_binary() -> str | None:
    """The ``go`` command (PATH, then Debian's and the official tarball's places), None when absent."""
    found = shutil.which("go")
    if found:
        return found
    for candidate in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def go_version() -> str:
    go = go_binary()
    if go is None:
        raise GoMissing("no Go toolchain (go) on this machine")
    return subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def module_digest(module_dir: Path) -> str:
    """A digest of everything a build of ``module_dir`` reads from the repository."""
    digest = hashlib.sha256(go_version().encode())
    for path in sorted(module_dir.rglob("*")):
        if path.is_file() and (path.suffix == ".go" or path.name in ("go.mod", "go.sum")):
            digest.update(str(path.relative_to(module_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_go_program(module_dir: Path, name: str, package: str = ".", ldflags: str = "") -> Path:
    """The binary of ``package`` in the Go module ``module_dir``, built when its sources changed.

    Raises GoMissing without Go, CalledProcessError (with Go's output) when the build fails."""
    go = go_binary()
    if go is None:
        raise GoMissing("no Go toolchain (go) on this machine")
    GO_BIN_DIR.mkdir(exist_ok=True)
    target = GO_BIN_DIR / f"{name}-{module_digest(module_dir)}"
    if target.exists():
        return target
    with (GO_BIN_DIR / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        partial = target.with_name(target.name + ".partial")
        command = [go, "build", "-o", str(partial)]
        if ldflags:
            command += ["-ldflags", ldflags]
        subprocess.run([*command, package], cwd=module_dir, check=True, capture_output=True, text=True)
        partial.rename(target)
        for old in GO_BIN_DIR.glob(f"{name}-*"):
            if old != target and not old.name.endswith(".partial"):
                old.unlink(missing_ok=True)
    return target
