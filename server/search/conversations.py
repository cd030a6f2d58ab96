"""Each user's conversation state, kept in the store (``conversation_turns``) so that it
survives restarts and is shared by every app process. Same interface as
:class:`memkit.conversation.ConversationStore`, which keeps it in memory: the service
reads a user's turns before a question and stores the turn the pipeline hands back."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from memkit.conversation import ConversationStore, Turn, content_words
from server.store.db import reading, writing
from server.store.schema import conversation_turns as turns
from server.store.schema import events, floors


class StoredConversations(ConversationStore):
    def __init__(
        self, engine: sa.Engine, max_turns: int = 20, idle_expiry: timedelta = timedelta(minutes=30)
    ):
        super().__init__(max_turns, idle_expiry)
        self.engine = engine

    def history(self, user_id: str | None, now: datetime | None = None) -> list[Turn]:
        """The user's last ``max_turns`` turns, oldest first; none once they have been idle
        longer than ``idle_expiry`` (a new conversation starts)."""
        if user_id is None:
            return []
        with reading(self.engine) as conn:
            rows = (
                conn.execute(
                    sa.select(turns)
                    .where(turns.c.user_id == user_id)
                    .order_by(turns.c.id.desc())
                    .limit(self.max_turns)
                )
                .mappings()
                .all()
            )
        out = [_turn(r) for r in reversed(rows)]
        now = now or datetime.now(timezone.utc)
        if out and now - out[-1].time > self.idle_expiry:
            return []
        return out

    def record(self, user_id: str | None, turn: Turn) -> None:
        if user_id is None:
            return
        window = turn.window or (None, None)
        with writing(self.engine) as conn:
            conn.execute(
                turns.insert().values(
                    user_id=user_id,
                    query=turn.query,
                    effective_query=turn.effective_query,
                    event_ids=turn.event_ids,
                    answer=turn.answer,
                    created_at=turn.time,
                    quoted=turn.quoted,
                    words=turn.words,
                    answer_words=turn.answer_words,
                    people=turn.people,
                    window_from=window[0],
                    window_to=window[1],
                    topic=turn.topic,
                )
            )
            # Only the last max_turns are ever read: older ones go, so a user's rows stay bounded
            # (below the oldest kept row's id; while there are fewer, it is NULL and nothing goes).
            oldest_kept = (
                sa.select(turns.c.id)
                .where(turns.c.user_id == user_id)
                .order_by(turns.c.id.desc())
                .offset(self.max_turns - 1)
                .limit(1)
                .scalar_subquery()
            )
            conn.execute(turns.delete().where(turns.c.user_id == user_id, turns.c.id < oldest_kept))

    def forget(self, user_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(turns.delete().where(turns.c.user_id == user_id))


def still_readable(conn, user_id: str, history: list[Turn]) -> list[Turn]:
    """The turns as their asker may see them now: a post he can no longer read (its floor
    turned private, or it is gone) is dropped from what a turn quoted, and so are the words
    its answer quoted, their authors and the answer (which post each word came from is not
    kept), so a follow-up carries nothing of it. The items a turn returned (``event_ids``,
    stored for the record) are left out: no follow-up reads them, and checking them was most
    of this check's work (200 ids a question against about 20 quoted)."""
    ids = {i for t in history for i in t.quoted}
    readable = (
        set(
            conn.execute(
                sa.select(events.c.id)
                .join(floors, floors.c.id == events.c.floor_id)
                .where(
                    events.c.id.in_(ids), sa.or_(~floors.c.is_private, floors.c.owner_id == user_id)
                )
            ).scalars()
        )
        if ids
        else set()
    )
    out = []
    for t in history:
        lost = not set(t.quoted) <= readable
        out.append(
            replace(
                t,
                event_ids=[],
                quoted=[i for i in t.quoted if i in readable],
                answer_words=[] if lost else t.answer_words,
                people=[] if lost else t.people,
                answer=None if lost else t.answer,
            )
        )
    return out


def _strings(value) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _turn(r) -> Turn:
    """A stored turn, whatever the row holds (one of an earlier version has no context)."""
    window = (r["window_from"], r["window_to"]) if r["window_from"] and r["window_to"] else None
    return Turn(
        query=r["query"],
        effective_query=r["effective_query"],
        event_ids=_strings(r["event_ids"]),
        answer=r["answer"],
        quoted=_strings(r["quoted"]),
        words=_strings(r["words"]) if r["words"] is not None else content_words(r["query"] or ""),
        answer_words=_strings(r["answer_words"]),
        people=_strings(r.get("people")),
        window=window,
        topic=r["topic"] or 0,
        time=r["created_at"],
    )
