"""The OpenAPI 3.1 document of the service, served at ``/openapi.json``.

Component schemas are named after the interface specification's where they fit
(PostAdd, Media, UserDetails, SignUpResponse, BlockDetails, FloorInfo, Threads,
EventResponse, 400ErrorCode, Remaining, SignInResponse, QueryResponse). ``tests/test_openapi.py``
validates the document and checks real responses against it.
"""

from __future__ import annotations

from flask import Blueprint, jsonify

from server.services.accounts import MODES
from server.services.floors import BLOCK_TYPES


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(props: dict, required=None, extra=False) -> dict:
    return {"type": "object", "properties": props, "required": list(required if required is not None else props),
            "additionalProperties": extra}


STR, INT, BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
NSTR = {"type": ["string", "null"]}
TIME = {"type": "string", "format": "date-time"}
EMAIL = {"type": "string", "format": "email", "maxLength": 254}
TITLE = {"type": "string", "minLength": 1, "maxLength": 200, "description": "outer spaces are trimmed first"}
DETAILS, AVATAR = {"type": "string", "maxLength": 5000}, {"type": "string", "maxLength": 2000}
MEDIA = {"type": "array", "maxItems": 20, "items": {"$ref": "#/components/schemas/Media"}}
# Block types in responses: a block stored by another version may carry a type this one does
# not know; it is reported as such (never a failed request), so the name is any string and
# the number may be 0.
TYPE_NAME = {"type": "string", "description": f"one of {', '.join(BLOCK_TYPES)} (any other: a type this version "
                                              "does not know)"}
TYPE_CODE = {"type": "integer", "enum": [0, *BLOCK_TYPES.values()],
             "description": "; ".join(f"{v} = {k}" for k, v in BLOCK_TYPES.items()) + "; 0 = a type this version "
                            "does not know"}
