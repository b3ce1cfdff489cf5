"""Go programs for the interop tests: skipped where Go is missing, unless ``DRA_REQUIRE_GO=1``
(CI), where that is an error."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

from devtools import gobuild, upstream

REQUIRED = bool(os.environ.get("DRA_REQUIRE_GO"))
needs_go = pytest.mark.skipif(gobuild.go_binary() is None and not REQUIRED, reason="the interop tests need a Go toolchain (go)")


def go_program(module: str, name: str | None = None, package: str = ".") -> Path:
    """The built binary of ``interop/<module>`` (built now if its sources changed); the test fails
    with Go's own output when the build does."""
    if gobuild.go_binary() is None:
        pytest.fail("DRA_REQUIRE_GO is set but there is no Go toolchain (go) on this machine")
    try:
        return gobuild.build_go_program(gobuild.INTEROP / module, name or module, package)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"go build of interop/{module} failed:\n{exc.stdout}\n{exc.stderr}")


@functools.cache
def _kubernetes_module() -> Path | None:
    go = gobuild.go_binary()
    if go is None:
        return None
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    module = Path(cache) / f"k8s.io/kubernetes@{upstream.KUBERNETES_VERSION}"
    return module if module.is_dir() else None


def upstream_file(relative: str) -> Path:
    """A file of k8s.io/kubernetes (the version the project follows) in Go's module cache; the test
    is skipped where Go or the module is missing, unless ``DRA_REQUIRE_GO=1``."""
    module = _kubernetes_module()
    if module is None or not (module / relative).exists():
        reason = f"no Go toolchain, or k8s.io/kubernetes@{upstream.KUBERNETES_VERSION} is not in its module cache"
        if REQUIRED:
            pytest.fail(f"DRA_REQUIRE_GO is set but there is {reason}")
        pytest.skip(reason)
    return module / relative
