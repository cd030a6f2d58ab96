"""What an attacker tries on accounts, on SQLite and PostgreSQL: guessing codes (they burn,
see test_accounts.py), probing for accounts by timing, hammering sign-in, reusing a
token after a password change in another process, and fishing secrets out of error
bodies and logs."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

import server.services.accounts as accounts
from server import create_app
from server.store.schema import users
from tests.service_fixtures import error_of, outbox_code, same_store

PW = "correct horse battery"
NEW_PW = "a brand new secret"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_a_missing_account_costs_one_password_hash_like_a_wrong_password(app, monkeypatch):
    c = app.test_client()
    c.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    calls = []
    real = accounts._hasher

    class Counting:  # the real argon2 hasher, with its calls counted
        def hash(self, password, kind="other"):
            calls.append("hash")
            return real.hash(password, kind)

        def verify(self, stored, password, kind="other"):
            calls.append("verify")
            return real.verify(stored, password, kind)

    monkeypatch.setattr(accounts, "_hasher", Counting())
    answers = {}
    for email in ("ann@example.com", "nobody@example.com"):
        calls.clear()
        r = c.post("/auth-service/signin/email", json={"email": email, "password": "wrong guess"})
        answers[email] = (r.status_code, error_of(r), len(calls))
    assert (
        answers["ann@example.com"] == answers["nobody@example.com"]
    )  # same status, body and argon2 work
    assert answers["ann@example.com"][2] == 1


@pytest.mark.parametrize(
    "path,field,value",
    [
        ("/auth-service/signin/email", "email", "ann@example.com"),
        ("/auth-service/signin/mobile", "mobile", "+447911123456"),
    ],
)
def test_sign_in_is_rate_limited_with_retry_after(tmp_path, tmp_path_factory, path, field, value):
    from tests.service_fixtures import make_app

    app = make_app("sqlite", tmp_path, tmp_path_factory, rate_limit_sign_in="3 per minute")
    c = app.test_client()
    statuses = [
        c.post(path, json={field: value, "password": "guess"}).status_code for _ in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    r = c.post(path, json={field: value, "password": "guess"})
    assert (
        r.status_code == 429
        and int(r.headers["Retry-After"]) > 0
        and error_of(r)["code"] == "rate_limited"
    )


def test_a_token_revoked_in_one_process_is_refused_by_another_at_once(app):
    other = create_app(same_store(app.extensions["memkit"]["settings"]))
    a, b = app.test_client(), other.test_client()
    a.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    token = a.post(
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "password": PW,
            "code": outbox_code(app, "ann@example.com"),
        },
    ).get_json()["token"]
    assert b.get("/auth-service/profile", headers=bearer(token)).status_code == 200
    r = a.post(
        "/auth-service/change/password",
        headers=bearer(token),
        json={"old_password": PW, "new_password": NEW_PW},
    )
    assert r.status_code == 200
    r = b.get("/auth-service/profile", headers=bearer(token))
    assert r.status_code == 401 and error_of(r)["code"] == "invalid_token"
    other.extensions["memkit"]["engine"].dispose()


def test_no_password_token_or_code_in_any_log_line_or_error_body(app, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    c = app.test_client()
    secrets, error_bodies = {PW, NEW_PW, "wrong guess 1", "typo in it"}, []

    def call(method, path, **kw):
        r = getattr(c, method)(path, **kw)
        if r.status_code >= 400:
            error_bodies.append(r.get_data(as_text=True))
        return r

    call(
        "post",
        "/auth-service/signup",
        json={"name": "Ann", "email": "ann@example.com", "password": PW},
    )
    code = outbox_code(app, "ann@example.com")
    secrets.add(code)
    call(
        "post",
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "password": PW,
            "code": "999999" if code != "999999" else "1",
        },
    )
    token = call(
        "post",
        "/auth-service/validate",
        json={"email": "ann@example.com", "code": code, "password": PW},
    ).get_json()["token"]
    secrets.add(token)
    call(
        "post",
        "/auth-service/signin/email",
        json={"email": "ann@example.com", "password": "wrong guess 1"},
    )
    call(
        "post",
        "/auth-service/change/password",
        headers=bearer(token),
        json={"old_password": "typo in it", "new_password": NEW_PW},
    )
    call(
        "post",
        "/auth-service/change/email",
        headers=bearer(token),
        json={"new_email_id": "ann@new.example", "activation_code": code},
    )
    r = call(
        "post",
        "/auth-service/change/password",
        headers=bearer(token),
        json={"old_password": PW, "new_password": NEW_PW},
    )
    secrets.add(r.get_json()["token"])
    call("get", "/auth-service/profile", headers=bearer(token))  # revoked: 401
    call(
        "post",
        "/auth-service/send/validation/code",
        json={"mode": "reset_password", "email": "ann@example.com"},
    )
    reset_code = outbox_code(app, "ann@example.com")
    secrets.add(reset_code)
    call(
        "post",
        "/auth-service/reset/password",
        json={"email": "ann@example.com", "code": reset_code, "new_password": "short"},
    )
    # A crash inside SQL with a secret bound into the statement: the trace is logged, but
    # neither the log nor the client sees the values.
    real_profile = accounts.Accounts.profile

    def crashing_profile(self, conn, user_id):
        conn.execute(
            sa.select(users).where(users.c.name == NEW_PW).where(sa.text("no_such_column = 1"))
        )
        return real_profile(self, conn, user_id)

    monkeypatch.setattr(accounts.Accounts, "profile", crashing_profile)
    r = call(
        "post", "/auth-service/signin/email", json={"email": "ann@example.com", "password": NEW_PW}
    )
    assert r.status_code == 500 and error_of(r) == {
        "code": "internal",
        "message": "internal server error",
        "field": None,
    }

    lines = [f"{rec.name} {rec.getMessage()} {rec.exc_text or ''}" for rec in caplog.records]
    assert any("unhandled error" in line and "no_such_column" in line for line in lines), (
        "the crash was not logged"
    )
    assert any("POST /auth-service/validate 400" in line for line in lines), (
        "requests are not logged"
    )
    assert len(error_bodies) >= 7
    for secret in secrets:
        assert not [line for line in lines if secret in line], (
            f"a secret is in the log: {secret[:3]}..."
        )
        assert not [b for b in error_bodies if secret in b], (
            f"a secret is in an error body: {secret[:3]}..."
        )
