"""Accounts through Flask's test client, on SQLite and on PostgreSQL. After every failure
the stored state is checked: nothing changed."""

import sqlalchemy as sa

from server.store.schema import codes, tokens, users
from tests.service_fixtures import error_of, outbox_code

PW = "correct horse battery"


def snapshot(app):
    engine = app.extensions["memkit"]["engine"]
    with engine.connect() as conn:
        return {
            t.name: sorted(map(tuple, conn.execute(sa.select(t)).all()), key=str)
            for t in (users, tokens)
        }


def signed_up(client, app, email="ann@example.com", name="Ann"):
    r = client.post("/auth-service/signup", json={"name": name, "email": email, "password": PW})
    assert r.status_code == 200, r.get_json()
    r = client.post(
        "/auth-service/validate",
        json={"email": email, "code": outbox_code(app, email), "password": PW},
    )
    assert r.status_code == 200, r.get_json()
    return r.get_json()["profile"]["user_id"], r.get_json()["token"]


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_sign_up_validate_sign_in_by_email(app):
    c = app.test_client()
    r = c.post(
        "/auth-service/signup", json={"name": "Ann", "email": "Ann@Example.COM", "password": PW}
    )
    body = r.get_json()
    assert r.status_code == 200 and body["profile"]["email"] == "ann@example.com"
    assert body["profile"]["validated"] is False
    assert [b["type"] for b in body["pod_info"]["blocks"]] == ["feed", "blog", "forum", "quiz"]
    assert body["profile"]["floor_count_info"] == {"permitted": "5", "remaining": "4"}
    assert body["profile"]["block_count_info"] == {"permitted": "20", "remaining": "16"}
    r = c.post("/auth-service/signin/email", json={"email": "ann@example.com", "password": PW})
    assert r.status_code == 403 and error_of(r)["code"] == "not_validated"
    r = c.post(
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "code": outbox_code(app, "ann@example.com"),
            "password": PW,
        },
    )
    assert r.status_code == 200 and r.get_json()["profile"]["validated"] is True
    r = c.post("/auth-service/signin/email", json={"email": "ANN@example.com", "password": PW})
    assert r.status_code == 200
    me = c.get("/auth-service/profile", headers=bearer(r.get_json()["token"]))
    assert me.status_code == 200 and me.get_json()["profile"]["user_id"] == body["user_id"]


def test_sign_up_and_sign_in_by_mobile(app):
    c = app.test_client()
    r = c.post(
        "/auth-service/signup", json={"name": "Bo", "mobile": "+44 7911 123456", "password": PW}
    )
    assert r.status_code == 200 and r.get_json()["profile"]["mobile_number"] == "+447911123456"
    code = outbox_code(app, "+447911123456")
    assert (
        c.post(
            "/auth-service/validate", json={"mobile": "+447911123456", "code": code, "password": PW}
        ).status_code
        == 200
    )
    r = c.post("/auth-service/signin/mobile", json={"mobile": "+447911123456", "password": PW})
    assert r.status_code == 200 and r.get_json()["token"]


def test_sign_up_errors_name_the_field_and_change_nothing(app):
    c = app.test_client()
    signed_up(c, app)
    before = snapshot(app)
    cases = [
        ({"name": "X", "email": "x@example.com"}, 400, "password"),
        ({"name": "X", "email": "x@example.com", "password": PW, "age": 3}, 400, "age"),
        ({"name": "X", "email": "not-an-address", "password": PW}, 400, "email"),
        ({"name": "X", "email": "x@example.com", "password": "short"}, 400, "password"),
        ({"name": "X", "mobile": "12345", "password": PW}, 400, "mobile"),
        ({"name": "X", "password": PW}, 400, "email"),
        ({"name": 5, "email": "x@example.com", "password": PW}, 400, "name"),
        ({"name": "X", "email": "ann@example.com", "password": PW}, 409, "email"),
    ]
    for payload, status, field in cases:
        r = c.post("/auth-service/signup", json=payload)
        assert r.status_code == status, (payload, r.get_json())
        assert error_of(r)["field"] == field
    r = c.post(
        "/auth-service/signup", data="name=X", content_type="application/x-www-form-urlencoded"
    )
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_body"
    assert snapshot(app) == before


def test_sign_in_failures_do_not_reveal_accounts(app):
    c = app.test_client()
    signed_up(c, app)
    wrong = c.post(
        "/auth-service/signin/email",
        json={"email": "ann@example.com", "password": "wrong password"},
    )
    nobody = c.post(
        "/auth-service/signin/email",
        json={"email": "zed@example.com", "password": "wrong password"},
    )
    assert wrong.status_code == nobody.status_code == 401
    assert error_of(wrong) == error_of(nobody)
    assert c.get("/auth-service/profile").status_code == 401
    assert c.get("/auth-service/profile", headers=bearer("forged")).status_code == 401


