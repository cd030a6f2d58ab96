"""The event change log: every create, edit or delete of an event adds a row in the same
transaction, so the log and the events never disagree. Search indexes read it to catch up
(server/search/index.py). Call it while the events still exist (after an insert or an
update, before a delete): it records each event's block, time and floor."""

from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa

from server.store.schema import event_log, events


def log_event_changes(conn, event_ids) -> None:
    ids = list(dict.fromkeys(event_ids))
    if ids:
        at = datetime.now(timezone.utc)
        where = {
            r[0]: r[1:]
            for r in conn.execute(
                sa.select(
                    events.c.id, events.c.block_id, events.c.created_at, events.c.floor_id
                ).where(events.c.id.in_(ids))
            )
        }
        conn.execute(
            event_log.insert(),
            [
                dict(
                    zip(("block_id", "event_at", "floor_id"), where.get(e, (None,) * 3)),
                    event_id=e,
                    at=at,
                )
                for e in ids
            ],
        )
