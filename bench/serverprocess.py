"""``python -m app serve`` as a subprocess on 127.0.0.1, for the benchmarks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, now
from devtools.ports import free_port

# ----------------------------------------------------------------------------- server process


class ServerProcess:
    """``python -m app serve`` as a subprocess on 127.0.0.1 (after ``python -m app migrate``)."""

    def __init__(self, database_url: str, log_path: Path, extra_args: list[str], root: Path = ROOT) -> None:
        self.root = root  # the checkout whose server runs
        self.database_url = database_url
        self.log_path = log_path
        self.extra_args = extra_args
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """Server process id."""
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        """The serve command line."""
        return [
            sys.executable,
            "-m",
            "app",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            # Plain HTTP: the clients here speak it (TLS is the same cost with auth on and off).
            "--insecure-serving",
            "--database-url",
            self.database_url,
            *self.extra_args,
        ]

    def start(self, timeout: float = 90.0) -> None:
        """Migrate, start the server and wait for /readyz."""
        self.migrate()
        self.launch()
        self.wait_ready(timeout)

    def migrate(self) -> None:
        """``python -m app migrate`` on the database."""
        mig = subprocess.run(
            [sys.executable, "-m", "app", "migrate", "--database-url", self.database_url],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if mig.returncode != 0:
            raise RuntimeError(f"`python -m app migrate` failed ({mig.returncode}):\n{mig.stdout}\n{mig.stderr}")

    def launch(self, env: dict[str, str] | None = None) -> None:
        """Start the server process (its output to the log), without waiting for it."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open for the server's lifetime
        self.proc = subprocess.Popen(
            self.command(),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )

    def wait_ready(self, timeout: float, poll: float = 0.1) -> None:
        """Until /readyz passes (RuntimeError with the log's end if the server exits or ``timeout`` passes)."""
        import httpx

        assert self.proc is not None, "wait_ready follows launch"
        deadline = now() + timeout
        while now() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}; log {self.log_path}:\n{self.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base_url + "/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(poll)
        raise RuntimeError(f"server not ready after {timeout}s; log {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, limit: int = 3000) -> str:
        """End of the server log."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait)
                    break
        if self._log is not None:
            self._log.close()
            self._log = None
