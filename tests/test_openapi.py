"""The OpenAPI document is valid, covers every route, and real responses match it."""

from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from server.api.openapi import spec
from tests.service_fixtures import outbox_code


def check(app, client, method, path, status, body_json, **kw):
    resp = getattr(client, method)(path, **kw)
    assert resp.status_code == status, (path, resp.get_json())
    rule, _ = app.url_map.bind("localhost").match(
        path.split("?")[0], method=method.upper(), return_rule=True
    )
    template = rule.rule.replace("<", "{").replace(">", "}")
    doc = spec(app)
    schema = doc["paths"][template][method]["responses"][str(status)]["content"][
        "application/json"
    ]["schema"]
    Draft202012Validator({**schema, "components": doc["components"]}).validate(resp.get_json())
    return resp.get_json()


def test_document_is_valid_and_covers_every_route(app):
    doc = app.test_client().get("/openapi.json").get_json()
    validate(doc)
    routes = {
        (r.rule.replace("<", "{").replace(">", "}"), m.lower())
        for r in app.url_map.iter_rules()
        for m in r.methods - {"HEAD", "OPTIONS"}
        if r.endpoint not in ("static", "openapi.openapi_json")
    }
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert routes == documented
    names = set(doc["components"]["schemas"])
    assert {
        "PostAdd",
        "Media",
        "UserDetails",
        "SignUpResponse",
        "BlockDetails",
        "FloorInfo",
        "Threads",
        "EventResponse",
        "400ErrorCode",
        "Remaining",
        "SignInResponse",
        "QueryResponse",
    } <= names


def test_responses_match_the_document(app):
    c = app.test_client()
    body = {"name": "Ann", "email": "ann@example.com", "password": "pass words 1"}
    check(app, c, "post", "/auth-service/signup", 200, None, json=body)
    check(app, c, "post", "/auth-service/signup", 400, None, json={**body, "extra": 1})
    tok = check(
        app,
        c,
        "post",
        "/auth-service/validate",
        200,
        None,
        json={
            "email": "ann@example.com",
            "code": outbox_code(app, "ann@example.com"),
            "password": body["password"],
        },
    )["token"]
    check(app, c, "post", "/auth-service/signup", 409, None, json=body)
    h = {"Authorization": f"Bearer {tok}"}
    signin = check(
        app,
        c,
        "post",
        "/auth-service/signin/email",
        200,
        None,
        json={"email": "ann@example.com", "password": "pass words 1"},
    )
    assert signin["token"] != tok
    me = check(app, c, "get", "/auth-service/profile", 200, None, headers=h)
    floor, feed = me["pod_info"]["floor_uid"], me["pod_info"]["blocks"][0]["block_id"]
    check(app, c, "get", f"/floors/{floor}", 200, None, headers=h)
    check(app, c, "get", "/floors/f_missing", 404, None, headers=h)
    ev = check(
        app,
        c,
        "post",
        f"/floors/{floor}/blocks/{feed}/events",
        200,
        None,
        headers=h,
        json={"text": "hello", "tags": ["t"], "media": [{"url": "https://x/y.png"}]},
    )
    check(app, c, "get", f"/floors/{floor}/events?limit=5", 200, None, headers=h)
    check(
        app,
        c,
        "patch",
        f"/events/{ev['event_id']}",
        200,
        None,
        headers=h,
        json={"text": "hello again"},
    )
    check(
        app,
        c,
        "post",
        f"/floors/{floor}/blocks",
        200,
        None,
        headers=h,
        json={"block_type": 4, "title": "Q"},
    )
    check(app, c, "post", "/floors", 200, None, headers=h, json={"title": "second"})
    check(
        app,
        c,
        "post",
        "/auth-service/send/validation/code",
        200,
        None,
        json={"mode": "reset_password", "email": "x@example.com"},
    )
    uid = me["profile"]["user_id"]
    doc = spec(app)
    request_schema = Draft202012Validator(
        {**doc["components"]["schemas"]["QueryRequest"], "components": doc["components"]}
    )
    for extra in (
        {"include_metadata": "1", "summary_needed": "0"},
        {"filters": {"tags": ["t"]}, "k": 3},
        {},
    ):
        body = {"user_id": uid, "query": "hello", "floor_ids": [floor], **extra}
        request_schema.validate(body)
        got = check(app, c, "post", "/agent/memory/query", 200, None, headers=h, json=body)
        assert got["items"] and ("metadata" in got["items"][0]) == (
            extra.get("include_metadata") == "1"
        )
    check(
        app,
        c,
        "post",
        "/agent/memory/query",
        422,
        None,
        headers=h,
        json={"user_id": uid, "query": "", "floor_ids": [floor]},
    )
    check(app, c, "post", "/agent/memory/query", 415, None, headers=h, data={"user_id": uid})
    check(
        app,
        c,
        "post",
        "/agent/memory/query",
        401,
        None,
        json={"user_id": uid, "query": "x", "floor_ids": [floor]},
    )
    check(app, c, "delete", f"/events/{ev['event_id']}", 200, None, headers=h)
    check(
        app,
        c,
        "post",
        "/auth-service/change/email",
        400,
        None,
        json={"new_email_id": "a@b.example", "activation_code": "1"},
    )
