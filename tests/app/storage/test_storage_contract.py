"""The storage contract (docs/architecture.md): ordered revisions, event log, compaction, replicas, schema."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from app import protobuf
from devtools.server import REPO_ROOT, ServerProcess, free_port
from tests.conftest import Databases
from tests.helpers import assert_status, claim, claims_path, iter_watch, watch_lines


def _ns(client: httpx.Client, name: str) -> None:
    client.post("/api/v1/namespaces", json={"metadata": {"name": name}})


def _collect(url: str, path: str, rv: str, until: threading.Event, out: list[dict[str, Any]]) -> None:
    """Watch from rv, resuming from the last seen revision whenever the stream ends."""
    last = rv
    with httpx.Client(base_url=url, timeout=30) as client:
        while not until.is_set():
            try:
                with client.stream("GET", path, params={"watch": "true", "resourceVersion": last, "timeoutSeconds": "1"}) as response:
                    for line in response.iter_lines():
                        if not line:
                            continue
                        event = orjson.loads(line)
                        assert event["type"] != "ERROR", event
                        out.append(event)
                        last = event["object"]["metadata"]["resourceVersion"]
            except httpx.HTTPError:
                time.sleep(0.1)


async def _writes(url: str, namespace: str, writers: int, per_writer: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:

        async def one(w: int) -> None:
            for i in range(per_writer):
                name = f"w{w}-{i % 5}"
                got = await client.get(claims_path(namespace, name))
                if got.status_code == 404:
                    await client.post(claims_path(namespace), json=claim(name))
                elif i % 3 == 0:
                    await client.delete(claims_path(namespace, name))
                else:
                    body = got.json()
                    body["metadata"].setdefault("labels", {})["i"] = str(i)
                    await client.put(claims_path(namespace, name), json=body)  # may 409; that's the point

        await asyncio.gather(*(one(w) for w in range(writers)))


def _history(url: str, namespace: str, since: str, until: str) -> list[tuple[int, str, str]]:
    """Every change after ``since`` up to ``until`` (the last write) as the log has it, via a watch from ``since``."""
    history: list[tuple[int, str, str]] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for e in iter_watch(client, claims_path(namespace), {"resourceVersion": since, "timeoutSeconds": "20"}, timeout=30):
            history.append((int(e["object"]["metadata"]["resourceVersion"]), e["type"], e["object"]["metadata"]["name"]))
            if e["object"]["metadata"]["resourceVersion"] == until:
                break
    return history


def test_concurrent_writers_watchers_see_exact_history(api: httpx.Client, server: ServerProcess, ns: str) -> None:
    start = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    done = threading.Event()
    seen: list[list[dict[str, Any]]] = [[], [], []]
    threads = [threading.Thread(target=_collect, args=(server.url, claims_path(ns), start, done, out)) for out in seen]
    for t in threads:
        t.start()
    asyncio.run(_writes(server.url, ns, writers=8, per_writer=30))
    final_rv = api.get(claims_path(ns)).json()["metadata"]["resourceVersion"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(not out or out[-1]["object"]["metadata"]["resourceVersion"] != final_rv for out in seen):
        time.sleep(0.1)
    done.set()
    for t in threads:
        t.join(10)
    truth = _history(server.url, ns, start, final_rv)
    assert truth, "the writers must have produced events"
    for out in seen:
        got = [(int(e["object"]["metadata"]["resourceVersion"]), e["type"], e["object"]["metadata"]["name"]) for e in out]
        assert got == truth
    revisions = [r for r, _, _ in truth]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
    # The state the watchers reconstruct is the state a LIST returns.
    state: dict[str, int] = {}
    for rev, kind, name in truth:
        if kind == "DELETED":
            state.pop(name, None)
        else:
            state[name] = rev
    listed = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"]) for i in api.get(claims_path(ns)).json()["items"]}
    assert listed == state


def test_watchers_resume_across_restart(start_server: Callable[..., ServerProcess]) -> None:
    """Watchers that resume from their last resourceVersion see every event exactly once,
    in order, across a server restart."""
    first = start_server()
    with httpx.Client(base_url=first.url) as client:
        _ns(client, "restart")
        rv = client.get(claims_path("restart")).json()["metadata"]["resourceVersion"]
    done = threading.Event()
    seen: list[dict[str, Any]] = []
    watcher = threading.Thread(target=_collect, args=(first.url, claims_path("restart"), rv, done, seen))
    watcher.start()
    asyncio.run(_writes(first.url, "restart", writers=4, per_writer=10))
    first.stop()
    second = ServerProcess(first.database_url, port=first.port).start()
    try:
        asyncio.run(_writes(second.url, "restart", writers=4, per_writer=10))
        with httpx.Client(base_url=second.url) as client:
            final = client.get(claims_path("restart")).json()["metadata"]["resourceVersion"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not seen or seen[-1]["object"]["metadata"]["resourceVersion"] != final):
            time.sleep(0.1)
        done.set()
        watcher.join(10)
        truth = _history(second.url, "restart", rv, final)
        got = [(int(e["object"]["metadata"]["resourceVersion"]), e["type"], e["object"]["metadata"]["name"]) for e in seen]
        assert got == truth
        assert len(truth) > 40
    finally:
        done.set()
        second.stop()


def test_compaction_expires_old_revisions(start_server: Callable[..., ServerProcess]) -> None:
    proc = start_server("--compaction-interval", "0.5", "--compaction-window", "0", "--compaction-min-retain", "2", "--default-watch-cache-size", "3")
    with httpx.Client(base_url=proc.url) as client:
        _ns(client, "compact")
        old = client.post(claims_path("compact"), json=claim("c0")).json()["metadata"]["resourceVersion"]
        for i in range(1, 10):
            client.post(claims_path("compact"), json=claim(f"c{i}"))
        # Compaction runs every 0.5 s: until it has passed ``old`` an exact read of it is served.
        deadline = time.monotonic() + 30
        while client.get(claims_path("compact"), params={"resourceVersion": old, "resourceVersionMatch": "Exact"}).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        events = watch_lines(client, claims_path("compact"), {"resourceVersion": old, "timeoutSeconds": "2"}, limit=1)
        assert events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert status["code"] == 410 and status["reason"] == "Expired"
        assert status["message"].startswith("too old resource version")
        assert_status(client.get(claims_path("compact"), params={"resourceVersion": old, "resourceVersionMatch": "Exact"}), 410, "Expired")
        # The same in protobuf: one ERROR frame carrying the Status.
        params = {"watch": "true", "resourceVersion": old, "timeoutSeconds": "2"}
        with client.stream("GET", claims_path("compact"), params=params, headers={"accept": protobuf.CONTENT_TYPE}) as response:
            assert response.headers["content-type"] == protobuf.WATCH_CONTENT_TYPE
            [(kind, raw)] = protobuf.read_watch_events(response.read())
        assert kind == "ERROR"
        assert protobuf.decode_object(raw) == status


CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the "
    "continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with "
    "the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)


def test_a_continue_token_older_than_compaction_expires_with_a_token_for_the_rest(start_server: Callable[..., ServerProcess]) -> None:
    proc = start_server("--compaction-interval", "0.5", "--compaction-window", "0", "--compaction-min-retain", "2", "--default-watch-cache-size", "3")
    with httpx.Client(base_url=proc.url) as client:
        _ns(client, "paged")
        for i in range(5):
            assert client.post(claims_path("paged"), json=claim(f"c{i}")).status_code == 201
        first = client.get(claims_path("paged"), params={"limit": "2"}).json()
        assert [c["metadata"]["name"] for c in first["items"]] == ["c0", "c1"]
        token = first["metadata"]["continue"]
        # Changes after the first page, then compaction past its revision.
        assert client.delete(claims_path("paged", "c3")).status_code == 200
        for i in range(5, 10):
            assert client.post(claims_path("paged"), json=claim(f"c{i}")).status_code == 201
        # Compaction runs every 0.5 s; until it has passed the token's revision the page is still served.
        deadline = time.monotonic() + 30
        while (expired := client.get(claims_path("paged"), params={"limit": "2", "continue": token})).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        status = assert_status(expired, 410, "Expired")
        assert status["message"] == CONTINUE_EXPIRED
        fresh = status["metadata"]["continue"]
        assert fresh and fresh != token
        # The fresh token continues after the same key, at the newest revision: the later changes show.
        rest: list[str] = []
        while fresh:
            page = client.get(claims_path("paged"), params={"limit": "2", "continue": fresh})
            assert page.status_code == 200, page.text
            rest += [c["metadata"]["name"] for c in page.json()["items"]]
            fresh = page.json()["metadata"].get("continue", "")
        assert rest == ["c2", "c4", "c5", "c6", "c7", "c8", "c9"]


def test_two_servers_share_one_ordered_stream(backend: str, databases: Databases, start_server: Callable[..., ServerProcess]) -> None:
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    url = databases.migrated()
    a = start_server("--poll-interval", "0.2", database_url=url, migrate_first=False)
    b = start_server("--poll-interval", "0.2", database_url=url, migrate_first=False)
    with httpx.Client(base_url=a.url) as client:
        _ns(client, "replicas")
        start = client.get(claims_path("replicas")).json()["metadata"]["resourceVersion"]
    done = threading.Event()
    seen_a: list[dict[str, Any]] = []
    seen_b: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=_collect, args=(a.url, claims_path("replicas"), start, done, seen_a)),
        threading.Thread(target=_collect, args=(b.url, claims_path("replicas"), start, done, seen_b)),
    ]
    for t in threads:
        t.start()

    async def both() -> None:
        await asyncio.gather(_writes(a.url, "replicas", 4, 20), _writes(b.url, "replicas", 4, 20))

    asyncio.run(both())
    with httpx.Client(base_url=b.url) as client:
        final = client.get(claims_path("replicas")).json()["metadata"]["resourceVersion"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(not s or s[-1]["object"]["metadata"]["resourceVersion"] != final for s in (seen_a, seen_b)):
        time.sleep(0.1)
    done.set()
    for t in threads:
        t.join(10)
    key = [(e["object"]["metadata"]["resourceVersion"], e["type"]) for e in seen_a]
    assert key == [(e["object"]["metadata"]["resourceVersion"], e["type"]) for e in seen_b]
    revisions = [int(r) for r, _ in key]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
    assert key == [(str(r), t) for r, t, _ in _history(a.url, "replicas", start, final)]


def test_a_replica_that_only_reads_learns_of_another_replicas_write_by_notification(
    backend: str, databases: Databases, start_server: Callable[..., ServerProcess]
) -> None:
    """Postgres LISTEN/NOTIFY: with a poll interval far beyond the test, only the notification of
    the writer's commit can bring the write to the reader's watchers (the reader writes nothing,
    so no poll of its own wakes it either)."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    url = databases.migrated()
    reader = start_server("--poll-interval", "120", database_url=url, migrate_first=False)
    writer = start_server("--poll-interval", "120", database_url=url, migrate_first=False)
    with httpx.Client(base_url=writer.url, timeout=30) as client:
        _ns(client, "notified")
    with httpx.Client(base_url=reader.url, timeout=30) as client:
        # Consistent reads wait for the database's newest revision: this one starts the watch after the namespace.
        start = client.get(claims_path("notified")).json()["metadata"]["resourceVersion"]
        seen: list[dict[str, Any]] = []

        def watch() -> None:
            seen.extend(watch_lines(client, claims_path("notified"), {"resourceVersion": start, "timeoutSeconds": "20"}, limit=1, timeout=30))

        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(0.5)
        with httpx.Client(base_url=writer.url, timeout=30) as other:
            written = other.post(claims_path("notified"), json=claim("c0"))
        assert written.status_code == 201, written.text
        watcher.join(30)
    # The watch ends after 20 s, a sixth of the poll interval: only a notification brings the event before that.
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in seen] == [("ADDED", written.json()["metadata"]["resourceVersion"])]


