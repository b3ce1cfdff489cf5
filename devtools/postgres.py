"""Throwaway PostgreSQL clusters for tests, benchmarks and local runs.

Postgres refuses to run as root, so when this process is root the cluster is
initialised and served as an unprivileged user (``postgres`` if that system user
exists, else ``nobody``) in a temp dir owned by that user. The server listens
only on 127.0.0.1 (plus a unix socket inside the temp dir) with trust auth.

Usage::

    with ThrowawayPostgres() as pg:
        engine = create_async_engine(pg.url)

    with database_url_for_tests() as url:   # honours DRA_TEST_DATABASE_URL
        ...

    python -m devtools.postgres [--fast] [--port N]   # prints the URL, runs until Ctrl-C
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

from devtools.ports import free_port

__all__ = [
    "ENV_TEST_DATABASE_URL",
    "PostgresError",
    "PostgresNotAvailable",
    "ThrowawayPostgres",
    "asyncpg_dsn",
    "database_url_for_tests",
    "find_postgres_bin",
]

ENV_TEST_DATABASE_URL = "DRA_TEST_DATABASE_URL"
DIR_PREFIX = "dra-pg-"
OWNER_FILE = "owner.pid"
SUPERUSER = "postgres"

_T = TypeVar("_T")


class PostgresError(RuntimeError):
    """The throwaway cluster could not be created, started or stopped."""


class PostgresNotAvailable(PostgresError):
    """No usable PostgreSQL server binaries were found on this machine."""


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for ``/usr/lib/postgresql/<version>/bin`` directories."""
    nums = re.findall(r"\d+", path.parent.name)
    return tuple(int(n) for n in nums) if nums else (-1,)


def find_postgres_bin() -> Path | None:
    """Return a directory holding ``initdb``/``postgres``/``pg_ctl``, or None.

    Looks at the newest ``/usr/lib/postgresql/*/bin``, then ``pg_config --bindir``,
    then ``initdb`` on PATH.
    """
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    for cand in candidates:
        if _is_bindir(cand):
            return cand
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is not None and out.returncode == 0 and _is_bindir(Path(out.stdout.strip())):
            return Path(out.stdout.strip())
    initdb = shutil.which("initdb")
    if initdb and _is_bindir(Path(initdb).resolve().parent):
        return Path(initdb).resolve().parent
    return None


def _is_bindir(path: Path) -> bool:
    """True when ``path`` holds the executables a cluster needs."""
    return all(os.access(path / exe, os.X_OK) for exe in ("initdb", "postgres", "pg_ctl"))


