"""Running hostile input where a hard limit ends it.

A regular expression match (or any other C code) cannot be interrupted from Python: pytest-timeout's
signal waits until it returns, which for a backtracking pattern can be hours. ``run_bounded`` runs
the evaluation in a fresh interpreter and kills it after ``timeout`` seconds, so a regression fails
the test in seconds instead of hanging the suite."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from devtools.server import REPO_ROOT

# What these limits catch is runaway work (backtracking, evaluating what the cost estimate should
# refuse): minutes or hours of it. The bound is loose so that a loaded machine never trips it;
# these are not speed targets.
RUNAWAY_SECONDS = 30.0


def run_bounded(source: str, timeout: float = RUNAWAY_SECONDS) -> Any:
    """Run ``source`` (Python that assigns the JSON-serialisable answer to ``result``) in a fresh
    interpreter and return ``result``; fail when it has not finished within ``timeout`` seconds
    (plus the interpreter's start)."""
    program = textwrap.dedent(source) + "\nimport json as _json, sys as _sys\n_sys.stdout.write(_json.dumps(result))\n"
    try:
        done = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout + 15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout + 15:.0f} s, killed:\n{source}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
