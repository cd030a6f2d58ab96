"""Credentials under attack, on SQLite and PostgreSQL where the store matters: a password
thief's sign-in in flight while the owner changes or resets the password or moves the
account (it must get no working token), a sign-in racing the account's deletion, sign-ups
taking the argon2 slots password changes need, signing up again to guess a code more
often, telling accounts apart by how a reset request is answered, and an address too long
for an outbox file's name. Races are made deterministic by holding one request's argon2
check on an event while the other request runs."""

from __future__ import annotations

import socket
import threading

import pytest
import sqlalchemy as sa
from alembic import command

import server.services.accounts as accounts
from server import create_app
from server.store.migrate import alembic_config
from server.store.schema import tokens, users
from tests.service_fixtures import (
    NO_LIMITS,
    PW,
    all_rows,
    delivered,
    error_of,
    make_app,
    outbox_code,
    outbox_message,
    same_store,
)
from tests.test_attacks import SEND, SIGNUP, VALIDATE, bearer, signed_up
from tests.test_attacks_accounts import Argon2Calls
from tests.test_smtp_delivery import smtp as smtp  # the fixture: a real SMTP server
from tests.test_smtp_delivery import smtp_app

SIGNIN, PROFILE = "/auth-service/signin/email", "/auth-service/profile"
RESET, CHANGE_PW = "/auth-service/reset/password", "/auth-service/change/password"
CHANGE_EMAIL, ACCOUNT = "/auth-service/change/email", "/auth-service/account"
NEW_PW = "a brand new secret"
ANN, NEW_ANN = "ann@example.com", "ann@elsewhere.example"
WAIT = 30  # seconds a held request may take to get where it is held, or to finish

both_stores = pytest.mark.parametrize("open_app", ["sqlite", "postgresql"], indirect=True)


class HeldCheck:
    """The service's argon2, except that a password check made in ``thread`` waits, once
    it is done, for ``release``: the request is then between reading the account and
    writing its token, as a sign-in whose argon2 is slow would be."""

    def __init__(self, real):
        self.real, self.thread = real, None
        self.entered, self.release = threading.Event(), threading.Event()

    def hash(self, password, kind="other"):
        return self.real.hash(password, kind)

    def verify(self, stored, password, kind="other"):
        ok = self.real.verify(stored, password, kind)
        if threading.current_thread() is self.thread:
            self.entered.set()
            assert self.release.wait(WAIT)
        return ok


@pytest.fixture
def held(monkeypatch):
    check = HeldCheck(accounts._hasher)
    monkeypatch.setattr(accounts, "_hasher", check)
    yield check
    check.release.set()  # a test that failed half way holds nothing


def in_flight(app, held_at, path, json) -> tuple[threading.Thread, list]:
    """Start ``POST path`` on its own thread and wait until it is held (``held_at``: a
    HeldCheck or a HeldProfile); returns the thread and the list its answer goes to."""
    answer: list = []
    t = threading.Thread(
        target=lambda: answer.append(app.test_client().post(path, json=json)), daemon=True
    )
    held_at.thread = t
    t.start()
    assert held_at.entered.wait(WAIT), "the request was never held"
    return t, answer


def finished(held_at, t: threading.Thread, answer: list):
    held_at.release.set()
    t.join(WAIT)
    assert answer, "the held request never answered"
    return answer[0]


def working(c, token: str | None) -> bool:
    return token is not None and c.get(PROFILE, headers=bearer(token)).status_code == 200


def change_credentials(c, app, change: str, owner: str):
    """What the owner does while the thief's sign-in is in flight; returns the answer. The
    codes it needs are asked for first (``ask_for_code``)."""
    if change == "password":
        return c.post(
            CHANGE_PW, headers=bearer(owner), json={"old_password": PW, "new_password": NEW_PW}
        )
    if change == "reset":
        return c.post(
            RESET, json={"email": ANN, "code": outbox_code(app, ANN), "new_password": NEW_PW}
        )
    return c.post(
        CHANGE_EMAIL,
        headers=bearer(owner),
        json={"new_email_id": NEW_ANN, "activation_code": outbox_code(app, NEW_ANN)},
    )


def ask_for_code(c, change: str, owner: str) -> None:
    if change == "reset":
        assert c.post(SEND, json={"mode": "reset_password", "email": ANN}).status_code == 200
    if change == "email":
        r = c.post(
            SEND,
            headers=bearer(owner),
            json={"mode": "change_email", "new_email_id": NEW_ANN, "password": PW},
        )
        assert r.status_code == 200


