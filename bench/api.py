"""API benchmark: the DRA API server against raw database round trips, measured in one run.

Starts a throwaway Postgres (fsync on), migrates it, starts ``python -m app serve`` as a real
subprocess on 127.0.0.1 and measures, for each client concurrency, creates/s, updates/s,
GETs/s and LISTs (1,000 objects)/s of ResourceClaims, plus watch delivery latency with 100
watchers under a fixed write rate. The same documents go through the same driver (asyncpg,
or aiosqlite with ``--sqlite``) as single-row statements, and every server figure is printed
next to its raw figure with the ratio server/raw. Targets are reported PASS/MISS only.

Run ``python -m bench.api --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import os
import platform
import random
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from bench.machine import load_average, reports_machine
from devtools.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
GROUP = "/apis/resource.k8s.io/v1"
NS_CRUD = "bench"
NS_LIST = "bench-list"
NS_WATCH = "bench-watch"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAX_OPS_PER_PHASE = 5_000_000
REQUEST_TIMEOUT = 30.0
ERROR_PAUSE = 0.01

now = time.perf_counter


# ----------------------------------------------------------------------------- documents


def claim(name: str, namespace: str, seq: int) -> dict[str, Any]:
    """A realistic ResourceClaim: two device requests with CEL selectors, a constraint and a config."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "dra-bench", "app.kubernetes.io/component": "trainer"},
            "annotations": {"bench.example.com/seq": str(seq)},
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 2,
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.attributes["gpu.example.com"].model == "LATEST-GPU-MODEL"'
                                        ' && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi"))'
                                        " >= 0"
                                    }
                                }
                            ],
                        },
                    },
                    {
                        "name": "nic",
                        "exactly": {
                            "deviceClassName": "nic.example.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.driver == "nic.example.com"'
                                        ' && device.attributes["nic.example.com"].rdma == true'
                                    }
                                }
                            ],
                        },
                    },
                ],
                "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.example.com",
                            "parameters": {
                                "apiVersion": "gpu.example.com/v1",
                                "kind": "GpuConfig",
                                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
                            },
                        },
                    }
                ],
            }
        },
    }


def claim_bytes(name: str, namespace: str, seq: int) -> bytes:
    """JSON body of :func:`claim`."""
    return orjson.dumps(claim(name, namespace, seq))


def claims_path(namespace: str, name: str | None = None) -> str:
    """API path of the claims collection (or one claim) in a namespace."""
    base = f"{GROUP}/namespaces/{namespace}/resourceclaims"
    return f"{base}/{name}" if name else base


# ----------------------------------------------------------------------------- statistics


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of unsorted values; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100.0 * len(s) + 0.5) - 1))
    return s[k]


def ms(v: float | None) -> float | None:
    """Seconds to milliseconds, rounded; None stays None."""
    return None if v is None else round(v * 1000.0, 3)


@dataclass
class PhaseResult:
    """Figures of one measured phase."""

    phase: str
    side: str  # "server" or "raw"
    clients: int
    ok: int
    elapsed_s: float
    rate: float
    p50_ms: float | None
    p99_ms: float | None
    conflicts: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    cpu_cores: dict[str, float | None] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- CPU accounting


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, cpu seconds) for every process, from /proc."""
    tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    return table


def _tree_cpu(root: int | None, table: dict[int, tuple[int, float]]) -> float | None:
    """CPU seconds of ``root`` and all its descendants (living ones)."""
    if root is None or root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    seen: set[int] = set()
    while stack and len(seen) < 100_000:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table.get(pid, (0, 0.0))[1]
        stack.extend(children.get(pid, []))
    return total


def _machine_busy() -> float | None:
    """CPU seconds all cores spent busy since boot (/proc/stat), None if unavailable."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / float(os.sysconf("SC_CLK_TCK"))


class CpuMeter:
    """Measures CPU (in cores) used by this process, the server tree, the database tree and everything else."""

    def __init__(self, server_pid: int | None, db_pid: int | None) -> None:
        self.server_pid = server_pid
        self.db_pid = db_pid
        self._start: tuple[float, float, float | None, float | None, float | None] = (0.0, 0.0, None, None, None)

    def _sample(self) -> tuple[float, float, float | None, float | None, float | None]:
        table = _proc_table()
        return (
            now(),
            time.process_time(),
            _tree_cpu(self.server_pid, table),
            _tree_cpu(self.db_pid, table),
            _machine_busy(),
        )

    def start(self) -> None:
        """Remember the current counters."""
        self._start = self._sample()

    def stop(self) -> dict[str, float | None]:
        """Cores used by client/server/db/other processes since :meth:`start`."""
        t1, c1, s1, d1, m1 = self._sample()
        t0, c0, s0, d0, m0 = self._start
        wall = max(t1 - t0, 1e-9)

        def cores(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round((b - a) / wall, 2)

        out = {"client": cores(c0, c1), "server": cores(s0, s1), "db": cores(d0, d1)}
        busy = cores(m0, m1)
        out["other"] = None if busy is None else round(max(0.0, busy - sum(v or 0.0 for v in out.values())), 2)
        return out


# ----------------------------------------------------------------------------- HTTP clients


class ApiClient(Protocol):
    """One logical client connection: a request returns (status, body)."""

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]: ...

    async def aclose(self) -> None: ...


class RawHTTP:
    """Minimal HTTP/1.1 keep-alive client on asyncio streams (one connection, one request at a time)."""

    def __init__(
        self, host: str, port: int, headers: dict[str, str], ssl_context: ssl.SSLContext | None = None, media_type: str = JSON
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context  # HTTPS (with a client certificate when the context holds one)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._common = f"Host: {host}:{port}\r\nAccept: {media_type}\r\n{extra}".encode()
        self._content_type = f"Content-Type: {media_type}\r\n".encode()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20, ssl=self.ssl_context)
        return self._reader, self._writer

    def _head(self, method: str, path: str, body: bytes | None) -> bytes:
        line = f"{method} {path} HTTP/1.1\r\n".encode()
        if body is None:
            return line + self._common + b"\r\n"
        return line + self._common + self._content_type + b"Content-Length: %d\r\n\r\n" % len(body)

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers: dict[bytes, bytes] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if sep:
                headers[k.strip().lower()] = v.strip()
        return status, headers

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request and read the whole response."""
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                reader, writer = await self._connect()
                writer.write(self._head(method, path, body) + (body or b""))
                status, headers = await self._read_head(reader)
                data = await self._read_body(reader, headers, status, method)
        except BaseException:
            await self.aclose()
            raise
        if headers.get(b"connection", b"").lower() == b"close":
            await self.aclose()
        return status, data

    async def _read_body(
        self, reader: asyncio.StreamReader, headers: dict[bytes, bytes], status: int, method: str
    ) -> bytes:
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return b""
        if b"content-length" in headers:
            return await reader.readexactly(int(headers[b"content-length"]))
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            parts = []
            for _ in range(10_000_000):
                size = int((await reader.readline()).split(b";", 1)[0], 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            return b"".join(parts)
        data = await reader.read()
        await self.aclose()
        return data

    async def aclose(self) -> None:
        """Close the connection (a later request reconnects)."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class HttpxApi:
    """ApiClient over a (possibly shared) httpx.AsyncClient."""

    def __init__(self, client: Any, owner: bool) -> None:
        self.client = client
        self.owner = owner

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request through the pool."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        r = await self.client.request(method, path, content=body, headers=headers)
        return r.status_code, r.content

    async def aclose(self) -> None:
        """Close the pool if this wrapper owns it."""
        if self.owner:
            await self.client.aclose()


def make_clients(
    kind: str, base_url: str, n: int, headers: dict[str, str], ssl_context: ssl.SSLContext | None = None, media_type: str = JSON
) -> list[ApiClient]:
    """``n`` clients; raw = one connection each, httpx = one shared keep-alive pool of ``n``."""
    parts = urlsplit(base_url)
    if kind == "raw":
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return [RawHTTP(parts.hostname or "127.0.0.1", port, headers, ssl_context, media_type) for _ in range(n)]
    if media_type != JSON:
        raise ValueError("the httpx client sends JSON only")
    import httpx

    pool = httpx.AsyncClient(
        base_url=base_url,
        headers={"Accept": "application/json", **headers},
        limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
        timeout=REQUEST_TIMEOUT,
        http1=True,
        http2=False,
        verify=ssl_context or True,
    )
    return [HttpxApi(pool, owner=(i == 0)) for i in range(n)]


