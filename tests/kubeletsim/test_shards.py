"""One node range run by several simulator processes (``--shard K/N``, ``--shards N``).

The rules of the split need no processes; the process test runs ``--shards 2`` against the shared
server and checks that the shards together run every node, that each node is registered by the
one shard that owns it, and that a pod on the second shard's node starts with an address from that
node's own range (addresses derive from the node's number in the whole range, not in its shard).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from devtools.server import REPO_ROOT, ServerProcess, stop_process
from kubeletsim import nodes as nodes_mod
from kubeletsim.settings import Settings, Shard
from kubeletsim.shards import child_argv
from tests.kubeletsim.test_simulator import make_pod, node_ready, pod_phase, wait_for

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


@pytest.mark.parametrize("nodes", [0, 1, 7, 10, 10_000])
@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_shards_split_the_range_without_overlap(nodes: int, count: int) -> None:
    owned = [list(Shard(i, count).numbers(nodes)) for i in range(count)]
    assert sorted(n for part in owned for n in part) == list(range(nodes))
    assert max(map(len, owned)) - min(map(len, owned)) <= 1
    # Contiguous: shard K's nodes come before shard K+1's.
    assert [n for part in owned for n in part] == list(range(nodes))


def test_settings_of_a_shard_name_its_nodes_by_their_number_in_the_whole_range() -> None:
    settings = Settings(nodes=10, node_prefix="s-", shard=Shard.parse("2/3"))
    assert settings.node_names == ["s-6", "s-7", "s-8", "s-9"]
    assert settings.node_index == {"s-6": 6, "s-7": 7, "s-8": 8, "s-9": 9}
    assert Settings(nodes=3, node_prefix="s-").node_index == {"s-0": 0, "s-1": 1, "s-2": 2}


@pytest.mark.parametrize("text", ["", "3", "3/3", "-1/2", "1/0", "a/b", "1/2/3", "1 / 2x"])
def test_a_bad_shard_is_refused_with_the_flag_named(text: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        Shard.parse(text)


def test_shard_flags_are_checked_before_anything_runs() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kubeletsim", "--nodes", "4", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)

    for args, message in (
        (("--shard", "2/2"), "--shard 2/2: K must be at least 0 and less than N"),
        (("--shards", "0"), "--shards must be at least 1"),
        (("--shards", "2", "--shard", "0/2"), "--shard and --shards exclude each other"),
    ):
        result = run(*args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)


def test_a_shard_named_alone_ignores_the_shard_count_of_its_environment() -> None:
    """DRA_KUBELETSIM_SHARDS set for a supervisor (make run SHARDS=N, compose) and inherited by a
    process started with --shard K/N is no second, conflicting flag: that process runs its shard."""
    env = {**os.environ, "DRA_KUBELETSIM_SHARDS": "2"}
    result = subprocess.run(
        [sys.executable, "-m", "kubeletsim", "--nodes", "4", "--shard", "2/2"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=env
    )
    # The shard's own flag is what is checked (a valid one would run), not "exclude each other".
    assert result.returncode == 2 and "--shard 2/2: K must be at least 0 and less than N" in result.stderr, result.stderr


def test_each_child_gets_the_flags_but_the_parents() -> None:
    argv = ["--nodes", "100", "--shards", "4", "--health-port=8080", "--profile", "gpu", "--healthz-port", "9", "--shards=4"]
    assert child_argv(argv, 3, 4) == ["--nodes", "100", "--profile", "gpu", "--shard", "3/4"]


# ---- two shards as processes ---------------------------------------------------------------------


def _log_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for line in path.read_bytes().splitlines():
        try:
            lines.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return lines


@pytest.fixture
def two_shards(server: ServerProcess, tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    prefix = f"sh{uuid.uuid4().hex[:6]}-"
    log = tmp_path / "shards.log"
    # Short: the nodes' unix sockets live under it.
    root = tempfile.mkdtemp(prefix="ks-")
    command = [
        sys.executable, "-m", "kubeletsim", "--server", server.url, "--nodes", "4", "--shards", "2", "--profile", "gpu",
        "--node-prefix", prefix, "--lease-interval", "1", "--root-dir", root,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=out)
    try:
        yield prefix, log, process
    finally:
        stop_process(process)
        shutil.rmtree(root, ignore_errors=True)
        with httpx.Client(base_url=server.url) as client:
            for collection in (SLICES, LEASES, "/api/v1/nodes"):
                for obj in client.get(collection).json()["items"]:
                    if obj["metadata"]["name"].startswith(prefix):
                        client.delete(f"{collection}/{obj['metadata']['name']}")


def test_two_shards_run_the_range_each_node_by_its_own_shard(
    server: ServerProcess, two_shards: tuple[str, Path, subprocess.Popen[bytes]]
) -> None:
    prefix, log, process = two_shards
    names = [f"{prefix}{i}" for i in range(4)]
    with httpx.Client(base_url=server.url, timeout=10.0) as client:

        def registered() -> bool:
            leases = {lease["metadata"]["name"] for lease in client.get(LEASES).json()["items"]}
            sliced = {s["spec"].get("nodeName") for s in client.get(SLICES).json()["items"]}
            return all(node_ready(client, n) for n in names) and set(names) <= leases and set(names) <= sliced

        wait_for(registered, timeout=60, what="four nodes of two shards Ready with Leases and slices")
        for i, name in enumerate(names):
            addresses = client.get(f"/api/v1/nodes/{name}").json()["status"]["addresses"]
            assert {"type": "InternalIP", "address": nodes_mod.node_ip(i)} in addresses
        # The second shard runs node 3's pods, with an address from node 3's range.
        namespace = f"sh-{uuid.uuid4().hex[:8]}"
        assert client.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).status_code == 201
        make_pod(client, namespace, "p", names[3])
        pod = wait_for(lambda: pod_phase(client, namespace, "p", "Running"), timeout=30, what="the pod on the second shard's node Running")
        assert nodes_mod.pod_host(3, pod["status"]["podIP"]) is not None
    registrations = {line["node"]: line["shard"] for line in _log_lines(log) if line.get("msg") == "registered node" and line.get("node") in names}
    assert registrations == {names[0]: "0/2", names[1]: "0/2", names[2]: "1/2", names[3]: "1/2"}
    # Stopping the parent stops both shards.
    started = next(line for line in _log_lines(log) if line.get("msg") == "started shards")
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in started["pids"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in started["pids"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone as far as anyone is concerned (its parent may be this test's own child that ended).
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
