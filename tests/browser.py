"""Browser tests: skipped where Debian's chromium (/usr/bin/chromium, which ``.ci/run`` installs)
or the playwright package is missing; their screenshots are kept in build/test-artifacts/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from devtools.browser import CHROMIUM, chromium

ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"


def _missing() -> str:
    """What the browser tests lack here, in words ("" when nothing)."""
    lacking = []
    if not CHROMIUM.exists():
        lacking.append(f"Debian's chromium ({CHROMIUM}; `apt-get install chromium`, which .ci/run does)")
    if importlib.util.find_spec("playwright") is None:
        lacking.append("the playwright package (pyproject's test extra)")
    return " and ".join(lacking)


MISSING = _missing()
needs_chromium = pytest.mark.skipif(bool(MISSING), reason=f"the dashboard's browser tests need {MISSING}")


def artifact(name: str) -> Path:
    """Where a test keeps a file for people to look at after the run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


__all__ = ["artifact", "chromium", "needs_chromium"]
