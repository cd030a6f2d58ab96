"""The event change log: every create, edit or delete of an event adds a row in the same
transaction, so the log and the events never disagree. Search indexes read it to catch up
(server/search/index.py)."""

from __future__ import annotations

from datetime import datetime, timezone

from server.store.schema import event_log


def log_event_changes(conn, event_ids) -> None:
    ids = list(dict.fromkeys(event_ids))
    if ids:
        at = datetime.now(timezone.utc)
        conn.execute(event_log.insert(), [{"event_id": e, "at": at} for e in ids])
