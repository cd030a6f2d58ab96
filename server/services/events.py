"""Events: posts in a block of a floor. Create (text, tags, media metadata, optional reply
to an event of the same floor, optional re-post of an event from another floor, which keeps
that floor as ``from_floor_uid``), recent events of a floor (newest first, paginated),
edit and delete (by the author or the floor's owner).

Who may post: the owner into any of their floors, any signed-in user into the blocks of a
public floor. Events are stored durably (committed) before the response.
"""

from __future__ import annotations

import base64
from datetime import datetime

import sqlalchemy as sa

from memkit.tables import parse_time
from server.errors import BadRequest, Forbidden, NotFound
from server.services.accounts import check_fields, new_id, now
from server.services.floors import BLOCK_TYPES, readable_floor
from server.store.changes import log_event_changes
from server.store.schema import blocks, events

MAX_TEXT = 20_000
MAX_TAGS = 20


def _iso(dt: datetime) -> str:
    return dt.isoformat() if dt.tzinfo else dt.isoformat() + "+00:00"


def event_response(e, b) -> dict:
    return {"event_id": e["id"], "floor_uid": e["floor_id"], "from_floor_uid": e["from_floor_id"] or e["floor_id"],
            "block_id": e["block_id"], "block_type": BLOCK_TYPES[b["type"]], "block_type_name": b["type"],
            "user_id": e["user_id"], "text": e["text"], "tags": e["tags"], "media": e["media"],
            "reply_to": e["reply_to"], "created_at": _iso(e["created_at"]), "updated_at": _iso(e["updated_at"])}


def _tags(value) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) and 1 <= len(t) <= 50 for t in value):
        raise BadRequest("tags must be a list of strings of 1 to 50 characters", field="tags", code="invalid_type")
    if len(value) > MAX_TAGS:
        raise BadRequest(f"at most {MAX_TAGS} tags", field="tags", code="too_many")
    return list(dict.fromkeys(value))


def _media(value) -> list[dict]:
    if not isinstance(value, list):
        raise BadRequest("media must be a list of objects", field="media", code="invalid_type")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("url"), str):
            raise BadRequest("each media item needs a url (string)", field=f"media[{i}].url", code="invalid_type")
        unknown = set(m) - {"url", "type", "caption"}
        if unknown:
            raise BadRequest(f"unknown field {sorted(unknown)[0]!r}", field=f"media[{i}]", code="unknown_field")
        out.append({"url": m["url"], "type": m.get("type", "image"), "caption": m.get("caption")})
    return out


def _text(value: str) -> str:
    if not value.strip():
        raise BadRequest("text must not be empty", field="text", code="empty")
    if len(value) > MAX_TEXT:
        raise BadRequest(f"text must be at most {MAX_TEXT} characters", field="text", code="too_long")
    return value