TAGS = {"type": "array", "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 50}}

SCHEMAS = {
    "400ErrorCode": obj({"error": obj({"code": STR, "message": STR, "field": NSTR})}),
    "Remaining": obj({"permitted": INT, "remaining": INT}),
    "UserDetails": obj({"user_id": STR, "name": STR, "email": NSTR, "mobile": NSTR, "validated": BOOL, "created_at": TIME,
                        "external_id": NSTR, "floor_count_info": ref("Remaining"), "block_count_info": ref("Remaining")}),
    "PodInfo": {"oneOf": [obj({}, []), obj({"floor_uid": STR, "title": STR, "is_private": BOOL, "blocks": {"type": "array", "items": obj(
        {"block_id": STR, "block_type": TYPE_NAME, "block_title": STR})}})]},
    "SignUpResponse": obj({"user_id": STR, "profile": ref("UserDetails"), "pod_info": ref("PodInfo"), "message": STR}),
    "Token": obj({"token": STR, "token_type": {"const": "Bearer"}, "expires_at": TIME}),
    "SignInResponse": obj({"user_id": STR, "profile": ref("UserDetails"), "token": STR, "token_type": {"const": "Bearer"},
                           "expires_at": TIME}, ["profile", "token", "token_type", "expires_at"]),
    "ProfileResponse": obj({"profile": ref("UserDetails"), "pod_info": ref("PodInfo")}),
    "ChangeEmailResponse": obj({"profile": ref("UserDetails"), "pod_info": ref("PodInfo"), "app_id": NSTR}),
    "ExternalUserResponse": obj({"user_id": STR, "created": BOOL, "app_id": STR, "profile": ref("UserDetails"),
                                 "pod_info": ref("PodInfo"), "token": STR, "token_type": {"const": "Bearer"}, "expires_at": TIME}),
    "PasswordChanged": obj({"message": STR, "token": STR, "token_type": {"const": "Bearer"}, "expires_at": TIME}),
    "CodeSent": obj({"mode": {"enum": list(MODES)}, "message": STR}),
    "Deleted": obj({"deleted": STR, "events_deleted": INT}, ["deleted"]),
    "BlockDetails": obj({"block_id": STR, "block_type": TYPE_NAME, "block_type_code": TYPE_CODE,
                         "block_title": STR, "block_details": STR, "created_at": TIME}),
    "FloorInfo": obj({"floor_uid": STR, "owner_id": STR, "title": STR, "details": STR, "avatar": NSTR, "is_private": BOOL,
                      "created_at": TIME, "blocks": {"type": "array", "items": ref("BlockDetails")}}),
    "Media": obj({"url": {"type": "string", "maxLength": 2000}, "type": {"type": "string", "maxLength": 50},
                  "caption": {"type": ["string", "null"], "maxLength": 1000}}, ["url"]),
    "PostAdd": obj({"text": {"type": "string", "minLength": 1, "maxLength": 20000},
                    "tags": TAGS,
                    "media": MEDIA, "reply_to": STR, "repost_of": STR, "created_at": TIME},
                   ["text"]),
    "EventResponse": obj({"event_id": STR, "floor_uid": STR, "from_floor_uid": STR, "block_id": STR,
                          "block_type": TYPE_CODE, "block_type_name": TYPE_NAME, "user_id": STR, "text": STR,
                          "tags": {"type": "array", "items": STR}, "media": {"type": "array", "items": ref("Media")},
                          "reply_to": NSTR, "created_at": TIME, "updated_at": TIME}),
    "ItemMetadata": obj({"source": obj({"floor_title": STR, "block_type_name": TYPE_NAME, "reply_to": NSTR,
                                         "repost": BOOL, "media": {"type": "array", "items": ref("Media")}}),
                         "created_at": TIME, "updated_at": TIME, "tags": {"type": "array", "items": STR}}),
    "QueryItem": obj({"block_type": TYPE_CODE,
                      "block_id": STR, "block_title": STR, "block_details": STR, "event_id": STR, "floor_uid": STR,
                      "from_floor_uid": {"type": "string", "description": "the floor the event was first posted in "
                                                                          "(its own floor unless it is a re-post)"},
                      "user_id": STR, "text": STR, "score": {"type": "number"},
                      "match_type": {"enum": ["keyword", "semantic", "hybrid"]},
                      "metadata": {**ref("ItemMetadata"), "description": 'only when include_metadata is "1"'}},
                     ["block_type", "block_id", "block_title", "block_details", "event_id", "floor_uid", "from_floor_uid",
                      "user_id", "text", "score", "match_type"]),
    "QueryResponse": obj({"user_id": STR, "query": STR,
                          "effective_query": {"type": "string", "description": "what was searched, after follow-up handling"},
                          "answer": {"type": "string", "description": 'summary_needed "1": a written answer quoting the '
                                     'items; "0": a one-line account; a fallback when nothing relevant was found'},
                          "items": {"type": "array", "items": ref("QueryItem")}, "app_id": NSTR,
                          "metadata": {**obj({"effective_query": STR, "context_turns": INT,
                                              "contextualizer": {"type": "object"}, "pipeline": STR}),
                                       "description": 'only when include_metadata is "1"'}},
                         ["user_id", "query", "effective_query", "answer", "items", "app_id"]),
    "Threads": obj({"floor_uid": STR, "events": {"type": "array", "items": ref("EventResponse")}, "next_cursor": NSTR}),
    "PostBatchResponse": obj({"floor_uid": STR, "block_id": STR, "events": {"type": "array", "items": ref("EventResponse")}}),
}

REQUESTS = {
    "SignUpRequest": obj({"name": {"type": "string", "minLength": 1, "maxLength": 200}, "email": EMAIL, "mobile": STR, "password": {"type": "string", "minLength": 8, "maxLength": 256}},
                         ["name", "password"]),
    "SendCodeRequest": obj({"mode": {"enum": list(MODES), "description": "; ".join(f"{k}: {v}" for k, v in MODES.items())},
                            "email": STR, "mobile": STR, "new_email_id": STR, "new_mobile": STR, "user_id": STR, "app_id": STR,
                            "password": {**STR, "description": "the account's password: required by change_email and "
                                                               "change_mobile"}}, ["mode"]),
    "ValidateRequest": obj({"email": STR, "mobile": STR, "code": STR,
                            "password": {**STR, "description": "the password chosen at sign-up"}}, ["code", "password"]),
    "SignInEmailRequest": obj({"email": EMAIL, "password": STR}),
    "SignInMobileRequest": obj({"mobile": STR, "password": STR}),
    "ChangePasswordRequest": obj({"old_password": STR, "new_password": {"type": "string", "minLength": 8, "maxLength": 256}}),
    "ResetPasswordRequest": obj({"email": STR, "mobile": STR, "code": STR, "new_password": STR}, ["code", "new_password"]),
    "ChangeEmailRequest": obj({"user_id": STR, "new_email_id": STR, "activation_code": STR, "app_id": STR},
                              ["new_email_id", "activation_code"]),
    "PostBatch": obj({"events": {"type": "array", "minItems": 1, "maxItems": 1000, "items": ref("PostAdd")}}, ["events"]),
    "ChangeEmailForm": obj({"new_email_id": STR, "activation_code": STR}),
    "ChangeMobileRequest": obj({"new_mobile": STR, "code": STR}),
    "ExternalRegisterRequest": obj({"external_id": STR, "name": STR}, ["external_id"]),
    "DeleteAccountRequest": obj({"password": STR}),
    "FloorCreate": obj({"title": TITLE, "details": DETAILS, "avatar": AVATAR, "is_private": BOOL}, ["title"]),
    "FloorEdit": obj({"title": TITLE, "details": DETAILS, "avatar": AVATAR}, []),
    "FloorRename": obj({"title": TITLE}),
    "BlockCreate": obj({"block_type": {"enum": list(BLOCK_TYPES)}, "title": TITLE, "details": DETAILS},
                       ["block_type", "title"]),
    "QueryFilters": obj({"time_from": {**TIME, "description": "inclusive, on the event's own time; no zone means UTC"},
                         "time_to": {**TIME, "description": "inclusive"},
                         "types": {"type": "array", "items": {"enum": list(BLOCK_TYPES)}},
                         "tags": {"type": "array", "maxItems": 50, "items": {"type": "string", "minLength": 1},
                                  "description": "an event matches if it has any of them"}},
                        []),
    "QueryRequest": obj({"user_id": STR, "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                         "floor_ids": {"type": "array", "minItems": 1, "maxItems": 50, "items": STR},
                         "filters": ref("QueryFilters"), "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                         "include_metadata": {"enum": ["0", "1"], "default": "0"},
                         "summary_needed": {"enum": ["0", "1"], "default": "1"}, "app_id": STR,
                         "filter_types": {"type": "array", "items": {"enum": list(BLOCK_TYPES)},
                                          "description": "alias of filters.types"},
                         "filter_tags": {"type": "array", "items": STR, "description": "alias of filters.tags"}},
                        ["user_id", "query", "floor_ids"]),
    "EventEdit": obj({"text": {"type": "string", "minLength": 1, "maxLength": 20000}, "tags": TAGS, "media": MEDIA}, []),
}

ERR = {"content": {"application/json": {"schema": ref("400ErrorCode")}}}
ERRORS = {
    "400": {"description": "bad input: the error names the field", **ERR},
    "401": {"description": "missing, invalid, expired or revoked bearer token", **ERR},
    "403": {"description": "not allowed (not the owner, quota used up, account not validated)", **ERR},
    "404": {"description": "no such resource, or one you may not see", **ERR},
    "409": {"description": "already registered", **ERR},
    "413": {"description": "request body too large", **ERR},
    "415": {"description": "the body is not JSON", **ERR},
    "422": {"description": "the request names a field wrongly (missing, wrong type, empty query, a floor you cannot "
                           "read, a user_id that is not yours): the error names the field", **ERR},
    "429": {"description": "rate limited; see Retry-After", **ERR, "headers": {"Retry-After": {"schema": INT}}},
    "503": {"description": "a code could not be delivered; nothing changed", **ERR},
}


def op(summary, response, body=None, auth="bearer", errors=("400", "401"), params=(), form=None, tag="accounts"):
    o = {"summary": summary, "tags": [tag],
         "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref(response)}}},
                       **{e: ERRORS[e] for e in errors}}}
    if body or form:
        content = {}
        if body:
            content["application/json"] = {"schema": ref(body)}
        if form:
            content["multipart/form-data"] = {"schema": ref(form)}
        o["requestBody"] = {"required": True, "content": content}
    o["security"] = {"bearer": [{"bearer": []}], "app": [{"appId": [], "appSecret": []}], None: [],
                     "either": [{"bearer": []}, {"appId": [], "appSecret": []}]}[auth]
    o["parameters"] = [{"name": p, "in": "path", "required": True, "schema": STR} for p in params]
    return o


