"""Database schema. Alembic migrations create and evolve it; this module only names it.

- ``objects`` holds the current state of every object (one row per key).
- ``events`` is the append-only event log: every write adds one row in the same
  transaction, keyed by the global revision. Watches resume from it.
- ``revision_state`` is a single row: the newest committed revision and the
  revision below which the event log has been compacted. Writers lock this row for
  the whole transaction, so revisions commit in increasing order.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

objects = Table(
    "objects",
    metadata,
    Column("resource", String(256), primary_key=True),
    Column("namespace", String(253), primary_key=True),
    Column("name", String(253), primary_key=True),
    Column("revision", BigInteger, nullable=False),
    Column("data", Text, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("revision", BigInteger, primary_key=True, autoincrement=False),
    Column("resource", String(256), nullable=False),
    Column("namespace", String(253), nullable=False),
    Column("name", String(253), nullable=False),
    Column("type", String(16), nullable=False),
    Column("data", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

revision_state = Table(
    "revision_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("current_revision", BigInteger, nullable=False),
    Column("compacted_revision", BigInteger, nullable=False),
)

# The Alembic revision this code needs; the server refuses to start on anything else.
HEAD_REVISION = "0002_pg_commit_function"