def _serve_once(url: str) -> subprocess.CompletedProcess[str]:
    """``python -m app serve`` on ``url``, expected to refuse and exit."""
    return subprocess.run(
        [sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{free_port()}", "--database-url", url],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unmigrated_database(databases: Databases, start_server: Callable[..., ServerProcess]) -> None:
    """Postgres is refused until migrated; the embedded SQLite database is created and migrated on start."""
    url = databases.new()
    if databases.backend == "sqlite":
        with httpx.Client(base_url=start_server(database_url=url, migrate_first=False).url) as client:
            _ns(client, "fresh")
            assert client.post(claims_path("fresh"), json=claim("c")).status_code == 201
        return
    result = _serve_once(url)
    assert result.returncode != 0
    assert "python -m app migrate" in result.stderr


def test_a_database_on_the_previous_schema_is_refused_until_migrated(databases: Databases, start_server: Callable[..., ServerProcess]) -> None:
    """Postgres keeps the explicit migrate step; SQLite is upgraded by the server itself."""
    url = databases.new()
    subprocess.run([sys.executable, "-m", "app", "migrate", "--database-url", url, "--revision", "0001_initial"], cwd=REPO_ROOT, check=True, capture_output=True)
    if databases.backend == "postgres":
        refused = _serve_once(url)
        assert refused.returncode != 0
        assert "'0001_initial'" in refused.stderr and "python -m app migrate" in refused.stderr

    upgraded = start_server(database_url=url, migrate_first=databases.backend == "postgres")
    with httpx.Client(base_url=upgraded.url) as client:
        _ns(client, "upgraded")
        created = client.post(claims_path("upgraded"), json=claim("c"))
        assert created.status_code == 201
        stale = created.json()
        stale["metadata"]["labels"] = {"v": "1"}
        assert client.put(claims_path("upgraded", "c"), json=stale).status_code == 200
        assert_status(client.put(claims_path("upgraded", "c"), json=stale), 409, "Conflict")
        assert client.delete(claims_path("upgraded", "c")).status_code == 200
        assert_status(client.get(claims_path("upgraded", "c")), 404, "NotFound")


class _Interposed:
    """The writer's driver connection with a hook around each ``dra_commit`` call: another
    replica's commit can be put exactly where a race would put it."""

    def __init__(self, connection: Any, before: Any = None, after: Any = None) -> None:
        self._connection = connection
        self._before = before
        self._after = after

    async def fetchval(self, query: str, *args: Any) -> Any:
        is_commit = query.startswith("SELECT dra_commit")
        if is_commit and self._before is not None:
            await self._before(self._connection)
        result = await self._connection.fetchval(query, *args)
        if is_commit and self._after is not None:
            await self._after(self._connection)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


class _Writer:
    """The pooled writer connection of a Store's Postgres dialect, its driver connection interposed."""

    def __init__(self, pooled: Any, driver_connection: _Interposed) -> None:
        self._pooled = pooled
        self.driver_connection = driver_connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pooled, name)


async def _interpose(store: Any, before: Any = None, after: Any = None) -> None:
    dialect = store.dialect
    connection = await dialect._writer_connection()
    dialect._writer = _Writer(dialect._writer, _Interposed(connection, before, after))


def _replicas_test(backend: str, databases: Databases, body: Any) -> None:
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    from app.storage.cache import WatchCache
    from app.storage.db import create_engine
    from app.storage.store import Store

    url = databases.migrated()

    async def run() -> None:
        # A poll interval far beyond the test: only notifications tell a replica about the other.
        a = Store(create_engine(url), WatchCache(10_000), poll_interval=60)
        b = Store(create_engine(url), WatchCache(10_000), poll_interval=60)
        await a.start()
        await b.start()
        try:
            await body(a, b)
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(run())


def _object(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "replicas"}}


