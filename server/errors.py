"""Typed service errors and the one place where they become HTTP responses.

Every error body has one shape: ``{"error": {"code": ..., "message": ..., "field": ...}}``
(``field`` is null when no single field is to blame). No stack trace reaches a client.
"""

from __future__ import annotations

import logging
import math
import time

from flask import Flask, current_app, jsonify
from werkzeug.exceptions import HTTPException

from memkit.core.errors import ValidationError as MemkitValidationError

log = logging.getLogger("memkit.server")


class ApiError(Exception):
    status = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        field: str | None = None,
        code: str | None = None,
        status: int | None = None,
        headers: dict | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code or self.code
        self.status = status or self.status
        self.headers = headers or {}


class BadRequest(ApiError):
    status, code = 400, "bad_request"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"


class Forbidden(ApiError):
    status, code = 403, "forbidden"


class NotFound(ApiError):
    status, code = 404, "not_found"


class Conflict(ApiError):
    status, code = 409, "conflict"


class Unprocessable(ApiError):
    status, code = 422, "unprocessable"


def body(code: str, message: str, field: str | None = None) -> dict:
    return {"error": {"code": code, "message": message, "field": field}}


def retry_after() -> int:
    """Seconds until the limit flask-limiter found breached lets a request through again."""
    limit = current_app.extensions["memkit"]["limiter"].current_limit
    return max(1, math.ceil(limit.reset_at - time.time())) if limit is not None else 60


def register(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api(err: ApiError):
        resp = jsonify(body(err.code, err.message, err.field))
        resp.status_code = err.status
        resp.headers.update(err.headers)
        if err.status == 401:
            resp.headers["WWW-Authenticate"] = "Bearer"
        return resp

    @app.errorhandler(MemkitValidationError)
    def _memkit(err: MemkitValidationError):
        return jsonify(body("invalid", err.message, err.field)), 400

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException):
        code = {
            404: "not_found",
            405: "method_not_allowed",
            413: "too_large",
            429: "rate_limited",
        }.get(err.code, (err.name or "error").lower().replace(" ", "_"))
        message = {404: "no such resource", 413: "request body too large"}.get(
            err.code, err.description or err.name
        )
        resp = jsonify(body(code, message))
        resp.status_code = err.code or 500
        if err.code == 429:
            resp.headers["Retry-After"] = str(retry_after())
        return resp

    @app.errorhandler(Exception)
    def _crash(err: Exception):
        log.exception("unhandled error")  # the trace goes to the log, never to the client
        return jsonify(body("internal", "internal server error")), 500