async def close_all(clients: list[ApiClient]) -> None:
    """Close every client."""
    for c in clients:
        with contextlib.suppress(Exception):
            await c.aclose()


# ----------------------------------------------------------------------------- watchers


class ChunkDecoder:
    """Incremental decoder of an HTTP/1.1 chunked body."""

    def __init__(self) -> None:
        self.buf = b""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Add raw bytes; return the body bytes of every complete chunk so far."""
        buf = self.buf + data
        pieces: list[bytes] = []
        pos = 0
        while not self.done:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            if size == 0:
                self.done = True
                break
            end = eol + 2 + size
            if len(buf) < end + 2:
                break
            pieces.append(buf[eol + 2 : end])
            pos = end + 2
        self.buf = buf[pos:]
        return b"".join(pieces)


class _WatchProtocol(asyncio.Protocol):
    """Reads one streaming HTTP/1.1 response with callbacks only (no coroutine per read)."""

    def __init__(self, on_head: Callable[[int], None], on_data: Callable[[bytes, float], None]) -> None:
        self.on_head = on_head
        self.on_data = on_data
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._head = b""
        self._in_body = False
        self._chunks: ChunkDecoder | None = None

    def data_received(self, data: bytes) -> None:
        t = now()
        if not self._in_body:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4 :]
            self._in_body, self._head = True, b""
            lines = head.split(b"\r\n")
            self.on_head(int(lines[0].split(b" ", 2)[1]))
            if any(ln.lower().replace(b" ", b"") == b"transfer-encoding:chunked" for ln in lines[1:]):
                self._chunks = ChunkDecoder()
        if self._chunks is not None:
            data = self._chunks.feed(data)
        if data:
            self.on_data(data, t)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class Watcher:
    """One watch stream; records (object name, arrival time) of every ADDED/MODIFIED event."""

    def __init__(self, marker: bytes) -> None:
        """``marker`` is ``"name":"<prefix>`` of the objects the writer creates (fast path, no JSON parse)."""
        self.status = 0
        self.connected = asyncio.Event()
        self.arrivals: list[tuple[bytes, float]] = []
        self.types: Counter[str] = Counter()
        self.error: str | None = None
        self._buf = b""
        self._marker = marker
        self._skip = len(b'"name":"')

    def on_head(self, status: int) -> None:
        """Response headers arrived."""
        self.status = status
        self.connected.set()

    def on_data(self, data: bytes, t: float) -> None:
        """Split body bytes into events and record (name, arrival time) of each ADDED/MODIFIED."""
        buf = self._buf + data
        if b"\n" not in buf:
            self._buf = buf
            return
        *lines, self._buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            i = line.find(self._marker)
            if i >= 0 and (line.startswith(b'{"type":"ADDED"') or line.startswith(b'{"type":"MODIFIED"')):
                start = i + self._skip
                self.types["ADDED" if line[9] == 65 else "MODIFIED"] += 1
                self.arrivals.append((line[start : line.find(b'"', start)], t))
                continue
            try:
                ev = orjson.loads(line)
                etype = ev["type"]
                self.types[etype] += 1
                if etype in ("ADDED", "MODIFIED"):
                    self.arrivals.append((ev["object"]["metadata"]["name"].encode(), t))
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                self.types["unparsable"] += 1

    async def run(
        self,
        kind: str,
        base_url: str,
        path: str,
        headers: dict[str, str],
        deadline: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """Hold the stream open until ``deadline`` (or until the server ends it)."""
        try:
            if kind == "raw":
                parts = urlsplit(base_url)
                host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
                loop = asyncio.get_running_loop()
                transport, proto = await loop.create_connection(
                    lambda: _WatchProtocol(self.on_head, self.on_data), host, port, ssl=ssl_context
                )
                try:
                    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    transport.write(
                        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n{extra}\r\n".encode()
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(proto.closed), timeout=max(0.0, deadline - now()))
                finally:
                    transport.close()
            else:
                import httpx

                timeout = httpx.Timeout(REQUEST_TIMEOUT, read=max(1.0, deadline - now() + 5))
                async with (
                    httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, verify=ssl_context or True) as client,
                    client.stream("GET", path) as resp,
                ):
                    self.on_head(resp.status_code)
                    async for chunk in resp.aiter_raw():
                        self.on_data(chunk, now())
                        if now() >= deadline:
                            break
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.connected.set()


# ----------------------------------------------------------------------------- raw database baseline


class RawDB(Protocol):
    """Single-row statements straight through the database driver, one connection per client."""

    driver: str

    async def open(self, n: int) -> None: ...

    async def insert(self, w: int, name: str, doc: str) -> int: ...

    async def update(self, w: int, row_id: int, doc: str) -> None: ...

    async def get(self, w: int, name: str) -> str | None: ...

    async def list_all(self, w: int) -> int: ...

    async def fill_list_table(self, docs: list[tuple[str, str]]) -> None: ...

    async def close(self) -> None: ...

    async def drop(self) -> None: ...

    async def describe(self) -> dict[str, str]: ...


class AsyncpgRaw:
    """Raw baseline through asyncpg: autocommit, one statement per round trip, prepared statements."""

    driver = "asyncpg"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conns: list[Any] = []

    async def open(self, n: int) -> None:
        """Create the tables (if needed) and ``n`` connections."""
        import asyncpg

        await self._close_conns()
        first = await asyncpg.connect(self.dsn, timeout=30)
        await first.execute(
            "CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, name text NOT NULL, data jsonb NOT NULL);"
            "CREATE INDEX IF NOT EXISTS bench_raw_name ON bench_raw (name);"
            "CREATE TABLE IF NOT EXISTS bench_raw_list (id bigserial PRIMARY KEY, name text NOT NULL, data jsonb NOT NULL)"
        )
        self.conns = [first] + [await asyncpg.connect(self.dsn, timeout=30) for _ in range(max(0, n - 1))]

    async def insert(self, w: int, name: str, doc: str) -> int:
        """INSERT one row, returning its id."""
        return int(
            await self.conns[w].fetchval("INSERT INTO bench_raw (name, data) VALUES ($1, $2) RETURNING id", name, doc)
        )

    async def update(self, w: int, row_id: int, doc: str) -> None:
        """UPDATE one row by id."""
        await self.conns[w].execute("UPDATE bench_raw SET data = $2 WHERE id = $1", row_id, doc)

    async def get(self, w: int, name: str) -> str | None:
        """SELECT one row's document by name."""
        v = await self.conns[w].fetchval("SELECT data FROM bench_raw WHERE name = $1", name)
        return None if v is None else str(v)

    async def list_all(self, w: int) -> int:
        """SELECT every row of the list table; returns the row count."""
        return len(await self.conns[w].fetch("SELECT name, data FROM bench_raw_list ORDER BY id"))

    async def fill_list_table(self, docs: list[tuple[str, str]]) -> None:
        """(Re)fill the list table."""
        await self.conns[0].execute("TRUNCATE bench_raw_list")
        await self.conns[0].executemany("INSERT INTO bench_raw_list (name, data) VALUES ($1, $2)", docs)

    async def _close_conns(self) -> None:
        for c in self.conns:
            with contextlib.suppress(Exception):
                await c.close()
        self.conns = []

    async def close(self) -> None:
        """Close every connection (the tables stay until :meth:`drop`)."""
        await self._close_conns()

    async def drop(self) -> None:
        """Drop the baseline tables."""
        import asyncpg

        with contextlib.suppress(Exception):
            conn = await asyncpg.connect(self.dsn, timeout=30)
            try:
                await conn.execute("DROP TABLE IF EXISTS bench_raw; DROP TABLE IF EXISTS bench_raw_list")
            finally:
                await conn.close()

    async def describe(self) -> dict[str, str]:
        """Server version and durability settings."""
        import asyncpg

        conn = await asyncpg.connect(self.dsn, timeout=30)
        try:
            return {
                k: str(await conn.fetchval(f"SHOW {k}"))
                for k in ("server_version", "fsync", "synchronous_commit", "shared_buffers")
            }
        finally:
            await conn.close()


