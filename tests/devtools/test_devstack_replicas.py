"""``make run REPLICAS=N SHARDS=M``: several API servers on one Postgres, the simulator's nodes as
several processes, and the workers spread over the replicas."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.credentials import ClusterCredentials
from devtools.devstack import worker_commands
from devtools.ports import free_port
from devtools.postgres import PostgresNotAvailable
from devtools.server import REPO_ROOT, ServerProcess, stop_process
from tests.conftest import PostgresCluster, _create_database
from tests.devtools.test_devstack_start import devstack, one_line


def flag(argv: list[str], name: str) -> str | None:
    """The last value of ``name`` in ``argv`` (argparse takes the last)."""
    values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    return values[-1] if values else None


def test_workers_are_spread_over_the_replicas_and_the_shards_own_parts_of_the_range(tmp_path: Path) -> None:
    credentials = ClusterCredentials.ensure(tmp_path / "pki")
    replicas = [ServerProcess("postgresql://x/y", port=6443 + i, credentials=credentials) for i in range(2)]
    commands = dict(worker_commands(replicas[0], "", 10, "gpu", replicas=replicas, shards=3))
    assert set(commands) == {"controller", "scheduler", "kubeletsim-0", "kubeletsim-1", "kubeletsim-2"}
    assert flag(commands["scheduler"], "--server") == replicas[0].url and flag(commands["controller"], "--server") == replicas[1].url
    for k in range(3):
        argv = commands[f"kubeletsim-{k}"]
        assert flag(argv, "--shard") == f"{k}/3" and flag(argv, "--nodes") == "10"
        assert flag(argv, "--server") == replicas[k % 2].url
        assert flag(argv, "--kubeconfig") == str(credentials.kubeconfig("kubeletsim"))
    # One server, one simulator: the commands make run has always started.
    single = dict(worker_commands(replicas[0], "", 2, "gpu"))
    assert set(single) == {"controller", "scheduler", "kubeletsim"} and "--server" not in single["kubeletsim"]


def test_replicas_on_sqlite_are_refused_with_what_to_do(tmp_path: Path) -> None:
    line = one_line(devstack(tmp_path, "--replicas", "2", "--port", str(free_port()), "--explain-port", "0"))
    assert line.startswith("error: 2 API server replicas need Postgres, SQLite is single-server: make run REPLICAS=2 DATABASE_URL=postgresql://"), line


@pytest.fixture
def postgres_database(postgres_cluster: PostgresCluster) -> str:
    try:
        url = postgres_cluster.url()
    except PostgresNotAvailable as exc:
        pytest.skip(f"no Postgres available: {exc}")
    name = f"devstack_{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_database(url, name))
    return url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def stack(tmp_path: Path, postgres_database: str) -> Iterator[tuple[int, Path]]:
    """``python -m devtools.devstack --replicas 2 --shards 2 --nodes 4`` on its own Postgres database."""
    port = free_port()
    while free_port() == port + 1:  # the second replica takes the next port; make sure it is free
        port = free_port()
    data = tmp_path / "data"
    command = [
        sys.executable, "-m", "devtools.devstack", "--port", str(port), "--database-url", postgres_database, "--replicas", "2",
        "--shards", "2", "--nodes", "4", "--profile", "gpu", "--explain-port", "0", "--data-dir", str(data),
        "--kubeconfig", str(tmp_path / "kubeconfig"),
    ]  # fmt: skip
    with open(tmp_path / "devstack.out", "wb") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=out)
    try:
        yield port, data
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        stop_process(process)


def test_two_replicas_and_two_shards_run_every_node(stack: tuple[int, Path]) -> None:
    port, data = stack
    credentials = ClusterCredentials(data / "pki")
    deadline = time.monotonic() + 120
    nodes: dict[int, set[str]] = {}
    while time.monotonic() < deadline:
        try:
            for replica in (0, 1):
                with httpx.Client(base_url=f"https://127.0.0.1:{port + replica}", timeout=5, **credentials.httpx_options()) as client:  # type: ignore[arg-type]
                    items = client.get("/api/v1/nodes").json().get("items") or []
                    nodes[replica] = {
                        n["metadata"]["name"] for n in items if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
                    }
        except (httpx.HTTPError, FileNotFoundError, ValueError):
            pass
        if nodes.get(0) == nodes.get(1) == {f"sim-{i}" for i in range(4)}:
            break
        time.sleep(0.5)
    assert nodes.get(0) == nodes.get(1) == {f"sim-{i}" for i in range(4)}, nodes
    logs = data / "logs"
    assert (logs / "apiserver.log").exists() and (logs / "apiserver-1.log").exists()
    # Each shard registered its own half of the range, through its own replica.
    for k, owned in ((0, {"sim-0", "sim-1"}), (1, {"sim-2", "sim-3"})):
        text = (logs / f"kubeletsim-{k}.log").read_text()
        assert all(f'"node":"{n}"' in text for n in owned) and not any(f'"node":"{n}"' in text for n in {f"sim-{i}" for i in range(4)} - owned)
        assert f'"shard":"{k}/2"' in text
