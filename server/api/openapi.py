"""Operations declared once: each route names its request model, response model, errors and
summary with ``@operation``; ``body()`` validates the request with that model; the route's
answer is checked against its response model; ``spec(app)`` builds the OpenAPI 3.1 document
(``/openapi.json``) from the same declarations and models (``server/models.py``).

Why ``model_json_schema`` (pydantic's ``models_json_schema``) assembled per route rather
than flask-openapi3 or spectree: those libraries own the request parsing and the error
body, while the service already has its own (``server/api/strict_json.py`` refuses what no
store can hold, ``server/errors.py`` has the one error shape, codes per field); adapting
their hooks would take more code than these ~100 lines, and adds no dependency beyond
pydantic, which the models need anyway.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from flask import Blueprint, current_app, jsonify, request
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from server import models as m
from server.errors import BadRequest, Unprocessable

SCHEMA_NAMES = {"Error400": "400ErrorCode"}  # names a Python class cannot have


@dataclass(frozen=True)
class Operation:
    summary: str
    response: type[BaseModel]
    body: type[BaseModel] | None = None
    errors: tuple[str, ...] = ("400", "401")
    auth: str = "bearer"  # "bearer", "app" (X-App-Id/X-App-Secret), "either" or "none"
    tag: str = "accounts"
    form: bool = False  # the body may also come as multipart form parts
    query: type[BaseModel] | None = None  # the query string's model
    invalid_status: int = 400  # the status of a body the model refuses


def operation(**kw):
    """Declare a route's operation; the view's answer is checked against ``response``."""
    op = Operation(**kw)

    def wrap(view):
        @functools.wraps(view)
        def run(*args, **kwargs):
            answer = op.response.model_validate(view(*args, **kwargs))
            return jsonify(answer.model_dump(mode="json", exclude_unset=True, by_alias=True))

        run.operation = op
        return run

    return wrap


def current_operation() -> Operation:
    return current_app.view_functions[request.endpoint].operation


def body():
    """The request's body, validated by the operation's model (a 400, or the operation's
    ``invalid_status``, naming the field otherwise)."""
    op = current_operation()
    if op.form and request.mimetype == "multipart/form-data":
        data = {**request.form.to_dict(), **{k: "" for k in request.files}}
    elif not request.is_json:
        raise BadRequest(
            "expected a JSON body (Content-Type: application/json)", code="invalid_body"
        )
    else:
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise BadRequest("the body is not a JSON object", code="invalid_body")
    return validated(op.body, data, Unprocessable if op.invalid_status == 422 else BadRequest)


def query_args():
    op = current_operation()
    return validated(op.query, request.args.to_dict(), BadRequest)


def validated(model: type[BaseModel], data, error_class):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise m.errors_to_api(exc, error_class) from None


# -- the document ---------------------------------------------------------------------------
ERRORS = {
    "400": "bad input: the error names the field",
    "401": "missing, invalid, expired or revoked bearer token",
    "403": "not allowed (not the owner, quota used up, account not validated)",
    "404": "no such resource, or one you may not see",
    "409": "already registered",
    "413": "request body too large",
    "415": "the body is not JSON",
    "422": (
        "the request names a field wrongly (missing, wrong type, empty query, a floor you "
        "cannot read, a user_id that is not yours, an unknown app_id): the error names the field"
    ),
    "429": "rate limited; see Retry-After",
    "503": "a code could not be delivered; nothing changed",
}
SECURITY = {
    "bearer": [{"bearer": []}],
    "app": [{"appId": [], "appSecret": []}],
    "none": [],
    "either": [{"bearer": []}, {"appId": [], "appSecret": []}],
}


def _ref(model: type[BaseModel]) -> dict:
    return {"$ref": f"#/components/schemas/{SCHEMA_NAMES.get(model.__name__, model.__name__)}"}


def _path_item(op: Operation, params: list[str]) -> dict:
    out = {
        "summary": op.summary,
        "tags": [op.tag],
        "security": SECURITY[op.auth],
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": _ref(op.response)}},
            },
            **{
                e: {
                    "description": ERRORS[e],
                    "content": {"application/json": {"schema": _ref(m.Error400)}},
                    **(
                        {"headers": {"Retry-After": {"schema": {"type": "integer"}}}}
                        if e == "429"
                        else {}
                    ),
                }
                for e in op.errors
            },
        },
        "parameters": [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
            for p in params
        ],
    }
    if op.body is not None:
        content = {"application/json": {"schema": _ref(op.body)}}
        if op.form:
            content["multipart/form-data"] = {"schema": _ref(op.body)}
        out["requestBody"] = {"required": True, "content": content}
    if op.query is not None:
        schema = op.query.model_json_schema()
        out["parameters"] += [
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": {k: v for k, v in prop.items() if k != "title"},
            }
            for name, prop in schema["properties"].items()
        ]
    return out


def _renamed(value):
    """``value`` with every reference to a schema of SCHEMA_NAMES under its document name."""
    if isinstance(value, dict):
        return {
            k: (
                f"#/components/schemas/{SCHEMA_NAMES[v.rsplit('/', 1)[1]]}"
                if k == "$ref" and v.rsplit("/", 1)[1] in SCHEMA_NAMES
                else _renamed(v)
            )
            for k, v in value.items()
        }
    return [_renamed(v) for v in value] if isinstance(value, list) else value


def spec(app) -> dict:
    """The OpenAPI 3.1 document of every declared route of ``app``."""
    paths: dict = {}
    used: list[tuple[type[BaseModel], str]] = [(m.Error400, "serialization")]
    for rule in app.url_map.iter_rules():
        op = getattr(app.view_functions[rule.endpoint], "operation", None)
        if op is None:
            continue
        path = rule.rule.replace("<", "{").replace(">", "}")
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            paths.setdefault(path, {})[method.lower()] = _path_item(op, list(rule.arguments))
        used.append((op.response, "serialization"))
        if op.body is not None:
            used.append((op.body, "validation"))
    _, defs = models_json_schema(
        list(dict.fromkeys(used)), ref_template="#/components/schemas/{model}"
    )
    schemas = _renamed(
        {SCHEMA_NAMES.get(name, name): schema for name, schema in defs.get("$defs", {}).items()}
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memkit",
            "version": "0.2.0",
            "description": "Offline-first conversational memory: accounts, floors, blocks, events "
            "and the conversational query. Every error body is a 400ErrorCode object, whatever "
            f"the status. block_type is always a number ({m.BLOCK_TYPE_DOC}), block_type_name its "
            "name.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "appId": {"type": "apiKey", "in": "header", "name": "X-App-Id"},
                "appSecret": {"type": "apiKey", "in": "header", "name": "X-App-Secret"},
            },
        },
    }


bp = Blueprint("openapi", __name__)


@bp.get("/openapi.json")
def openapi_json():
    return jsonify(spec(current_app))
