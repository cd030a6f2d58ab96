"""Engine creation. SQLite runs in WAL mode with foreign keys on; PostgreSQL is used as is.
Every service operation runs in one transaction (``engine.begin()``): a failed request
changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa

from server.store.schema import metadata


def connect(url: str) -> sa.Engine:
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    # hide_parameters: an SQL error's message (which may reach the log) never carries the
    # values bound into the statement: hashes, codes' destinations, text people posted.
    # PostgreSQL sessions in UTC: times come back in UTC, so a stored time near the first or
    # last day Python can hold is never shifted out of its range by the server's zone.
    extra = {"connect_args": {"options": "-c timezone=UTC"}} if url.startswith("postgresql") else {}
    engine = sa.create_engine(url, future=True, pool_pre_ping=True, hide_parameters=True, **extra)
    if engine.dialect.name == "sqlite":
        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.close()
    _create_tables(engine)
    return engine


def _create_tables(engine: sa.Engine, tries: int = 10) -> None:
    """Create missing tables and columns. Several processes starting at once on a new
    store (gunicorn's workers) race between "does it exist?" and "create it": the loser
    gets "already exists" and simply looks again."""
    for attempt in range(tries):
        try:
            metadata.create_all(engine)
            _add_missing_columns(engine)
            return
        except (sa.exc.OperationalError, sa.exc.ProgrammingError, sa.exc.IntegrityError) as exc:
            if "exist" not in str(exc).lower() and "duplicate" not in str(exc).lower() or attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def _add_missing_columns(engine: sa.Engine) -> None:
    """Stores created by an earlier version lack columns added since; add them (nullable
    columns only, so no existing row needs a value). create_all never alters a table."""
    inspector = sa.inspect(engine)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            have = {c["name"] for c in inspector.get_columns(table.name)}
            for col in table.columns:
                if col.name not in have and col.nullable:
                    kind = col.type.compile(dialect=engine.dialect)
                    conn.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {kind}'))
