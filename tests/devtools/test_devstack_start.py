"""What ``make run`` (``python -m devtools.devstack``) and the server say when they cannot start:
one line on stderr naming the cause and what to do, exit code 1, no traceback."""

from __future__ import annotations

import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.credentials import ClusterCredentials
from devtools.ports import free_port
from devtools.server import REPO_ROOT


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def devstack(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    database = f"sqlite:///{tmp_path / 'dra.sqlite'}"
    return run(["-m", "devtools.devstack", "--data-dir", str(tmp_path / "data"), "--database-url", database, *flags])


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_taken_port_says_which_and_how_to_pick_another(tmp_path: Path, taken_port: int) -> None:
    line = one_line(devstack(tmp_path, "--port", str(taken_port), "--explain-port", "0"))
    suggested = re.fullmatch(
        rf"error: 127\.0\.0\.1:{taken_port} is already in use \(another make run\?\); stop what listens there, or use another port: make run PORT=(\d+)", line
    )
    assert suggested and int(suggested[1]) > taken_port, line
    assert not (tmp_path / "data").exists(), "nothing is made before the ports are known to be free"


def test_a_taken_explanation_port_says_so(tmp_path: Path, taken_port: int) -> None:
    line = one_line(devstack(tmp_path, "--port", str(free_port()), "--explain-port", str(taken_port)))
    suggested = re.fullmatch(
        rf"error: 127\.0\.0\.1:{taken_port} is already in use, the scheduler's explanation port \(another make run\?\); "
        r"use another: DRA_EXPLAIN_PORT=(\d+) make run \(0: no explanations\)",
        line,
    )
    assert suggested and int(suggested[1]) > taken_port, line


def test_a_locked_database_says_so(tmp_path: Path) -> None:
    holder = sqlite3.connect(tmp_path / "dra.sqlite", isolation_level=None)
    try:
        holder.execute("CREATE TABLE held (x)")
        holder.execute("BEGIN EXCLUSIVE")
        line = one_line(devstack(tmp_path, "--port", str(free_port()), "--explain-port", "0"))
    finally:
        holder.close()
    assert line == (
        f"error: cannot migrate the database sqlite:///{tmp_path / 'dra.sqlite'}: "
        f"the database file {tmp_path / 'dra.sqlite'} cannot be used: database is locked (SQLITE_BUSY)"
    )


def test_a_file_that_is_no_database_says_so(tmp_path: Path) -> None:
    (tmp_path / "dra.sqlite").write_text("not a database\n")
    line = one_line(devstack(tmp_path, "--port", str(free_port()), "--explain-port", "0"))
    assert line.startswith(f"error: cannot migrate the database sqlite:///{tmp_path / 'dra.sqlite'}: the database file {tmp_path / 'dra.sqlite'} is damaged")
    assert line.endswith("move it away to start with an empty database, or restore it from a backup")


def test_a_missing_serving_certificate_says_which_and_what_to_do(tmp_path: Path) -> None:
    pki = tmp_path / "data" / "pki"
    ClusterCredentials.ensure(pki)
    (pki / "apiserver.crt").unlink()
    line = one_line(devstack(tmp_path, "--port", str(free_port()), "--explain-port", "0"))
    assert line == (
        f"error: the API server did not start: --tls-cert-file {pki / 'apiserver.crt'}: no such file; "
        f"the credentials in {pki} are incomplete: rm -rf {pki} makes new ones (kubeconfigs made from the old ones stop working)"
    )


def test_a_missing_client_certificate_says_which_and_what_to_do(tmp_path: Path) -> None:
    pki = tmp_path / "data" / "pki"
    ClusterCredentials.ensure(pki)
    (pki / "admin.crt").unlink()
    line = one_line(devstack(tmp_path, "--port", str(free_port()), "--explain-port", "0"))
    assert line == (
        f"error: {pki / 'admin.crt'} is missing; the credentials in {pki} are incomplete: rm -rf {pki} makes new ones "
        "(kubeconfigs made from the old ones stop working)"
    )


# The server alone says the same in its own words (python -m app serve / migrate).


def test_the_server_on_a_taken_port(tmp_path: Path, taken_port: int) -> None:
    result = run(["-m", "app", "serve", "--insecure-serving", "--listen", f"127.0.0.1:{taken_port}", "--database-url", f"sqlite:///{tmp_path / 'x.sqlite'}"])
    assert (result.returncode, result.stderr.splitlines()[-1:]) == (1, [f"error: 127.0.0.1:{taken_port} is already in use"])
    assert "Traceback" not in result.stderr


def test_the_server_names_a_missing_file_and_its_flag(tmp_path: Path) -> None:
    missing = tmp_path / "ca.crt"
    result = run(
        ["-m", "app", "serve", "--insecure-serving", "--listen", f"127.0.0.1:{free_port()}", "--database-url", f"sqlite:///{tmp_path / 'x.sqlite'}",
         "--client-ca-file", str(missing)]
    )  # fmt: skip
    assert (result.returncode, result.stderr.splitlines()[-1:]) == (2, [f"error: --client-ca-file {missing}: no such file"])


def test_migrate_on_a_damaged_file(tmp_path: Path) -> None:
    (tmp_path / "x.sqlite").write_text("not a database\n")
    result = run(["-m", "app", "migrate", "--database-url", f"sqlite:///{tmp_path / 'x.sqlite'}"])
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"error: the database file {tmp_path / 'x.sqlite'} is damaged or is not a SQLite database")
