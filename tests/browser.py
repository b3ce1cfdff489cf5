"""Debian's headless Chromium, driven by Playwright (which never downloads a browser of its own
here); tests that need it are skipped where /usr/bin/chromium is missing (``.ci/run`` installs it)."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None,
    reason="needs Debian's chromium (/usr/bin/chromium) and the playwright package",
)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (playwright's Browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def artifact(name: str) -> Path:
    """Where a test keeps a file for people to look at after the run (build/test-artifacts/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
