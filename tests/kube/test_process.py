"""The worker scaffold: the common flags (one spelling of the health port, the old one still
accepted), and a worker run with its health endpoint."""

from __future__ import annotations

import argparse
import asyncio

import httpx
import pytest

from controllers.app import build_parser as controller_parser
from devtools.ports import free_port
from kube.client import KubeClient
from kube.process import run_worker, worker_parser
from kube.timeutil import duration_seconds
from kubeletsim.__main__ import build_parser as simulator_parser
from schedulers.app import build_parser as scheduler_parser


def test_every_worker_spells_the_health_port_the_same_and_reads_it_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRA_HEALTH_PORT", "10248")
    for build in (scheduler_parser, controller_parser, simulator_parser):
        parser = build()
        assert parser.parse_args([]).health_port == 10248
        assert parser.parse_args(["--health-port", "7"]).health_port == 7
        assert "--health-port" in parser.format_help()


def test_the_old_spelling_still_works_but_is_not_shown() -> None:
    for build in (scheduler_parser, controller_parser, simulator_parser):
        parser = build()
        assert parser.parse_args(["--healthz-port=10248"]).health_port == 10248
        assert "--healthz-port" not in parser.format_help() and "--healthz-port" not in parser.format_usage()


def test_every_worker_has_the_common_flags() -> None:
    """The scaffold's flags, spelled alike in every worker; leader election where a worker is elected."""
    common = {a.dest: a.option_strings for a in worker_parser("w", "", leader_elected=True)._actions}
    for build in (scheduler_parser, controller_parser):
        flags = {a.dest: a.option_strings for a in build()._actions}
        assert {dest: flags.get(dest) for dest in common} == common
    simulator = {a.dest: a.option_strings for a in simulator_parser()._actions}
    plain = {a.dest: a.option_strings for a in worker_parser("w", "", leader_elected=False)._actions}
    assert {dest: simulator.get(dest) for dest in plain} == plain


def test_leader_election_flags_only_for_leader_elected_workers() -> None:
    elected = worker_parser("w", "", leader_elected=True).parse_args(["--identity", "a", "--no-leader-elect"])
    assert elected.identity == "a" and elected.no_leader_elect and elected.lease_duration == 15.0
    with pytest.raises(SystemExit):
        worker_parser("w", "", leader_elected=False).parse_args(["--no-leader-elect"])


class _Client(KubeClient):
    closed = False

    async def close(self) -> None:
        self.closed = True
        await super().close()


async def test_a_worker_answers_health_once_ready_and_closes_its_client_when_stopped() -> None:
    port = free_port()
    args = worker_parser("w", "", leader_elected=False).parse_args(["--health-port", str(port)])
    client = _Client("http://127.0.0.1:1", user_agent="test")
    ready = asyncio.Event()
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(run_worker(client, args, work, name="test-worker", ready=ready.is_set))
    await started.wait()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        assert (await http.get("/healthz")).status_code == 503
        ready.set()
        assert (await http.get("/healthz")).status_code == 200
        task.cancel()  # what SIGTERM does
        await task  # the worker ends quietly
        with pytest.raises(httpx.ConnectError):
            await http.get("/healthz")
    assert client.closed


def test_upstreams_duration_flags_take_go_durations() -> None:
    """The scheduler's delegated-auth cache flags are spelled and valued as kube-scheduler's."""
    args = scheduler_parser().parse_args(["--authorization-webhook-cache-unauthorized-ttl", "1m30s", "--authentication-token-webhook-cache-ttl", "0"])
    assert (args.authorization_webhook_cache_unauthorized_ttl, args.authentication_token_webhook_cache_ttl) == (90.0, 0.0)
    assert args.authorization_webhook_cache_authorized_ttl == 10.0
    assert duration_seconds("250ms") == 0.25
    with pytest.raises(argparse.ArgumentTypeError, match='invalid duration "ten"'):
        duration_seconds("ten")
