"""Engine creation. SQLite runs in WAL mode with foreign keys on; PostgreSQL is used as is.
Every service operation runs in one transaction (``engine.begin()``): a failed request
changes nothing.

Connecting upgrades the store's schema (server/store/migrate.py). Processes starting at
once on one store (gunicorn's workers) take turns: the upgrade runs in one transaction
that first takes the store's write lock (PostgreSQL: an advisory lock; SQLite: ``BEGIN
IMMEDIATE``). Both keep DDL inside the transaction, so the next process finds the upgrade
done, or, if it failed, nothing half done.

A question takes two connections from the pool, one after the other: its first reads (the
token, its history, its floors, the index's log) share one (``one_connection`` around them,
``reading`` where each reads), returned before the question waits for the index; the posts
it reads and the turn it stores (``writing``) share the second."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa

from memkit.core.private import private_dir, private_sqlite
from server.store.migrate import upgrade

_LOCK = 0x6D656D6D  # advisory lock key ("memm") for schema upgrades


def connect(url: str) -> sa.Engine:
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        # Private before SQLite opens it: its -wal and -shm files take the file's mode.
        path = Path(url[len("sqlite:///") :])
        private_dir(path.parent)
        private_sqlite(path)
    engine = _engine(url)
    with _locked(engine) as conn:
        upgrade(conn)
    return engine


def _engine(url: str, **options) -> sa.Engine:
    # hide_parameters: an SQL error's message (which may reach the log) never carries the
    # values bound into the statement: hashes, codes' destinations, text people posted.
    # PostgreSQL sessions in UTC: times come back in UTC, so a stored time near the first or
    # last day Python can hold is never shifted out of its range by the server's zone.
    extra = {"connect_args": {"options": "-c timezone=UTC"}} if url.startswith("postgresql") else {}
    # A pooled connection to a server may have been dropped (a restart): check it before
    # use. A SQLite file has no server to lose it, and the check cost each checkout (most
    # requests check out several) a statement.
    ping = url.startswith("postgresql")
    engine = sa.create_engine(url, pool_pre_ping=ping, hide_parameters=True, **extra, **options)
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")  # first: the next two may wait for another process
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


@contextmanager
def _locked(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction holding the store's write lock until it commits."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
            yield conn
        return
    if engine.url.database in (
        None,
        "",
        ":memory:",
    ):  # one connection's own database: nobody to wait for
        with engine.begin() as conn:
            yield conn
        return
    # Python's sqlite3 commits before DDL on its own; with its transaction handling off,
    # BEGIN IMMEDIATE makes the whole upgrade one transaction that holds the write lock.
    own = _engine(engine.url.render_as_string(hide_password=False), poolclass=sa.pool.NullPool)
    sa.event.listen(
        own, "connect", lambda dbapi_conn, _record: setattr(dbapi_conn, "isolation_level", None)
    )
    sa.event.listen(own, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    try:
        with own.begin() as conn:
            yield conn
    finally:
        own.dispose()


# -- one connection for a request's reads -----------------------------------------------
class _Shared:
    """The connection a request's reads share: taken from the pool at the first read."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.conn: sa.Connection | None = None


_SHARED: ContextVar[_Shared | None] = ContextVar("memkit_shared_connection", default=None)


@contextmanager
def one_connection(engine: sa.Engine) -> Iterator[None]:
    """Inside this block, every ``reading(engine)`` in this thread uses one connection
    (a question's token check, its history, its floors, the index's log and the posts it
    reads), taken from the pool at the first of them, not before: a request that first
    waits (an application's secret waits for an argon2 slot) holds no connection while it
    waits. Returned to the pool when the block ends. Nested blocks share the outer one's."""
    if _SHARED.get() is not None:
        yield
        return
    shared = _Shared(engine)
    token = _SHARED.set(shared)
    try:
        yield
    finally:
        _SHARED.reset(token)
        if shared.conn is not None:
            shared.conn.close()


def _shared(engine: sa.Engine) -> sa.Connection | None:
    """The connection ``one_connection(engine)`` shares in this thread, taken from the pool
    now if it was not yet; None outside such a block."""
    shared = _SHARED.get()
    if shared is None or shared.engine is not engine:
        return None
    if shared.conn is None:
        shared.conn = engine.connect()
    return shared.conn


@contextmanager
def reading(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection to read from: inside ``one_connection(engine)`` the shared one, else a
    new one. Each block is its own transaction either way (ended when the block ends), so
    a later block sees what was committed since. Only for reads: nothing is committed."""
    conn = _shared(engine)
    if conn is None:
        with engine.connect() as conn:
            yield conn
        return
    try:
        yield conn
    finally:
        conn.rollback()


@contextmanager
def writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction to write in (``engine.begin()``): inside ``one_connection(engine)`` on
    the shared connection, committed when the block ends and rolled back if it raises."""
    conn = _shared(engine)
    if conn is None:
        with engine.begin() as conn:
            yield conn
        return
    if conn.in_transaction():  # a read's transaction left open: end it first
        conn.rollback()
    with conn.begin():
        yield conn
