"""``POST /agent/memory/query``: the conversational query (rules in server/services/memory.py)."""

from __future__ import annotations

from contextlib import ExitStack

from flask import Blueprint, current_app, request

from memkit.models.encoders import asking
from server import models as m
from server.api.auth import app_caller
from server.api.openapi import body, operation
from server.errors import ApiError
from server.services.memory import Caller
from server.store import one_connection

bp = Blueprint("memory", __name__, url_prefix="/agent/memory")


def _caller() -> Caller:
    """A user by bearer token, or an application by X-App-Id and X-App-Secret."""
    accounts = current_app.extensions["memkit"]["accounts"]
    if request.headers.get("Authorization") or not request.headers.get("X-App-Id"):
        return Caller(user_id=accounts.authenticate(request.headers.get("Authorization")))
    return Caller(app_id=app_caller())


@bp.post("/query")
@operation(
    summary="Ask in natural language over some floors; returns an answer and the ranked items "
    "that ground it. Follow-ups of the same user_id build on earlier queries",
    response=m.QueryResponse,
    body=m.QueryRequest,
    auth="either",
    errors=("400", "401", "415", "422", "429"),
    tag="memory",
    invalid_status=422,
)
def query():
    ext = current_app.extensions["memkit"]
    # The question's first reads (the caller's token, its history, its floors) share one
    # connection, back in the pool before the question waits for the index or the model:
    # a request that holds a connection never waits for another (no pool deadlock).
    with ExitStack() as held:
        with one_connection(ext["engine"]):
            caller = _caller()
            if not request.is_json:
                got = request.mimetype or "no content type"
                raise ApiError(
                    "send the query as a JSON body (Content-Type: application/json); multipart "
                    f"and form bodies are not accepted (got {got})",
                    code="unsupported_media_type",
                    status=415,
                )
            req = body()
            # Counted per asker before the question reads anything more, and held as one of
            # the asker's questions in flight until it is answered (server/api/limits.py).
            held.enter_context(ext["questions"].admitted(_asker(caller, req)))
            prepared = ext["memory"].prepare(caller, req)
        with asking():  # the model's runs for writes yield to it (memkit.models.encoders.Lanes)
            return ext["memory"].answer(req, prepared)


def _asker(caller: Caller, req: m.QueryRequest) -> str:
    """Whose count a question spends: the signed-in user's, or the application's for the
    user it names (an application spends no one's count but its own users')."""
    if caller.user_id is not None:
        return f"user:{caller.user_id}"
    return f"app:{caller.app_id}/user:{req.user_id[:200]}"
