"""Floors and blocks: read, create (within quotas), edit, rename, make private or public.

Only a floor's owner edits it. A private floor is invisible to everyone else: every
operation on it answers 404 exactly as for an id that never existed. Public floors are
readable by any signed-in user.
"""

from __future__ import annotations

import sqlalchemy as sa

from server.errors import BadRequest, Forbidden, NotFound
from server.services.common import check_fields, new_id, now
from server.store.schema import blocks, floors, users

# Block types and the numbers the query endpoint reports for them (0 for a type this
# version does not know, e.g. one stored by another version: reported, never a crash).
BLOCK_TYPES = {"feed": 1, "blog": 2, "forum": 3, "quiz": 4}


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
    return {"block_id": b["id"], "block_type": b["type"], "block_type_code": BLOCK_TYPES.get(b["type"], 0),
            "block_title": b["title"], "block_details": b["details"], "created_at": b["created_at"].isoformat()}


class Floors:
    def __init__(self, engine: sa.Engine, settings):
        self.engine, self.settings = engine, settings

    def info(self, conn, f) -> dict:
        bl = conn.execute(sa.select(blocks).where(blocks.c.floor_id == f["id"]).order_by(blocks.c.created_at, blocks.c.id)
                          ).mappings().all()
        return {"floor_uid": f["id"], "owner_id": f["owner_id"], "title": f["title"], "details": f["details"],
                "avatar": f["avatar"], "is_private": f["is_private"], "created_at": f["created_at"].isoformat(),
                "blocks": [block_details(b) for b in bl]}

    def get(self, user_id: str, floor_id: str) -> dict:
        with self.engine.connect() as conn:
            return self.info(conn, readable_floor(conn, floor_id, user_id))

    def _quota(self, conn, user_id: str, what: str) -> None:
        u = conn.execute(sa.select(users).where(users.c.id == user_id)).mappings().one()
        if what == "floor":
            used = conn.execute(sa.select(sa.func.count()).select_from(floors).where(floors.c.owner_id == user_id)).scalar()
            permitted = u["floor_quota"]
        else:
            used = conn.execute(sa.select(sa.func.count()).select_from(blocks).join(floors)
                                .where(floors.c.owner_id == user_id)).scalar()
            permitted = u["block_quota"]
        if used >= permitted:
            raise Forbidden(f"{what} quota used up ({permitted} permitted, 0 remaining)", code="quota_exceeded")

    def create(self, user_id: str, data: dict) -> dict:
        check_fields(data, {"title": str}, {"details": str, "avatar": str, "is_private": bool})
        _lengths(data)
        title = _title(data["title"])
        with self.engine.begin() as conn:
            self._quota(conn, user_id, "floor")
            fid = new_id("f")
            conn.execute(floors.insert().values(id=fid, owner_id=user_id, title=title, details=data.get("details", ""),
                                                avatar=data.get("avatar"), is_private=data.get("is_private", False),
                                                created_at=now()))
            return self.info(conn, conn.execute(sa.select(floors).where(floors.c.id == fid)).mappings().one())

    def edit(self, user_id: str, floor_id: str, data: dict) -> dict:
        check_fields(data, {}, {"title": str, "details": str, "avatar": str})
        if not data:
            raise BadRequest("nothing to change: give title, details or avatar", code="missing_field")
        _lengths(data)
        values = {k: v for k, v in data.items()}
        if "title" in values:
            values["title"] = _title(values["title"])
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            conn.execute(floors.update().where(floors.c.id == floor_id).values(**values))
            return self.info(conn, conn.execute(sa.select(floors).where(floors.c.id == floor_id)).mappings().one())

    def rename(self, user_id: str, floor_id: str, data: dict) -> dict:
        check_fields(data, {"title": str})
        return self.edit(user_id, floor_id, {"title": data["title"]})

    def set_private(self, user_id: str, floor_id: str, private: bool) -> dict:
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            conn.execute(floors.update().where(floors.c.id == floor_id).values(is_private=private))
            return self.info(conn, conn.execute(sa.select(floors).where(floors.c.id == floor_id)).mappings().one())

    def add_block(self, user_id: str, floor_id: str, data: dict) -> dict:
        check_fields(data, {"block_type": str, "title": str}, {"details": str})
        _lengths(data)
        if data["block_type"] not in BLOCK_TYPES:
            raise BadRequest(f"block_type must be one of {list(BLOCK_TYPES)}", field="block_type", code="invalid_type")
        with self.engine.begin() as conn:
            owned_floor(conn, floor_id, user_id)
            self._quota(conn, user_id, "block")
            bid = new_id("b")
            conn.execute(blocks.insert().values(id=bid, floor_id=floor_id, type=data["block_type"],
                                                title=_title(data["title"]), details=data.get("details", ""),
                                                created_at=now()))
            return block_details(conn.execute(sa.select(blocks).where(blocks.c.id == bid)).mappings().one())


MAX_DETAILS, MAX_AVATAR = 5000, 2000  # characters (the OpenAPI document states them too)


def _lengths(data: dict) -> None:
    for name, most in (("details", MAX_DETAILS), ("avatar", MAX_AVATAR)):
        if isinstance(data.get(name), str) and len(data[name]) > most:
            raise BadRequest(f"{name} must be at most {most} characters", field=name, code="too_long")


def _title(value: str) -> str:
    value = value.strip()
    if not 1 <= len(value) <= 200:
        raise BadRequest("title must be 1 to 200 characters", field="title", code="invalid_title")
    return value
