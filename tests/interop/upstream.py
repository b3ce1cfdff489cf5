"""Upstream's binaries for the interop tests (``devtools.upstream``). Their build takes a quarter
of an hour of two cores, so a test run never starts it unasked: the tests that need them are
skipped until ``make upstream`` (or ``make interop``) has built them, except under
``DRA_REQUIRE_GO=1`` (CI), where they are built if need be and a missing Go is an error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from devtools import gobuild, upstream
from tests.interop.golang import REQUIRED, needs_go

# Building from an empty module cache under DRA_REQUIRE_GO may take a while on a busy machine.
BUILD_TIMEOUT = 3600
needs_upstream = [
    needs_go,
    pytest.mark.skipif(
        not REQUIRED and (gobuild.go_binary() is None or not upstream.built()),
        reason="upstream's binaries are not built: make upstream (needs Go), or make interop",
    ),
    pytest.mark.timeout(BUILD_TIMEOUT),
]


def upstream_binaries() -> Path:
    """The directory of etcd, kube-apiserver, kube-scheduler and kube-controller-manager."""
    if gobuild.go_binary() is None:
        pytest.fail("DRA_REQUIRE_GO is set but there is no Go toolchain (go) on this machine")
    try:
        return upstream.build()
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"go build of upstream's binaries failed:\n{exc.stdout}\n{exc.stderr}")
