"""The API server's flags: names, defaults and environment variables, as README's table gives them."""

from __future__ import annotations

import argparse

import pytest

from app.config import Settings, add_server_arguments, settings_from_args


def _settings(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return settings_from_args(parser.parse_args(list(argv)))


def test_delete_collection_workers_come_from_the_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRA_DELETE_COLLECTION_WORKERS", raising=False)
    assert _settings().delete_collection_workers == 16
    assert _settings("--delete-collection-workers", "1").delete_collection_workers == 1
    monkeypatch.setenv("DRA_DELETE_COLLECTION_WORKERS", "4")
    assert _settings().delete_collection_workers == 4
    with pytest.raises(SystemExit):
        _settings("--delete-collection-workers", "many")
