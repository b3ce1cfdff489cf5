"""free_port: distinct ports, and per pytest-xdist worker a block no other worker draws from."""

from __future__ import annotations

import socket

import pytest

from devtools.ports import free_port


def _listen(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


@pytest.mark.parametrize(("worker", "block"), [("gw0", range(20000, 21000)), ("gw3", range(23000, 24000))])
def test_each_worker_draws_from_its_own_block(monkeypatch: pytest.MonkeyPatch, worker: str, block: range) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    ports = [free_port() for _ in range(50)]
    assert all(p in block for p in ports)
    assert len(set(ports)) == len(ports)  # handed out once, even before anything listens


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    port = free_port()
    with _listen(port):
        for _ in range(20):
            assert free_port() != port