def test_codes_burn_after_five_misses_and_are_single_use(app):
    c = app.test_client()
    c.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    good = outbox_code(app, "ann@example.com")
    bad = "000000" if good != "000000" else "111111"
    for _ in range(5):
        r = c.post(
            "/auth-service/validate", json={"email": "ann@example.com", "code": bad, "password": PW}
        )
        assert r.status_code == 400 and error_of(r)["code"] == "code_invalid"
    r = c.post(
        "/auth-service/validate", json={"email": "ann@example.com", "code": good, "password": PW}
    )
    assert error_of(r)["code"] == "code_burned"
    # A new code works once; the same code again is refused.
    assert (
        c.post(
            "/auth-service/send/validation/code",
            json={"mode": "signup", "email": "ann@example.com"},
        ).status_code
        == 200
    )
    fresh = outbox_code(app, "ann@example.com")
    assert (
        c.post(
            "/auth-service/validate",
            json={"email": "ann@example.com", "code": fresh, "password": PW},
        ).status_code
        == 200
    )
    r = c.post(
        "/auth-service/validate", json={"email": "ann@example.com", "code": fresh, "password": PW}
    )
    assert r.status_code == 400


def test_codes_expire(app):
    app.extensions["memkit"]["settings"].code_ttl_minutes = -1  # born expired
    c = app.test_client()
    c.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    r = c.post(
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "code": outbox_code(app, "ann@example.com"),
            "password": PW,
        },
    )
    # An address's code answers as a wrong one would (whether a code was sent there tells
    # whether the address has an account); the message names both.
    assert (
        r.status_code == 400
        and error_of(r)["code"] == "code_invalid"
        and "expired" in error_of(r)["message"]
    )


def test_change_password_revokes_tokens_at_once(app):
    c = app.test_client()
    _, token = signed_up(c, app)
    before = snapshot(app)
    r = c.post(
        "/auth-service/change/password",
        headers=bearer(token),
        json={"old_password": "nope nope", "new_password": "new secret 123"},
    )
    assert r.status_code == 400 and error_of(r)["field"] == "old_password"
    assert snapshot(app) == before
    r = c.post(
        "/auth-service/change/password",
        headers=bearer(token),
        json={"old_password": PW, "new_password": "new secret 123"},
    )
    assert r.status_code == 200
    assert c.get("/auth-service/profile", headers=bearer(token)).status_code == 401
    assert c.get("/auth-service/profile", headers=bearer(r.get_json()["token"])).status_code == 200
    assert (
        c.post(
            "/auth-service/signin/email", json={"email": "ann@example.com", "password": PW}
        ).status_code
        == 401
    )


def test_reset_password_by_code(app):
    c = app.test_client()
    _, token = signed_up(c, app)
    for email in ("ann@example.com", "nobody@example.com"):  # the same answer either way
        r = c.post(
            "/auth-service/send/validation/code", json={"mode": "reset_password", "email": email}
        )
        assert r.status_code == 200 and "if an account matches" in r.get_json()["message"]
    code = outbox_code(app, "ann@example.com")
    r = c.post(
        "/auth-service/reset/password",
        json={"email": "ann@example.com", "code": code, "new_password": "brand new pw"},
    )
    assert r.status_code == 200
    assert c.get("/auth-service/profile", headers=bearer(token)).status_code == 401
    assert (
        c.post(
            "/auth-service/signin/email",
            json={"email": "ann@example.com", "password": "brand new pw"},
        ).status_code
        == 200
    )


def stored_email(app, user_id):
    with app.extensions["memkit"]["engine"].connect() as conn:
        return conn.execute(sa.select(users.c.email).where(users.c.id == user_id)).scalar()


def test_change_email_json_and_multipart(app):
    c = app.test_client()
    uid, token = signed_up(c, app)
    r = c.post(
        "/auth-service/send/validation/code",
        headers=bearer(token),
        json={"mode": "change_email", "new_email_id": "ann@new.example", "password": PW},
    )
    assert r.status_code == 200
    app_id, _ = app.extensions["memkit"]["accounts"].register_app("widget")
    body = {
        "user_id": uid,
        "new_email_id": "ann@new.example",
        "activation_code": outbox_code(app, "ann@new.example"),
        "app_id": app_id,
    }
    r = c.post("/auth-service/change/email", headers=bearer(token), json=body)
    out = r.get_json()
    assert r.status_code == 200 and out["app_id"] == app_id
    assert (
        out["profile"]["email"] == "ann@new.example"
        and out["profile"]["block_count_info"]["remaining"] == "16"
    )
    assert out["pod_info"]["floor_uid"].startswith("f_")
    assert stored_email(app, uid) == "ann@new.example"
    # Multipart form parts, as the specification describes.
    c.post(
        "/auth-service/send/validation/code",
        headers=bearer(token),
        json={"mode": "change_email", "new_email_id": "ann@third.example", "password": PW},
    )
    form = {
        "new_email_id": "ann@third.example",
        "activation_code": outbox_code(app, "ann@third.example"),
    }
    r = c.post(
        "/auth-service/change/email",
        headers=bearer(token),
        data=form,
        content_type="multipart/form-data",
    )
    assert r.status_code == 200 and stored_email(app, uid) == "ann@third.example"


