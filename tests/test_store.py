"""The store: times go in and come out as aware UTC datetimes on both backends; schema
changes are alembic revisions applied when a process connects, so a store made before
alembic (by main's schema, or by an older one lacking the event log's newest columns) is
upgraded on start and keeps its rows; the revisions and schema.py agree."""

import sqlite3
import subprocess
import sys
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from server.store import connect, metadata
from tests.service_fixtures import postgres_url

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path, tmp_path_factory):
    return (
        f"sqlite:///{tmp_path / 'store.db'}"
        if request.param == "sqlite"
        else postgres_url(tmp_path_factory)
    )


def test_times_come_back_aware_and_in_utc(url):
    engine = connect(url)
    users = metadata.tables["users"]
    india = timezone(timedelta(hours=5, minutes=30))
    rows = [
        ("u_1", T0.astimezone(india)),
        ("u_2", T0.replace(tzinfo=None)),
        ("u_3", T0),
    ]  # naive: UTC
    try:
        with engine.begin() as conn:
            conn.execute(
                users.insert(),
                [
                    dict(
                        id=i,
                        name="Ann",
                        validated=True,
                        floor_quota=5,
                        block_quota=20,
                        created_at=at,
                    )
                    for i, at in rows
                ],
            )
            got = conn.execute(sa.select(users.c.created_at).order_by(users.c.id)).scalars().all()
            # compared in SQL too: the stored instants order as the times do, whatever zone
            # they came in
            later = conn.execute(
                sa.select(sa.func.count()).where(users.c.created_at > T0 - timedelta(minutes=1))
            ).scalar_one()
        assert got == [T0] * 3 and all(t.tzinfo is timezone.utc for t in got)
        assert later == 3
    finally:
        engine.dispose()


# The schema as it was before alembic, read from git so it cannot drift with schema.py.
BEFORE = "aeeabeb"
HEAD = "0005"  # the newest revision (server/store/migrations/versions)


def old_schema() -> sa.MetaData:
    text = subprocess.run(
        ["git", "show", f"{BEFORE}:server/store/schema.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("old_schema")
    exec(compile(text, "old_schema.py", "exec"), module.__dict__)
    return module.metadata


def old_store(url: str, drop: tuple[str, ...] = ()) -> None:
    """A store as an earlier version made it (create_all, no alembic), with a few rows;
    ``drop``: event log columns that version did not have yet."""
    old = old_schema()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    old.create_all(engine)
    t = old.tables
    with engine.begin() as conn:
        for name in drop:
            conn.execute(sa.text(f"ALTER TABLE event_log DROP COLUMN {name}"))
        conn.execute(
            t["users"].insert(),
            dict(
                id="u_1", name="Ann", validated=True, floor_quota=5, block_quota=20, created_at=T0
            ),
        )
        conn.execute(
            t["floors"].insert(),
            dict(
                id="f_1", owner_id="u_1", title="Ann", details="", is_private=False, created_at=T0
            ),
        )
        conn.execute(
            t["blocks"].insert(),
            dict(id="b_1", floor_id="f_1", type="feed", title="Feed", details="", created_at=T0),
        )
        conn.execute(
            t["events"].insert(),
            dict(
                id="e_1",
                floor_id="f_1",
                block_id="b_1",
                user_id="u_1",
                text="hello",
                tags=[],
                media=[],
                created_at=T0,
                updated_at=T0,
            ),
        )
        conn.execute(
            t["event_log"].insert(), dict(event_id="e_1", at=T0)
        )  # names only columns every version had
    engine.dispose()


def revision(engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def differences(engine) -> list:
    """What schema.py declares and the store lacks, or the other way round."""
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), metadata)


@pytest.mark.parametrize("drop", [(), ("block_id", "event_at", "floor_id")], ids=["main", "older"])
def test_a_store_made_before_alembic_is_upgraded_on_start_and_keeps_its_rows(url, drop):
    old_store(url, drop)
    engine = connect(url)
    try:
        assert revision(engine) == HEAD
        assert differences(engine) == []
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT text FROM events")).scalars().all() == ["hello"]
            assert conn.execute(sa.text("SELECT name FROM users")).scalars().all() == ["Ann"]
            log = conn.execute(metadata.tables["event_log"].select()).mappings().one()
        assert log["event_id"] == "e_1" and log["floor_id"] is None and log["at"] == T0
    finally:
        engine.dispose()
    engine = connect(url)  # a second start finds nothing to do
    assert revision(engine) == HEAD
    engine.dispose()


def test_a_new_store_gets_the_schema_py_declares(url):
    engine = connect(url)
    try:
        assert revision(engine) == HEAD
        assert differences(engine) == []
    finally:
        engine.dispose()


@pytest.mark.heavy
def test_processes_starting_together_on_a_new_store_take_turns(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    # each process also writes through its engine at once, as a worker's first request does
    start = (
        f"import sqlalchemy as sa; from server.store import connect; e = connect({url!r})\n"
        "with e.begin() as c: c.execute(sa.text("
        "\"INSERT INTO apps VALUES (hex(randomblob(8)), 'a', 'h', '2026-11-01')\"))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", start], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    engine = sa.create_engine(url)
    assert revision(engine) == HEAD and differences(engine) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM apps")).scalar_one() == 6
    engine.dispose()


def test_a_store_from_before_event_log_block_id_gains_the_column(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE event_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "event_id VARCHAR(40) NOT NULL, at DATETIME NOT NULL)"
    )
    db.execute("INSERT INTO event_log (event_id, at) VALUES ('e_old', '2024-01-01 00:00:00')")
    db.commit()
    db.close()
    engine = connect(f"sqlite:///{path}")
    connect(f"sqlite:///{path}").dispose()  # a second start changes nothing
    assert "block_id" in {c["name"] for c in sa.inspect(engine).get_columns("event_log")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT event_id, block_id FROM event_log")).all() == [
            ("e_old", None)
        ]
    engine.dispose()
