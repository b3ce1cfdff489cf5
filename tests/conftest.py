"""Shared fixtures: a real API server process per storage backend, and clients for it.

Every storage and API test (``tests/app``) runs once on SQLite and once on Postgres; clients,
workers and end-to-end tests run on one, SQLite, the embedded default (``DRA_TEST_BACKEND=postgres``
runs them on Postgres): their other half is deselected. Postgres comes from
``DRA_TEST_DATABASE_URL`` when set, otherwise from a throwaway cluster started as an
unprivileged user. Without Postgres binaries the Postgres half is skipped, unless
``DRA_REQUIRE_POSTGRES=1`` (CI), where that is an error.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from devtools.credentials import ClusterCredentials
from devtools.postgres import PostgresNotAvailable, database_url_for_tests
from devtools.server import ServerProcess, migrate, migrated_sqlite, stop_all
from kube.client import KubeClient
from tests.authcluster import AuthCluster, start_auth_cluster
from tests.contract import check_response_body
from tests.helpers import new_namespace

BACKENDS = ["sqlite", "postgres"]
# What clients, workers and end-to-end tests run on: what they test is above the storage.
ONE_BACKEND = os.environ.get("DRA_TEST_BACKEND", "sqlite")
# The storage and API tests, which run on both.
BOTH_BACKENDS = ("tests/app/",)

# Simulators and drivers started by the tests meet in a directory of their own, not in the
# checkout's data directory (short: unix socket paths are limited to 107 bytes).
os.environ.setdefault("DRA_KUBELET_ROOT_DIR", tempfile.mkdtemp(prefix="kr-", dir="/tmp"))


class PostgresCluster:
    """One throwaway Postgres for the whole session, started on first use.

    It outlives the backend-parametrised fixtures: with xdist's ``--dist loadfile`` a worker
    switches backend at every file, and starting a cluster each time cost seconds per file."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self._url: str | None = None
        self._unavailable: PostgresNotAvailable | None = None

    def url(self) -> str:
        if self._unavailable is not None:
            raise self._unavailable
        if self._url is None:
            try:
                self._url = self.stack.enter_context(database_url_for_tests())
            except PostgresNotAvailable as exc:
                self._unavailable = exc
                raise
        return self._url


