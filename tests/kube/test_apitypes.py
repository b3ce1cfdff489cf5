"""What the typed dicts are for: mypy refuses a misspelt field of a served kind, read with ``.get``
(devtools/mypy_typeddict_keys.py, which pyproject.toml loads) or with ``[]``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from devtools.server import REPO_ROOT

SNIPPET = """
from typing import Any, cast

from kube.apitypes import ResourceClaim


def admin_requested(obj: dict[str, Any]) -> bool:
    claim = cast(ResourceClaim, obj)
    for request in claim["spec"]["devices"].get("requests") or []:
        exactly = request.get("exactly") or {{}}
        if exactly.get("{field}"):
            return True
        if "{field}" in exactly and exactly["{field}"]:
            return True
    return False
"""


def _mypy(tmp_path: Path, field: str) -> tuple[str, int]:
    source = tmp_path / "snippet.py"
    source.write_text(textwrap.dedent(SNIPPET.format(field=field)))
    out, err, status = mypy_api.run(
        ["--config-file", str(REPO_ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(source)]
    )
    return out + err, status


@pytest.mark.timeout(300)
def test_mypy_refuses_a_misspelt_field(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, "adminAcess")
    assert status == 1, out
    errors = [line for line in out.splitlines() if 'TypedDict "ExactDeviceRequest" has no key "adminAcess"' in line]
    assert [line.split(":")[1] for line in errors] == ["11", "13"], out  # the .get and the [] read


@pytest.mark.timeout(300)
def test_mypy_takes_the_field_spelt_right(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, "adminAccess")
    assert status == 0, out
