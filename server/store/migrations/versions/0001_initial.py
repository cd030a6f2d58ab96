"""The store as it was when alembic took over (November 2026).

Every store runs this first: a new store gets its tables; a store made before alembic
(by ``metadata.create_all`` of any earlier version) gets the tables and the nullable
columns it lacks (the event log's ``block_id``, ``event_at`` and ``floor_id`` came
after its first release). The tables are written out here, not imported from
schema.py: a revision is history and must not change when schema.py does (a test
checks that the revisions and schema.py describe the same tables).

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

metadata = sa.MetaData()
TS = sa.DateTime(timezone=True)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("email", sa.String(320), unique=True),
    sa.Column("mobile", sa.String(20), unique=True),
    sa.Column("password_hash", sa.String(200)),
    sa.Column("validated", sa.Boolean, nullable=False, default=False),
    sa.Column("app_id", sa.String(40), sa.ForeignKey("apps.id")),
    sa.Column("external_id", sa.String(200)),
    sa.Column("floor_quota", sa.Integer, nullable=False),
    sa.Column("block_quota", sa.Integer, nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.UniqueConstraint("app_id", "external_id"),
)

apps = sa.Table(
    "apps",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("secret_hash", sa.String(200), nullable=False),
    sa.Column("created_at", TS, nullable=False),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("hash", sa.String(64), primary_key=True),  # sha256 of the bearer token
    sa.Column(
        "user_id",
        sa.String(40),
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("expires_at", TS, nullable=False),
    sa.Column("revoked_at", TS),
)

codes = sa.Table(
    "codes",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "user_id",
        sa.String(40),
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("mode", sa.String(20), nullable=False),
    sa.Column("destination", sa.String(320), nullable=False),
    sa.Column("code_hash", sa.String(64), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("expires_at", TS, nullable=False),
    sa.Column("used_at", TS),
)

floors = sa.Table(
    "floors",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "owner_id",
        sa.String(40),
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("details", sa.Text, nullable=False, default=""),
    sa.Column("avatar", sa.String(2000)),
    sa.Column("is_private", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", TS, nullable=False),
)

blocks = sa.Table(
    "blocks",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "floor_id",
        sa.String(40),
        sa.ForeignKey("floors.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("type", sa.String(20), nullable=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("details", sa.Text, nullable=False, default=""),
    sa.Column("created_at", TS, nullable=False),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column(
        "floor_id", sa.String(40), sa.ForeignKey("floors.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column(
        "block_id", sa.String(40), sa.ForeignKey("blocks.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column(
        "user_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("media", sa.JSON, nullable=False),
    sa.Column("reply_to", sa.String(40)),
    sa.Column("from_floor_id", sa.String(40)),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
    sa.Index("events_floor_time", "floor_id", "created_at"),
)

event_log = sa.Table(
    "event_log",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(40), nullable=False),
    sa.Column(
        "block_id", sa.String(40)
    ),  # the event's block and time: its session (neighbours) is re-indexed
    sa.Column("event_at", TS),
    sa.Column(
        "floor_id", sa.String(40)
    ),  # a query catches up its own floors' rows only (null: any floor)
    sa.Column("at", TS, nullable=False),
    sqlite_autoincrement=True,
)

conversation_turns = sa.Table(
    "conversation_turns",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "user_id", sa.String(40), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("query", sa.Text, nullable=False),
    sa.Column("effective_query", sa.Text, nullable=False),
    sa.Column("event_ids", sa.JSON, nullable=False),
    sa.Column("answer", sa.Text),
    sa.Column("created_at", TS, nullable=False),
    sa.Index("conversation_turns_user", "user_id", "id"),
    sqlite_autoincrement=True,
)

encoder_versions = sa.Table(
    "encoder_versions",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("encoder", sa.String(200), nullable=False),
    sa.Column("state", sa.String(20), nullable=False),  # building, active, retired, failed
    sa.Column("model", sa.LargeBinary),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("switched_at", TS),
    sqlite_autoincrement=True,
)


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    have = set(inspector.get_table_names())
    for table in metadata.sorted_tables:
        if table.name not in have:
            table.create(bind)
            continue
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in columns:  # nullable, so no stored row needs a value
                op.add_column(table.name, sa.Column(column.name, column.type))


def downgrade() -> None:
    metadata.drop_all(op.get_bind())
