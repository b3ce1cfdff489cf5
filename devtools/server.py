"""Run the API server as a real subprocess (tests, benchmarks, the dev stack)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from devtools.credentials import ClusterCredentials
from devtools.ports import free_port
from devtools.progress import STALL_LIMIT, START_TIMEOUT, Progress

REPO_ROOT = Path(__file__).resolve().parents[1]


def stop_process(process: subprocess.Popen[bytes] | None, kill: bool = False) -> None:
    """Stop a child process: SIGTERM (or SIGKILL), then SIGKILL if it lingers past 10 s."""
    if process is None or process.poll() is not None:
        return
    if kill:
        process.kill()
    else:
        process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_all(servers: list[ServerProcess]) -> None:
    """Stop several servers at once: each is asked (SIGTERM) before any is waited for."""
    for server in servers:
        if server.process is not None and server.process.poll() is None:
            server.process.terminate()
    for server in servers:
        server.stop()


def migrate(database_url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "app", "migrate", "--database-url", database_url],
        check=True,
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=START_TIMEOUT,
    )


SQLITE = "sqlite+aiosqlite:///"
_migrated: list[Path] = []  # the one template of this process


def migrated_sqlite(path: Path) -> str:
    """The URL of a new SQLite database at ``path`` with the schema ``python -m app migrate`` makes.

    It is a copy of one database this process migrated once: each migration is a process that
    imports the server and Alembic, seconds on a loaded machine, and every stack needs one."""
    if not _migrated:
        directory = Path(tempfile.mkdtemp(prefix="dra-schema-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        template = directory / "migrated.sqlite"
        migrate(f"{SQLITE}{template}")
        _migrated.append(template)
    template = _migrated[0]
    for suffix in ("", "-wal", "-shm"):  # the journal too, should one have been left
        if (source := template.with_name(template.name + suffix)).exists():
            shutil.copyfile(source, path.with_name(path.name + suffix))
    return f"{SQLITE}{path}"


class ServerProcess:
    """``python -m app serve`` on a free loopback port, stopped on exit.

    With ``credentials`` it serves HTTPS and authenticates and authorizes (Node,RBAC) with them,
    and writes a kubeconfig per identity for its URL; without, plain HTTP on loopback that lets
    anyone do anything (``--insecure-serving``, AlwaysAllow)."""

    def __init__(
        self,
        database_url: str,
        *extra_args: str,
        port: int | None = None,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        credentials: ClusterCredentials | None = None,
    ) -> None:
        self.database_url = database_url
        self.extra_args = list(extra_args)
        self.port = port or free_port()
        self.credentials = credentials
        self.url = f"{'https' if credentials else 'http'}://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None

    def security_flags(self) -> list[str]:
        if self.credentials is None:
            return ["--insecure-serving"]
        return self.credentials.server_flags()

    def httpx_options(self, identity: str = "admin") -> dict[str, object]:
        """Options for an httpx client of this server acting as ``identity`` (base_url included)."""
        options: dict[str, object] = {"base_url": self.url}
        if self.credentials is not None:
            options.update(self.credentials.httpx_options(identity))
        return options

    def worker_flags(self, identity: str) -> list[str]:
        """Flags that point a worker at this server as ``identity``."""
        if self.credentials is None:
            return ["--server", self.url]
        return self.credentials.worker_flags(identity)

    def start(self, timeout: float = START_TIMEOUT) -> ServerProcess:
        if self.credentials is not None:
            self.credentials.write_kubeconfigs(self.url)
        args = [
            sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{self.port}", "--database-url", self.database_url,
            *self.security_flags(), *self.extra_args,
        ]  # fmt: skip
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self._log_file = out
        self.process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=out, stderr=out, env={**os.environ, **self.env})
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()  # one that is not ready in time must not go on starting beside the next test
            raise
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT, stall: float = STALL_LIMIT) -> None:
        """Wait until ``/readyz`` passes, for as long as the process makes progress (its log grows,
        it spends CPU time) and at most ``timeout`` seconds: TimeoutError once it has shown none for
        ``stall`` seconds or at the bound, RuntimeError if it exits; each says what it waited for."""
        assert self.process is not None, "wait_ready follows start"
        progress = Progress(self.process.pid, self.log_path)
        started = last_progress = time.monotonic()
        answer = "no answer"
        # As the admin: a server with --anonymous-auth=false answers anonymous probes 401.
        with httpx.Client(**self.httpx_options(), timeout=1.0) as client:  # type: ignore[arg-type]
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"server exited with code {self.process.returncode} before it was ready; log {self.log_path}:{progress.log_tail()}")
                try:
                    response = client.get("/readyz")
                    if response.status_code == 200:
                        return
                    answer = f"{response.status_code} {response.text[:200]!r}"
                except httpx.HTTPError as exc:
                    answer = f"no answer ({type(exc).__name__})"
                now = time.monotonic()
                if progress.moved():
                    last_progress = now
                waited = f"{now - started:.0f} s for {self.url}/readyz (last: {answer})"
                if now - last_progress >= stall:
                    raise TimeoutError(f"server stuck: no log line and no CPU time for {stall:.0f} s, after {waited}; log {self.log_path}:{progress.log_tail()}")
                if now - started >= timeout:
                    raise TimeoutError(f"server not ready although still working, after {waited}; log {self.log_path}:{progress.log_tail()}")
                time.sleep(0.05)

    def stop(self, kill: bool = False) -> None:
        stop_process(self.process, kill)
        if self._log_file not in (None, subprocess.DEVNULL):
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
