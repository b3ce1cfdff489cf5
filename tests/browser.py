"""Browser tests: skipped where Debian's chromium (/usr/bin/chromium, which ``.ci/run`` installs)
or the playwright package is missing, unless ``DRA_REQUIRE_CHROMIUM=1`` (CI), where that is an
error; their screenshots are kept in build/test-artifacts/."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools import browser
from devtools.browser import CHROMIUM

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
REQUIRED = bool(os.environ.get("DRA_REQUIRE_CHROMIUM"))
needs_chromium = pytest.mark.skipif(bool(MISSING) and not REQUIRED, reason=f"the dashboard's browser tests need {MISSING}")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """The headless browser; where it is required but missing, the test fails and says why."""
    if MISSING:
        pytest.fail(f"DRA_REQUIRE_CHROMIUM is set but the dashboard's browser tests lack {MISSING}")
    with browser.chromium() as running:
        yield running


def artifact(name: str) -> Path:
    """Where a test keeps a file for people to look at after the run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


__all__ = ["artifact", "chromium", "needs_chromium"]
