"""The pipeline's items, read from the store (memkit.core.items.ItemSource).

The pipeline ranks event ids; what it shows the answer writer and the conversation (text,
author's name, time, block) it reads here, one query per question for the posts it
considers. The fields only the HTTP response needs (the block's details, the floor a
re-post came from, media, tags, times) travel in ``Item.extra``.
"""

from __future__ import annotations

import sqlalchemy as sa

from memkit.core.items import Item
from server.store.db import reading
from server.store.schema import blocks, events, floors, stored_media, stored_tags, users

CHUNK = 500  # ids per query (SQLite limits an expression's depth)


class StoredPosts:
    def __init__(self, engine: sa.Engine):
        self.engine = engine

    def items(self, event_ids: list[str]) -> list[Item]:
        if not event_ids:
            return []
        q = (
            sa.select(
                events,
                blocks.c.type.label("btype"),
                blocks.c.title.label("btitle"),
                blocks.c.details.label("bdetails"),
                floors.c.title.label("ftitle"),
                users.c.name.label("uname"),
            )
            .join(blocks, blocks.c.id == events.c.block_id)
            .join(floors, floors.c.id == events.c.floor_id)
            .join(users, users.c.id == events.c.user_id)
        )
        rows = {}
        with reading(self.engine) as conn:
            for i in range(0, len(event_ids), CHUNK):
                part = event_ids[i : i + CHUNK]
                rows.update(
                    {r["id"]: r for r in conn.execute(q.where(events.c.id.in_(part))).mappings()}
                )
        return [_item(rows[e]) for e in event_ids if e in rows]


def _item(r) -> Item:
    name = r["uname"].strip() if isinstance(r["uname"], str) else ""
    return Item(
        event_id=r["id"],
        text=r["text"] if isinstance(r["text"], str) else "",
        speaker=name or None,
        user_id=r["user_id"],
        created_at=r["created_at"],
        floor_id=r["floor_id"],
        block_id=r["block_id"],
        block_type=r["btype"],
        block_title=r["btitle"],
        extra={
            "block_details": r["bdetails"],
            "from_floor_uid": r["from_floor_id"] or r["floor_id"],
            "metadata": {
                "source": {
                    "floor_title": r["ftitle"],
                    "block_type_name": r["btype"],
                    "reply_to": r["reply_to"],
                    "repost": r["from_floor_id"] is not None,
                    "media": stored_media(r["media"]),
                },
                "created_at": r["created_at"].isoformat(),
                "updated_at": r["updated_at"].isoformat(),
                "tags": stored_tags(r["tags"]),
            },
        },
    )