def test_change_email_failures_are_400_and_keep_the_address(app):
    c = app.test_client()
    uid, token = signed_up(c, app)
    other_uid, other_token = signed_up(c, app, "bo@example.com", "Bo")
    c.post(
        "/auth-service/send/validation/code",
        headers=bearer(token),
        json={"mode": "change_email", "new_email_id": "ann@new.example", "password": PW},
    )
    code = outbox_code(app, "ann@new.example")
    wrong = "000000" if code != "000000" else "111111"
    c.post(
        "/auth-service/send/validation/code",
        headers=bearer(other_token),
        json={"mode": "change_email", "new_email_id": "bo@new.example", "password": PW},
    )
    bo_code = outbox_code(app, "bo@new.example")
    cases = [
        (
            {"new_email_id": "ann@new.example", "activation_code": wrong},
            bearer(token),
            "code_invalid",
        ),
        (
            {"new_email_id": "ann@other.example", "activation_code": code},
            bearer(token),
            "code_invalid",
        ),  # other address
        (
            {"new_email_id": "bo@new.example", "activation_code": bo_code},
            bearer(token),
            "code_invalid",
        ),  # another user's
        (
            {"new_email_id": "bo@example.com", "activation_code": code},
            bearer(token),
            "code_invalid",
        ),  # taken: the code first
        ({"new_email_id": "ann@new.example", "activation_code": code}, {}, "missing_token"),
        (
            {"new_email_id": "ann@new.example", "activation_code": code},
            bearer("forged"),
            "invalid_token",
        ),
        (
            {"new_email_id": "ann@new.example", "activation_code": code, "user_id": other_uid},
            bearer(token),
            "user_mismatch",
        ),
        ({"new_email_id": "ann@new.example"}, bearer(token), "missing_field"),
        ({"new_email_id": "nope", "activation_code": code}, bearer(token), "invalid_email"),
    ]
    for payload, headers, expected in cases:
        r = c.post("/auth-service/change/email", headers=headers, json=payload)
        assert r.status_code == 400, (payload, r.get_json())
        assert error_of(r)["code"] == expected, (payload, r.get_json())
        assert stored_email(app, uid) == "ann@example.com"
    # The real code still works after the failures (4 misses < 5), then it is used up.
    app.extensions["memkit"]["limiter"].reset()  # 9 calls so far; the limit is 10 a minute
    assert (
        c.post(
            "/auth-service/change/email",
            headers=bearer(token),
            json={"new_email_id": "ann@new.example", "activation_code": code},
        ).status_code
        == 200
    )
    r = c.post(
        "/auth-service/change/email",
        headers=bearer(token),
        json={"new_email_id": "ann@new.example", "activation_code": code},
    )
    assert (
        r.status_code == 400
        and error_of(r)["code"] == "code_used"
        and stored_email(app, uid) == "ann@new.example"
    )


def test_send_code_is_rate_limited_with_retry_after(app):
    c = app.test_client()
    c.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    statuses = [
        c.post(
            "/auth-service/send/validation/code",
            json={"mode": "signup", "email": "ann@example.com"},
        ).status_code
        for _ in range(6)
    ]
    assert statuses == [200] * 5 + [429]
    r = c.post(
        "/auth-service/send/validation/code", json={"mode": "signup", "email": "ann@example.com"}
    )
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    assert error_of(r)["code"] == "rate_limited"


def test_codes_and_tokens_are_stored_hashed(app):
    c = app.test_client()
    _, token = signed_up(c, app)
    with app.extensions["memkit"]["engine"].connect() as conn:
        stored = [
            tuple(r)
            for r in conn.execute(
                sa.select(tokens.c.hash, codes.c.code_hash).select_from(
                    tokens.join(codes, tokens.c.user_id == codes.c.user_id)
                )
            )
        ]
        pw = conn.execute(sa.select(users.c.password_hash)).scalar()
    assert stored and all(token not in h for row in stored for h in row)
    assert pw.startswith("$argon2") and PW not in pw


def test_change_email_with_an_expired_code_is_400_and_keeps_the_address(app):
    c = app.test_client()
    uid, token = signed_up(c, app)
    app.extensions["memkit"][
        "settings"
    ].code_ttl_minutes = -1  # codes sent from now on are born expired
    c.post(
        "/auth-service/send/validation/code",
        headers=bearer(token),
        json={"mode": "change_email", "new_email_id": "ann@new.example", "password": PW},
    )
    r = c.post(
        "/auth-service/change/email",
        headers=bearer(token),
        json={
            "new_email_id": "ann@new.example",
            "activation_code": outbox_code(app, "ann@new.example"),
        },
    )
    assert r.status_code == 400 and error_of(r)["code"] == "code_expired"
    assert stored_email(app, uid) == "ann@example.com"


def test_the_service_hashes_passwords_with_argon2ids_default_parameters():
    """Tests run argon2id at its cheapest (conftest); the service's own hasher is built with
    argon2-cffi's defaults (RFC 9106's low-memory profile: 64 MiB, 3 passes, 4 lanes)."""
    from server.services import accounts

    stored = accounts._Argon2().hash(PW)
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert accounts._Argon2().verify(stored, PW)