def test_a_replica_commits_although_another_commits_before_each_of_its_attempts(backend: str, databases: Databases) -> None:
    from app.storage.cache import ADDED
    from app.storage.dialects import WriteOp

    async def body(a: Any, b: Any) -> None:
        moved = 0

        async def other_replica_commits(connection: Any) -> None:
            nonlocal moved
            if not connection.is_in_transaction():  # under the revision lock nobody else can commit
                moved += 1
                await b.write(WriteOp(ADDED, "resourceclaims", "replicas", f"b-{moved}", _object(f"b-{moved}")))

        await _interpose(a, before=other_replica_commits)
        stored = await a.write(WriteOp(ADDED, "resourceclaims", "replicas", "a", _object("a")))
        assert int(stored.obj["metadata"]["resourceVersion"]) > moved  # after the other replica's writes
        assert moved >= 1

    _replicas_test(backend, databases, body)


def test_another_replicas_commit_in_the_revisions_a_failed_write_left_unused_is_seen(backend: str, databases: Databases) -> None:
    from app.storage.cache import ADDED, MODIFIED
    from app.storage.dialects import WriteOp
    from app.storage.errors import RevisionMismatch

    async def body(a: Any, b: Any) -> None:
        injected = False

        async def other_replica_commits(_connection: Any) -> None:
            # Right after our commit, before we read its result: the other replica takes the
            # revision our failed update left unused, and its notification arrives first.
            nonlocal injected
            if not injected:
                injected = True
                await b.write(WriteOp(ADDED, "resourceclaims", "replicas", "b", _object("b")))
                await asyncio.sleep(0.2)

        await _interpose(a, after=other_replica_commits)
        created: Any
        stale: Any
        created, stale = await asyncio.gather(
            a.write(WriteOp(ADDED, "resourceclaims", "replicas", "a", _object("a"))),
            a.write(WriteOp(MODIFIED, "resourceclaims", "replicas", "missing", _object("missing"), expected_revision=10**9)),
            return_exceptions=True,
        )
        assert not isinstance(created, BaseException) and isinstance(stale, RevisionMismatch)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and a.cache.revision < b.cache.revision:
            await asyncio.sleep(0.05)
        assert a.cache.revision == b.cache.revision  # not after the 60 s poll

    _replicas_test(backend, databases, body)


def test_a_namespace_created_through_one_replica_takes_creates_through_another_at_once(
    backend: str, databases: Databases, start_server: Callable[..., ServerProcess]
) -> None:
    """The second replica's cache learns of the namespace a moment after the first one answered;
    a create arriving in that moment is not refused as if the namespace did not exist (upstream's
    namespace lifecycle looks a namespace it has not seen up before refusing)."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    url = databases.migrated()
    first = start_server("--poll-interval", "120", database_url=url, migrate_first=False)
    second = start_server("--poll-interval", "120", database_url=url, migrate_first=False)
    with httpx.Client(base_url=first.url, timeout=30) as one, httpx.Client(base_url=second.url, timeout=30) as other:
        for i in range(20):
            _ns(one, f"fresh-{i}")
            created = other.post(claims_path(f"fresh-{i}"), json=claim("c"))
            assert created.status_code == 201, created.text
        # A namespace nobody created is still refused, after the same look.
        assert_status(other.post(claims_path("never-made"), json=claim("c")), 404, "NotFound")
