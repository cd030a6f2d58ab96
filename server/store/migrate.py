"""Schema changes are alembic revisions (server/store/migrations/versions). Every process
upgrades its store to the newest revision when it connects (``server.store.connect``,
which holds the store's lock meanwhile), so a store made by any earlier version is
brought up to date on start.

A new revision: ``.venv/bin/alembic -c server/store/alembic.ini revision -m "what"``, then
write its ``upgrade()`` and change schema.py to match (tests/test_store.py checks that
the two agree).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def upgrade(conn: sa.Connection) -> None:
    """Bring the store to the newest revision, in the connection's transaction (nothing
    to do if it is there already)."""
    command.upgrade(alembic_config(conn), "head")