# -- 1. a reset does not evict a password thief --------------------------------------------------
@both_stores
@pytest.mark.parametrize("change", ["password", "reset", "email"])
def test_a_sign_in_in_flight_while_the_owner_changes_credentials_gets_no_working_token(
    open_app, held, change
):
    app = open_app
    c = app.test_client()
    owner = signed_up(c, app)
    ask_for_code(c, change, owner)
    # The thief's sign-in with the old password has read the account and passed argon2 ...
    t, answer = in_flight(app, held, SIGNIN, {"email": ANN, "password": PW})
    # ... when the owner, who noticed, changes the password, resets it or moves the account.
    r = change_credentials(c, app, change, owner)
    assert r.status_code == 200, r.get_json()
    thief = finished(held, t, answer)
    # Before the fix the thief's token, inserted after the change revoked the others, worked
    # for 7 days.
    assert not working(c, (thief.get_json() or {}).get("token"))
    assert thief.status_code == 401 and error_of(thief)["code"] == "bad_credentials"
    # The owner keeps access: the new token, or (a change of address) the caller's own.
    mine = owner if change == "email" else r.get_json()["token"]
    assert working(c, mine)
    assert working(c, owner) == (change == "email")  # a password change revokes the others


class HeldProfile:
    """Holds a sign-in in ``thread`` where it reads the profile it answers with: after its
    token is inserted, before its transaction commits."""

    def __init__(self, real):
        self.real, self.thread = real, None
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, service, conn, user_id):
        if threading.current_thread() is self.thread:
            self.entered.set()
            assert self.release.wait(WAIT)
        return self.real(service, conn, user_id)


@pytest.mark.parametrize("open_app", ["postgresql"], indirect=True)
@pytest.mark.parametrize("change", ["password", "reset"])
def test_a_token_written_as_the_password_changes_is_refused(open_app, monkeypatch, change):
    """On PostgreSQL a password change does not wait for a sign-in's open transaction: the
    change's revocation cannot see the token the sign-in wrote under the old credentials
    and has not committed yet. The token records the credentials it was issued under, and
    ``authenticate`` refuses it once they are not the account's. (SQLite's writers take
    turns: there the change waits for the sign-in, and its revocation sees the token.)"""
    app = open_app
    c = app.test_client()
    owner = signed_up(c, app)
    ask_for_code(c, change, owner)
    hold = HeldProfile(accounts.Accounts.profile)
    monkeypatch.setattr(accounts.Accounts, "profile", lambda *a: hold(*a))
    t, answer = in_flight(app, hold, SIGNIN, {"email": ANN, "password": PW})
    done: list = []
    changer = threading.Thread(
        target=lambda: done.append(change_credentials(app.test_client(), app, change, owner)),
        daemon=True,
    )
    changer.start()
    changer.join(WAIT)
    thief = finished(hold, t, answer)
    assert done and done[0].status_code == 200, "the change waited for the sign-in"
    token = (thief.get_json() or {}).get("token")
    assert not working(c, token)  # before the fix: 200 for the next 7 days
    assert working(c, done[0].get_json()["token"])


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_tokens_issued_before_the_upgrade_keep_working(kind, tmp_path, tmp_path_factory):
    app = make_app(kind, tmp_path, tmp_path_factory, **NO_LIMITS)
    token = signed_up(app.test_client(), app)
    engine = app.extensions["memkit"]["engine"]
    with engine.begin() as conn:  # the store as the revision before made it, with Ann's token
        command.downgrade(alembic_config(conn), "0004")
    with engine.connect() as conn:
        assert "credential_version" not in {
            c["name"] for c in sa.inspect(conn).get_columns("tokens")
        }
    upgraded = create_app(same_store(app.extensions["memkit"]["settings"]))  # upgrades the store
    try:
        c = upgraded.test_client()
        assert working(c, token)
        r = c.post(
            CHANGE_PW, headers=bearer(token), json={"old_password": PW, "new_password": NEW_PW}
        )
        assert r.status_code == 200
        assert not working(c, token) and working(c, r.get_json()["token"])
    finally:
        upgraded.extensions["memkit"]["engine"].dispose()


# -- 2. a sign-in racing the account's deletion -------------------------------------------------
@both_stores
def test_a_sign_in_racing_the_accounts_deletion_is_a_401_as_for_no_account(open_app, held):
    app = open_app
    c = app.test_client()
    owner = signed_up(c, app)
    t, answer = in_flight(app, held, SIGNIN, {"email": ANN, "password": PW})
    r = c.delete(ACCOUNT, headers=bearer(owner), json={"password": PW})
    assert r.status_code == 200, r.get_json()
    late = finished(held, t, answer)
    never = c.post(SIGNIN, json={"email": "nobody@example.com", "password": PW})
    # Before the fix: 500 (the profile read, or the token's insert, found the user gone).
    assert (late.status_code, late.get_json()) == (never.status_code, never.get_json())
    assert late.status_code == 401 and error_of(late)["code"] == "bad_credentials"
    with app.extensions["memkit"]["engine"].connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(users)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(tokens)).scalar() == 0