class Events:
    def __init__(self, engine: sa.Engine):
        self.engine = engine

    def _block(self, conn, floor_id: str, block_id: str):
        b = conn.execute(sa.select(blocks).where(blocks.c.id == block_id, blocks.c.floor_id == floor_id)).mappings().first()
        if b is None:
            raise NotFound("no such block in this floor", field="block_id")
        return b

    def create(self, user_id: str, floor_id: str, block_id: str, data: dict) -> dict:
        check_fields(data, {"text": str}, {"tags": list, "media": list, "reply_to": str, "repost_of": str,
                                           "created_at": str})
        text = _text(data["text"])
        tags = _tags(data.get("tags", []))
        media = _media(data.get("media", []))
        try:
            created = parse_time(data["created_at"]) if data.get("created_at") else now()
        except ValueError:
            raise BadRequest("created_at must be an ISO 8601 time", field="created_at", code="invalid_time") from None
        with self.engine.begin() as conn:
            f = readable_floor(conn, floor_id, user_id)
            if f["is_private"] and f["owner_id"] != user_id:  # unreachable: readable_floor hides it
                raise NotFound("no such floor", field="floor_id")
            b = self._block(conn, floor_id, block_id)
            from_floor = None
            if data.get("reply_to"):
                parent = conn.execute(sa.select(events.c.floor_id).where(events.c.id == data["reply_to"])).first()
                if parent is None or parent[0] != floor_id:
                    raise NotFound("reply_to names no event of this floor", field="reply_to")
            if data.get("repost_of"):
                src = conn.execute(sa.select(events).where(events.c.id == data["repost_of"])).mappings().first()
                if src is None:
                    raise NotFound("repost_of names no event you can read", field="repost_of")
                readable_floor(conn, src["floor_id"], user_id)  # 404 if that floor is private to someone else
                from_floor = src["from_floor_id"] or src["floor_id"]
            eid = new_id("e")
            conn.execute(events.insert().values(id=eid, floor_id=floor_id, block_id=block_id, user_id=user_id, text=text,
                                                tags=tags, media=media, reply_to=data.get("reply_to"),
                                                from_floor_id=from_floor, created_at=created, updated_at=now()))
            row = conn.execute(sa.select(events).where(events.c.id == eid)).mappings().one()
            out = event_response(row, b)
            log_event_changes(conn, [eid])  # the search index catches up from the log
        return out

    def recent(self, user_id: str, floor_id: str, args: dict) -> dict:
        allowed = {"block_id", "type", "limit", "cursor"}
        for k in args:
            if k not in allowed:
                raise BadRequest(f"unknown parameter {k!r}", field=k, code="unknown_field")
        try:
            limit = int(args.get("limit", 20))
        except ValueError:
            raise BadRequest("limit must be an integer", field="limit", code="invalid_type") from None
        if not 1 <= limit <= 100:
            raise BadRequest("limit must be between 1 and 100", field="limit", code="out_of_range")
        with self.engine.connect() as conn:
            readable_floor(conn, floor_id, user_id)
            q = (sa.select(events, blocks.c.type.label("btype"), blocks.c.title.label("btitle"))
                 .join(blocks, blocks.c.id == events.c.block_id).where(events.c.floor_id == floor_id))
            if args.get("block_id"):
                q = q.where(events.c.block_id == args["block_id"])
            if args.get("type"):
                if args["type"] not in BLOCK_TYPES:
                    raise BadRequest(f"type must be one of {list(BLOCK_TYPES)}", field="type", code="invalid_type")
                q = q.where(blocks.c.type == args["type"])
            if args.get("cursor"):
                try:
                    ts, eid = base64.urlsafe_b64decode(args["cursor"].encode()).decode().split("|", 1)
                    t = datetime.fromisoformat(ts)
                except (ValueError, UnicodeDecodeError):
                    raise BadRequest("cursor is not one this service gave out", field="cursor", code="invalid_cursor") from None
                q = q.where(sa.or_(events.c.created_at < t, sa.and_(events.c.created_at == t, events.c.id < eid)))
            rows = conn.execute(q.order_by(events.c.created_at.desc(), events.c.id.desc()).limit(limit + 1)).mappings().all()
        items = [event_response(r, {"type": r["btype"]}) for r in rows[:limit]]
        cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            cursor = base64.urlsafe_b64encode(f"{last['created_at'].isoformat()}|{last['id']}".encode()).decode()
        return {"floor_uid": floor_id, "events": items, "next_cursor": cursor}

    def _editable(self, conn, user_id: str, event_id: str):
        e = conn.execute(sa.select(events).where(events.c.id == event_id)).mappings().first()
        if e is None:
            raise NotFound("no such event", field="event_id")
        f = readable_floor(conn, e["floor_id"], user_id)  # 404 on someone else's private floor
        if user_id not in (e["user_id"], f["owner_id"]):
            raise Forbidden("only the author or the floor's owner may change this event", code="not_allowed")
        return e

    def edit(self, user_id: str, event_id: str, data: dict) -> dict:
        check_fields(data, {}, {"text": str, "tags": list, "media": list})
        if not data:
            raise BadRequest("nothing to change: give text, tags or media", code="missing_field")
        values = {"updated_at": now()}
        if "text" in data:
            values["text"] = _text(data["text"])
        if "tags" in data:
            values["tags"] = _tags(data["tags"])
        if "media" in data:
            values["media"] = _media(data["media"])
        with self.engine.begin() as conn:
            e = self._editable(conn, user_id, event_id)
            conn.execute(events.update().where(events.c.id == event_id).values(**values))
            row = conn.execute(sa.select(events).where(events.c.id == event_id)).mappings().one()
            b = conn.execute(sa.select(blocks).where(blocks.c.id == e["block_id"])).mappings().one()
            out = event_response(row, b)
            log_event_changes(conn, [event_id])
        return out

    def delete(self, user_id: str, event_id: str) -> dict:
        with self.engine.begin() as conn:
            self._editable(conn, user_id, event_id)
            log_event_changes(conn, [event_id])
            conn.execute(events.delete().where(events.c.id == event_id))
        return {"deleted": event_id}