def _pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (zombies count as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _read_pid(path: Path) -> int | None:
    """First line of a pid file as an int, or None."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _traversable_by_others(path: Path) -> bool:
    """True when every ancestor of ``path`` can be traversed by any user."""
    for part in [path, *path.parents]:
        try:
            if not part.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def cleanup_leftovers(base: Path | None = None) -> int:
    """Kill and remove clusters left behind by processes that no longer exist.

    Only directories created by this module (``dra-pg-*`` with an owner pid file)
    are touched. Returns how many were removed.
    """
    base = base or Path(tempfile.gettempdir())
    removed = 0
    for d in base.glob(DIR_PREFIX + "*"):
        owner = _read_pid(d / OWNER_FILE)
        if owner is None or _pid_alive(owner):
            continue
        postmaster = _read_pid(d / "data" / "postmaster.pid")
        if postmaster is not None and _pid_alive(postmaster):
            with contextlib.suppress(OSError):
                os.kill(postmaster, signal.SIGQUIT)
            deadline = time.monotonic() + 5
            while _pid_alive(postmaster) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _pid_alive(postmaster):
                with contextlib.suppress(OSError):
                    os.kill(postmaster, signal.SIGKILL)
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


class ThrowawayPostgres:
    """A private PostgreSQL cluster in a temp dir, removed again by :meth:`stop`.

    Attributes after :meth:`start`: ``url`` (SQLAlchemy asyncpg URL), ``dsn``
    (plain ``postgresql://`` DSN for asyncpg/psycopg2), ``port``, ``host``,
    ``user``, ``database``, ``socket_dir``, ``data_dir``, ``log_path``.
    """

    def __init__(
        self,
        *,
        database: str = "dra",
        port: int | None = None,
        fast: bool = False,
        settings: Mapping[str, str | int] | None = None,
        bin_dir: Path | str | None = None,
        base_dir: Path | str | None = None,
        run_as: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        """Configure (not start) a cluster.

        ``fast=True`` turns off fsync/synchronous_commit/full_page_writes (tests only).
        ``settings`` are extra ``postgres -c`` options; they win over the defaults.
        ``run_as`` forces the OS user used when running as root.
        """
        self.database = database
        self.host = "127.0.0.1"
        self.user = SUPERUSER
        self.fast = fast
        self._requested_port = port
        self._extra_settings = dict(settings or {})
        self._bin_dir = Path(bin_dir) if bin_dir else None
        self._base_dir = Path(base_dir) if base_dir else None
        self._run_as = run_as
        self._startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._lock = threading.Lock()
        self.port = 0
        self.tmp_dir: Path | None = None
        self.os_user: str | None = None

    # ------------------------------------------------------------------ paths

    @property
    def data_dir(self) -> Path:
        """The cluster's PGDATA."""
        return self._require_tmp() / "data"

    @property
    def socket_dir(self) -> Path:
        """Directory holding the server's unix socket."""
        return self._require_tmp() / "sock"

    @property
    def log_path(self) -> Path:
        """The server log file."""
        return self._require_tmp() / "postgres.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL: ``postgresql+asyncpg://USER@127.0.0.1:PORT/DB``."""
        self._require_running()
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def dsn(self) -> str:
        """libpq/asyncpg DSN: ``postgresql://USER@127.0.0.1:PORT/DB``."""
        self._require_running()
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def pid(self) -> int | None:
        """Process id of the server (or of its setpriv/runuser wrapper), None when stopped."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def _require_tmp(self) -> Path:
        if self.tmp_dir is None:
            raise PostgresError("ThrowawayPostgres has not been started")
        return self.tmp_dir

    def _require_running(self) -> None:
        if not self.running:
            raise PostgresError("ThrowawayPostgres is not running")

    # -------------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> ThrowawayPostgres:
        """Create the cluster, start the server, create the database. Idempotent."""
        with self._lock:
            if self.running:
                return self
            bin_dir = self._bin_dir or find_postgres_bin()
            if bin_dir is None or not _is_bindir(bin_dir):
                raise PostgresNotAvailable(
                    "PostgreSQL server binaries (initdb, postgres, pg_ctl) not found: looked in "
                    "/usr/lib/postgresql/*/bin, `pg_config --bindir` and PATH. Install the postgresql "
                    f"server package or set {ENV_TEST_DATABASE_URL} to an existing server."
                )
            self._bin_dir = bin_dir
            base = self._choose_base_dir()
            cleanup_leftovers(base)
            try:
                self._create_dir(base)
                self._initdb()
                self._start_server()
                self._create_database()
            except BaseException:
                self._teardown()
                raise
            atexit.register(self.stop)
            return self

    def pause(self) -> None:
        """Stop the server (``pg_ctl -m fast``: clients are disconnected, commits are kept even with
        ``fast=True``) but keep its data: an outage, ended by :meth:`resume`."""
        with self._lock:
            self._kill_server("fast")

    def resume(self) -> None:
        """Start the server again after :meth:`pause`, on the same port and data."""
        with self._lock:
            if not self.running:
                self._start_server(self.port)

    def stop(self) -> None:
        """Shut the server down immediately (``pg_ctl -m immediate``) and remove the temp dir."""
        with self._lock:
            self._teardown()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    # ---------------------------------------------------------------- helpers

    def _choose_base_dir(self) -> Path:
        """Temp base dir; when dropping privileges it must be traversable by that user."""
        base = self._base_dir or Path(tempfile.gettempdir())
        if os.geteuid() == 0 and not _traversable_by_others(base):
            base = Path("/tmp")
        base.mkdir(parents=True, exist_ok=True)
        return base

    def _create_dir(self, base: Path) -> None:
        self.tmp_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=base))
        (self.tmp_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        self.socket_dir.mkdir()
        self.data_dir.mkdir(mode=0o700)
        if os.geteuid() == 0:
            self.os_user = self._run_as or self._pick_user()
            pw = pwd.getpwnam(self.os_user)
            for p in (self.tmp_dir, self.socket_dir, self.data_dir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            os.chmod(self.tmp_dir, 0o755)
        else:
            self.os_user = pwd.getpwuid(os.geteuid()).pw_name

    @staticmethod
    def _pick_user() -> str:
        for name in ("postgres", "nobody"):
            try:
                pwd.getpwnam(name)
            except KeyError:
                continue
            return name
        raise PostgresError("running as root but neither a 'postgres' nor a 'nobody' user exists")

    def _wrap(self, argv: list[str]) -> list[str]:
        """Prefix ``argv`` so it runs as the unprivileged user when we are root."""
        if os.geteuid() != 0:
            return argv
        assert self.os_user is not None
        setpriv = shutil.which("setpriv")
        if setpriv:
            pw = pwd.getpwnam(self.os_user)
            return [setpriv, f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--", *argv]
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", self.os_user, "--", *argv]
        raise PostgresError("running as root but neither setpriv nor runuser is available to drop privileges")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", TZ="UTC")
        if self.tmp_dir is not None:
            env["HOME"] = str(self.tmp_dir)
        return env

    def _run(self, argv: list[str], what: str, timeout: float = 120.0) -> None:
        try:
            res = subprocess.run(
                self._wrap(argv),
                cwd=self.tmp_dir,
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise PostgresError(f"{what} timed out after {timeout}s") from e
        if res.returncode != 0:
            raise PostgresError(f"{what} failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}".rstrip())

    def _initdb(self) -> None:
        assert self._bin_dir is not None
        self._run(
            [
                str(self._bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
                "--no-instructions",
            ],
            "initdb",
        )

    def _settings(self, port: int) -> dict[str, str]:
        s: dict[str, str | int] = {
            "listen_addresses": "127.0.0.1",
            "port": port,
            "unix_socket_directories": str(self.socket_dir),
            "max_connections": 200,
            "shared_buffers": "256MB",
            "max_wal_size": "2GB",
            "dynamic_shared_memory_type": "mmap",
            "logging_collector": "off",
            "log_min_messages": "warning",
            "timezone": "UTC",
        }
        if self.fast:
            s.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        s.update(self._extra_settings)
        return {k: str(v) for k, v in s.items()}

    def _start_server(self, port: int | None = None) -> None:
        assert self._bin_dir is not None
        wanted = port or self._requested_port
        attempts = 1 if wanted else 5
        last_log = ""
        for _ in range(attempts):
            port = wanted or free_port()
            argv = [str(self._bin_dir / "postgres"), "-D", str(self.data_dir)]
            for k, v in self._settings(port).items():
                argv += ["-c", f"{k}={v}"]
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the server's lifetime
            self._proc = subprocess.Popen(
                self._wrap(argv),
                cwd=self.tmp_dir,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.port = port
            if self._wait_ready():
                return
            last_log = self._log_tail()
            self._kill_server()
            if "could not bind" not in last_log and "already in use" not in last_log:
                break
        raise PostgresError(f"postgres did not start; log {self.log_path}:\n{last_log}")

    def _wait_ready(self) -> bool:
        """Wait until the server accepts TCP connections; False if it exited or timed out."""
        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout
        pg_isready = self._bin_dir / "pg_isready" if self._bin_dir else None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            if pg_isready is not None and os.access(pg_isready, os.X_OK):
                res = subprocess.run(
                    [str(pg_isready), "-q", "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", "postgres"],
                    env=self._env(),
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
                if res.returncode == 0:
                    return True
            else:
                with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1):
                    if "ready to accept connections" in self._log_tail():
                        return True
            time.sleep(0.05)
        return False

    def _create_database(self) -> None:
        assert self._bin_dir is not None
        if self.database == "postgres":
            return
        createdb = self._bin_dir / "createdb"
        if os.access(createdb, os.X_OK):
            res = subprocess.run(
                [str(createdb), "-h", self.host, "-p", str(self.port), "-U", self.user, self.database],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if res.returncode != 0:
                raise PostgresError(f"createdb {self.database} failed: {res.stderr.strip()}")
            return
        admin = f"postgresql://{self.user}@{self.host}:{self.port}/postgres"
        _run_coro(_execute(admin, f'CREATE DATABASE "{self.database}"'))

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except (OSError, PostgresError):
            return ""

    def _kill_server(self, mode: str = "immediate") -> None:
        """Shutdown via pg_ctl (``mode``), then signals, then reap."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None and self._bin_dir is not None and self.tmp_dir is not None:
            with contextlib.suppress(PostgresError, OSError):
                self._run(
                    [
                        str(self._bin_dir / "pg_ctl"),
                        "stop",
                        "-D",
                        str(self.data_dir),
                        "-m",
                        mode,
                        "-w",
                        "-t",
                        "10",
                    ],
                    "pg_ctl stop",
                    timeout=20,
                )
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            if proc.poll() is not None:
                break
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self._proc = None
        if self._log_file is not None:
            with contextlib.suppress(OSError):
                self._log_file.close()
            self._log_file = None

    def _teardown(self) -> None:
        self._kill_server()
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None
        self.port = 0


# ---------------------------------------------------------------- external URLs


def asyncpg_dsn(url: str) -> str:
    """Turn a SQLAlchemy URL (``postgresql+asyncpg://``) into a plain ``postgresql://`` DSN."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return urlunsplit(("postgresql", *parts[1:]))


def _sqlalchemy_url(url: str) -> str:
    """Turn any PostgreSQL URL into the ``postgresql+asyncpg://`` form."""
    return urlunsplit(("postgresql+asyncpg", *urlsplit(asyncpg_dsn(url))[1:]))


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


async def _execute(dsn: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _run_coro(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion, even when called from inside a running event loop."""
    result: list[_T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=target, name="pg-admin", daemon=True)
    t.start()
    t.join()
    if error:
        raise error[0]
    return result[0]


@contextlib.contextmanager
def database_url_for_tests(*, fast: bool = True, prefix: str = "dra_test") -> Iterator[str]:
    """Yield a SQLAlchemy asyncpg URL of an empty database, dropped afterwards.

    With ``DRA_TEST_DATABASE_URL`` set (any PostgreSQL URL of a role allowed to
    create databases), a fresh database ``<prefix>_<hex>`` is created there and
    dropped on exit. Otherwise a :class:`ThrowawayPostgres` is started (``fast``
    selects fsync=off) and stopped on exit. Raises :class:`PostgresNotAvailable`
    when neither is possible.
    """
    external = os.environ.get(ENV_TEST_DATABASE_URL, "").strip()
    if not external:
        with ThrowawayPostgres(fast=fast) as pg:
            yield pg.url
        return
    admin = asyncpg_dsn(external)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    _run_coro(_execute(admin, f'CREATE DATABASE "{name}"'))
    try:
        yield _with_database(_sqlalchemy_url(external), name)
    finally:
        _run_coro(_execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# ------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    """Start a throwaway cluster, print its URL and wait for Ctrl-C/SIGTERM."""
    ap = argparse.ArgumentParser(prog="python -m devtools.postgres", description=main.__doc__)
    ap.add_argument("--port", type=int, default=None, help="TCP port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--database", default="dra", help="database to create (default: dra)")
    ap.add_argument("--fast", action="store_true", help="fsync=off, synchronous_commit=off (tests only)")
    ap.add_argument(
        "-c",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra postgres setting (repeatable)",
    )
    args = ap.parse_args(argv)
    settings: dict[str, str | int] = {}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"-c expects NAME=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        pg = ThrowawayPostgres(database=args.database, port=args.port, fast=args.fast, settings=settings)
        pg.start()
    except PostgresError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        print(pg.url, flush=True)
        print(
            f"# dsn={pg.dsn} socket_dir={pg.socket_dir} log={pg.log_path}; Ctrl-C to stop", file=sys.stderr, flush=True
        )
        while not stop.is_set():
            if not pg.running:
                print(f"error: postgres exited; log tail:\n{pg._log_tail()}", file=sys.stderr)
                return 1
            stop.wait(1.0)
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
