"""What ``make run`` says about the server's readiness: nothing while its ``/readyz`` passes, the
failing checks of the verbose answer when it fails, and that nothing answers at all."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devtools.devstack import readiness
from devtools.ports import free_port
from devtools.server import ServerProcess


class FailingReadiness(BaseHTTPRequestHandler):
    """A server whose database check fails, as the API server answers ``/readyz?verbose``."""

    def do_GET(self) -> None:
        body = b"[+]ping ok\n[-]etcd failed: reason withheld\n[+]storage-loops ok\nreadyz check failed\n"
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def failing() -> Iterator[ServerProcess]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), FailingReadiness)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield ServerProcess("sqlite://", port=http.server_address[1])
    finally:
        http.shutdown()
        http.server_close()


def test_a_ready_server_says_nothing(server: ServerProcess) -> None:
    assert readiness(server) is None


def test_the_failing_checks_are_named(failing: ServerProcess) -> None:
    assert readiness(failing) == "etcd failed: reason withheld"


def test_no_answer_says_so() -> None:
    silent = ServerProcess("sqlite://", port=free_port())
    assert (readiness(silent) or "").startswith(f"no answer from {silent.url}/readyz: ")
