"""Upstream's binaries for the interop tests: built once (``devtools.upstream``), or the test fails
with Go's own output; skipped where Go is missing unless ``DRA_REQUIRE_GO=1`` (``golang.needs_go``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devtools import gobuild, upstream


def upstream_binaries() -> Path:
    """The directory of etcd, kube-apiserver, kube-scheduler and kube-controller-manager."""
    if gobuild.go_binary() is None:
        pytest.fail("DRA_REQUIRE_GO is set but there is no Go toolchain (go) on this machine")
    try:
        return upstream.build()
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"go build of upstream's binaries failed:\n{exc.stdout}\n{exc.stderr}")
