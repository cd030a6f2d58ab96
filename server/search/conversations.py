"""Each user's conversation state, kept in the store (``conversation_turns``) so that it
survives restarts and is shared by every app process. Same interface as
:class:`memkit.conversation.ConversationStore`, which keeps it in memory."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from memkit.conversation import ConversationStore, Turn
from server.store.schema import conversation_turns as turns


class StoredConversations(ConversationStore):
    def __init__(self, engine: sa.Engine, max_turns: int = 20, idle_expiry: timedelta = timedelta(minutes=30)):
        super().__init__(max_turns, idle_expiry)
        self.engine = engine

    def history(self, user_id: str | None, now: datetime | None = None) -> list[Turn]:
        """The user's last ``max_turns`` turns, oldest first; none once they have been idle
        longer than ``idle_expiry`` (a new conversation starts)."""
        if user_id is None:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(turns).where(turns.c.user_id == user_id)
                                .order_by(turns.c.id.desc()).limit(self.max_turns)).mappings().all()
        out = [Turn(query=r["query"], effective_query=r["effective_query"], event_ids=list(r["event_ids"]),
                    answer=r["answer"], time=r["created_at"]) for r in reversed(rows)]
        now = now or datetime.now(timezone.utc)
        if out and now - out[-1].time > self.idle_expiry:
            return []
        return out

    def record(self, user_id: str | None, turn: Turn) -> None:
        if user_id is None:
            return
        with self.engine.begin() as conn:
            conn.execute(turns.insert().values(user_id=user_id, query=turn.query, effective_query=turn.effective_query,
                                               event_ids=turn.event_ids, answer=turn.answer, created_at=turn.time))
            # Only the last max_turns are ever read: older ones go, so a user's rows stay bounded
            # (below the oldest kept row's id; while there are fewer, it is NULL and nothing goes).
            oldest_kept = (sa.select(turns.c.id).where(turns.c.user_id == user_id).order_by(turns.c.id.desc())
                           .offset(self.max_turns - 1).limit(1).scalar_subquery())
            conn.execute(turns.delete().where(turns.c.user_id == user_id, turns.c.id < oldest_kept))

    def forget(self, user_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(turns.delete().where(turns.c.user_id == user_id))
