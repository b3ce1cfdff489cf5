"""What ``make run`` says about the server's readiness: nothing while its ``/readyz`` passes, the
failing checks of the verbose answer when it fails, and that nothing answers at all; and the
server it starts admits what clusters for DRA drivers admit."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from devtools.devstack import readiness, start_server
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


def test_make_runs_server_admits_privileged_driver_pods(tmp_path: Path) -> None:
    """Drivers' kubelet plugins run in privileged containers: make run's server allows them
    (--allow-privileged=true, as kube-up and kind clusters), where the flag's default refuses them."""
    args = argparse.Namespace(
        port=free_port(), explain_port=free_port(), database_url=f"sqlite:///{tmp_path / 'dra.sqlite'}", data_dir=tmp_path,
        nodes=1, feature_gates="", runtime_config="", kubeconfig=tmp_path / "kubeconfig",
    )  # fmt: skip
    server, _kubeconfig = start_server(args, tmp_path / "logs")
    try:
        with httpx.Client(**server.httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
            container = {"name": "plugin", "image": "registry.k8s.io/pause:3.10", "securityContext": {"privileged": True}}
            created = admin.post("/api/v1/namespaces/default/pods", json={"metadata": {"name": "plugin"}, "spec": {"containers": [container]}})
            assert created.status_code == 201, created.text
    finally:
        server.stop()
