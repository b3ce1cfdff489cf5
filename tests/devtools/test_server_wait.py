"""How the tests wait for a server they start: for as long as it makes progress (its log grows, it
spends CPU time) up to a generous bound, rather than a fixed 30 s that a busy machine misses, and
each way the wait ends says what it waited for."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.ports import free_port
from devtools.progress import Progress, cpu_seconds
from devtools.server import ServerProcess
from tests.processes import eventually_while_progressing

# A stand-in for ``python -m app serve``: a log line every STEP seconds while it "starts", for
# START_LINES lines, then /readyz answers 200 (or never, without a port; or it sleeps silently).
FAKE_SERVER = """
import http.server, sys, time
port, lines, step, then = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
for n in range(lines):
    print(f"starting, step {n}", flush=True)
    time.sleep(step)
if then == "serve":
    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *args): pass
    print("ready", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), Ready).serve_forever()
elif then == "exit":
    print("error: the database cannot be used", flush=True)
    sys.exit(3)
time.sleep(600)
"""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    server = ServerProcess("sqlite://", port=free_port(), log_path=tmp_path / "server.log")
    yield server, tmp_path / "server.log"
    server.stop(kill=True)


def run(server: ServerProcess, log: Path, lines: int, step: float, then: str) -> None:
    with log.open("ab") as out:
        server.process = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(server.port), str(lines), str(step), then], stdout=out, stderr=out)


def test_a_server_slower_than_the_stall_limit_but_progressing_is_waited_for(fake: tuple[ServerProcess, Path]) -> None:
    server, log = fake
    run(server, log, lines=8, step=0.5, then="serve")
    started = time.monotonic()
    server.wait_ready(timeout=60, stall=2)
    assert time.monotonic() - started >= 3.5, "ready only after its eight steps"


def test_a_server_that_shows_no_progress_is_given_up_as_stuck(fake: tuple[ServerProcess, Path]) -> None:
    server, log = fake
    run(server, log, lines=1, step=0, then="sleep")
    started = time.monotonic()
    with pytest.raises(TimeoutError) as failure:
        server.wait_ready(timeout=60, stall=2)
    assert time.monotonic() - started < 30, "the stall limit, not the bound"
    message = str(failure.value)
    assert message.startswith("server stuck: no log line and no CPU time for 2 s, after ")
    assert f"for {server.url}/readyz (last: no answer (ConnectError))" in message
    assert message.endswith("\n    starting, step 0"), "its log's last lines"


def test_a_server_still_working_at_the_bound_is_given_up_saying_so(fake: tuple[ServerProcess, Path]) -> None:
    server, log = fake
    run(server, log, lines=100, step=0.2, then="serve")
    with pytest.raises(TimeoutError, match=r"^server not ready although still working, after \d+ s for http://127\.0\.0\.1:\d+/readyz "):
        server.wait_ready(timeout=3, stall=2)


def test_a_server_that_exits_is_reported_with_its_last_words(fake: tuple[ServerProcess, Path]) -> None:
    server, log = fake
    run(server, log, lines=1, step=0, then="exit")
    with pytest.raises(RuntimeError) as failure:
        server.wait_ready(timeout=60, stall=10)
    assert str(failure.value).startswith("server exited with code 3 before it was ready; log ")
    assert str(failure.value).endswith("\n    starting, step 0\n    error: the database cannot be used")


def test_progress_is_a_growing_log_or_cpu_time(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("one\n")
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"])
    try:
        progress = Progress(busy.pid, log)
        assert progress.moved(), "the first sample"
        time.sleep(0.3)
        assert progress.moved(), "CPU time spent"
        assert (cpu_seconds(busy.pid) or 0) > 0
    finally:
        busy.kill()
        busy.wait()
    idle = Progress(busy.pid, log)  # a process that is gone has no CPU time to show
    assert idle.moved() and not idle.moved()
    log.write_text("one\ntwo\n")
    assert idle.moved(), "a log line"


def test_a_server_not_ready_in_time_is_stopped_not_left_starting(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite:///{tmp_path / 'dra.sqlite'}", log_path=tmp_path / "server.log")
    with pytest.raises(TimeoutError):
        server.start(timeout=0.5)
    assert server.process is not None and server.process.poll() is not None, "stopped, not left to load the machine beside the next test"


def test_a_wait_on_workers_gives_up_once_none_of_them_makes_progress(tmp_path: Path) -> None:
    """A stuck worker (no log line, no CPU) fails the wait after the stall limit, not at the bound,
    and the failure says what was waited for."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(AssertionError, match=r"nodes published: no process made progress for 1 s"):
            eventually_while_progressing(lambda: False, "nodes published", [(sleeper, tmp_path / "missing.log")], timeout=30, stall=1.0)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_wait_on_workers_goes_on_while_one_of_them_works(tmp_path: Path) -> None:
    log = tmp_path / "busy.log"
    writer = subprocess.Popen([sys.executable, "-c", f"import time\nfor i in range(40):\n    open({str(log)!r}, 'a').write('x\\n'); time.sleep(0.1)"])
    try:
        # Done after 2.5 s, longer than the 1-s stall limit: the log keeps growing meanwhile.
        started = time.monotonic()
        assert eventually_while_progressing(lambda: time.monotonic() - started > 2.5, "done", [(writer, log)], timeout=30, stall=1.0)
    finally:
        writer.kill()
        writer.wait()
