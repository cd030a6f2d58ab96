"""The store opens databases written by earlier versions."""

import sqlite3

import sqlalchemy as sa

from server.store import connect


def test_a_store_from_before_event_log_block_id_gains_the_column(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE event_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id VARCHAR(40) NOT NULL, "
               "at DATETIME NOT NULL)")
    db.execute("INSERT INTO event_log (event_id, at) VALUES ('e_old', '2024-01-01 00:00:00')")
    db.commit()
    db.close()
    engine = connect(f"sqlite:///{path}")
    connect(f"sqlite:///{path}").dispose()  # a second start changes nothing
    assert "block_id" in {c["name"] for c in sa.inspect(engine).get_columns("event_log")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT event_id, block_id FROM event_log")).all() == [("e_old", None)]
    engine.dispose()