def spec() -> dict:
    f, e = ("floor_id",), ("event_id",)
    paths = {
        "/auth-service/signup": {"post": op("Sign up with e-mail and/or mobile number; sends a validation code",
                                            "SignUpResponse", "SignUpRequest", None, ("400", "409", "429", "503"))},
        "/auth-service/send/validation/code": {"post": op(
            "Send a validation code for a mode (signup and reset_password need no token, the same answer either way)",
            "CodeSent", "SendCodeRequest", None, ("400", "401", "429", "503"))},
        "/auth-service/validate": {"post": op("Validate a new account with its code and the password chosen at sign-up",
                                              "SignInResponse", "ValidateRequest", None, ("400", "401", "429"))},
        "/auth-service/signin/email": {"post": op("Sign in with e-mail and password", "SignInResponse", "SignInEmailRequest",
                                                  None, ("400", "401", "403", "429"))},
        "/auth-service/signin/mobile": {"post": op("Sign in with mobile number and password", "SignInResponse",
                                                   "SignInMobileRequest", None, ("400", "401", "403", "429"))},
        "/auth-service/change/password": {"post": op("Change password; revokes every earlier token", "PasswordChanged",
                                                      "ChangePasswordRequest")},
        "/auth-service/reset/password": {"post": op("Reset a forgotten password with a code; revokes every token",
                                                    "PasswordChanged", "ResetPasswordRequest", None, ("400", "401", "429"))},
        "/auth-service/change/email": {"post": op(
            "Change e-mail with a code sent to the new address (JSON or multipart); revokes every other token and "
            "tells the old address; every failure is a 400",
            "ChangeEmailResponse", "ChangeEmailRequest", errors=("400", "429"), form="ChangeEmailForm")},
        "/auth-service/change/mobile": {"post": op("Change mobile number with a code sent to it; revokes every other "
                                                   "token and tells the old number", "ProfileResponse",
                                                   "ChangeMobileRequest", errors=("400", "401", "429"))},
        "/auth-service/external/register": {"post": op(
            "An application registers, or finds, its user by external id (idempotent)", "ExternalUserResponse",
            "ExternalRegisterRequest", "app")},
        "/auth-service/account": {"delete": op("Delete the account and everything it owns", "Deleted", "DeleteAccountRequest")},
        "/auth-service/profile": {"get": op("The signed-in user's profile and own floor", "ProfileResponse")},
        "/floors": {"post": op("Create a floor (uses the floor quota)", "FloorInfo", "FloorCreate", errors=("400", "401", "403"),
                               tag="floors")},
        "/floors/{floor_id}": {
            "get": op("Basic information of a floor", "FloorInfo", errors=("401", "404"), params=f, tag="floors"),
            "patch": op("Edit title, details or avatar (owner only)", "FloorInfo", "FloorEdit",
                        errors=("400", "401", "403", "404"), params=f, tag="floors")},
        "/floors/{floor_id}/rename": {"post": op("Rename a floor", "FloorInfo", "FloorRename", errors=("400", "401", "403", "404"),
                                                 params=f, tag="floors")},
        "/floors/{floor_id}/private": {"post": op("Make a floor private", "FloorInfo", errors=("401", "403", "404"),
                                                  params=f, tag="floors")},
        "/floors/{floor_id}/public": {"post": op("Make a floor public", "FloorInfo", errors=("401", "403", "404"),
                                                 params=f, tag="floors")},
        "/floors/{floor_id}/blocks": {"post": op("Add a block (uses the block quota)", "BlockDetails", "BlockCreate",
                                                 errors=("400", "401", "403", "404"), params=f, tag="floors")},
        "/floors/{floor_id}/blocks/{block_id}/events": {"post": op(
            "Post an event into a block (stored before the 200)", "EventResponse", "PostAdd",
            errors=("400", "401", "404"), params=("floor_id", "block_id"), tag="events")},
        "/floors/{floor_id}/blocks/{block_id}/events/batch": {"post": op(
            "Post up to 1,000 events into a block in one transaction (all stored, or none: an error names "
            "events[i].field)", "PostBatchResponse", "PostBatch", errors=("400", "401", "404"),
            params=("floor_id", "block_id"), tag="events")},
        "/floors/{floor_id}/events": {"get": {**op("Recent events of a floor, newest first", "Threads",
                                                   errors=("400", "401", "404"), params=f, tag="events")}},
        "/events/{event_id}": {
            "patch": op("Edit an event (author or floor owner)", "EventResponse", "EventEdit", errors=("400", "401", "403", "404"),
                        params=e, tag="events"),
            "delete": op("Delete an event (author or floor owner)", "Deleted", errors=("401", "403", "404"), params=e,
                         tag="events")},
        "/agent/memory/query": {"post": op(
            "Ask in natural language over some floors; returns an answer and the ranked items that ground it. Follow-ups "
            "of the same user_id build on earlier queries", "QueryResponse", "QueryRequest", "either",
            ("400", "401", "415", "422"), tag="memory")},
    }
    paths["/floors/{floor_id}/events"]["get"]["parameters"] += [
        {"name": "block_id", "in": "query", "schema": STR},
        {"name": "type", "in": "query", "schema": {"enum": list(BLOCK_TYPES)}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
        {"name": "cursor", "in": "query", "schema": STR, "description": "next_cursor of the previous page"},
    ]
    return {
        "openapi": "3.1.0",
        "info": {"title": "memkit", "version": "0.1.0",
                 "description": "Offline-first conversational memory: accounts, floors, blocks, events and the conversational "
                                "query. Every error body "
                                "is a 400ErrorCode object, whatever the status."},
        "paths": paths,
        "components": {"schemas": {**SCHEMAS, **REQUESTS}, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "appId": {"type": "apiKey", "in": "header", "name": "X-App-Id"},
            "appSecret": {"type": "apiKey", "in": "header", "name": "X-App-Secret"}}},
    }


bp = Blueprint("openapi", __name__)


@bp.get("/openapi.json")
def openapi_json():
    return jsonify(spec())
