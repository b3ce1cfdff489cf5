"""The raw database baseline (single-row statements through asyncpg or aiosqlite) and the
database a run uses."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from bench.common import LOOPBACK

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
