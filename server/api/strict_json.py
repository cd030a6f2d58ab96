"""Request input that never reaches the services half-valid.

Every JSON body goes through ``StrictJSONProvider.loads`` (Flask's ``request.get_json``):
UTF-8 only, standard JSON only (no ``NaN`` or ``Infinity``), no key repeated within an
object, at most ``MAX_DEPTH`` levels of nesting, and no string (key or value) holding a NUL
character or an unpaired surrogate, which neither SQLite's nor PostgreSQL's text can store.
``check_url`` applies the same rule to the path and query string. Each refusal is a 400 that
says what and where, e.g. ``events[2].text``, before any service runs, so nothing is stored.
"""

from __future__ import annotations

import json

from flask import request
from flask.json.provider import DefaultJSONProvider

from server.errors import BadRequest

MAX_DEPTH = 20  # the deepest valid body (a batch of events with media) is 5 levels


def _no_constants(name: str):
    raise BadRequest(f"{name} is not JSON: numbers must be finite", code="invalid_json")


def _no_duplicates(pairs: list[tuple]) -> dict:
    """An object whose keys are all different: with a repeated key, what one reader of the
    body sees (the first) and what the service would act on (the last) could differ."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise BadRequest(
                f"the key {json.dumps(key)} appears more than once in an object",
                field=key,
                code="duplicate_key",
            )
        out[key] = value
    return out


def bad_text(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (\\ud800-\\udfff); expected valid Unicode text"
    return None


def check_value(value, where: str = "", depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise BadRequest(
            f"the body is nested more than {MAX_DEPTH} levels deep",
            field=where or None,
            code="too_deep",
        )
    if isinstance(value, str):
        problem = bad_text(value)
        if problem:
            raise BadRequest(
                f"{where or 'the body'} {problem}", field=where or None, code="invalid_text"
            )
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_value(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else key
            if bad_text(key):
                raise BadRequest(f"a field name {bad_text(key)}", field=None, code="invalid_text")
            check_value(item, name, depth + 1)


class StrictJSONProvider(DefaultJSONProvider):
    def loads(self, s, **kwargs):
        if isinstance(s, (bytes, bytearray)):
            try:
                s = bytes(s).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BadRequest(
                    f"the body is not valid UTF-8 (byte {exc.start})", code="invalid_encoding"
                ) from None
        try:
            value = json.loads(s, parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
        except RecursionError:
            raise BadRequest(
                f"the body is nested more than {MAX_DEPTH} levels deep", code="too_deep"
            ) from None
        except ValueError as exc:
            raise BadRequest(f"the body is not valid JSON: {exc}", code="invalid_json") from None
        check_value(value)
        return value


def check_url() -> None:
    """Path, query string and form fields: the same text rule as bodies (a 400 naming the
    parameter)."""
    problem = bad_text(request.path)
    if problem:
        raise BadRequest(f"the path {problem}", code="invalid_text")
    fields = list(request.args.items(multi=True))
    if request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        fields += list(request.form.items(multi=True))
    for name, value in fields:
        problem = bad_text(name) or bad_text(value)
        if problem:
            raise BadRequest(f"{name} {problem}", field=name, code="invalid_text")
