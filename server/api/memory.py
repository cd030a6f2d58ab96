"""``POST /agent/memory/query``: the conversational query (rules in server/services/memory.py)."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from server.errors import ApiError, BadRequest
from server.services.memory import Caller

bp = Blueprint("memory", __name__, url_prefix="/agent/memory")


def _caller() -> Caller:
    """A user by bearer token, or an application by X-App-Id and X-App-Secret."""
    accounts = current_app.extensions["memkit"]["accounts"]
    if request.headers.get("Authorization") or not request.headers.get("X-App-Id"):
        return Caller(user_id=accounts.authenticate(request.headers.get("Authorization")))
    return Caller(app_id=accounts.authenticate_app(request.headers.get("X-App-Id"), request.headers.get("X-App-Secret")))


@bp.post("/query")
def query():
    caller = _caller()
    if not request.is_json:
        raise ApiError("send the query as a JSON body (Content-Type: application/json); multipart and form bodies "
                       f"are not accepted (got {request.mimetype or 'no content type'})", code="unsupported_media_type",
                       status=415)
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise BadRequest("the body is not a JSON object", code="invalid_body")
    return jsonify(current_app.extensions["memkit"]["memory"].query(caller, data))
