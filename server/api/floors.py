"""``/floors/...`` and ``/events/...``: floors, blocks and events. Every route needs a bearer
token."""

from __future__ import annotations

from flask import Blueprint, current_app

from server import models as m
from server.api.auth import current_user
from server.api.limits import spend_write_budget
from server.api.openapi import body, operation, query_args


def services():
    ext = current_app.extensions["memkit"]
    return ext["floors"], ext["events"]


bp = Blueprint("floors", __name__, url_prefix="/floors")
ERR = ("400", "401", "403", "404")


@bp.post("")
@operation(
    summary="Create a floor (uses the floor quota)",
    response=m.FloorInfo,
    body=m.FloorCreate,
    errors=("400", "401", "403"),
    tag="floors",
)
def create_floor():
    return services()[0].create(current_user(), body())


@bp.get("/<floor_id>")
@operation(
    summary="Basic information of a floor",
    response=m.FloorInfo,
    errors=("401", "404"),
    tag="floors",
)
def get_floor(floor_id):
    return services()[0].get(current_user(), floor_id)


@bp.patch("/<floor_id>")
@operation(
    summary="Edit title, details or avatar (owner only)",
    response=m.FloorInfo,
    body=m.FloorEdit,
    errors=ERR,
    tag="floors",
)
def edit_floor(floor_id):
    return services()[0].edit(current_user(), floor_id, body())


@bp.post("/<floor_id>/edit")
@operation(
    summary="Edit floor (interface 4.3's POST): title, details or avatar (owner only); the same "
    "as PATCH /floors/{floor_id}",
    response=m.FloorInfo,
    body=m.FloorEdit,
    errors=ERR,
    tag="floors",
)
def edit_floor_by_post(floor_id):
    return services()[0].edit(current_user(), floor_id, body())


@bp.post("/<floor_id>/rename")
@operation(
    summary="Rename a floor", response=m.FloorInfo, body=m.FloorRename, errors=ERR, tag="floors"
)
def rename_floor(floor_id):
    return services()[0].edit(current_user(), floor_id, body())


@bp.post("/<floor_id>/private")
@operation(
    summary="Make a floor private", response=m.FloorInfo, errors=("401", "403", "404"), tag="floors"
)
def make_private(floor_id):
    return services()[0].set_private(current_user(), floor_id, True)


@bp.post("/<floor_id>/public")
@operation(
    summary="Make a floor public", response=m.FloorInfo, errors=("401", "403", "404"), tag="floors"
)
def make_public(floor_id):
    return services()[0].set_private(current_user(), floor_id, False)


@bp.post("/<floor_id>/blocks")
@operation(
    summary="Add a block (uses the block quota)",
    response=m.BlockDetails,
    body=m.BlockCreate,
    errors=ERR,
    tag="floors",
)
def add_block(floor_id):
    return services()[0].add_block(current_user(), floor_id, body())


@bp.post("/<floor_id>/blocks/<block_id>/events")
@operation(
    summary="Post an event into a block (stored before the 200)",
    response=m.EventResponse,
    body=m.PostAdd,
    errors=("400", "401", "404", "429"),
    tag="events",
)
def create_event(floor_id, block_id):
    user = current_user()
    spend_write_budget(user)
    return services()[1].create(user, floor_id, block_id, body())


@bp.post("/<floor_id>/blocks/<block_id>/events/batch")
@operation(
    summary="Post up to 1,000 events into a block in one transaction (all stored, or none: an "
    "error names events[i].field)",
    response=m.PostBatchResponse,
    body=m.PostBatch,
    errors=("400", "401", "404", "429"),
    tag="events",
)
def create_events(floor_id, block_id):
    user = current_user()
    spend_write_budget(user)
    return services()[1].create_many(user, floor_id, block_id, body())


@bp.get("/<floor_id>/events")
@operation(
    summary="Recent events of a floor, newest first",
    response=m.Threads,
    query=m.RecentEvents,
    errors=("400", "401", "404"),
    tag="events",
)
def recent_events(floor_id):
    return services()[1].recent(current_user(), floor_id, query_args())


events_bp = Blueprint("events", __name__, url_prefix="/events")


@events_bp.patch("/<event_id>")
@operation(
    summary="Edit an event (its author only; the floor's owner may delete it)",
    response=m.EventResponse,
    body=m.EventEdit,
    errors=(*ERR, "429"),
    tag="events",
)
def edit_event(event_id):
    user = current_user()
    spend_write_budget(user)
    return services()[1].edit(user, event_id, body())


@events_bp.delete("/<event_id>")
@operation(
    summary="Delete an event (author or floor owner)",
    response=m.Deleted,
    errors=("401", "403", "404"),
    tag="events",
)
def delete_event(event_id):
    return services()[1].delete(current_user(), event_id)
