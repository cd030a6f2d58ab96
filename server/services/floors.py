"""Floors and blocks: read, create (within quotas), edit, rename, make private or public.

Only a floor's owner edits it. A private floor is invisible to everyone else: every
operation on it answers 404 exactly as for an id that never existed. Public floors are
readable by any signed-in user.
"""

from __future__ import annotations

import sqlalchemy as sa

from server import models as m
from server.errors import Forbidden, NotFound
from server.models import BLOCK_TYPES
from server.services.common import new_id, now
from server.store.schema import blocks, floors, users

TYPE_NAMES = {number: name for name, number in BLOCK_TYPES.items()}


def readable_floor(conn, floor_id: str, user_id: str):
    """The floor row if this user may read it; 404 otherwise (no hint it exists)."""
    if not isinstance(floor_id, str):
        raise NotFound("no such floor", field="floor_id")
    f = conn.execute(sa.select(floors).where(floors.c.id == floor_id)).mappings().first()
    if f is None or (f["is_private"] and f["owner_id"] != user_id):
        raise NotFound("no such floor", field="floor_id")
    return f


def owned_floor(conn, floor_id: str, user_id: str):
    f = readable_floor(conn, floor_id, user_id)
    if f["owner_id"] != user_id:
        raise Forbidden("only the floor's owner may change it", field="floor_id", code="not_owner")
    return f


def block_details(b) -> dict:
    return {
        "block_id": b["id"],
        "block_type": BLOCK_TYPES.get(b["type"], 0),
        "block_type_name": b["type"],
        "block_title": b["title"],
        "block_details": b["details"],
        "created_at": b["created_at"].isoformat(),
    }


class Floors:
    def __init__(self, engine: sa.Engine, settings):
        self.engine, self.settings = engine, settings

    def info(self, conn, f) -> dict:
        bl = (
            conn.execute(
                sa.select(blocks)
                .where(blocks.c.floor_id == f["id"])
                .order_by(blocks.c.created_at, blocks.c.id)
            )
            .mappings()
            .all()
        )
        return {
            "floor_uid": f["id"],
            "owner_id": f["owner_id"],
            "title": f["title"],
            "details": f["details"],
            "avatar": f["avatar"],
            "is_private": f["is_private"],
            "created_at": f["created_at"].isoformat(),
            "blocks": [block_details(b) for b in bl],
        }

    def get(self, user_id: str, floor_id: str) -> dict:
        with self.engine.connect() as conn:
            return self.info(conn, readable_floor(conn, floor_id, user_id))

    def _quota(self, conn, user_id: str, what: str) -> None:
        """Refuse a floor or block past the user's quota. The count and the insert that
        follows must not interleave with another request of the same user's, or two at once
        both find one left: so the user's row is written first (a no-op update), which
        makes the next such request wait for this transaction (SQLite's write lock,
        PostgreSQL's row lock) and then count what it committed."""
        conn.execute(
            users.update().where(users.c.id == user_id).values(floor_quota=users.c.floor_quota)
        )
        u = conn.execute(sa.select(users).where(users.c.id == user_id)).mappings().one()
        if what == "floor":
            used = conn.execute(
                sa.select(sa.func.count()).select_from(floors).where(floors.c.owner_id == user_id)
            ).scalar()
            permitted = u["floor_quota"]
        else:
            used = conn.execute(
                sa.select(sa.func.count())
                .select_from(blocks)
                .join(floors)
                .where(floors.c.owner_id == user_id)
            ).scalar()
            permitted = u["block_quota"]
        if used >= permitted:
            raise Forbidden(
                f"{what} quota used up ({permitted} permitted, 0 remaining)", code="quota_exceeded"
            )

    def create(self, user_id: str, data: m.FloorCreate) -> dict:
        with self.engine.begin() as conn:
            self._quota(conn, user_id, "floor")
            fid = new_id("f")
            conn.execute(
                floors.insert().values(
                    id=fid, owner_id=user_id, created_at=now(), **data.model_dump()
                )
            )
            return self.info(
                conn, conn.execute(sa.select(floors).where(floors.c.id == fid)).mappings().one()
            )

    def edit(self, user_id: str, floor_id: str, data: m.FloorEdit | m.FloorRename) -> dict:
        """Change the fields the request gave (a rename gives only the title)."""
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            conn.execute(
                floors.update()
                .where(floors.c.id == floor_id)
                .values(**data.model_dump(exclude_unset=True))
            )
            return self.info(
                conn,
                conn.execute(sa.select(floors).where(floors.c.id == floor_id)).mappings().one(),
            )

    def set_private(self, user_id: str, floor_id: str, private: bool) -> dict:
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            conn.execute(floors.update().where(floors.c.id == floor_id).values(is_private=private))
            return self.info(
                conn,
                conn.execute(sa.select(floors).where(floors.c.id == floor_id)).mappings().one(),
            )

    def add_block(self, user_id: str, floor_id: str, data: m.BlockCreate) -> dict:
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            self._quota(conn, user_id, "block")
            bid = new_id("b")
            conn.execute(
                blocks.insert().values(
                    id=bid,
                    floor_id=floor_id,
                    type=TYPE_NAMES[data.block_type],
                    title=data.title,
                    details=data.details,
                    created_at=now(),
                )
            )
            return block_details(
                conn.execute(sa.select(blocks).where(blocks.c.id == bid)).mappings().one()
            )
