"""Browser tests: skipped where Debian's chromium (/usr/bin/chromium, which ``.ci/run`` installs)
or the playwright package is missing; their screenshots are kept in build/test-artifacts/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from devtools.browser import CHROMIUM, chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None,
    reason="needs Debian's chromium (/usr/bin/chromium) and the playwright package",
)


def artifact(name: str) -> Path:
    """Where a test keeps a file for people to look at after the run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


__all__ = ["artifact", "chromium", "needs_chromium"]
