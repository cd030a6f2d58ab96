"""Tables. Ids are random text (``u_...``, ``f_...``) so they reveal nothing about counts.
Secrets (passwords, tokens, codes, app secrets) are stored only as hashes."""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa


class UTCDateTime(sa.types.TypeDecorator):
    """Times go in and come out as aware UTC datetimes on every backend, so no code past
    the store checks for a missing zone. PostgreSQL's ``timestamptz`` keeps the instant
    (sessions run in UTC, server/store/db.py); SQLite keeps text without a zone, so a
    time is turned to UTC before it is written and read back as UTC. A naive time given
    to the store is UTC."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None or value.tzinfo is None or value.tzinfo is timezone.utc:
            return value
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() == timezone.utc.utcoffset(None):
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


metadata = sa.MetaData()
TS = UTCDateTime()

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
    # Counts the account's password and address changes; a token records the count it was
    # issued under and works only while it is the account's (revision 0005).
    sa.Column("credential_version", sa.Integer, nullable=False, default=0, server_default="0"),
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
    # users.credential_version when the password or address it was issued on was checked.
    sa.Column("credential_version", sa.Integer, nullable=False, default=0, server_default="0"),
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
    sa.Index("events_floor_user", "floor_id", "user_id"),  # a floor's authors, read by every query
)

# One row per change to an event (create, edit, delete), written in the same transaction
# as the change. Every app process reads it to keep its search index in step with the
# store (server/search). AUTOINCREMENT so SQLite never reuses a number.
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

# What each user asked and got back, newest last: the conversation state that follow-up
# questions build on (memkit.question.conversation). Kept here so it survives restarts and every
# app process sees the same history.
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
    # What a follow-up may refer to (memkit.question.conversation.Turn; revision 0002).
    sa.Column("quoted", sa.JSON),
    sa.Column("words", sa.JSON),
    sa.Column("answer_words", sa.JSON),
    sa.Column("window_from", sa.Date),
    sa.Column("window_to", sa.Date),
    sa.Column("topic", sa.Integer),
    sa.Column("people", sa.JSON),  # who wrote the posts the answer quoted (revision 0004)
    sa.Index("conversation_turns_user", "user_id", "id"),
    sqlite_autoincrement=True,
)

# The encoder the search index uses, one row per model the store was re-encoded with by
# `memkit adapt` (server/search/versions.py). Queries use the newest 'active' row (none: the
# config's own model); a 'building' row is being re-encoded while the active one serves.
# ``model`` carries the trained model's files, so processes on other machines can load it.
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

tables = {t.name: t for t in metadata.sorted_tables}


# -- reading JSON columns back: the documented shape, whatever a row holds (written by
# another version, or by hand), so no stored value can break a response ---------------
def stored_tags(value) -> list[str]:
    """Stored tags in the documented shape, whatever the column holds (a row of another
    version, or written by hand): its strings, or nothing."""
    return [t for t in value if isinstance(t, str)] if isinstance(value, list) else []


def stored_media(value) -> list[dict]:
    """Stored media in the documented shape: the items with a string url, their other
    fields strings or left out, anything else (a NaN, a number, a list) dropped."""
    if not isinstance(value, list):
        return []
    out = []
    for m in value:
        if isinstance(m, dict) and isinstance(m.get("url"), str):
            out.append(
                {
                    "url": m["url"],
                    "type": m["type"] if isinstance(m.get("type"), str) else "image",
                    "caption": m["caption"] if isinstance(m.get("caption"), str) else None,
                }
            )
    return out
