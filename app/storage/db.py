"""Engines, URLs and migrations for the two supported databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.storage.schema import HEAD_REVISION

REPO_ROOT = Path(__file__).resolve().parents[2]


class SchemaOutOfDate(RuntimeError):
    """The database schema is not the one this server needs."""


def normalise_database_url(url: str) -> str:
    """Accept the URLs people type and pick the async driver this server uses."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url[len("postgresql://"):]
    if url.startswith("sqlite://") and not url.startswith("sqlite+aiosqlite://"):
        url = "sqlite+aiosqlite://" + url[len("sqlite://"):]
    return url


def is_sqlite(url: str) -> bool:
    return make_url(normalise_database_url(url)).get_backend_name() == "sqlite"


def create_engine(url: str, pool_size: int = 20) -> AsyncEngine:
    url = normalise_database_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30})
        _configure_sqlite(engine)
        return engine
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        connect_args={"server_settings": {"application_name": "dra-apiserver"}},
    )


def _configure_sqlite(engine: AsyncEngine) -> None:
    """WAL for concurrent readers; BEGIN IMMEDIATE so writers serialise at the start."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("write") else "BEGIN")


def _alembic_config(url: str) -> Any:
    from alembic.config import Config

    config = Config(str(REPO_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    config.attributes["database_url"] = normalise_database_url(url)
    return config


def run_migrations(url: str, target: str = "head") -> None:
    """Upgrade the schema (``python -m app migrate``). Safe to run repeatedly."""
    from alembic import command

    if is_sqlite(url):
        database = make_url(normalise_database_url(url)).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(_alembic_config(url), target)


async def check_schema(engine: AsyncEngine, url: str) -> None:
    """Refuse to serve on a schema other than the one this code was written for."""
    fix = f"python -m app migrate --database-url '{url}'"
    try:
        async with engine.connect() as conn:
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except DBAPIError as exc:
        raise SchemaOutOfDate(
            f"the database has no schema (or cannot be read: {exc.orig}); run `{fix}` to create it"
        ) from None
    if version != HEAD_REVISION:
        raise SchemaOutOfDate(
            f"the database schema is at revision {version!r} but this server needs {HEAD_REVISION!r}; "
            f"run `{fix}` to upgrade it"
        )


