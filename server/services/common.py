"""Helpers every service uses: the clock, new ids, and checking a request's fields. Kept
apart from the services so none imports another just for these."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from server.errors import BadRequest


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    """Random text ids (``u_...``, ``f_...``): they reveal nothing about counts."""
    return f"{prefix}_{secrets.token_hex(8)}"


def check_fields(data, required: dict[str, type], optional: dict[str, type] | None = None) -> dict:
    """Unknown fields, missing fields and wrong types are refused, each naming the field."""
    optional = optional or {}
    if not isinstance(data, dict):
        raise BadRequest("expected a JSON object", code="invalid_body")
    for name in data:
        if name not in required and name not in optional:
            raise BadRequest(f"unknown field {name!r}", field=name, code="unknown_field")
    for name, kind in {**required, **optional}.items():
        if name not in data or data[name] is None:
            if name in required:
                raise BadRequest(f"{name} is required", field=name, code="missing_field")
            continue
        if not isinstance(data[name], kind) or isinstance(data[name], bool) and kind is not bool:
            raise BadRequest(f"{name} must be a {kind.__name__}", field=name, code="invalid_type")
    return data
