"""The service as ../shared/INTERFACE.md names it, on SQLite and PostgreSQL: the
change of e-mail in both of its forms with section 2.4's 200 body field by field, its four
400 cases, single-use codes, rate limits per account, the bearer scheme's case, an unknown
``app_id`` refused by every operation that takes one, ``summary_needed``'s default and one
meaning of ``block_type``."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from server.models import BLOCK_TYPES
from server.store.schema import users
from tests.service_fixtures import PW, error_of, make_app, outbox_code, user

CHANGE = "/auth-service/change/email"
SEND = "/auth-service/send/validation/code"
Q = "/agent/memory/query"

# Interface 2.4, every field and its type.
PROFILE = {
    "floor_id": str,
    "floor_count_info": {"permitted": str, "remaining": str},
    "block_count_info": {"permitted": str, "remaining": str},
    "FID": str,
    "title": str,
    "name": str,
    "email": str,
    "mobile_number": str,
    "user_id": str,
    "avatar": {"url": str, "type": str},
}
POD_INFO = {
    "floor_id": str,
    "is_owner": str,
    "app_id": str,
    "title": str,
    "details": str,
    "floor_uid": str,
    "blocks": [{"block_id": str, "type": str, "title": str}],
    "avatar": {"url": str, "type": str},
}
BODY = {"profile": PROFILE, "pod_info": POD_INFO, "app_id": str}


def conforms(value, shape, where="body") -> None:
    """``value`` has every field of ``shape`` with its type (extra fields are allowed)."""
    if isinstance(shape, dict):
        assert isinstance(value, dict), where
        for name, inner in shape.items():
            assert name in value, f"{where}.{name} is missing"
            conforms(value[name], inner, f"{where}.{name}")
    elif isinstance(shape, list):
        assert isinstance(value, list) and value, where
        for i, item in enumerate(value):
            conforms(item, shape[0], f"{where}[{i}]")
    else:
        assert isinstance(value, shape), f"{where}: {value!r} is not a {shape.__name__}"


def stored_email(app, user_id):
    with app.extensions["memkit"]["engine"].connect() as conn:
        return conn.execute(sa.select(users.c.email).where(users.c.id == user_id)).scalar()


def signed_in(c, app, name="Ann"):
    """(headers, user id, own floor, {type: block id}) of a new validated user ``name``."""
    h, floor, blocks = user(c, app, name)
    uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
    return h, uid, floor, blocks


def ask_code(c, app, h, new_email):
    r = c.post(
        SEND, headers=h, json={"mode": "change_email", "new_email_id": new_email, "password": PW}
    )
    assert r.status_code == 200, r.get_json()
    return outbox_code(app, new_email)


def test_change_email_as_multipart_and_as_json_answers_section_2_4(app):
    c = app.test_client()
    h, uid, floor, blocks = signed_in(c, app)
    app_id, _ = app.extensions["memkit"]["accounts"].register_app("widget")
    # The sample request: two multipart form parts.
    code = ask_code(c, app, h, "ann@new.example")
    r = c.post(
        CHANGE,
        headers=h,
        content_type="multipart/form-data",
        data={"new_email_id": "ann@new.example", "activation_code": code},
    )
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    conforms(body, BODY)
    profile, pod = body["profile"], body["pod_info"]
    assert body["app_id"] == ""  # none was given
    assert profile["email"] == "ann@new.example" == stored_email(app, uid)
    assert profile["user_id"] == uid and profile["name"] == "Ann" and profile["mobile_number"] == ""
    assert profile["floor_id"] == profile["FID"] == pod["floor_id"] == pod["floor_uid"] == floor
    assert profile["title"] == pod["title"] == "Ann's floor" and pod["details"] == ""
    assert profile["floor_count_info"] == {"permitted": "5", "remaining": "4"}
    assert profile["block_count_info"] == {"permitted": "20", "remaining": "16"}
    assert profile["avatar"] == pod["avatar"] == {"url": "", "type": ""}
    assert pod["is_owner"] == "1" and pod["app_id"] == ""
    assert [(b["type"], b["title"], b["block_id"]) for b in pod["blocks"]] == [
        (t, t.capitalize(), blocks[t]) for t in ("feed", "blog", "forum", "quiz")
    ]
    # The description's JSON body with all four fields; the floor's avatar shows in both places.
    c.patch(f"/floors/{floor}", headers=h, json={"avatar": "https://example.com/ann.png"})
    code = ask_code(c, app, h, "ann@third.example")
    r = c.post(
        CHANGE,
        headers=h,
        json={
            "user_id": uid,
            "new_email_id": "ann@third.example",
            "activation_code": code,
            "app_id": app_id,
        },
    )
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    conforms(body, BODY)
    assert body["app_id"] == app_id and body["profile"][
        "email"
    ] == "ann@third.example" == stored_email(app, uid)
    assert (
        body["profile"]["avatar"]
        == body["pod_info"]["avatar"]
        == {"url": "https://example.com/ann.png", "type": "image"}
    )


def test_the_four_400_cases_leave_the_email_unchanged(app):
    """Section 7.2: a code invalid or expired; one that matches another user or address;
    an address in use; a missing or bad token."""
    c = app.test_client()
    h, uid, _, _ = signed_in(c, app)
    bo, _, _, _ = signed_in(c, app, "Bo")
    code = ask_code(c, app, h, "ann@new.example")
    bo_code = ask_code(c, app, bo, "bo@new.example")
    wrong = "000000" if code != "000000" else "111111"
    cases = [
        (
            "invalid code",
            h,
            {"new_email_id": "ann@new.example", "activation_code": wrong},
            "code_invalid",
        ),
        (
            "another address's code",
            h,
            {"new_email_id": "ann@other.example", "activation_code": code},
            "code_invalid",
        ),
        (
            "another user's code",
            h,
            {"new_email_id": "bo@new.example", "activation_code": bo_code},
            "code_invalid",
        ),
        (
            "no token",
            {},
            {"new_email_id": "ann@new.example", "activation_code": code},
            "missing_token",
        ),
        (
            "bad token",
            {"Authorization": "Bearer forged"},
            {"new_email_id": "ann@new.example", "activation_code": code},
            "invalid_token",
        ),
    ]
    for name, headers, payload, expected in cases:
        for form in (False, True):
            kw = (
                {"data": payload, "content_type": "multipart/form-data"}
                if form
                else {"json": payload}
            )
            r = c.post(CHANGE, headers=headers, **kw)
            assert r.status_code == 400 and error_of(r)["code"] == expected, (
                name,
                form,
                r.get_json(),
            )
            assert stored_email(app, uid) == "ann@example.com", name
        app.extensions["memkit"]["limiter"].reset()  # counting is tested below
    with app.extensions["memkit"]["engine"].begin() as conn:  # expired
        conn.execute(sa.text("UPDATE codes SET expires_at = created_at"))
    r = c.post(CHANGE, headers=h, json={"new_email_id": "ann@new.example", "activation_code": code})
    assert (
        r.status_code == 400
        and error_of(r)["code"] == "code_expired"
        and stored_email(app, uid) == "ann@example.com"
    )
    # In use: Bo moved to the address after Ann's code was sent there. (Only a valid code
    # gets this far, so the answer tells nobody but the address's holder that it is taken.)
    taken = ask_code(c, app, h, "both@new.example")
    assert (
        c.post(
            CHANGE,
            headers=bo,
            json={
                "new_email_id": "both@new.example",
                "activation_code": ask_code(c, app, bo, "both@new.example"),
            },
        ).status_code
        == 200
    )
    for form in (False, True):
        payload = {"new_email_id": "both@new.example", "activation_code": taken}
        kw = {"data": payload, "content_type": "multipart/form-data"} if form else {"json": payload}
        r = c.post(CHANGE, headers=h, **kw)
        assert (
            r.status_code == 400
            and error_of(r)["code"] == "email_in_use"
            and stored_email(app, uid) == "ann@example.com"
        )


def test_a_used_change_email_code_answers_code_used(app):
    c = app.test_client()
    h, uid, _, _ = signed_in(c, app)
    code = ask_code(c, app, h, "ann@new.example")
    body = {"new_email_id": "ann@new.example", "activation_code": code}
    assert c.post(CHANGE, headers=h, json=body).status_code == 200
    r = c.post(CHANGE, headers=h, json=body)
    assert (
        r.status_code == 400
        and error_of(r)["code"] == "code_used"
        and error_of(r)["field"] == "activation_code"
    )
    assert stored_email(app, uid) == "ann@new.example"


def test_one_accounts_failures_do_not_rate_limit_another(tmp_path, tmp_path_factory):
    """Ann's failed attempts from one address used to make Bo's valid request
    from the same address a 429."""
    app = make_app(
        "sqlite",
        tmp_path,
        tmp_path_factory,
        rate_limit_change_email="3 per minute",
        rate_limit_check_code="3 per minute",
        rate_limit_sign_in="3 per minute",
    )
    c = app.test_client()
    ann, _, _, _ = signed_in(c, app)
    bo, bo_id, _, _ = signed_in(c, app, "Bo")
    code = ask_code(c, app, bo, "bo@new.example")
    app.extensions["memkit"]["limiter"].reset()
    bad = {"new_email_id": "ann@new.example", "activation_code": "123456"}
    statuses = [c.post(CHANGE, headers=ann, json=bad).status_code for _ in range(4)]
    assert statuses == [400, 400, 400, 429]
    r = c.post(CHANGE, headers=ann, json=bad)
    assert (
        r.status_code == 429
        and int(r.headers["Retry-After"]) > 0
        and error_of(r)["code"] == "rate_limited"
    )
    r = c.post(CHANGE, headers=bo, json={"new_email_id": "bo@new.example", "activation_code": code})
    assert r.status_code == 200 and stored_email(app, bo_id) == "bo@new.example"
    # Sign-in: guesses at Ann's password leave Bo's sign-in alone.
    for _ in range(3):
        assert (
            c.post(
                "/auth-service/signin/email", json={"email": "ann@example.com", "password": "guess"}
            ).status_code
            == 401
        )
    assert (
        c.post(
            "/auth-service/signin/email", json={"email": "ann@example.com", "password": PW}
        ).status_code
        == 429
    )
    assert (
        c.post(
            "/auth-service/signin/email", json={"email": "bo@new.example", "password": PW}
        ).status_code
        == 200
    )


def test_the_address_layer_still_bounds_one_address_trying_many_accounts(
    tmp_path, tmp_path_factory
):
    app = make_app(
        "sqlite",
        tmp_path,
        tmp_path_factory,
        rate_limit_sign_in="2 per minute",
        rate_limit_address_factor=2,
    )
    c = app.test_client()
    statuses = [
        c.post(
            "/auth-service/signin/email", json={"email": f"u{i}@example.com", "password": "guess"}
        ).status_code
        for i in range(5)
    ]
    assert statuses == [401, 401, 401, 401, 429]  # 2 x 2 per address, whatever the accounts


def test_the_bearer_scheme_is_case_insensitive(app):
    c = app.test_client()
    h, _, _, _ = signed_in(c, app)
    token = h["Authorization"].split(" ", 1)[1]
    for scheme in ("bearer", "BEARER", "Bearer"):
        r = c.get("/auth-service/profile", headers={"Authorization": f"{scheme} {token}"})
        assert r.status_code == 200, (scheme, r.get_json())
    r = c.get("/auth-service/profile", headers={"Authorization": f"Basic {token}"})
    assert r.status_code == 401 and error_of(r)["code"] == "missing_token"


def test_an_unknown_app_id_is_refused_by_every_operation_that_takes_one(app):
    from server.api.openapi import spec

    c = app.test_client()
    h, uid, floor, _ = signed_in(c, app)
    doc = spec(app)
    taking = sorted(
        (path, method)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if "app_id"
        in doc["components"]["schemas"]
        .get(
            op.get("requestBody", {})
            .get("content", {})
            .get("application/json", {})
            .get("schema", {})
            .get("$ref", "/")
            .rsplit("/", 1)[1],
            {},
        )
        .get("properties", {})
    )
    assert taking == sorted([(CHANGE, "post"), (SEND, "post"), (Q, "post")])
    code = ask_code(c, app, h, "ann@new.example")
    bodies = {
        CHANGE: {"new_email_id": "ann@new.example", "activation_code": code},
        SEND: {"mode": "change_email", "new_email_id": "ann@other.example", "password": PW},
        Q: {"user_id": uid, "query": "anything", "floor_ids": [floor]},
    }
    for path, _ in taking:
        r = c.post(path, headers=h, json={**bodies[path], "app_id": "nope"})
        assert r.status_code in (400, 422) and error_of(r)["code"] == "invalid_app", (
            path,
            r.get_json(),
        )
        assert error_of(r)["field"] == "app_id"
    assert stored_email(app, uid) == "ann@example.com"
    # the code was not spent: it still works
    assert c.post(CHANGE, headers=h, json=bodies[CHANGE]).status_code == 200


def test_summary_needed_defaults_to_0(app, monkeypatch):
    c = app.test_client()
    h, uid, floor, blocks = signed_in(c, app)
    c.post(
        f"/floors/{floor}/blocks/{blocks['feed']}/events",
        headers=h,
        json={"text": "Biscuit the puppy loves the beach"},
    )
    index = app.extensions["memkit"]["memory"].index
    asked = []
    real = index.pipeline.ask
    monkeypatch.setattr(index.pipeline, "ask", lambda req: asked.append(req.summary) or real(req))
    for extra in ({}, {"summary_needed": "0"}, {"summary_needed": "1"}):
        r = c.post(
            Q, headers=h, json={"user_id": uid, "query": "puppy", "floor_ids": [floor], **extra}
        )
        assert r.status_code == 200, r.get_json()
    assert asked == [False, False, True]


@pytest.mark.parametrize("number,name", sorted((v, k) for k, v in BLOCK_TYPES.items()))
def test_block_type_is_a_number_everywhere_with_block_type_name(app, number, name):
    c = app.test_client()
    h, uid, floor, _ = signed_in(c, app)
    block = c.post(
        f"/floors/{floor}/blocks", headers=h, json={"block_type": number, "title": "Mine"}
    ).get_json()
    assert (block["block_type"], block["block_type_name"]) == (number, name)
    info = c.get(f"/floors/{floor}", headers=h).get_json()
    assert all(b["block_type"] == BLOCK_TYPES[b["block_type_name"]] for b in info["blocks"])
    ev = c.post(
        f"/floors/{floor}/blocks/{block['block_id']}/events",
        headers=h,
        json={"text": "a kayak trip"},
    ).get_json()
    assert (ev["block_type"], ev["block_type_name"]) == (number, name)
    listed = c.get(f"/floors/{floor}/events", headers=h).get_json()["events"][0]
    assert (listed["block_type"], listed["block_type_name"]) == (number, name)
    item = c.post(
        Q,
        headers=h,
        json={"user_id": uid, "query": "kayak", "floor_ids": [floor], "include_metadata": "1"},
    ).get_json()["items"][0]
    assert item["block_type"] == number and item["metadata"]["source"]["block_type_name"] == name
    r = c.post(f"/floors/{floor}/blocks", headers=h, json={"block_type": name, "title": "By name"})
    assert (
        r.status_code == 400
        and error_of(r)["field"] == "block_type"
        and "1, 2, 3 or 4" in error_of(r)["message"]
    )
