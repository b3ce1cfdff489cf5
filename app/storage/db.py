"""Engines, URLs and migrations for the two supported databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.dialects import Dialect, dialect_for, with_driver
from app.storage.schema import HEAD_REVISION

REPO_ROOT = Path(__file__).resolve().parents[2]


class SchemaOutOfDate(RuntimeError):
    """The database schema is not the one this server needs."""


def normalise_database_url(url: str) -> str:
    """Accept the URLs people type and pick the async driver this server uses."""
    return with_driver(url)


def _prepared(url: str) -> tuple[URL, type[Dialect]]:
    """``url`` parsed and its dialect, the place its database lives made ready."""
    parsed = make_url(normalise_database_url(url))
    dialect = dialect_for(parsed.get_backend_name())
    dialect.prepare_location(parsed)
    return parsed, dialect


def create_engine(url: str, pool_size: int = 20) -> AsyncEngine:
    parsed, dialect = _prepared(url)
    return dialect.create_engine(parsed, pool_size)


def _alembic_config(url: str) -> Any:
    from alembic.config import Config

    config = Config(str(REPO_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    config.attributes["database_url"] = normalise_database_url(url)
    return config


def run_migrations(url: str, target: str = "head") -> None:
    """Upgrade the schema (``python -m app migrate``). Safe to run repeatedly."""
    from alembic import command

    _prepared(url)
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


