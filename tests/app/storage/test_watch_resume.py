"""Watches resumed at a version another replica just acknowledged: two real server processes on
one Postgres, writers on both, and a watch on the other replica started at every acknowledged
write's resourceVersion, with and without one replica killed and restarted mid-run."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import orjson
import pytest

from devtools.server import ServerProcess
from tests.conftest import Databases
from tests.helpers import claim, claims_path

NS = "resume"
WRITERS = 8
MAX_RUN_SECONDS = 300.0
WATCH_SECONDS = 1  # long enough for the replay and the live writes after it; shorter watches free their slots sooner
MAX_OPEN_WATCHES = 48
MIN_WATCHES = 200
START_SECONDS = 120.0  # a loaded machine imports slowly

Change = tuple[int, str, str]  # resourceVersion, event type, name


@dataclass
class ResumedWatch:
    """One watch started at ``since`` (a write the other replica acknowledged): what it answered."""

    replica: str
    since: int
    status: int = 0  # none: the replica was down (killed) when the watch started
    reason: str = ""  # of a refusal
    changes: list[Change] = field(default_factory=list)


@dataclass
class Run:
    watches: list[ResumedWatch] = field(default_factory=list)
    writes: int = 0
    started: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


async def _watch(client: httpx.AsyncClient, replica: str, since: int, run: Run, open_watches: asyncio.Semaphore) -> None:
    watch = ResumedWatch(replica, since)
    params = {"watch": "true", "resourceVersion": str(since), "timeoutSeconds": str(WATCH_SECONDS)}
    try:
        async with client.stream("GET", claims_path(NS), params=params) as response:
            watch.status = response.status_code
            if response.status_code != 200:
                watch.reason = orjson.loads(await response.aread()).get("reason", "")
            else:
                async for line in response.aiter_lines():
                    if line:
                        event = orjson.loads(line)
                        meta = event["object"]["metadata"]
                        watch.changes.append((int(meta["resourceVersion"]), event["type"], meta.get("name", "")))
    except httpx.HTTPError:
        pass  # the replica was killed under it: what it received before still counts
    finally:
        open_watches.release()
    run.watches.append(watch)


async def _writer(w: int, clients: dict[str, httpx.AsyncClient], run: Run, open_watches: asyncio.Semaphore) -> None:
    """Creates and updates through one replica; each acknowledged write starts a watch on the other."""
    mine, other = ("a", "b") if w % 2 == 0 else ("b", "a")
    client = clients[mine]
    i = 0
    while not run.done.is_set():
        i += 1
        name = f"w{w}-{i % 3}"
        try:
            got = await client.get(claims_path(NS, name))
            if got.status_code == 404:
                answer = await client.post(claims_path(NS), json=claim(name))
            else:
                body = got.json()
                body["metadata"].setdefault("labels", {})["i"] = str(i)
                answer = await client.put(claims_path(NS, name), json=body)
        except httpx.HTTPError:
            await asyncio.sleep(0.05)  # that replica is down: not acknowledged
            continue
        if answer.status_code not in (200, 201):
            continue  # a conflict with another writer, or the replica going down
        run.writes += 1
        if open_watches.locked():
            continue
        await open_watches.acquire()
        since = int(answer.json()["metadata"]["resourceVersion"])
        run.started += 1
        task = asyncio.create_task(_watch(clients[other], other, since, run, open_watches))
        run.tasks.add(task)
        task.add_done_callback(run.tasks.discard)


async def _stress(replicas: dict[str, ServerProcess], restart: str | None) -> Run:
    run = Run()
    open_watches = asyncio.Semaphore(MAX_OPEN_WATCHES)
    limits = httpx.Limits(max_connections=MAX_OPEN_WATCHES + 2 * WRITERS)
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits))
            for name, server in replicas.items()
        }
        await clients["a"].post("/api/v1/namespaces", json={"metadata": {"name": NS}})
        writers = [asyncio.create_task(_writer(w, clients, run, open_watches)) for w in range(WRITERS)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_RUN_SECONDS
        # However slow the machine: until enough watches started (a restart after a third of them).
        while run.started < MIN_WATCHES and loop.time() < deadline:
            if restart is not None and run.started >= MIN_WATCHES // 3:
                server = replicas[restart]
                server.stop(kill=True)  # SIGKILL, as a crash would
                await asyncio.sleep(0.5)
                await asyncio.to_thread(server.start, START_SECONDS)
                restart = None
            await asyncio.sleep(0.1)
        run.done.set()
        await asyncio.gather(*writers)
        await asyncio.gather(*tuple(run.tasks))
    return run


async def _log(database_url: str) -> list[Change]:
    """Every change of the namespace's claims, as the database's event log holds it."""
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch(
            "SELECT revision, type, name FROM events WHERE resource = 'resourceclaims.resource.k8s.io' AND namespace = $1 ORDER BY revision", NS
        )
    finally:
        await conn.close()
    return [(int(r["revision"]), r["type"], r["name"]) for r in rows]


@pytest.mark.parametrize("restart", [None, "a", "b"], ids=["both-up", "restart-a", "restart-b"])
def test_a_watch_resumed_at_another_replicas_acknowledged_version_starts_after_it(
    backend: str, databases: Databases, tmp_path: Path, restart: str | None
) -> None:
    """Every watch sees exactly the changes after the version it asked for, in order: none at or
    below it (the write it resumes from was acknowledged by the other replica, which this one may
    not have applied yet), and none missing. Upstream replays ``watchCache.getAllEventsSinceLocked``
    (events after the version) and ``cacheWatcher.process`` sends a live event only when it is
    newer than the version; the watch is not held up meanwhile
    (``Cacher.waitUntilWatchCacheFreshAndForceAllEvents`` waits for sendInitialEvents only)."""
    if backend != "postgres":
        pytest.skip("several replicas need Postgres")
    url = databases.migrated()
    replicas = {name: ServerProcess(url, log_path=tmp_path / f"{name}.log") for name in ("a", "b")}
    try:
        for server in replicas.values():
            server.start(START_SECONDS)
        run = asyncio.run(_stress(replicas, restart))
    finally:
        for server in replicas.values():
            server.stop()
    log = asyncio.run(_log(url))
    repeated = [w for w in run.watches if w.changes and w.changes[0][0] <= w.since]
    examples = [f"watch on {w.replica} from {w.since}: first {w.changes[0]}" for w in repeated[:3]]
    assert not repeated, f"{len(repeated)} of {len(run.watches)} watches began at or below their resourceVersion: {examples}"
    assert len(run.watches) >= MIN_WATCHES, f"only {len(run.watches)} watches from {run.writes} writes"
    if restart is None:
        assert all(w.status for w in run.watches), "a watch found no replica to answer though both ran"
    refused = [w for w in run.watches if w.status not in (0, 200)]
    assert not refused, refused[:3]
    for watch in run.watches:
        expected = [change for change in log if change[0] > watch.since][: len(watch.changes)]
        assert watch.changes == expected, f"watch on {watch.replica} from {watch.since}: {watch.changes[:5]}... where the log has {expected[:5]}..."
    assert sum(len(w.changes) for w in run.watches) > len(run.watches)  # the watches saw the writes that followed
