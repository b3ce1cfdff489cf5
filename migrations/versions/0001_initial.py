"""Objects table, event log and the global revision row.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # "C" collation on Postgres keeps key comparisons bytewise (names sort as the API lists them).
    is_pg = op.get_bind().dialect.name == "postgresql"
    key = sa.String(256, collation="C") if is_pg else sa.String(256)
    name = sa.String(253, collation="C") if is_pg else sa.String(253)
    op.create_table(
        "objects",
        sa.Column("resource", key, primary_key=True),
        sa.Column("namespace", name, primary_key=True),
        sa.Column("name", name, primary_key=True),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
    )
    op.create_table(
        "events",
        sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("resource", key, nullable=False),
        sa.Column("namespace", name, nullable=False),
        sa.Column("name", name, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("events_created_at", "events", ["created_at"])
    op.create_table(
        "revision_state",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("current_revision", sa.BigInteger, nullable=False),
        sa.Column("compacted_revision", sa.BigInteger, nullable=False),
    )
    op.execute("INSERT INTO revision_state (id, current_revision, compacted_revision) VALUES (1, 1, 0)")


def downgrade() -> None:
    op.drop_table("revision_state")
    op.drop_index("events_created_at", table_name="events")
    op.drop_table("events")
    op.drop_table("objects")