class Databases:
    """Hands out databases of one backend: empty ones (``new``), and migrated ones (``migrated``),
    copies of one database migrated once per session with ``python -m app migrate`` (the tests of
    migration itself start from ``new``)."""

    def __init__(self, backend: str, tmp: Path, cluster: PostgresCluster) -> None:
        self.backend = backend
        self.tmp = tmp
        self.cluster = cluster
        self._template: str | None = None

    def new(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite+aiosqlite:///{self._sqlite_path()}"
        url = self.cluster.url()
        name = f"t_{uuid.uuid4().hex[:10]}"
        asyncio.run(_create_database(url, name))
        return url.rsplit("/", 1)[0] + "/" + name

    def migrated(self) -> str:
        """A database on the current schema, as ``migrate(self.new())`` leaves it, without a migrate process each."""
        if self.backend == "sqlite":
            return migrated_sqlite(self._sqlite_path())
        if self._template is None:
            template = self.new()
            migrate(template)
            self._template = template
        name = f"t_{uuid.uuid4().hex[:10]}"
        asyncio.run(_create_database(self._template, name, template=self._template.rsplit("/", 1)[1]))
        return self._template.rsplit("/", 1)[0] + "/" + name

    def _sqlite_path(self) -> Path:
        return self.tmp / f"dra-{uuid.uuid4().hex[:8]}.sqlite"


async def _create_database(url: str, name: str, template: str | None = None) -> None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    finally:
        await conn.close()


# Fixtures that start a server process or Postgres. A test that uses one, directly or through
# another fixture, is marked "server": `make test-fast` (the edit loop) leaves those out.
SERVER_FIXTURES = frozenset({"databases", "postgres_cluster", "start_server", "server", "shared_servers", "auth_cluster"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "server: starts an API server process or Postgres (through its fixtures); make test-fast leaves these out")
    config.addinivalue_line("markers", "image: installs the container image's file set as the Dockerfile does (minutes of pip and mypyc); make test-image runs these, make test leaves them out")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, other_backend = [], []
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
        on = getattr(getattr(item, "callspec", None), "params", {}).get("databases")
        if on is not None and on != ONE_BACKEND and not item.nodeid.startswith(BOTH_BACKENDS):
            other_backend.append(item)
        else:
            kept.append(item)
    # Deselected, not parametrised apart: one ``databases`` fixture, so the fixtures built on it
    # (servers, stacks) are rebuilt whenever the backend changes and never serve the other one.
    if other_backend:
        config.hook.pytest_deselected(items=other_backend)
    items[:] = heavy_files_first(kept)


def heavy_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order xdist hands out whole files in (the Makefile's ``--no-loadscope-reorder`` keeps it):
    files that start whole stacks first (end-to-end tests, and those marked ``slow``), then the rest
    by number of tests, most first; each file's tests keep their order. Handing out the longest
    work first leaves the small files to even out the workers at the end, where xdist's own order
    (by number of tests alone) left a minute-long end-to-end file to run last on one worker."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def heaviness(path: str) -> tuple[bool, int]:
        tests = files[path]
        heavy = path.startswith("tests/e2e/") or any(item.get_closest_marker("slow") for item in tests)
        return (not heavy, -len(tests))

    return [item for path in sorted(files, key=heaviness) for item in files[path]]


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    with ExitStack() as stack:
        yield PostgresCluster(stack)


@pytest.fixture(scope="session", params=BACKENDS)
def databases(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres_cluster: PostgresCluster) -> Iterator[Databases]:
    dbs = Databases(request.param, tmp_path_factory.mktemp(request.param), postgres_cluster)
    if request.param == "postgres":
        try:
            dbs.new()
        except PostgresNotAvailable as exc:
            if os.environ.get("DRA_REQUIRE_POSTGRES"):
                pytest.fail(f"Postgres is required here but not available: {exc}")
            pytest.skip(f"no Postgres available: {exc}")
    yield dbs



@pytest.fixture(scope="session")
def backend(databases: Databases) -> str:
    return databases.backend


@pytest.fixture(scope="session")
def start_server(databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ServerProcess]]:
    """Start extra servers: ``start_server(*flags, database_url=None, credentials=None)``; with
    credentials the server serves HTTPS with Node,RBAC (``devtools.credentials``)."""
    started: list[ServerProcess] = []
    logs = tmp_path_factory.mktemp("logs")

    def start(*flags: str, database_url: str | None = None, migrate_first: bool = True, credentials: ClusterCredentials | None = None) -> ServerProcess:
        if database_url is None:
            url = databases.migrated() if migrate_first else databases.new()
        else:
            url = database_url
            if migrate_first:
                migrate(url)
        proc = ServerProcess(url, *flags, log_path=logs / f"server-{len(started)}.log", credentials=credentials)
        started.append(proc)
        return proc.start()

    yield start
    stop_all(started)


@pytest.fixture(scope="session")
def shared_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    """The shared server of each backend, kept for the whole session, like the Postgres cluster:
    a worker of ``--dist loadfile`` switches backend at every file, and tests already share
    these servers across files when run without xdist."""
    servers: dict[str, ServerProcess] = {}
    yield servers
    stop_all(list(servers.values()))


@pytest.fixture(scope="session")
def server(databases: Databases, shared_servers: dict[str, ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    """The shared server of this backend (tests isolate themselves by namespace)."""
    proc = shared_servers.get(databases.backend)
    if proc is None:
        url = databases.migrated()
        log = tmp_path_factory.mktemp("logs") / f"shared-{databases.backend}.log"
        proc = shared_servers[databases.backend] = ServerProcess(url, "--bookmark-interval", "1", log_path=log).start()
    return proc


@pytest.fixture(scope="session")
def auth_cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    """A server of this backend over HTTPS with Node,RBAC and an audit log, for tests of who may do what."""
    yield start_auth_cluster(start_server, tmp_path_factory.mktemp("auth"))


def _contract_hook(response: httpx.Response) -> None:
    """Check every non-streaming JSON answer against the official v1.37 schema."""
    if response.request.url.params.get("watch") in ("true", "1"):
        return  # watch events are checked by the watch helpers as they are read
    response.read()
    check_response_body(response.content, response.headers.get("content-type", ""), f"{response.request.method} {response.request.url.path}")


@pytest.fixture(scope="session")
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    """A client for the shared server; every object it receives is checked against the official schema."""
    with httpx.Client(base_url=server.url, timeout=30.0, event_hooks={"response": [_contract_hook]}) as client:
        yield client


@pytest.fixture
async def kube_client(server: ServerProcess) -> AsyncIterator[KubeClient]:
    """The workers' client for the shared server, for tests that run a worker's parts in their own event loop."""
    async with KubeClient(server.url, user_agent="tests") as client:
        yield client


@pytest.fixture
def ns(api: httpx.Client) -> str:
    """A fresh namespace for one test."""
    return new_namespace(api)