class SqliteRaw:
    """Raw baseline through aiosqlite with the server's pragmas (WAL, synchronous=NORMAL), autocommit."""

    driver = "aiosqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conns: list[Any] = []

    async def open(self, n: int) -> None:
        """Create the tables and ``n`` connections (SQLite serialises writers; busy_timeout waits)."""
        import aiosqlite

        await self.close_conns()
        for _ in range(n):
            c = await aiosqlite.connect(str(self.path), isolation_level=None, timeout=30)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
                await c.execute(f"PRAGMA {pragma}")
            self.conns.append(c)
        await self.conns[0].executescript(
            "CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
            " data TEXT NOT NULL);"
            "CREATE INDEX IF NOT EXISTS bench_raw_name ON bench_raw (name);"
            "CREATE TABLE IF NOT EXISTS bench_raw_list (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
            " data TEXT NOT NULL);"
        )

    async def insert(self, w: int, name: str, doc: str) -> int:
        """INSERT one row, returning its id."""
        cur = await self.conns[w].execute("INSERT INTO bench_raw (name, data) VALUES (?, ?)", (name, doc))
        return int(cur.lastrowid or 0)

    async def update(self, w: int, row_id: int, doc: str) -> None:
        """UPDATE one row by id."""
        await self.conns[w].execute("UPDATE bench_raw SET data = ? WHERE id = ?", (doc, row_id))

    async def get(self, w: int, name: str) -> str | None:
        """SELECT one row's document by name."""
        async with self.conns[w].execute("SELECT data FROM bench_raw WHERE name = ?", (name,)) as cur:
            row = await cur.fetchone()
        return None if row is None else str(row[0])

    async def list_all(self, w: int) -> int:
        """SELECT every row of the list table."""
        async with self.conns[w].execute("SELECT name, data FROM bench_raw_list ORDER BY id") as cur:
            return len(list(await cur.fetchall()))

    async def fill_list_table(self, docs: list[tuple[str, str]]) -> None:
        """(Re)fill the list table."""
        await self.conns[0].execute("DELETE FROM bench_raw_list")
        await self.conns[0].execute("BEGIN")
        await self.conns[0].executemany("INSERT INTO bench_raw_list (name, data) VALUES (?, ?)", docs)
        await self.conns[0].execute("COMMIT")

    async def close_conns(self) -> None:
        """Close every connection."""
        for c in self.conns:
            with contextlib.suppress(Exception):
                await c.close()
        self.conns = []

    async def close(self) -> None:
        """Close every connection."""
        await self.close_conns()

    async def drop(self) -> None:
        """Remove the baseline database file."""
        await self.close_conns()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(str(self.path) + suffix).unlink()

    async def describe(self) -> dict[str, str]:
        """SQLite library version and pragmas."""
        import sqlite3

        return {"sqlite_version": sqlite3.sqlite_version, "journal_mode": "wal", "synchronous": "NORMAL"}


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
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open for the server's lifetime
        self.proc = subprocess.Popen(
            self.command(),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        import httpx

        deadline = now() + timeout
        while now() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}; log {self.log_path}:\n{self.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base_url + "/readyz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
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


# ----------------------------------------------------------------------------- measurement loop

Op = Callable[[], Awaitable[str]]


@dataclass
class LoopStats:
    """Raw outcome of a closed loop."""

    outcomes: Counter[str]
    latencies: list[float]
    elapsed: float


async def closed_loop(ops: list[Op], duration: float, max_ops: int = MAX_OPS_PER_PHASE) -> LoopStats:
    """Run each op back-to-back in its own task for ``duration`` seconds (and at most ``max_ops`` in total).

    An op returns "ok", "conflict" or an error label; only "ok" ops count towards latency.
    """
    outcomes: Counter[str] = Counter()
    latencies: list[float] = []
    issued = 0
    start = now()
    deadline = start + duration

    async def worker(op: Op) -> None:
        nonlocal issued
        while issued < max_ops:
            t0 = now()
            if t0 >= deadline:
                return
            issued += 1
            try:
                out = await op()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                out = f"exception:{type(e).__name__}"
            t1 = now()
            outcomes[out] += 1
            if out == "ok":
                latencies.append(t1 - t0)
            elif out != "conflict":
                await asyncio.sleep(ERROR_PAUSE)

    tasks = [asyncio.create_task(worker(op)) for op in ops]
    _done, pending = await asyncio.wait(tasks, timeout=duration + REQUEST_TIMEOUT + 5)
    for t in pending:
        t.cancel()
        outcomes["timeout"] += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    return LoopStats(outcomes, latencies, now() - start)


def status_label(status: int, want: int) -> str:
    """Outcome label of an HTTP status."""
    if status == want:
        return "ok"
    if status == 409:
        return "conflict"
    return f"http:{status}"


# ----------------------------------------------------------------------------- the benchmark


@dataclass
class Options:
    """Parsed command line."""

    clients: list[int]
    duration: float
    warmup: float
    list_size: int
    watchers: int
    watch_rate: float
    watch_duration: float
    client_kind: str
    phases: set[str]
    headers: dict[str, str]
    server_args: list[str]
    ssl_context: ssl.SSLContext | None = None  # HTTPS clients (--against-upstream: both servers, client certificates)
    protobuf: bool = False  # request and response bodies in Kubernetes' protobuf instead of JSON


class Bench:
    """Runs every phase against one server and one raw baseline and collects the results."""

    def __init__(
        self,
        opts: Options,
        base_url: str,
        raw: RawDB | None,
        cpu: CpuMeter,
    ) -> None:
        self.o = opts
        self.base_url = base_url
        self.raw = raw
        self.cpu = cpu
        self.results: list[PhaseResult] = []
        self.created: list[str] = []
        self.raw_names: list[str] = []
        self.raw_ids: list[int] = []
        self.serial = itertools.count()
        self.tag = f"{int(time.time()) % 1_000_000:06d}"
        self.notes: list[str] = []
        # What makes the run's figures untrue (main exits non-zero): e.g. a LIST answered short.
        self.failures: list[str] = []
        # Bodies as the server is asked to take and give them: JSON, or protobuf (kube/protobuf.py).
        self.media_type = PROTOBUF if opts.protobuf else JSON
        self.encode: Callable[[dict[str, Any]], bytes] = orjson.dumps
        self.decode: Callable[[bytes], Any] = orjson.loads
        if opts.protobuf:
            from kube import protobuf

            self.encode, self.decode = protobuf.encode_object, protobuf.decode_object

    def list_items(self, body: bytes) -> int:
        """How many items a LIST answer holds, counted without decoding them (a full decode of
        every measured LIST would cost the client more CPU than the server spends on it): in
        JSON each claim has one ``"uid":`` (the benchmark's claims have no owner references), in
        protobuf each item is one field 2 of the list message."""
        if self.media_type == JSON:
            return body.count(b'"uid":')
        from kube import protobuf

        _, _, raw = protobuf.open_envelope(body)
        return sum(1 for number, *_ in protobuf._fields(raw, 0, len(raw), "list") if number == 2)

    def claim_body(self, name: str, namespace: str, seq: int) -> bytes:
        """:func:`claim` in the phase's media type."""
        return self.encode(claim(name, namespace, seq))

    # --------------------------------------------------------------- helpers

    def clients(self, n: int) -> list[ApiClient]:
        """Fresh client connections for a phase."""
        return make_clients(self.o.client_kind, self.base_url, n, self.o.headers, self.o.ssl_context, self.media_type)

    async def prime(self, clients: list[ApiClient]) -> None:
        """Open every connection before the clock starts."""
        await asyncio.gather(*(c.request("GET", "/readyz") for c in clients))

    async def measure(
        self, phase: str, side: str, n: int, make_ops: Callable[[], list[Op]], extra: dict[str, Any] | None = None
    ) -> PhaseResult:
        """Warm up, then run a measured closed loop and record the result."""
        if self.o.warmup > 0:
            await closed_loop(make_ops(), self.o.warmup)
        ops = make_ops()
        self.cpu.start()
        st = await closed_loop(ops, self.o.duration)
        cpu = self.cpu.stop()
        ok = st.outcomes.pop("ok", 0)
        conflicts = st.outcomes.pop("conflict", 0)
        res = PhaseResult(
            phase=phase,
            side=side,
            clients=n,
            ok=ok,
            elapsed_s=round(st.elapsed, 3),
            rate=round(ok / st.elapsed, 1) if st.elapsed > 0 else 0.0,
            p50_ms=ms(percentile(st.latencies, 50)),
            p99_ms=ms(percentile(st.latencies, 99)),
            conflicts=conflicts,
            errors=dict(st.outcomes),
            cpu_cores=cpu,
            extra=extra or {},
        )
        self.results.append(res)
        print(
            f"  {side:6s} {phase:7s} c={n:<3d} {res.rate:>9.1f}/s  p50 {res.p50_ms} ms  p99 {res.p99_ms} ms"
            f"  conflicts {conflicts}  errors {res.errors or 0}  cpu {cpu}",
            flush=True,
        )
        return res

    async def ensure_namespaces(self) -> None:
        """Create the benchmark namespaces (409 = already there)."""
        [c] = self.clients(1)
        try:
            for ns in (NS_CRUD, NS_LIST, NS_WATCH):
                body = self.encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                status, data = await c.request("POST", "/api/v1/namespaces", body)
                if status not in (200, 201, 409):
                    raise RuntimeError(f"creating namespace {ns}: HTTP {status} {data[:300]!r}")
            status, data = await c.request("POST", claims_path(NS_CRUD), self.claim_body(f"probe-{self.tag}", NS_CRUD, 0))
            if status not in (201, 409):
                raise RuntimeError(f"creating a ResourceClaim: HTTP {status} {data[:500]!r}")
            if status == 201:
                self.created.append(f"probe-{self.tag}")
        finally:
            await close_all([c])

    async def create_many(self, namespace: str, prefix: str, count: int, conc: int = 16) -> list[str]:
        """Create ``count`` claims (bounded: 120 s); returns the names created."""
        clients = self.clients(conc)
        names: list[str] = []
        todo = iter(range(count))
        deadline = now() + 120

        async def worker(c: ApiClient) -> None:
            for i in todo:
                if now() > deadline:
                    return
                name = f"{prefix}-{i}"
                status, _ = await c.request("POST", claims_path(namespace, None), self.claim_body(name, namespace, i))
                if status in (201, 409):
                    names.append(name)

        try:
            await asyncio.gather(*(worker(c) for c in clients))
        finally:
            await close_all(clients)
        return names

    # --------------------------------------------------------------- server phases

    async def server_create(self, n: int) -> None:
        """POST claims back-to-back."""
        clients = self.clients(n)
        await self.prime(clients)

        def make_ops() -> list[Op]:
            # Unique across calls: bench.profile runs the phase twice against one server.
            round_ = next(self.serial)

            def op_for(w: int, c: ApiClient) -> Op:
                seq = 0

                async def op() -> str:
                    nonlocal seq
                    seq += 1
                    name = f"c{self.tag}-{n}-{round_}-{w}-{seq}"
                    status, _ = await c.request("POST", claims_path(NS_CRUD), self.claim_body(name, NS_CRUD, seq))
                    if status == 201:
                        self.created.append(name)
                    return status_label(status, 201)

                return op

            return [op_for(w, c) for w, c in enumerate(clients)]

        try:
            await self.measure("create", "server", n, make_ops)
        finally:
            await close_all(clients)

    async def server_update(self, n: int) -> None:
        """PUT claims with the resourceVersion of the previous response (each client owns its objects)."""
        per_client = 4
        want = n * per_client
        if len(self.created) < want:
            self.created += await self.create_many(NS_CRUD, f"u{self.tag}-{n}", want - len(self.created))
        names = self.created[:want]
        clients = self.clients(n)
        await self.prime(clients)
        objs: dict[str, dict[str, Any]] = {}

        async def refresh(c: ApiClient, name: str) -> None:
            status, data = await c.request("GET", claims_path(NS_CRUD, name))
            if status == 200:
                objs[name] = self.decode(data)

        try:
            for i in range(0, len(names), n):
                await asyncio.gather(*(refresh(clients[j % n], nm) for j, nm in enumerate(names[i : i + n])))

            def op_for(w: int, c: ApiClient) -> Op:
                mine = [nm for nm in names[w::n] if nm in objs]
                k = 0

                async def op() -> str:
                    nonlocal k
                    if not mine:
                        return "no-objects"
                    name = mine[k % len(mine)]
                    k += 1
                    obj = objs[name]
                    obj["metadata"].setdefault("annotations", {})["bench.example.com/seq"] = str(k)
                    status, data = await c.request("PUT", claims_path(NS_CRUD, name), self.encode(obj))
                    if status == 200:
                        objs[name] = self.decode(data)
                    elif status == 409:
                        await refresh(c, name)
                    return status_label(status, 200)

                return op

            await self.measure("update", "server", n, lambda: [op_for(w, c) for w, c in enumerate(clients)])
        finally:
            await close_all(clients)

    async def server_get(self, n: int) -> None:
        """GET random existing claims."""
        if not self.created:
            self.created += await self.create_many(NS_CRUD, f"g{self.tag}-{n}", 1000)
        clients = self.clients(n)
        await self.prime(clients)
        pool = self.created[:100_000]

        def op_for(c: ApiClient, rng: random.Random) -> Op:
            async def op() -> str:
                status, _ = await c.request("GET", claims_path(NS_CRUD, rng.choice(pool)))
                return status_label(status, 200)

            return op

        try:
            await self.measure("get", "server", n, lambda: [op_for(c, random.Random(w)) for w, c in enumerate(clients)])
        finally:
            await close_all(clients)

    async def prepare_list(self) -> None:
        """Create ``list_size`` claims in the list namespace and check a LIST returns them."""
        [c] = self.clients(1)
        try:
            status, data = await c.request("GET", claims_path(NS_LIST))
            have = len(self.decode(data).get("items") or []) if status == 200 else 0
            if have < self.o.list_size:
                await self.create_many(NS_LIST, "l", self.o.list_size)
                status, data = await c.request("GET", claims_path(NS_LIST))
                have = len(self.decode(data).get("items") or []) if status == 200 else 0
            if have != self.o.list_size:
                self.notes.append(f"LIST returned {have} items, expected {self.o.list_size} (HTTP {status})")
        finally:
            await close_all([c])

    async def server_list(self, n: int) -> None:
        """LIST the namespace holding ``list_size`` claims."""
        clients = self.clients(n)
        await self.prime(clients)
        sizes: list[int] = []
        # Items per answer of every LIST, one tally per make_ops() call (the warm-up's, then the
        # measured loop's): a short 200 is not a LIST of list_size.
        tallies: list[Counter[int]] = []

        def make_ops() -> list[Op]:
            tallies.append(Counter())
            return [op_for(c, tallies[-1]) for c in clients]

        def op_for(c: ApiClient, returned: Counter[int]) -> Op:
            async def op() -> str:
                status, data = await c.request("GET", claims_path(NS_LIST))
                if status != 200:
                    return status_label(status, 200)
                items = self.list_items(data)
                returned[items] += 1
                if len(sizes) < 1000:
                    sizes.append(len(data))
                return "ok" if items == self.o.list_size else "short"

            return op

        try:
            result = await self.measure("list", "server", n, make_ops, {"objects_per_list": self.o.list_size})
            returned = tallies[-1]
            result.extra["objects_per_list"] = sorted(returned) if len(returned) != 1 else next(iter(returned))
            if sizes:
                result.extra["bytes_per_list"] = int(sum(sizes) / len(sizes))
            if short := sum(count for items, count in returned.items() if items != self.o.list_size):
                got = ", ".join(f"{count} x {items}" for items, count in sorted(returned.items()) if items != self.o.list_size)
                self.failures.append(f"LIST at {n} clients: {short} of {sum(returned.values())} answers held fewer or more than {self.o.list_size} items ({got})")
        finally:
            await close_all(clients)

    # --------------------------------------------------------------- raw phases

    async def raw_phases(self, n: int) -> None:
        """Raw statements at concurrency ``n``: insert, update, get by name, select 1,000 rows."""
        raw = self.raw
        if raw is None:
            return
        await raw.open(n)
        try:
            if "create" in self.o.phases or "update" in self.o.phases or "get" in self.o.phases:

                def insert_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        seq = 0

                        async def op() -> str:
                            nonlocal seq
                            seq += 1
                            name = f"r{n}-{w}-{seq}-{next(self.serial)}"
                            row_id = await raw.insert(w, name, claim_bytes(name, NS_CRUD, seq).decode())
                            self.raw_names.append(name)
                            self.raw_ids.append(row_id)
                            return "ok"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("create", "raw", n, insert_ops)
            if "update" in self.o.phases and self.raw_ids:
                ids = self.raw_ids[: n * 4]

                def update_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        mine = ids[w::n] or ids
                        k = 0

                        async def op() -> str:
                            nonlocal k
                            k += 1
                            await raw.update(w, mine[k % len(mine)], claim_bytes(f"u-{k}", NS_CRUD, k).decode())
                            return "ok"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("update", "raw", n, update_ops)
            if "get" in self.o.phases and self.raw_names:
                pool = self.raw_names[:100_000]

                def get_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        rng = random.Random(w)

                        async def op() -> str:
                            return "ok" if await raw.get(w, rng.choice(pool)) is not None else "missing"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("get", "raw", n, get_ops)
            if "list" in self.o.phases:
                docs = [(f"l-{i}", claim_bytes(f"l-{i}", NS_LIST, i).decode()) for i in range(self.o.list_size)]
                await raw.fill_list_table(docs)

                def list_ops() -> list[Op]:
                    def op_for(w: int) -> Op:
                        async def op() -> str:
                            return "ok" if await raw.list_all(w) == self.o.list_size else "short"

                        return op

                    return [op_for(w) for w in range(n)]

                await self.measure("list", "raw", n, list_ops, {"objects_per_list": self.o.list_size})
        finally:
            await raw.close()

    # --------------------------------------------------------------- watch

    async def watch_latency(self) -> dict[str, Any]:
        """W watchers on the claims collection; a writer creates claims at a fixed rate."""
        o = self.o
        [c] = self.clients(1)
        try:
            status, data = await c.request("GET", claims_path(NS_WATCH) + "?limit=1")
            if status != 200:
                raise RuntimeError(f"LIST {NS_WATCH}: HTTP {status} {data[:300]!r}")
            rv = orjson.loads(data)["metadata"]["resourceVersion"]
        finally:
            await close_all([c])
        path = claims_path(NS_WATCH) + f"?watch=true&resourceVersion={rv}"
        prefix = f"w-{self.tag}-{rv}-"
        watchers = [Watcher(f'"name":"{prefix}'.encode()) for _ in range(o.watchers)]
        stream_deadline = now() + o.watch_duration + 60
        tasks = [
            asyncio.create_task(w.run(o.client_kind, self.base_url, path, o.headers, stream_deadline, o.ssl_context)) for w in watchers
        ]
        result: dict[str, Any] = {"watchers": o.watchers, "target_rate": o.watch_rate, "duration_s": o.watch_duration}
        writers = self.clients(min(64, max(16, int(o.watch_rate / 20))))
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    await asyncio.gather(*(w.connected.wait() for w in watchers))
            bad = [w for w in watchers if w.status != 200]
            if bad:
                result["watch_errors"] = sorted({f"{w.status} {w.error or ''}".strip() for w in bad})
            await self.prime(writers)
            await asyncio.sleep(0.5)
            resp_at: dict[bytes, float] = {}
            free: asyncio.Queue[ApiClient] = asyncio.Queue()
            for wc in writers:
                free.put_nowait(wc)
            outcomes: Counter[str] = Counter()
            write_lat: list[float] = []

            async def write(i: int) -> None:
                wc = await free.get()
                name = f"{prefix}{i}"
                t0 = now()
                try:
                    st, _ = await wc.request("POST", claims_path(NS_WATCH), claim_bytes(name, NS_WATCH, i))
                    t1 = now()
                    outcomes[status_label(st, 201)] += 1
                    if st == 201:
                        resp_at[name.encode()] = t1
                        write_lat.append(t1 - t0)
                except Exception as e:
                    outcomes[f"exception:{type(e).__name__}"] += 1
                finally:
                    free.put_nowait(wc)

            total = int(o.watch_rate * o.watch_duration)
            pending: list[asyncio.Task[None]] = []
            self.cpu.start()
            t_start = now()
            launched = 0
            while launched < total and now() < t_start + o.watch_duration + 30:
                due = min(total, int((now() - t_start) * o.watch_rate) + 1)
                while launched < due:
                    pending.append(asyncio.create_task(write(launched)))
                    launched += 1
                delay = t_start + launched / o.watch_rate - now()
                await asyncio.sleep(max(0.0, delay))
            write_elapsed = now() - t_start
            _done, late = await asyncio.wait(pending, timeout=REQUEST_TIMEOUT) if pending else (set(), set())
            for t in late:
                t.cancel()
            ok = len(resp_at)
            expected = ok * sum(1 for w in watchers if w.status == 200)
            drain_deadline = now() + 15
            while now() < drain_deadline:
                got = sum(sum(1 for nm, _ in w.arrivals if nm in resp_at) for w in watchers)
                if got >= expected:
                    break
                await asyncio.sleep(0.1)
            result["cpu_cores"] = self.cpu.stop()
            lat = [t - resp_at[nm] for w in watchers for nm, t in w.arrivals if nm in resp_at]
            result.update(
                writes_ok=ok,
                write_errors={k: v for k, v in outcomes.items() if k != "ok"},
                achieved_rate=round(ok / write_elapsed, 1) if write_elapsed > 0 else 0.0,
                write_p50_ms=ms(percentile(write_lat, 50)),
                write_p99_ms=ms(percentile(write_lat, 99)),
                events_expected=expected,
                events_received=len(lat),
                events_before_response=sum(1 for v in lat if v < 0),
                p50_ms=ms(percentile(lat, 50)),
                p90_ms=ms(percentile(lat, 90)),
                p99_ms=ms(percentile(lat, 99)),
                max_ms=ms(max(lat) if lat else None),
                event_types=dict(sum((w.types for w in watchers), Counter())),
            )
            errs = sorted({w.error for w in watchers if w.error})
            if errs:
                result["stream_errors"] = errs[:5]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await close_all(writers)
        print(f"  watch: {result}", flush=True)
        return result


# ----------------------------------------------------------------------------- report


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


# Who the auth phase sends requests as, besides nobody: a member of system:masters, and a user
# RBAC allows through a RoleBinding (among the default bindings every authenticated user has).
AUTH_USERS = {"admin": ("bench-admin-token", "bench-admin", "system:masters"), "rbac": ("bench-user-token", "bench-user", "")}
# Rounds of off, admin, rbac in turn, so that a change in the machine's other load weighs on every side alike.
AUTH_ROUNDS = 2


def _merged(results: list[PhaseResult], phase: str) -> PhaseResult:
    """One side's rounds as one phase: requests and time summed, rates and CPU over the whole."""
    elapsed = sum(r.elapsed_s for r in results)
    ok = sum(r.ok for r in results)
    cpu: dict[str, float | None] = {}
    for key in results[0].cpu_cores:
        busy = [r.cpu_cores.get(key) for r in results]
        cpu[key] = None if any(b is None for b in busy) or not elapsed else round(sum(b * r.elapsed_s for b, r in zip(busy, results, strict=True) if b is not None) / elapsed, 3)
    errors: dict[str, int] = {}
    for r in results:
        for k, v in r.errors.items():
            errors[k] = errors.get(k, 0) + v
    return dataclasses.replace(
        results[0],
        phase=phase,
        ok=ok,
        elapsed_s=round(elapsed, 3),
        rate=round(ok / elapsed, 1) if elapsed else 0.0,
        p50_ms=max((r.p50_ms for r in results if r.p50_ms is not None), default=None),
        p99_ms=max((r.p99_ms for r in results if r.p99_ms is not None), default=None),
        conflicts=sum(r.conflicts for r in results),
        errors=errors,
        cpu_cores=cpu,
    )


async def _grant_claim_reads(admin: Bench, user: str) -> None:
    """A Role that may get claims in the benchmark's namespace, bound to ``user``."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS_CRUD}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "bench-claim-reader"},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]}]}  # fmt: skip
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bench-claim-reader"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bench-claim-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}  # fmt: skip
    (client,) = admin.clients(1)
    try:
        for path, body in ((f"{rbac}/roles", role), (f"{rbac}/rolebindings", binding)):
            status, text = await client.request("POST", path, orjson.dumps(body))
            if status not in (201, 409):
                raise RuntimeError(f"auth phase: POST {path} answered {status}: {text[:300]!r}")
    finally:
        await close_all([client])


def _cpu_per_request(result: PhaseResult) -> float | None:
    cores = result.cpu_cores.get("server")
    return cores * result.elapsed_s / result.ok if cores and result.ok else None


async def auth_cost(opts: Options, bench: Bench, db_url: str, tmp: Path, plain_pid: int | None, db_pid: int | None) -> dict[str, Any] | None:
    """The same GET load, on the same database, against a second server that authenticates bearer
    tokens and authorizes with Node,RBAC, as an admin (system:masters) and as a user a RoleBinding
    allows: server CPU per request of each against the same run's server without auth."""
    n = max(opts.clients)
    tokens = tmp / "tokens.csv"
    tokens.write_text("".join(f'{token},{user},{user}-uid' + (f',"{groups}"' if groups else "") + "\n" for token, user, groups in AUTH_USERS.values()))
    auth_server = ServerProcess(
        db_url, tmp / "server-auth.log", [*opts.server_args, "--authorization-mode", "Node,RBAC", "--token-auth-file", str(tokens)]
    )
    auth_server.start()
    try:
        sides: dict[str, Bench] = {"off": Bench(opts, bench.base_url, None, CpuMeter(plain_pid, db_pid))}
        for side, (token, _user, _groups) in AUTH_USERS.items():
            authed_opts = dataclasses.replace(opts, headers={**opts.headers, "Authorization": f"Bearer {token}"})
            sides[side] = Bench(authed_opts, auth_server.base_url, None, CpuMeter(auth_server.pid, db_pid))
        await _grant_claim_reads(sides["admin"], AUTH_USERS["rbac"][1])
        for side_bench in sides.values():
            side_bench.created = bench.created
        for _round in range(AUTH_ROUNDS):
            for side, side_bench in sides.items():
                print(f"  auth-{side}:", flush=True)
                await side_bench.server_get(n)
    finally:
        auth_server.stop()
    merged = {side: _merged(b.results, f"get/auth-{side}") for side, b in sides.items()}
    bench.results.extend(merged.values())
    figures: dict[str, Any] = {}
    cost_off = _cpu_per_request(merged["off"])
    figures["cpu_us_per_get_off"] = cost_off and cost_off * 1e6
    line = [f"  authn+authz: server CPU per GET {_fmt(cost_off and cost_off * 1e6, 0)} us off"]
    for side in AUTH_USERS:
        cost_on = _cpu_per_request(merged[side])
        share = (cost_on - cost_off) / cost_on if cost_off and cost_on else None
        figures[f"cpu_us_per_get_{side}"] = cost_on and cost_on * 1e6
        figures[f"auth_share_{side}"] = share
        line.append(f"{_fmt(cost_on and cost_on * 1e6, 0)} us as {side} ({_fmt(share and share * 100, 1)}% of the request, x{_fmt(cost_on / cost_off if cost_on and cost_off else None, 3)} of off)")
    print(", ".join(line), flush=True)
    return figures


# ----------------------------------------------------------------------------- against upstream

# --against-upstream: these phases against upstream's kube-apiserver + etcd and against this server
# + its database, each started fresh per round, both over HTTPS as the admin (a client certificate
# in system:masters) with Node,RBAC on, so transport, authentication and authorization cost alike.
UPSTREAM_PHASES = ("create", "update", "get", "list")
SIDES = ("upstream", "this")

# (base URL, client TLS context, server pid, database pid, description)
SideStack = tuple[str, ssl.SSLContext, int | None, int | None, str]


@contextlib.contextmanager
def _upstream_stack(directory: Path) -> Iterator[SideStack]:
    """kube-apiserver on etcd; etcd syncs its writes as Postgres does here (fsync on)."""
    from devtools.upstream import ETCD_VERSION, KUBERNETES_VERSION, UpstreamControlPlane

    with UpstreamControlPlane(directory, workers=False, etcd_fsync=True) as plane:
        assert plane.apiserver is not None and plane.etcd is not None
        context = plane.credentials.httpx_options("admin")["verify"]
        assert isinstance(context, ssl.SSLContext)
        desc = f"kube-apiserver {KUBERNETES_VERSION} + etcd {ETCD_VERSION} (fsync on)"
        yield plane.url, context, plane.apiserver.process.pid, plane.etcd.process.pid, desc


@contextlib.contextmanager
def _this_stack(directory: Path, args: argparse.Namespace, server_args: list[str]) -> Iterator[SideStack]:
    """``python -m app serve`` with the same kind of credentials, on a throwaway Postgres (fsync on) or SQLite."""
    from devtools.credentials import ClusterCredentials
    from devtools.server import ServerProcess as SecureServer
    from devtools.server import migrate

    credentials = ClusterCredentials.ensure(directory / "pki")
    context = credentials.httpx_options("admin")["verify"]
    assert isinstance(context, ssl.SSLContext)
    with _database(args, directory) as (db_url, _raw, db_pid):
        assert db_url is not None
        migrate(db_url)
        server = SecureServer(db_url, *server_args, log_path=directory / "server.log", credentials=credentials)
        with server:
            assert server.process is not None
            desc = "this server + " + ("SQLite (in process)" if args.sqlite else "Postgres (fsync on)")
            yield server.url, context, server.process.pid, db_pid, desc


def _cpu_us_per_request(result: PhaseResult) -> float | None:
    """Server + database CPU per successful request, in µs: both sides pay for their storage."""
    cores = [result.cpu_cores.get(k) for k in ("server", "db")]
    if cores[0] is None or not result.ok:
        return None
    return sum(c or 0.0 for c in cores) * result.elapsed_s / result.ok * 1e6


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


async def against_upstream(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Every phase at every concurrency on both stacks, ``--rounds`` times with the order of the
    sides alternating; returns the JSON document and prints this server's figures beside upstream's."""
    phases = [p for p in UPSTREAM_PHASES if p in opts.phases]
    runs: dict[str, list[PhaseResult]] = {side: [] for side in SIDES}
    descriptions: dict[str, str] = {}
    notes: list[str] = []
    failures: list[str] = []
    meta: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average_start": load_average(),
                            "cpus": os.cpu_count(), "duration_s": opts.duration, "rounds": args.rounds, "clients": opts.clients,
                            "media_type": PROTOBUF if opts.protobuf else JSON}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="dra-bench-upstream-") as tmpdir:
        for round_ in range(args.rounds):
            for side in SIDES if round_ % 2 == 0 else SIDES[::-1]:
                directory = Path(tmpdir) / f"{side}-{round_}"
                directory.mkdir()
                stack = _upstream_stack(directory) if side == "upstream" else _this_stack(directory, args, opts.server_args)
                with stack as (url, context, server_pid, db_pid, desc):
                    descriptions[side] = desc
                    print(f"-- round {round_ + 1}: {desc} at {url}", flush=True)
                    # kube-apiserver keeps busy for a while after /readyz (post-start hooks, bootstrap
                    # policy, API discovery): both sides get the same idle time before the clock runs.
                    await asyncio.sleep(args.settle)
                    bench = Bench(dataclasses.replace(opts, ssl_context=context), url, None, CpuMeter(server_pid, db_pid))
                    await bench.ensure_namespaces()
                    if "list" in phases:
                        await bench.prepare_list()
                    steps = {"create": bench.server_create, "update": bench.server_update, "get": bench.server_get, "list": bench.server_list}
                    for n in opts.clients:
                        for phase in phases:
                            await steps[phase](n)
                    runs[side] += bench.results
                    notes += [f"{side}: {note}" for note in bench.notes]
                    failures += [f"{side}: {failure}" for failure in bench.failures]
    meta.update(sides=descriptions, notes=notes, failures=failures, load_average_end=load_average())
    rows: list[dict[str, Any]] = []
    for n in opts.clients:
        for phase in phases:
            merged = {side: _merged([r for r in runs[side] if r.phase == phase and r.clients == n], phase) for side in SIDES}
            cpu = {side: _cpu_us_per_request(merged[side]) for side in SIDES}
            rows.append({
                "phase": phase, "clients": n,
                **{f"{side}_per_s": merged[side].rate for side in SIDES},
                **{f"{side}_cpu_us": None if (us := cpu[side]) is None else round(us, 1) for side in SIDES},
                **{f"{side}_p99_ms": merged[side].p99_ms for side in SIDES},
                **{f"{side}_errors": sum(merged[side].errors.values()) + merged[side].conflicts for side in SIDES},
                "rate_ratio": _ratio(merged["this"].rate, merged["upstream"].rate),
                "cpu_ratio": _ratio(cpu["this"], cpu["upstream"]),
                "other_cores": max(merged[side].cpu_cores.get("other") or 0.0 for side in SIDES),
            })  # fmt: skip
    print_side_by_side(meta, rows)
    return {"meta": meta, "rows": rows, "results": {side: [asdict(r) for r in runs[side]] for side in SIDES}}


def print_side_by_side(meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The comparison table: this server's rate and CPU per request beside upstream's."""
    print()
    print("=" * 118)
    print(f"this server beside upstream, one run: {meta['sides'].get('this')}  vs  {meta['sides'].get('upstream')}")
    print(f"  HTTPS with the admin's client certificate, Node,RBAC, {meta['media_type']} on both; {meta['rounds']} round(s) of "
          f"{meta['duration_s']} s per phase; load average {meta['load_average_start']} -> {meta['load_average_end']}")  # fmt: skip
    print("  CPU per request = the server's and its storage's processes (upstream: kube-apiserver + etcd)")
    print("=" * 118)
    print(f"{'phase':<8}{'clients':>8}{'upstream/s':>12}{'this/s':>10}{'this÷up':>9}{'up µs/req':>11}{'this µs/req':>13}"
          f"{'this÷up':>9}{'p99 ms up/this':>18}{'errors up/this':>16}")  # fmt: skip
    print("-" * 118)
    for r in rows:
        p99 = f"{_fmt(r['upstream_p99_ms'], 1)}/{_fmt(r['this_p99_ms'], 1)}"
        print(
            f"{r['phase']:<8}{r['clients']:>8}{_fmt(r['upstream_per_s']):>12}{_fmt(r['this_per_s']):>10}{_fmt(r['rate_ratio'], 2):>9}"
            f"{_fmt(r['upstream_cpu_us'], 0):>11}{_fmt(r['this_cpu_us'], 0):>13}{_fmt(r['cpu_ratio'], 2):>9}{p99:>18}"
            f"{str(r['upstream_errors']) + '/' + str(r['this_errors']):>16}"
        )
    print("-" * 118)
    others = max((r["other_cores"] for r in rows), default=0.0)
    if others > 0.3:
        print(f"  WARNING: other processes used up to {others:.2f} cores during a phase (loaded machine); figures are noisy.")
    for note in meta["notes"]:
        print(f"  note: {note}")


def evaluate_targets(results: list[PhaseResult], watch: dict[str, Any] | None) -> list[dict[str, Any]]:
    """PASS/MISS of the published targets (informational only)."""
    by = {(r.phase, r.side, r.clients): r for r in results}
    out: list[dict[str, Any]] = []
    s16, r16 = by.get(("create", "server", 16)), by.get(("create", "raw", 16))
    if s16 and r16 and r16.rate > 0:
        ratio = s16.rate / r16.rate
        out.append(
            {
                "target": "creates/s at 16 clients >= 0.5x raw inserts",
                "value": round(ratio, 3),
                "status": "PASS" if ratio >= 0.5 else "MISS",
            }
        )
    else:
        out.append({"target": "creates/s at 16 clients >= 0.5x raw inserts", "value": None, "status": "n/a"})
    gets = [r for r in results if r.phase == "get" and r.side == "server"]
    if gets:
        best = max(gets, key=lambda r: r.rate)
        out.append(
            {
                "target": "GETs >= 5,000/s",
                "value": best.rate,
                "clients": best.clients,
                "status": "PASS" if best.rate >= 5000 else "MISS",
            }
        )
    else:
        out.append({"target": "GETs >= 5,000/s", "value": None, "status": "n/a"})
    name = "watch p99 < 50 ms at 500 writes/s"
    if watch and watch.get("p99_ms") is not None:
        p99 = float(watch["p99_ms"])
        complete = watch["events_received"] >= watch["events_expected"] > 0
        rate_ok = watch["achieved_rate"] >= 0.95 * 500
        status = "PASS" if p99 < 50 and complete and rate_ok else "MISS"
        note = []
        if not complete:
            note.append(f"{watch['events_expected'] - watch['events_received']} events missing")
        if not rate_ok:
            note.append(f"writer reached {watch['achieved_rate']}/s")
        out.append({"target": name, "value": p99, "status": status, "note": "; ".join(note)})
    else:
        out.append({"target": name, "value": None, "status": "n/a"})
    return out


PHASE_ORDER = ["create", "update", "get", "list", "get/auth-off", "get/auth-admin", "get/auth-rbac"]


def print_report(
    meta: dict[str, Any], results: list[PhaseResult], watch: dict[str, Any] | None, targets: list[dict[str, Any]]
) -> None:
    """Readable table of every figure."""
    print()
    print("=" * 118)
    print(f"DRA API benchmark  server: {meta['server']}")
    print(f"  database: {meta['database']}   raw baseline: {meta['raw_driver']}   http client: {meta['client']}")
    print(
        f"  machine: {meta['cpus']} CPUs, Python {meta['python']}; duration {meta['duration_s']} s/phase, "
        f"warmup {meta['warmup_s']} s; load average {meta.get('load_average_start')} -> {meta.get('load_average_end')}"
    )
    print("=" * 118)
    header = (
        f"{'phase':<8}{'clients':>8}{'server/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'raw/s':>11}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'srv/raw':>9}{'409s':>6}{'errors':>8}  cpu cores client/server/db/other"
    )
    print(header)
    print("-" * 118)
    by = {(r.phase, r.side, r.clients): r for r in results}
    keys = sorted(
        {(r.phase, r.clients) for r in results}, key=lambda k: (PHASE_ORDER.index(k[0]), k[1])
    )
    for phase, n in keys:
        s, r = by.get((phase, "server", n)), by.get((phase, "raw", n))
        ratio = s.rate / r.rate if s and r and r.rate else None
        cpu = s.cpu_cores if s else {}
        cpu_s = "/".join(_fmt(cpu.get(k), 2) for k in ("client", "server", "db", "other")) if s else "-"
        print(
            f"{phase:<8}{n:>8}{_fmt(s.rate if s else None):>11}{_fmt(s.p50_ms if s else None, 2):>9}"
            f"{_fmt(s.p99_ms if s else None, 2):>9}{_fmt(r.rate if r else None):>11}"
            f"{_fmt(r.p50_ms if r else None, 2):>9}{_fmt(r.p99_ms if r else None, 2):>9}"
            f"{_fmt(ratio, 3):>9}{(s.conflicts if s else 0):>6}{(sum(s.errors.values()) if s else 0):>8}  {cpu_s}"
        )
    print("-" * 118)
    print("  create = POST ResourceClaim vs raw INSERT; update = PUT with resourceVersion vs raw UPDATE by id;")
    returned = sorted({str(r.extra.get("objects_per_list")) for r in results if r.phase == "list" and r.side == "server"})
    print(f"  get = GET one claim vs raw SELECT by name; list = LIST of {' or '.join(returned) or '-'} claims (as returned) vs raw SELECT of the same rows.")
    if watch:
        print(
            f"watch: {watch['watchers']} watchers, writer {watch.get('achieved_rate')}/s "
            f"(target {watch['target_rate']}/s, {watch.get('writes_ok')} writes, errors {watch.get('write_errors')})"
            f"; events {watch.get('events_received')}/{watch.get('events_expected')}; latency write-response -> "
            f"event p50 {watch.get('p50_ms')} ms, p90 {watch.get('p90_ms')} ms, p99 {watch.get('p99_ms')} ms, "
            f"max {watch.get('max_ms')} ms; cpu {watch.get('cpu_cores')}"
        )
        if watch.get("watch_errors") or watch.get("stream_errors"):
            print(f"  watch problems: {watch.get('watch_errors')} {watch.get('stream_errors')}")
    others = [r.cpu_cores.get("other") or 0.0 for r in results] + [
        float((watch or {}).get("cpu_cores", {}).get("other") or 0)
    ]
    if max(others, default=0.0) > 0.3:
        print(f"  WARNING: other processes used up to {max(others):.2f} cores during a phase; figures are noisy.")
    print("targets (informational, never fail the run):")
    for t in targets:
        extra = f" (at {t['clients']} clients)" if "clients" in t else ""
        note = f" - {t['note']}" if t.get("note") else ""
        print(f"  [{t['status']:>4}] {t['target']}: {t['value']}{extra}{note}")
    for n in meta.get("notes", []):
        print(f"  note: {n}")


# ----------------------------------------------------------------------------- orchestration


def _check_loopback(url: str, what: str) -> None:
    host = urlsplit(url).hostname or ""
    if host not in LOOPBACK:
        raise SystemExit(f"{what} must point at 127.0.0.1 (got host {host!r})")


@contextlib.contextmanager
def _database(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[str | None, RawDB | None, int | None]]:
    """Yield (server database URL, raw baseline, database pid)."""
    if args.sqlite:
        yield f"sqlite+aiosqlite:///{tmp / 'bench.sqlite'}", SqliteRaw(tmp / "raw.sqlite"), None
        return
    from devtools.postgres import ThrowawayPostgres, asyncpg_dsn

    if args.database_url:
        _check_loopback(args.database_url, "--database-url")
        yield args.database_url, AsyncpgRaw(asyncpg_dsn(args.database_url)), None
        return
    if args.server_url:
        yield None, None, None
        return
    with ThrowawayPostgres(fast=False, database="dra_bench") as pg:
        yield pg.url, AsyncpgRaw(pg.dsn), pg.pid


async def run(args: argparse.Namespace, opts: Options) -> dict[str, Any]:
    """Run the whole benchmark; returns the JSON document."""
    with (
        tempfile.TemporaryDirectory(prefix="dra-bench-") as tmpdir,
        _database(args, Path(tmpdir)) as (
            db_url,
            raw,
            db_pid,
        ),
    ):
        server: ServerProcess | None = None
        if args.server_url:
            _check_loopback(args.server_url, "--server-url")
            base_url = args.server_url.rstrip("/")
            server_desc = f"{base_url} (already running)"
        else:
            assert db_url is not None
            server = ServerProcess(db_url, Path(tmpdir) / "server.log", opts.server_args)
            server_desc = "python " + " ".join(server.command()[1:])
            print(f"starting: {server_desc}", flush=True)
            server.start()
            base_url = server.base_url
        db_desc: dict[str, str] = {}
        if raw is not None:
            db_desc = await raw.describe()
        meta: dict[str, Any] = {
            "server": server_desc,
            "database": ("sqlite " if args.sqlite else "postgres ") + " ".join(f"{k}={v}" for k, v in db_desc.items())
            if db_desc
            else "unknown (no --database-url)",
            "raw_driver": raw.driver if raw else "none",
            "client": {
                "raw": "raw asyncio streams, HTTP/1.1 keep-alive, one connection per client",
                "httpx": "httpx.AsyncClient, HTTP/1.1 keep-alive pool sized to the clients",
            }[opts.client_kind]
            + f" ({type(asyncio.get_running_loop()).__module__.split('.')[0]} event loop)",
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "duration_s": opts.duration,
            "warmup_s": opts.warmup,
            "clients": opts.clients,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average_start": load_average(),
        }
        bench = Bench(opts, base_url, raw, CpuMeter(server.pid if server else None, db_pid))
        watch: dict[str, Any] | None = None
        try:
            await bench.ensure_namespaces()
            if "list" in opts.phases:
                await bench.prepare_list()
            for n in opts.clients:
                print(f"-- {n} client(s)", flush=True)
                if raw is not None and "raw" in opts.phases:
                    await bench.raw_phases(n)
                if "create" in opts.phases:
                    await bench.server_create(n)
                if "update" in opts.phases:
                    await bench.server_update(n)
                if "get" in opts.phases:
                    await bench.server_get(n)
                if "list" in opts.phases:
                    await bench.server_list(n)
            if "watch" in opts.phases:
                print("-- watch", flush=True)
                watch = await bench.watch_latency()
            if "auth" in opts.phases and server is not None and db_url is not None:
                print("-- authentication and authorization", flush=True)
                auth = await auth_cost(opts, bench, db_url, Path(tmpdir), server.pid, db_pid)
                if auth is not None:
                    meta["auth"] = auth
        finally:
            if raw is not None:
                await raw.drop()
            if server is not None:
                if server.proc is not None and server.proc.poll() is not None:
                    bench.notes.append(f"server exited early; log tail:\n{server.log_tail()}")
                server.stop()
        meta["notes"] = bench.notes
        meta["failures"] = bench.failures
        meta["load_average_end"] = load_average()
        targets = evaluate_targets(bench.results, watch)
        print_report(meta, bench.results, watch, targets)
        return {"meta": meta, "results": [asdict(r) for r in bench.results], "watch": watch, "targets": targets}


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Options]:
    """Command line."""
    ap = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,16,64", help="comma-separated client concurrencies (default 1,16,64)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per measured phase (default 5)")
    ap.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each phase (default 0.5)")
    ap.add_argument("--list-size", type=int, default=1000, help="objects per LIST (default 1000)")
    ap.add_argument("--watchers", type=int, default=100, help="concurrent watchers (default 100)")
    ap.add_argument("--watch-rate", type=float, default=500.0, help="writes/s during the watch phase (default 500)")
    ap.add_argument("--watch-duration", type=float, default=None, help="seconds of writes (default --duration)")
    ap.add_argument(
        "--client",
        dest="client_kind",
        choices=["raw", "httpx"],
        default="raw",
        help="HTTP client: raw asyncio streams (default; cheapest on 2 cores) or httpx",
    )
    ap.add_argument(
        "--phases", default="raw,create,update,get,list,watch,auth", help="subset of raw,create,update,get,list,watch,auth (auth: GET with auth on vs off)"
    )
    ap.add_argument("--database-url", default=None, help="use this Postgres (127.0.0.1) instead of a throwaway one")
    ap.add_argument("--sqlite", action="store_true", help="run against the embedded SQLite backend")
    ap.add_argument("--server-url", default=None, help="benchmark an already running server (http://127.0.0.1:PORT)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra argument for `app serve` (repeatable)")
    ap.add_argument(
        "--no-uvloop", dest="uvloop", action="store_false", help="use asyncio's own event loop in the client"
    )
    ap.add_argument("--token", default=None, help="bearer token sent with every request")
    ap.add_argument("--json", dest="json_path", default=None, help="write all figures to this JSON file")
    ap.add_argument(
        "--against-upstream",
        action="store_true",
        help="the create,update,get,list phases against upstream's kube-apiserver + etcd and against this server, "
        "both over HTTPS with client certificates, side by side (needs make upstream)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="--against-upstream: rounds, the sides' order alternating (default 1)")
    ap.add_argument(
        "--protobuf", action="store_true", help="claims sent and read as Kubernetes protobuf instead of JSON (no watch phase)"
    )
    ap.add_argument("--settle", type=float, default=10.0, help="--against-upstream: idle seconds after a server starts (default 10)")
    args = ap.parse_args(argv)
    if args.sqlite and args.database_url:
        ap.error("--sqlite and --database-url are exclusive")
    if args.against_upstream and (args.server_url or args.database_url or args.token):
        ap.error("--against-upstream starts both servers itself: no --server-url, --database-url or --token")
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds must be between 1 and 100")
    try:
        clients = [int(x) for x in args.clients.split(",") if x.strip()]
    except ValueError:
        ap.error("--clients expects integers like 1,16,64")
    if not clients or min(clients) < 1 or max(clients) > 1000:
        ap.error("--clients must be between 1 and 1000")
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    unknown = phases - {"raw", "create", "update", "get", "list", "watch", "auth"}
    if unknown:
        ap.error(f"unknown phases: {sorted(unknown)}")
    if args.protobuf:
        phases.discard("watch")  # the watchers read JSON lines
    if args.duration <= 0 or args.duration > 3600 or args.watch_rate <= 0 or not 0 < args.watchers <= 10_000:
        ap.error("duration must be in (0, 3600], watch-rate > 0, watchers in 1..10000")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    opts = Options(
        clients=clients,
        duration=args.duration,
        warmup=max(0.0, args.warmup),
        list_size=args.list_size,
        watchers=args.watchers,
        watch_rate=args.watch_rate,
        watch_duration=args.watch_duration or args.duration,
        client_kind=args.client_kind,
        phases=phases,
        headers=headers,
        server_args=args.server_arg,
        protobuf=args.protobuf,
    )
    return args, opts


def _loop_factory(use_uvloop: bool) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when wanted and installed (the server uses it too), else asyncio's default."""
    if not use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]


@reports_machine
def main(argv: list[str] | None = None) -> int:
    """Entry point: run, print, optionally write JSON. Exit status ignores target misses."""
    args, opts = parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(args.uvloop)) as runner:
            doc = runner.run(against_upstream(args, opts) if args.against_upstream else run(args, opts))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json_path:
        Path(args.json_path).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        print(f"figures written to {args.json_path}")
    if doc["meta"].get("failures"):
        print("error: figures that do not measure what they say:\n  " + "\n  ".join(doc["meta"]["failures"]), file=sys.stderr)
        return 1
    # A side that served none of a phase's requests is a broken comparison, not a slow one.
    failed = [f"{r['phase']} at {r['clients']}" for r in doc.get("rows", []) if not (r["upstream_per_s"] and r["this_per_s"])]
    if failed:
        print(f"error: a side served no requests in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
