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

    def start(self, timeout: float = 30.0) -> ServerProcess:
        if self.credentials is not None:
            self.credentials.write_kubeconfigs(self.url)
        args = [
            sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{self.port}", "--database-url", self.database_url,
            *self.security_flags(), *self.extra_args,
        ]  # fmt: skip
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self._log_file = out
        self.process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=out, stderr=out, env={**os.environ, **self.env})
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # As the admin: a server with --anonymous-auth=false answers anonymous probes 401.
        with httpx.Client(**self.httpx_options(), timeout=1.0) as client:  # type: ignore[arg-type]
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"server exited with code {self.process.returncode}; log: {self.log_path}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise TimeoutError(f"server at {self.url} not ready after {timeout}s; log: {self.log_path}")

    def stop(self, kill: bool = False) -> None:
        stop_process(self.process, kill)
        if self._log_file not in (None, subprocess.DEVNULL):
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
