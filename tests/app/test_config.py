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


def test_the_kubernetes_service_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DRA_ADVERTISE_ADDRESS", "DRA_SERVICE_CLUSTER_IP_RANGE", "DRA_ENDPOINT_RECONCILER_TYPE"):
        monkeypatch.delenv(name, raising=False)
    defaults = _settings()
    assert (defaults.advertise_address, defaults.service_cluster_ip_range, defaults.endpoint_reconciler_type) == ("", "", "lease")
    given = _settings("--advertise-address", "192.0.2.9", "--service-cluster-ip-range", "10.96.0.0/12", "--endpoint-reconciler-type", "none")
    assert (given.advertise_address, given.service_cluster_ip_range, given.endpoint_reconciler_type) == ("192.0.2.9", "10.96.0.0/12", "none")
    monkeypatch.setenv("DRA_ENDPOINT_RECONCILER_TYPE", "none")
    assert _settings().endpoint_reconciler_type == "none"


def test_allow_privileged_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-apiserver's boolean flag: bare, =true or =false; here also DRA_ALLOW_PRIVILEGED."""
    monkeypatch.delenv("DRA_ALLOW_PRIVILEGED", raising=False)
    assert _settings().allow_privileged is False
    assert _settings("--allow-privileged").allow_privileged is True
    assert _settings("--allow-privileged=true").allow_privileged is True
    assert _settings("--allow-privileged=false").allow_privileged is False
    monkeypatch.setenv("DRA_ALLOW_PRIVILEGED", "true")
    assert _settings().allow_privileged is True
    with pytest.raises(SystemExit):
        _settings("--allow-privileged=maybe")
