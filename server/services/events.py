"""Events: posts in a block of a floor. Create (text, tags, media metadata, optional reply
to an event of the same floor, optional re-post of an event from another floor, which keeps
that floor as ``from_floor_uid``), recent events of a floor (newest first, paginated),
edit (by the author) and delete (by the author or the floor's owner). An author may delete
their posts in a floor that has since turned private (they are their words), not edit them.

Who may post: the owner into any of their floors, any signed-in user into the blocks of a
public floor. Events are stored durably (committed) before the response.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone

import sqlalchemy as sa

from memkit.core.tables import parse_time
from memkit.models.encoders import naming_cache_keys
from server import models as m
from server.errors import BadRequest, Forbidden, NotFound
from server.models import BLOCK_TYPES
from server.search.conversations import forget_quoted
from server.search.forgetting import NO_VECTORS
from server.search.index import session_of
from server.services.common import new_id, now
from server.services.floors import readable_floor
from server.store.changes import log_event_changes
from server.store.schema import blocks, events, floors, stored_media, stored_tags


def event_response(e, b) -> dict:
    return {
        "event_id": e["id"],
        "floor_uid": e["floor_id"],
        "from_floor_uid": e["from_floor_id"] or e["floor_id"],
        "block_id": e["block_id"],
        "block_type": BLOCK_TYPES.get(b["type"], 0),
        "block_type_name": b["type"],
        "user_id": e["user_id"],
        "text": e["text"],
        "tags": stored_tags(e["tags"]),
        "media": stored_media(e["media"]),
        "reply_to": e["reply_to"],
        "created_at": e["created_at"].isoformat(),
        "updated_at": e["updated_at"].isoformat(),
    }


def _ahead(posts: list[tuple[str, datetime, m.PostAdd]]) -> list[dict]:
    """The posts of a create as ``before_write`` takes them."""
    return [
        {"event_id": eid, "text": item.text, "tags": item.tags, "created_at": at}
        for eid, at, item in posts
    ]


def utc(at: datetime) -> datetime:
    """A time as the store holds it: in UTC (a naive one is UTC already)."""
    return at if at.tzinfo is None else at.astimezone(timezone.utc)


class Events:
    """``indexer(conn, event_ids)``, if given, runs inside each write's transaction after
    the events are written (a search backend that keeps its index in the store, such as
    PostgreSQL with pgvector, writes the vectors there, so both commit or neither does).
    ``after_write(floor_ids, event_ids, encoded)``, if given, runs after the commit with the
    floors and events written (the process's in-memory index applies them at once, so the
    write is searchable when the request returns; ``encoded``: ``before_write`` saw them).
    ``before_write(floor_id, block_id, user_id, posts)``, if given, runs before a create's
    transaction with the posts about to be written (their ids, texts, tags and times): the
    search encodes them into the shared embedding cache there, so that no process catching
    up on the write encodes them again, and no transaction is held open while they are
    encoded."""

    def __init__(
        self,
        engine: sa.Engine,
        indexer=None,
        after_write=None,
        before_write=None,
        vectors=NO_VECTORS,
    ):
        self.engine = engine
        self.vectors = vectors  # server.search.forgetting.CachedVectors: what a change forgets
        self.indexer = indexer
        self.after_write = after_write
        self.before_write = before_write

    def _before(
        self,
        user_id: str,
        floor_id: str,
        block_id: str,
        posts: list[tuple[str, datetime, m.PostAdd]],
    ) -> None:
        if self.before_write is None:
            return
        with self.engine.connect() as conn:  # nothing is encoded for someone who may not post here
            self._postable(conn, user_id, floor_id, block_id)
        self.before_write(floor_id, block_id, user_id, _ahead(posts))

    def _refused(
        self,
        user_id: str,
        floor_id: str,
        block_id: str,
        posts: list[tuple[str, datetime, m.PostAdd]],
    ) -> None:
        """A write refused inside its transaction (a reply to a post deleted meanwhile, a
        floor turned private) stored nothing, so the vectors ``before_write`` made for it
        go: what it encoded is named again (no model runs) and what the store does not name
        now is deleted from the floor's cache namespace."""
        if self.before_write is None:
            return
        with naming_cache_keys() as keys:
            self.before_write(floor_id, block_id, user_id, _ahead(posts))
        sessions = [
            session_of({"floor_id": floor_id, "block_id": block_id, "created_at": utc(at)})
            for _, at, _ in posts
        ]
        self.vectors.unwritten(sessions, {floor_id: keys}).forget()

    def _written(self, conn, event_ids: list[str]) -> None:
        log_event_changes(conn, event_ids)  # the search index catches up from the log
        if self.indexer is not None:
            self.indexer(conn, event_ids)

    def _committed(self, floor_id: str, event_ids: list[str], encoded: bool = False) -> None:
        """``encoded``: the events are new posts that ``before_write`` encoded."""
        if self.after_write is not None:
            self.after_write([floor_id], event_ids, encoded)

    def _block(self, conn, floor_id: str, block_id: str):
        b = (
            conn.execute(
                sa.select(blocks).where(blocks.c.id == block_id, blocks.c.floor_id == floor_id)
            )
            .mappings()
            .first()
        )
        if b is None:
            raise NotFound("no such block in this floor", field="block_id")
        return b

    def create(self, user_id: str, floor_id: str, block_id: str, item: m.PostAdd) -> dict:
        return self._create(user_id, floor_id, block_id, [item])[0]

    def create_many(self, user_id: str, floor_id: str, block_id: str, data: m.PostBatch) -> dict:
        """Bulk ingest: ``{"events": [event, ...]}``, 1 to 1,000 events of the same
        shape as a single create, written in one transaction: all are stored or, if any is
        refused (the error names ``events[i].field``), none is."""
        out = self._create(user_id, floor_id, block_id, data.events, batch=True)
        return {"floor_uid": floor_id, "block_id": block_id, "events": out}

    def _create(
        self, user_id: str, floor_id: str, block_id: str, items: list[m.PostAdd], batch=False
    ) -> list[dict]:
        posts = [(new_id("e"), item.created_at or now(), item) for item in items]
        self._before(user_id, floor_id, block_id, posts)
        try:
            with self.engine.begin() as conn:
                b = self._postable(conn, user_id, floor_id, block_id)
                rows = []
                for i, post in enumerate(posts):
                    try:
                        rows.append(self._row(conn, user_id, floor_id, b, *post))
                    except NotFound as exc:
                        if batch:
                            exc.field = f"events[{i}].{exc.field}"
                            exc.message = f"events[{i}]: {exc.message}"
                        raise
                conn.execute(events.insert(), rows)  # one statement for the batch
                ids = [r["id"] for r in rows]
                self._written(conn, ids)
        except Exception:
            self._refused(user_id, floor_id, block_id, posts)
            raise
        self._committed(floor_id, ids, encoded=self.before_write is not None)
        return [event_response(r, b) for r in rows]

    def _postable(self, conn, user_id: str, floor_id: str, block_id: str):
        readable_floor(conn, floor_id, user_id)
        return self._block(conn, floor_id, block_id)

    def _row(
        self, conn, user_id: str, floor_id: str, b, eid: str, created_at: datetime, item: m.PostAdd
    ) -> dict:
        """The stored row of a post, once its reply and re-post are checked."""
        from_floor = None
        if item.reply_to:
            parent = conn.execute(
                sa.select(events.c.floor_id).where(events.c.id == item.reply_to)
            ).first()
            if parent is None or parent[0] != floor_id:
                raise NotFound("reply_to names no event of this floor", field="reply_to")
        if item.repost_of:
            src = (
                conn.execute(
                    sa.select(events, floors.c.is_private, floors.c.owner_id)
                    .join(floors)
                    .where(events.c.id == item.repost_of)
                )
                .mappings()
                .first()
            )
            if src is None or (
                src["is_private"] and src["owner_id"] != user_id
            ):  # the same answer for both
                raise NotFound("repost_of names no event you can read", field="repost_of")
            from_floor = src["from_floor_id"] or src["floor_id"]
        row = dict(
            id=eid,
            floor_id=floor_id,
            block_id=b["id"],
            user_id=user_id,
            text=item.text,
            tags=item.tags,
            media=[md.model_dump() for md in item.media],
            reply_to=item.reply_to,
            from_floor_id=from_floor,
            created_at=created_at,
            updated_at=now(),
        )
        return row

    def recent(self, user_id: str, floor_id: str, args: m.RecentEvents) -> dict:
        limit = args.limit
        with self.engine.connect() as conn:
            readable_floor(conn, floor_id, user_id)
            q = (
                sa.select(events, blocks.c.type.label("btype"), blocks.c.title.label("btitle"))
                .join(blocks, blocks.c.id == events.c.block_id)
                .where(events.c.floor_id == floor_id)
            )
            if args.block_id:
                q = q.where(events.c.block_id == args.block_id)
            if args.type:
                q = q.where(blocks.c.type == args.type)
            if args.cursor:
                try:
                    ts, eid = base64.urlsafe_b64decode(args.cursor.encode()).decode().split("|", 1)
                    t = parse_time(ts)  # a time the store can hold in UTC, or ValueError
                except (ValueError, UnicodeDecodeError):
                    raise BadRequest(
                        "cursor is not one this service gave out",
                        field="cursor",
                        code="invalid_cursor",
                    ) from None
                q = q.where(
                    sa.or_(
                        events.c.created_at < t,
                        sa.and_(events.c.created_at == t, events.c.id < eid),
                    )
                )
            rows = (
                conn.execute(
                    q.order_by(events.c.created_at.desc(), events.c.id.desc()).limit(limit + 1)
                )
                .mappings()
                .all()
            )
        items = [event_response(r, {"type": r["btype"]}) for r in rows[:limit]]
        cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            cursor = base64.urlsafe_b64encode(
                f"{last['created_at'].isoformat()}|{last['id']}".encode()
            ).decode()
        return {"floor_uid": floor_id, "events": items, "next_cursor": cursor}

    def _editable(self, conn, user_id: str, event_id: str, rewrite: bool = False):
        """The event if this user may delete it (its author, or the floor's owner) or, with
        ``rewrite``, edit it (its author alone: a post's words are its author's, and answers
        quote them as theirs). In a private floor of someone else's only its author may
        delete it: whoever else asks is answered as for an event that never existed."""
        e = (
            conn.execute(
                sa.select(events, floors.c.is_private, floors.c.owner_id)
                .join(floors)
                .where(events.c.id == event_id)
            )
            .mappings()
            .first()
        )
        if e is None or (
            e["is_private"]
            and e["owner_id"] != user_id
            and (rewrite or e["user_id"] != user_id)  # their own post: theirs to delete
        ):  # someone else's private floor: missing
            raise NotFound("no such event", field="event_id")
        if user_id not in (e["user_id"], e["owner_id"]):
            raise Forbidden(
                "only the author or the floor's owner may change this event", code="not_allowed"
            )
        if rewrite and user_id != e["user_id"]:
            raise Forbidden(
                "only the author may edit this event (the floor's owner may delete it)",
                code="not_author",
            )
        return e

    def edit(self, user_id: str, event_id: str, data: m.EventEdit) -> dict:
        values = {"updated_at": now(), **data.model_dump(exclude_unset=True)}
        with self.engine.begin() as conn:
            e = self._editable(conn, user_id, event_id, rewrite=True)
            old = self.vectors.pending(conn, [e])
            if (
                conn.execute(
                    events.update().where(events.c.id == event_id).values(**values)
                ).rowcount
                != 1
            ):
                raise NotFound(
                    "no such event", field="event_id"
                )  # deleted since it was read just above
            row = conn.execute(sa.select(events).where(events.c.id == event_id)).mappings().one()
            b = conn.execute(sa.select(blocks).where(blocks.c.id == e["block_id"])).mappings().one()
            out = event_response(row, b)
            self._written(conn, [event_id])
            forget_quoted(conn, {event_id: e["text"]})  # the old words, as turns quoted them
        self._committed(e["floor_id"], [event_id])
        old.forget(rows=[row])  # the old text's vectors
        return out

    def delete(self, user_id: str, event_id: str) -> dict:
        with self.engine.begin() as conn:
            e = self._editable(conn, user_id, event_id)
            old = self.vectors.pending(conn, [e])
            log_event_changes(conn, [event_id])
            forget_quoted(conn, {event_id: e["text"]})  # its words, as turns quoted them
            conn.execute(events.delete().where(events.c.id == event_id))
        self._committed(e["floor_id"], [event_id])
        old.forget()  # its vectors, and its neighbours' documents that held it
        return {"deleted": event_id}
