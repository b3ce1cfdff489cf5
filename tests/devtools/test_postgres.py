"""Self-test of the throwaway PostgreSQL cluster helper."""

from __future__ import annotations

import asyncio
import os

import pytest

from devtools.postgres import (
    ENV_TEST_DATABASE_URL,
    ThrowawayPostgres,
    asyncpg_dsn,
    database_url_for_tests,
    find_postgres_bin,
)


async def _roundtrip(dsn: str) -> list[tuple[int, str]]:
    """Create a table, insert two rows and read them back."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, name text NOT NULL, data jsonb)")
        await conn.execute("INSERT INTO t (name, data) VALUES ($1, $2::jsonb)", "a", '{"x": 1}')
        await conn.execute("INSERT INTO t (name, data) VALUES ($1, $2::jsonb)", "b", '{"x": 2}')
        rows = await conn.fetch("SELECT id, name FROM t ORDER BY id")
        return [(int(r["id"]), str(r["name"])) for r in rows]
    finally:
        await conn.close()


def test_asyncpg_dsn() -> None:
    assert asyncpg_dsn("postgresql+asyncpg://u@127.0.0.1:5/db?x=1") == "postgresql://u@127.0.0.1:5/db?x=1"
    with pytest.raises(ValueError):
        asyncpg_dsn("sqlite+aiosqlite:///x.db")


def test_throwaway_postgres_roundtrip() -> None:
    if find_postgres_bin() is None:
        pytest.skip("PostgreSQL server binaries not found")
    pg = ThrowawayPostgres(fast=True)
    with pg:
        assert pg.url.startswith("postgresql+asyncpg://postgres@127.0.0.1:")
        assert pg.url.endswith("/dra")
        tmp = pg.tmp_dir
        assert tmp is not None and tmp.is_dir()
        assert asyncio.run(_roundtrip(pg.dsn)) == [(1, "a"), (2, "b")]
        dsn = pg.dsn
        pg.pause()
        assert not pg.running
        with pytest.raises(OSError):
            asyncio.run(_count(dsn))
        pg.resume()
        assert pg.dsn == dsn
        assert asyncio.run(_count(dsn)) == 2, "an outage keeps the data"
    assert not pg.running
    assert not tmp.exists()


async def _count(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM t"))
    finally:
        await conn.close()


def test_database_url_for_tests() -> None:
    if not os.environ.get(ENV_TEST_DATABASE_URL) and find_postgres_bin() is None:
        pytest.skip("PostgreSQL server binaries not found and DRA_TEST_DATABASE_URL unset")
    with database_url_for_tests() as url:
        assert url.startswith("postgresql+asyncpg://")
        assert asyncio.run(_roundtrip(asyncpg_dsn(url))) == [(1, "a"), (2, "b")]
