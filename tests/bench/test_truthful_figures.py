"""What the benchmarks print must be true whatever the figures: the machine's load beside them, the
LIST size that was returned (a short LIST fails the run), and only the benchmark's own Postgres in
its CPU figures."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from bench.machine import MachineLoad, cpu_times, reports_machine, steal_percent
from bench.scheduler import process_tree
from devtools.server import REPO_ROOT

STAT = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"


def test_steal_is_the_share_of_cpu_time_stolen_between_two_samples(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(user=100, system=50, idle=800, steal=50))
    assert cpu_times(stat) == (50, 1000)
    machine = MachineLoad(stat)
    stat.write_text(STAT.format(user=160, system=70, idle=950, steal=70))
    # 20 of the 250 ticks since the first sample were stolen.
    assert machine.summary()["steal_percent"] == 8.0
    assert "steal 8.0% of CPU time" in machine.line() and "load average" in machine.line()
    assert steal_percent(None, (1, 2)) is None
    assert cpu_times(tmp_path / "missing") is None
    assert "steal unknown" in MachineLoad(tmp_path / "missing").line()


def test_a_benchmark_prints_the_machine_load_even_when_it_fails(capsys: pytest.CaptureFixture[str]) -> None:
    @reports_machine
    def main() -> int:
        print("figures")
        raise RuntimeError("broken")

    with pytest.raises(RuntimeError):
        main()
    printed = capsys.readouterr()
    assert printed.out == "figures\n"  # stdout stays the figures (some benchmarks print JSON there)
    assert printed.err.startswith("machine: load average ") and "(/proc/stat)" in printed.err


class FakeServer(http.server.ThreadingHTTPServer):
    """Answers what bench.api asks with 201s, and every LIST of the list namespace with ``items`` claims."""

    items = 0


class FakeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, code: int, body: dict[str, object]) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.endswith("/namespaces/bench-list/resourceclaims"):
            count = self.server.items  # type: ignore[attr-defined]
            items = [{"metadata": {"name": f"l-{i}", "namespace": "bench-list", "uid": f"uid-{i}"}} for i in range(count)]
            self._answer(200, {"kind": "ResourceClaimList", "apiVersion": "resource.k8s.io/v1", "metadata": {"resourceVersion": "9"}, "items": items})
        else:
            self._answer(200, {"status": "ok"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(201, {"metadata": {"name": "x"}})

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer(("127.0.0.1", 0), FakeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_list_phase(server: FakeServer, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    out = tmp_path / "figures.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.api", "--server-url", f"http://127.0.0.1:{server.server_address[1]}", "--phases", "list",
         "--clients", "1", "--duration", "0.3", "--warmup", "0.1", "--list-size", "5", "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    [result] = orjson.loads(out.read_bytes())["results"] if out.exists() else [{}]
    return run, result


def test_the_api_benchmark_reports_the_list_size_returned_and_fails_on_a_short_list(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.items = 3
    run, result = run_list_phase(fake_server, tmp_path)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "held fewer or more than 5 items" in run.stderr and " x 3)" in run.stderr
    assert result["ok"] == 0 and result["errors"]["short"] > 0  # type: ignore[index]
    assert result["extra"]["objects_per_list"] == 3  # type: ignore[index]
    assert "LIST of 3 claims (as returned)" in run.stdout
    assert "machine: load average" in run.stderr

    fake_server.items = 5
    run, result = run_list_phase(fake_server, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert result["ok"] > 0 and not result["errors"]  # type: ignore[operator]
    assert result["extra"]["objects_per_list"] == 5  # type: ignore[index]


def test_the_postgres_cpu_figure_counts_only_the_benchmarks_own_cluster() -> None:
    """bench.scheduler charges Postgres with the process tree of its own cluster's server; another
    cluster on the machine (here the second one) is not in it."""
    from devtools.postgres import PostgresNotAvailable, ThrowawayPostgres

    try:
        with ThrowawayPostgres(fast=True, database="mine") as mine, ThrowawayPostgres(fast=True, database="other") as other:
            assert mine.pid is not None and other.pid is not None
            own, others = set(process_tree(mine.pid)), set(process_tree(other.pid))
            assert not own & others
            # The tree holds the postmaster and its auxiliary processes, all postgres.
            names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in own if os.path.exists(f"/proc/{pid}/comm")}
            assert len(own) > 2 and "postgres" in names
    except PostgresNotAvailable as exc:
        if os.environ.get("DRA_REQUIRE_POSTGRES"):
            raise
        pytest.skip(f"no Postgres available: {exc}")
