"""The store: SQLAlchemy Core tables and an engine (SQLite file by default, PostgreSQL by URL)."""

from server.store.db import connect, one_connection, reading, writing
from server.store.schema import metadata, tables

__all__ = ["connect", "metadata", "one_connection", "reading", "tables", "writing"]
