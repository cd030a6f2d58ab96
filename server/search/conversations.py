"""Each user's conversation state, kept in the store (``conversation_turns``) so that it
survives restarts and is shared by every app process. Same interface as
:class:`memkit.question.conversation.ConversationStore`, which keeps it in memory: the service
reads a user's turns before a question and stores the turn the pipeline hands back."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from memkit.question.conversation import ConversationStore, Turn, content_words
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


def forget_quoted(conn, posts: dict[str, str]) -> int:
    """In ``conn``'s transaction, before these posts (event id -> text) are deleted or
    rewritten: every stored turn of anyone's that returned or quoted one of them loses it;
    a turn that quoted one loses its answer, the words it quoted and their authors (as
    ``still_readable`` drops a post its asker can no longer read); and that user's later
    turns whose effective query carried the post's words are left with their question as
    asked. So no stored row keeps words their author took back. Returns how many turns
    changed. A turn holds ids in JSON lists; they are found by their text (``LIKE``, the
    same on SQLite and PostgreSQL) and checked exactly."""
    gone = set(posts)
    if not gone:
        return 0
    text = lambda column: sa.cast(column, sa.Text)  # noqa: E731
    like = [
        text(column).like(f'%"{eid}"%')
        for eid in gone
        for column in (turns.c.quoted, turns.c.event_ids)
    ]
    rows = conn.execute(
        sa.select(turns.c.id, turns.c.user_id, turns.c.quoted, turns.c.event_ids).where(
            sa.or_(*like)
        )
    ).all()
    values: dict[int, dict] = {}
    since: dict[str, int] = {}  # user -> the first turn that quoted one
    for tid, user, quoted, returned in rows:
        quoted, returned = _strings(quoted), _strings(returned)
        lost = bool(gone & set(quoted))
        if not lost and not gone & set(returned):
            continue  # a LIKE match that is not one of the ids ("_" matches any character)
        values[tid] = {
            "quoted": [i for i in quoted if i not in gone],
            "event_ids": [i for i in returned if i not in gone],
        }
        if lost:
            values[tid].update(answer=None, answer_words=[], people=[])
            since[user] = min(since.get(user, tid), tid)
    words = {w.lower() for t in posts.values() for w in content_words(t or "")}
    for user, first in since.items():
        for tid, query, effective in conn.execute(
            sa.select(turns.c.id, turns.c.query, turns.c.effective_query).where(
                turns.c.user_id == user, turns.c.id >= first
            )
        ).all():
            carried = {w.lower() for w in content_words(effective or "")}
            carried -= {w.lower() for w in content_words(query or "")}
            if effective != query and carried & words:
                values.setdefault(tid, {})["effective_query"] = query
    for tid, change in values.items():
        conn.execute(turns.update().where(turns.c.id == tid).values(**change))
    return len(values)


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
