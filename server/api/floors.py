"""``/floors/...``: floors, blocks and events. Every route needs a bearer token."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from server.api.auth import current_user, json_body


def services():
    ext = current_app.extensions["memkit"]
    return ext["floors"], ext["events"]


bp = Blueprint("floors", __name__, url_prefix="/floors")


@bp.post("")
def create_floor():
    return jsonify(services()[0].create(current_user(), json_body()))


@bp.get("/<floor_id>")
def get_floor(floor_id):
    return jsonify(services()[0].get(current_user(), floor_id))


@bp.patch("/<floor_id>")
def edit_floor(floor_id):
    return jsonify(services()[0].edit(current_user(), floor_id, json_body()))


@bp.post("/<floor_id>/rename")
def rename_floor(floor_id):
    return jsonify(services()[0].rename(current_user(), floor_id, json_body()))


@bp.post("/<floor_id>/private")
def make_private(floor_id):
    return jsonify(services()[0].set_private(current_user(), floor_id, True))


@bp.post("/<floor_id>/public")
def make_public(floor_id):
    return jsonify(services()[0].set_private(current_user(), floor_id, False))


@bp.post("/<floor_id>/blocks")
def add_block(floor_id):
    return jsonify(services()[0].add_block(current_user(), floor_id, json_body()))


@bp.post("/<floor_id>/blocks/<block_id>/events")
def create_event(floor_id, block_id):
    return jsonify(services()[1].create(current_user(), floor_id, block_id, json_body()))


@bp.post("/<floor_id>/blocks/<block_id>/events/batch")
def create_events(floor_id, block_id):
    return jsonify(services()[1].create_many(current_user(), floor_id, block_id, json_body()))


@bp.get("/<floor_id>/events")
def recent_events(floor_id):
    return jsonify(services()[1].recent(current_user(), floor_id, request.args.to_dict()))


events_bp = Blueprint("events", __name__, url_prefix="/events")


@events_bp.patch("/<event_id>")
def edit_event(event_id):
    return jsonify(services()[1].edit(current_user(), event_id, json_body()))


@events_bp.delete("/<event_id>")
def delete_event(event_id):
    return jsonify(services()[1].delete(current_user(), event_id))