# -- 3. sign-ups take the argon2 slot password changes and resets need -------------------------
def test_a_sign_up_flood_never_makes_a_password_change_or_reset_wait(tmp_path, tmp_path_factory):
    app = make_app("sqlite", tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    owner = signed_up(c, app)
    assert c.post(SEND, json={"mode": "reset_password", "email": ANN}).status_code == 200
    code = outbox_code(app, ANN)
    counting = Argon2Calls(accounts._hasher)
    accounts._hasher, real = counting, accounts._hasher
    try:
        r = c.post(SIGNUP, json={"name": "Bo", "email": "bo@example.com", "password": PW})
        assert r.status_code == 200
    finally:
        accounts._hasher = real
    (kind,) = counting.kinds  # the slots a sign-up's hash runs in
    n = accounts.ARGON2_SLOTS[kind]
    slots = real._slots[kind]
    for _ in range(n):  # a flood of sign-ups holds every one of them
        slots.acquire()
    answers: dict = {}

    def run(name, call):
        t = threading.Thread(target=lambda: answers.setdefault(name, call()), daemon=True)
        t.start()
        return t

    try:
        flood = run(
            "sign_up",
            lambda: app.test_client().post(
                SIGNUP, json={"name": "Cy", "email": "cy@example.com", "password": PW}
            ),
        )
        flood.join(0.5)
        assert flood.is_alive()  # the slots held are the ones sign-ups wait for
        for name, call in (
            (
                "change",
                lambda: app.test_client().post(
                    CHANGE_PW,
                    headers=bearer(owner),
                    json={"old_password": PW, "new_password": NEW_PW},
                ),
            ),
            (
                "reset",
                lambda: app.test_client().post(
                    RESET, json={"email": ANN, "code": code, "new_password": "another new one"}
                ),
            ),
        ):
            # Before the fix sign-ups hashed in the one slot these hash in: they waited.
            run(name, call).join(WAIT)
            assert name in answers and answers[name].status_code == 200, name
    finally:
        for _ in range(n):
            slots.release()
    flood.join(WAIT)
    assert answers["sign_up"].status_code == 200


# -- 4. signing up again restarts the hourly count of code guesses ------------------------------
@both_stores
def test_signing_up_again_does_not_restart_the_hourly_count_of_code_checks(open_app):
    app = open_app
    c = app.test_client()
    sign_up = {"name": "Ann", "email": ANN, "password": PW}
    assert c.post(SIGNUP, json=sign_up).status_code == 200
    budget = app.extensions["memkit"]["settings"].code_checks_per_hour
    checks = 0
    while checks < budget:  # guess code after code, asking for a new one each time
        good = int(outbox_code(app, ANN))
        for i in range(1, 6):
            wrong = f"{(good + i) % 10**6:06d}"
            r = c.post(VALIDATE, json={"email": ANN, "code": wrong, "password": PW})
            assert error_of(r)["code"] == "code_invalid"
            checks += 1
        assert c.post(SEND, json={"mode": "signup", "email": ANN}).status_code == 200
    # A new sign-up replaces the registration (a new user id): before the fix its codes went
    # with it, and the next hour's checks started from none.
    assert c.post(SIGNUP, json=sign_up).status_code == 200
    r = c.post(VALIDATE, json={"email": ANN, "code": outbox_code(app, ANN), "password": PW})
    assert r.status_code == 400 and error_of(r)["code"] == "too_many_tries"
    # Another address is not held up.
    signed_up(c, app, "bo@example.com", "Bo")


# -- 5. telling accounts apart by how a code request is answered ---------------------------------
@pytest.mark.parametrize("mode", ["reset_password", "signup"])
def test_asking_for_a_code_does_the_same_work_whether_or_not_the_account_exists(
    tmp_path, tmp_path_factory, monkeypatch, mode
):
    app = make_app("sqlite", tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    if mode == "reset_password":
        signed_up(c, app)  # a reset code goes to a validated account
    else:  # a sign-up code asked for again, to an account still to be validated
        assert c.post(SIGNUP, json={"name": "Ann", "email": ANN, "password": PW}).status_code == 200
    absent = "nobody@example.com"
    service = app.extensions["memkit"]["accounts"]
    delivered(app)
    statements: list = []  # (thread, SQL) of every statement the store ran
    sent: list = []  # (thread, address) of every message sent
    sa.event.listen(
        app.extensions["memkit"]["engine"],
        "before_cursor_execute",
        lambda conn, cur, sql, *a: statements.append((threading.get_ident(), sql)),
    )
    real_send = service.mailer.send

    def send(to, subject, text):
        sent.append((threading.get_ident(), to))
        real_send(to, subject, text)

    monkeypatch.setattr(service.mailer, "send", send)
    work = {ANN: [], absent: []}
    me = threading.get_ident()
    for _ in range(20):  # alternately, as the probe did
        for address in (ANN, absent):
            statements.clear()
            before = len(sent)
            r = c.post(SEND, json={"mode": mode, "email": address})
            assert r.status_code == 200
            work[address].append(
                (
                    r.get_json()["message"].replace(address, "ADDRESS"),
                    [sql for thread, sql in statements if thread == me],
                    [to for thread, to in sent[before:] if thread == me],
                )
            )
    # The request itself reads and writes the same and sends nothing (before the fix the
    # existing account's request wrote a code and sent it, the other did neither) ...
    assert work[ANN] == work[absent]
    assert work[ANN][0][2] == []
    # ... and the codes still go where there is an account, and only there.
    assert "code is" in outbox_message(app, ANN)
    assert [to for _, to in sent] == [ANN] * 20
    with pytest.raises(AssertionError):
        outbox_message(app, absent)


def test_a_failing_mail_server_does_not_tell_whether_the_account_exists(
    tmp_path, tmp_path_factory, caplog
):
    app = make_app("sqlite", tmp_path, tmp_path_factory, **NO_LIMITS)
    signed_up(app.test_client(), app)
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = app.extensions["memkit"]["settings"]
    down = create_app(same_store(settings, smtp_host="127.0.0.1", smtp_port=port, **NO_LIMITS))
    try:
        c = down.test_client()
        before = all_rows(down)
        answers = {}
        for email in (ANN, "nobody@example.com"):
            r = c.post(SEND, json={"mode": "reset_password", "email": email})
            body = r.get_json()
            answers[email] = (r.status_code, str(body).replace(email, "ADDRESS"))
        # Before the fix Ann's request answered 503 delivery_failed, nobody's 200.
        assert answers[ANN] == answers["nobody@example.com"] and answers[ANN][0] == 200
        # The code that could not be sent is not kept, and whoever runs the service is told.
        assert all_rows(down) == before
        lines = [rec.getMessage() for rec in caplog.records]
        assert any("not sent" in line for line in lines)
        assert not any(ANN in line for line in lines)  # nor whom it was for
    finally:
        down.extensions["memkit"]["engine"].dispose()


def test_reset_codes_sent_in_the_background_arrive_over_real_smtp(smtp, tmp_path):
    inbox, port = smtp
    app = smtp_app(port, tmp_path)
    try:
        c = app.test_client()
        assert c.post(SIGNUP, json={"name": "Ann", "email": ANN, "password": PW}).status_code == 200
        r = c.post(VALIDATE, json={"email": ANN, "code": inbox.code_for(ANN), "password": PW})
        assert r.status_code == 200
        assert c.post(SEND, json={"mode": "reset_password", "email": ANN}).status_code == 200
        delivered(app)
        code = inbox.code_for(ANN)
        r = c.post(RESET, json={"email": ANN, "code": code, "new_password": NEW_PW})
        assert r.status_code == 200 and working(c, r.get_json()["token"])
    finally:
        app.extensions["memkit"]["engine"].dispose()


# -- 6. a valid address too long for an outbox file's name --------------------------------------
def test_a_254_character_address_gets_its_code_in_the_outbox(tmp_path, tmp_path_factory):
    app = make_app("sqlite", tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    domain = ".".join(["b" * 63, "c" * 63, "d" * 57, "com"])
    longest = f"{'a' * 64}@{domain}"
    twin = f"{'a' * 64}@{domain[:-4]}.org"  # the same first characters
    assert len(longest) == len(twin) == 254
    for address in (longest, twin):
        # Before the fix: 503 delivery_failed (the file's name was longer than 255 bytes).
        token = signed_up(c, app, address, "Al")
        assert working(c, token)
    assert outbox_message(app, longest).startswith(f"To: {longest}\n")
    assert outbox_message(app, twin).startswith(f"To: {twin}\n")
    folder = tmp_path / "outbox"
    assert all(len(p.name) <= 128 for p in folder.iterdir())
