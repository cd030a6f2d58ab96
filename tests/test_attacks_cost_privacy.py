"""Attacks on the service's cost and privacy (unknown applications' secrets, floods per
network, half-sent requests, files and caches readable by others, a post's encodings, write
budgets), each performed as the attacker did. Every test here failed before its fix;
SECURITY.md lists them by finding.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import server.settings
from memkit.models.encoders import CachedEncoder
from server import create_app
from server.services import accounts
from tests.service_fixtures import NO_LIMITS, PW, error_of, outbox_code, outbox_message, user
from tests.test_attacks import SEND, SIGNUP, VALIDATE, bearer, signed_up
from tests.test_attacks_accounts import EXTERNAL, Q, from_address, sqlite_app
from tests.test_attacks_accounts import argon2 as argon2  # the fixture counting argon2 calls


# -- 1. failed credentials of identities that do not exist ------------------------------------
def test_a_wrong_secret_for_an_unknown_application_costs_no_argon2_work(
    tmp_path, tmp_path_factory, argon2
):
    app = sqlite_app(tmp_path, tmp_path_factory)
    c = app.test_client()
    app_id, _ = app.extensions["memkit"]["accounts"].register_app("widget")
    argon2.calls = 0
    for i, path in enumerate([Q, EXTERNAL] * 3):
        r = c.post(
            path,
            headers={"X-App-Id": f"app_nope{i}", "X-App-Secret": "x"},
            json={"external_id": "e1"},
            **from_address(f"10.0.{i}.1"),
        )
        assert r.status_code == 401 and error_of(r)["code"] == "bad_app_credentials"
    assert argon2.calls == 0
    # A registered application's wrong secret is still checked, and answered the same.
    r = c.post(EXTERNAL, headers={"X-App-Id": app_id, "X-App-Secret": "x"}, json={})
    assert r.status_code == 401 and error_of(r)["code"] == "bad_app_credentials"
    assert argon2.calls == 1


def test_an_unknown_application_id_is_answered_before_flask(
    tmp_path, tmp_path_factory, monkeypatch
):
    """The spread flood (a new made-up id from a new network each request) is answered by
    the WSGI middleware with Flask's own 401, so each costs one indexed read."""
    app = sqlite_app(tmp_path, tmp_path_factory)
    c = app.test_client()
    app_id, _ = app.extensions["memkit"]["accounts"].register_app("widget")
    real = c.post(Q, headers={"X-App-Id": app_id, "X-App-Secret": "x"}, json={})
    seen = []
    monkeypatch.setattr(
        app.extensions["memkit"]["accounts"], "authenticate_app", lambda *a: seen.append(a)
    )
    for path in (Q, EXTERNAL):
        r = c.post(path, headers={"X-App-Id": "app_madeup", "X-App-Secret": "x"}, json={})
        assert (r.status_code, r.get_json()) == (401, real.get_json())
        assert r.headers["WWW-Authenticate"] == "Bearer" and "Retry-After" not in r.headers
    assert seen == []  # Flask's check never ran


def test_counts_per_client_address_are_kept_per_network(tmp_path, tmp_path_factory):
    """IPv4 addresses count per /24, IPv6 addresses per /64: a flood from new addresses of
    one network is one count."""
    app = sqlite_app(
        tmp_path,
        tmp_path_factory,
        rate_limit_sign_in="3 per minute",
        rate_limit_app_secret="2 per minute",
        rate_limit_address_factor=1,
    )
    c = app.test_client()

    def sign_in(i, address):  # a new account each time: only the address's count can refuse
        return c.post(
            "/auth-service/signin/email",
            json={"email": f"nobody{i}@example.com", "password": "wrong password"},
            **from_address(address),
        ).status_code

    for network, same, other in (
        (["10.1.2.3", "10.1.2.4", "10.1.2.5"], "10.1.2.200", "10.1.3.1"),
        (
            ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::3"],
            "2001:db8:1:2:abcd::1",
            "2001:db8:1:3::1",
        ),
    ):
        assert [sign_in(i, a) for i, a in enumerate(network)] == [401] * 3
        assert sign_in(10, same) == 429
        assert sign_in(11, other) == 401

    def wrong_secret(i, address):  # failed credentials: a new application id each time
        return c.post(
            Q, headers={"X-App-Id": f"app_nope{i}", "X-App-Secret": "x"}, **from_address(address)
        ).status_code

    assert [wrong_secret(i, f"10.7.7.{i}") for i in range(1, 4)] == [401, 401, 429]
    assert wrong_secret(4, "10.7.8.1") == 401


def test_sign_ins_keep_argon2_slots_no_other_flood_can_take(tmp_path, tmp_path_factory, argon2):
    """While every argon2 slot of the other kinds is held (a flood of application secrets,
    of new passwords, of password checks by signed-in users), a sign-in still runs at once."""
    app = sqlite_app(tmp_path, tmp_path_factory)
    c = app.test_client()
    signed_up(c, app)
    assert argon2.kinds == ["sign_up", "sign_in"]  # the sign-up's hash, the validation's check
    held = [
        (sem, n)
        for kind, sem in argon2.real._slots.items()
        if kind != "sign_in"
        for n in [accounts.ARGON2_SLOTS[kind]]
    ]
    for sem, n in held:
        for _ in range(n):
            sem.acquire()
    try:
        answer = []
        t = threading.Thread(
            target=lambda: answer.append(
                c.post(
                    "/auth-service/signin/email",
                    json={"email": "ann@example.com", "password": PW},
                ).status_code
            ),
            daemon=True,
        )
        t.start()
        t.join(timeout=30)  # before the fix one pool of four: it waited for the flood
        assert answer == [200]
    finally:
        for sem, n in held:
            for _ in range(n):
                sem.release()


# -- 3. a squatted mobile number (and e-mail address) -------------------------------------------
@pytest.mark.parametrize("kind", ["mobile", "email"])
@pytest.mark.parametrize("way", ["sign_up", "move"])
def test_an_address_given_beside_the_one_validated_binds_nothing(
    tmp_path, tmp_path_factory, kind, way
):
    """Mallory signs up with her own address and the victim's (of the other kind) and
    validates with her own code: the victim's address signs no one in, and its owner can
    still sign up with it or move his account to it, told nothing false."""
    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    own, victims = (
        ("mallory@example.com", "+447911123456")
        if kind == "mobile"
        else ("+447911123457", "vic@example.com")
    )
    own_kind = "email" if kind == "mobile" else "mobile"
    mallory = {"name": "Mallory", own_kind: own, kind: victims, "password": "mallory's own"}
    assert c.post(SIGNUP, json=mallory).status_code == 200
    if own_kind == "mobile":  # the sign-up code went to the e-mail address: ask for one by SMS
        assert c.post(SEND, json={"mode": "signup", "mobile": own}).status_code == 200
    r = c.post(
        VALIDATE,
        json={own_kind: own, "code": outbox_code(app, own), "password": "mallory's own"},
    )
    assert r.status_code == 200
    signin = f"/auth-service/signin/{kind}"
    assert c.post(signin, json={kind: victims, "password": "mallory's own"}).status_code == 401
    assert r.get_json()["profile"][_PROFILE[kind]] == ""  # her account has only what she proved

    if way == "sign_up":  # the owner signs up with his address and validates it
        assert (
            c.post(SIGNUP, json={"name": "Vic", kind: victims, "password": PW}).status_code == 200
        )
        r = c.post(
            VALIDATE, json={kind: victims, "code": outbox_code(app, victims), "password": PW}
        )
        assert r.status_code == 200
    else:  # the owner, signed up with another address, moves his account to it
        vic = bearer(signed_up(c, app, "vic.old@example.com", "Vic"))
        field, mode, path, code_field = _CHANGE[kind]
        r = c.post(SEND, headers=vic, json={"mode": mode, field: victims, "password": PW})
        assert r.status_code == 200
        message = outbox_message(app, victims)
        assert "already belongs to your account" not in message and "code is" in message
        r = c.post(path, headers=vic, json={field: victims, code_field: outbox_code(app, victims)})
        assert r.status_code == 200, r.get_json()
        assert r.get_json()["profile"][_PROFILE[kind]] == victims
    assert c.post(signin, json={kind: victims, "password": PW}).status_code == 200
    assert c.post(signin, json={kind: victims, "password": "mallory's own"}).status_code == 401
    # Mallory's account is hers still, by the address she proved.
    assert (
        c.post(
            f"/auth-service/signin/{own_kind}", json={own_kind: own, "password": "mallory's own"}
        ).status_code
        == 200
    )


_PROFILE = {"email": "email", "mobile": "mobile_number"}
_CHANGE = {  # the request field, the code's mode, the path and its code field of a change
    "email": ("new_email_id", "change_email", "/auth-service/change/email", "activation_code"),
    "mobile": ("new_mobile", "change_mobile", "/auth-service/change/mobile", "code"),
}


# -- 4. files others on the host can read ---------------------------------------------------------
@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual umask: files 644 and folders 755 unless made otherwise
    yield
    os.umask(old)


def modes(root: Path) -> dict[str, str]:
    """The permission bits of every file and folder under ``root`` (and of ``root``)."""
    return {
        str(p.relative_to(root.parent)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in [root, *root.rglob("*")]
    }


def test_the_instance_store_and_outbox_are_private_whatever_the_umask(
    tmp_path, monkeypatch, umask_022
):
    instance = tmp_path / "instance"
    monkeypatch.setattr(server.settings, "INSTANCE", instance)  # where secret_key is made
    app = create_app(
        {
            "database_url": f"sqlite:///{instance / 'memkit.db'}",
            "outbox_dir": str(instance / "outbox"),
        }
    )
    c = app.test_client()
    h, fid, blocks = user(c, app, "Ann")  # a code in the outbox, rows in the store
    r = c.post(f"/floors/{fid}/blocks/{blocks['feed']}/events", headers=h, json={"text": "hi"})
    assert r.status_code == 200
    found = modes(instance)
    assert {"instance/memkit.db-wal", "instance/memkit.db-shm", "instance/secret_key"} <= set(found)
    assert any(name.startswith("instance/outbox/") for name in found)
    assert found == {name: "0o700" if (tmp_path / name).is_dir() else "0o600" for name in found}, (
        found
    )
    app.extensions["memkit"]["engine"].dispose()


class _Zeros:
    name, dim = "zeros", 4

    def encode(self, texts, show_progress=None):
        return np.zeros((len(texts), self.dim), np.float32)


def test_the_embedding_cache_is_private_whatever_the_umask(tmp_path, monkeypatch, umask_022):
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path / "home" / "memkit"))
    encoder = CachedEncoder(_Zeros())  # in the default folder, $MEMKIT_CACHE_DIR
    encoder.encode(["a private post", "another one"], store=True)
    found = modes(tmp_path / "home")
    assert "home/memkit/embeddings.sqlite-wal" in found
    assert found == {name: "0o700" if (tmp_path / name).is_dir() else "0o600" for name in found}, (
        found
    )


# -- 8. what a follow-up carries from a post its asker can no longer read --------------------------
@pytest.mark.slow
def test_a_follow_up_carries_nothing_from_a_post_its_asker_can_no_longer_read(app):
    """Tom asks about a post of Ann's public floor; Ann makes the floor private; Tom's
    follow-up (over his own floor) shows neither the post's id nor its words in
    ``metadata.carried``. Mia, asking the same while the floor is public, is carried both."""
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    assert c.post(f"/floors/{fid}/public", headers=ann).status_code == 200
    r = c.post(
        f"/floors/{fid}/blocks/{blocks['feed']}/events",
        headers=ann,
        json={"text": "I've organised the whole Zion trip, cabin and permits are booked"},
    )
    post = r.get_json()["event_id"]

    def ask(who, floor, query):
        h = who[0]
        uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
        body = {"user_id": uid, "query": query, "floor_ids": [floor], "include_metadata": "1"}
        r = c.post(Q, headers=h, json=body)
        assert r.status_code == 200, r.get_json()
        return r.get_json()["metadata"]

    the_posts_words = {"I've", "whole", "cabin", "permits"}  # not in the question
    mia, tom = user(c, app, "Mia"), user(c, app, "Tom")
    for who in (mia, tom):
        assert post in ask(who, fid, "Who organised the Zion trip?")["quoted"]
    carried = ask(mia, fid, "when was that?")["carried"]  # the floor is public: all is carried
    assert post in carried["posts"] and the_posts_words & set(carried["words"]), carried
    assert c.post(f"/floors/{fid}/private", headers=ann).status_code == 200
    carried = ask(tom, tom[1], "when was that?")["carried"]
    assert carried["kind"] == "follow-up"
    assert post not in carried["posts"] and not the_posts_words & set(carried["words"]), carried


# -- 5. an owner's rewrite quoted as the guest's words --------------------------------------------
def test_the_floors_owner_may_delete_a_guests_post_but_not_rewrite_it(tmp_path, tmp_path_factory):
    app = sqlite_app(tmp_path, tmp_path_factory)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    bo = user(c, app, "Bo")[0]
    assert c.post(f"/floors/{fid}/public", headers=ann).status_code == 200
    post = c.post(
        f"/floors/{fid}/blocks/{blocks['feed']}/events", headers=bo, json={"text": "See you at 8"}
    ).get_json()["event_id"]
    for change in (
        {"text": "I owe you 500 pounds and will pay tomorrow"},
        {"tags": ["debt"]},
        {"media": []},
    ):
        r = c.patch(f"/events/{post}", headers=ann, json=change)
        assert r.status_code == 403 and error_of(r)["code"] == "not_author", r.get_json()
    events = c.get(f"/floors/{fid}/events", headers=ann).get_json()["events"]
    assert [(e["text"], e["tags"]) for e in events] == [("See you at 8", [])]
    assert c.patch(f"/events/{post}", headers=bo, json={"text": "See you at 9"}).status_code == 200
    assert c.delete(f"/events/{post}", headers=ann).status_code == 200  # moderation


# -- 6. slow clients under `memkit serve` ---------------------------------------------------------
class _Served:
    """`memkit serve`'s server (server/cli.py's BoundedServer) on a free loopback port, in a
    thread, with a short read timeout and a small per-network bound."""

    def __init__(self, app, timeout: float = 0.5, per_network: int = 3) -> None:
        from server.cli import BoundedServer, QuietHandler

        handler = type("Handler", (QuietHandler,), {"timeout": timeout})
        bounded = type("Server", (BoundedServer,), {"per_network": per_network})
        self.server = bounded("127.0.0.1", 0, app, handler=handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _read_until_closed(s: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    start, data = time.monotonic(), b""
    while chunk := s.recv(65536):
        data += chunk
    return data, time.monotonic() - start


@pytest.fixture()
def served(tmp_path, tmp_path_factory):
    s = _Served(sqlite_app(tmp_path, tmp_path_factory, max_body_bytes=10_000))
    yield s
    s.close()


def test_a_request_whose_body_stalls_is_dropped(served):
    s = served.connect()
    s.sendall(
        b"POST /auth-service/signin/email HTTP/1.1\r\nHost: x\r\n"
        b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email": '
    )
    data, took = _read_until_closed(s)  # before the fix: held until the client gave up
    assert took < 5, took
    assert b"200 OK" not in data


def test_a_connection_is_closed_after_a_413(served):
    s = served.connect()
    s.sendall(
        b"POST /auth-service/signin/email HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2000000\r\n\r\n" + b" " * 20_000
    )
    data, took = _read_until_closed(s)  # the rest of the body is never sent
    assert data.startswith(b"HTTP/1.1 413"), data[:100]
    assert took < 5, took


def test_one_network_cannot_take_every_thread_with_half_sent_requests(served):
    held = [served.connect() for _ in range(3)]
    for s in held:
        s.sendall(b"GET /openapi.json HTTP/1.1\r\n")  # and never the rest
    time.sleep(0.1)
    extra = served.connect()  # a fourth from the same /24: closed at once
    assert _read_until_closed(extra)[0] == b""
    for s in held:  # the held ones are dropped after the read timeout ...
        _read_until_closed(s)
    # ... and the network may connect again once their threads let go of their slots (a
    # thread does that just after closing its socket: a client can see the close first)
    deadline, answer = time.monotonic() + 2, b""
    while not answer.startswith(b"HTTP/1.1 200") and time.monotonic() < deadline:
        fresh = served.connect()
        fresh.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _read_until_closed(fresh)[0]
    assert answer.startswith(b"HTTP/1.1 200")


# -- 2. a post's write costs by its length, and writes have a budget ------------------------------
def _text(sentence, chars: int) -> str:
    out, i = [], 0
    while sum(map(len, out)) + len(out) < chars:
        out.append(sentence(i))
        i += 1
    return " ".join(out)[:chars]


def test_a_posts_encodings_grow_with_its_length_not_its_number_of_sentences(
    tmp_path, tmp_path_factory
):
    """A 20,000-character post of 1,500 tiny sentences was encoded 1,500 times (a run of the
    model each, about 4x the CPU of prose as long); now about as often as prose."""
    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    prose = _text(
        lambda i: f"On day {i} we walked along the harbour wall and talked about the lighthouse.",
        20_000,
    )
    tiny = _text(lambda i: f"Ok {i}.", 20_000)
    encoder = app.extensions["memkit"]["memory"].index.pipeline.answerer.encoder

    def encodings(text: str) -> int:
        before = encoder.encoded
        r = c.post(
            f"/floors/{fid}/blocks/{blocks['blog']}/events", headers=ann, json={"text": text}
        )
        assert r.status_code == 200, r.get_json()
        return encoder.encoded - before

    as_prose, as_tiny = encodings(prose), encodings(tiny)
    assert as_prose > 100  # one per sentence: the post's sentences were encoded at all
    assert as_tiny <= 3 * as_prose, (as_tiny, as_prose)  # before: 2,347 against 263


def test_writes_spend_a_budget_per_user(tmp_path, tmp_path_factory):
    app = sqlite_app(tmp_path, tmp_path_factory, rate_limit_write="50 per minute")
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    bo, bo_floor, bo_blocks = user(c, app, "Bo")
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events"
    batch = {"events": [{"text": "x" * 1000} for _ in range(30)]}  # about 31 kB
    assert c.post(f"{feed}/batch", headers=ann, json=batch).status_code == 200
    r = c.post(f"{feed}/batch", headers=ann, json=batch)  # past 50 kB in the minute
    assert r.status_code == 429 and error_of(r)["code"] == "rate_limited"
    assert 0 < int(r.headers["Retry-After"]) <= 60
    assert "kB" in error_of(r)["message"]
    listed = c.get(f"/floors/{fid}/events?limit=100", headers=ann).get_json()["events"]
    assert len(listed) == 30  # the refused batch stored nothing
    small = c.post(feed, headers=ann, json={"text": "still here"})  # 1 kB still fits
    assert small.status_code == 200
    other = f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events/batch"
    assert c.post(other, headers=bo, json=batch).status_code == 200  # another user's own budget


# -- 4. the embedding cache's keys ----------------------------------------------------------------
def test_the_embedding_cache_cannot_be_checked_against_guesses_without_the_secret(
    tmp_path, tmp_path_factory
):
    """The probe recovered a private post's PIN from the cache file alone: its keys were
    SHA-256 of (model, text). The service now keys them with its instance secret."""
    import hashlib

    from memkit.models.encoders import EmbeddingCache, default_cache_dir, key_cache_with

    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")  # the sign-up floor: private
    secret = "The code for the garage door is 4821."
    filler = " ".join(f"We cleared shelf {i} of the garage today." for i in range(15))
    r = c.post(
        f"/floors/{fid}/blocks/{blocks['blog']}/events",
        headers=ann,
        json={"text": f"{filler} {secret}"},  # a long post: its sentences encoded one by one
    )
    assert r.status_code == 200
    name = app.extensions["memkit"]["memory"].index.pipeline.answerer.encoder.name
    with sqlite3.connect(default_cache_dir() / "embeddings.sqlite") as db:
        keys = {k for (k,) in db.execute("SELECT key FROM emb")}
    assert EmbeddingCache.key(name, secret) in keys  # the sentence was cached, keyed
    guesses = {
        hashlib.sha256(f"{name}\x00The code for the garage door is {pin:04d}.".encode()).hexdigest()
        for pin in range(10_000)
    }
    assert not guesses & keys  # before: the PIN's key was found among them
    key_cache_with(None)  # as eval keys them: the same text, another key
    try:
        assert EmbeddingCache.key(name, secret) not in keys
    finally:
        key_cache_with(app.extensions["memkit"]["settings"].secret_key)


def _floor_keys(floor_id: str) -> set[str]:
    from memkit.models.encoders import default_cache_dir

    with sqlite3.connect(default_cache_dir() / "embeddings.sqlite") as db:
        return {
            k
            for (k,) in db.execute(
                "SELECT n.key FROM emb_ns n JOIN emb USING (key) WHERE n.ns = ?",
                (f"floor:{floor_id}",),
            )
        }


def _stored(keys) -> set[str]:
    from memkit.models.encoders import default_cache_dir

    with sqlite3.connect(default_cache_dir() / "embeddings.sqlite") as db:
        return {k for k in keys if db.execute("SELECT 1 FROM emb WHERE key = ?", (k,)).fetchone()}


def _ask(c, headers, floor: str, query: str) -> None:
    uid = c.get("/auth-service/profile", headers=headers).get_json()["profile"]["user_id"]
    r = c.post(Q, headers=headers, json={"user_id": uid, "query": query, "floor_ids": [floor]})
    assert r.status_code == 200, r.get_json()


def test_deleting_or_rewriting_a_post_deletes_its_cached_vectors(tmp_path, tmp_path_factory):
    """The probe found a deleted post's keys still in the cache file. Now a delete or an
    edit leaves the floor's cache entries exactly those its remaining posts name: nothing
    of the old text (its line, its sentences, its neighbour's document that held it)."""
    from server.search.forgetting import named_keys

    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    memory = app.extensions["memkit"]["memory"]
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events"
    day = "2026-03-02T09:00:00Z"
    posts = [
        "Packing for the Oban ferry now.",
        "The safe code is 7391, written on the boiler.",  # the secret deleted below
        "Ferry left late, we got seats upstairs.",
    ]
    ids = [
        c.post(
            feed, headers=ann, json={"text": t, "created_at": day.replace("09", f"1{i}")}
        ).get_json()["event_id"]
        for i, t in enumerate(posts)
    ]
    _ask(c, ann, fid, "ferry?")  # the index is open
    with memory.engine.connect() as conn:
        everything = named_keys(memory.index.pipeline, conn, [(fid, blocks["feed"], None)])[fid]
    assert everything <= _floor_keys(fid)  # what the posts made is in the cache

    assert c.delete(f"/events/{ids[1]}", headers=ann).status_code == 200
    with memory.engine.connect() as conn:
        left = named_keys(memory.index.pipeline, conn, [(fid, blocks["feed"], None)])[fid]
    assert _floor_keys(fid) == left  # nothing more than the two remaining posts name
    assert not _stored(everything - left)  # the secret's vectors are gone from the file
    assert everything - left  # (and there were some)

    r = c.patch(f"/events/{ids[2]}", headers=ann, json={"text": "Ferry cancelled, we drove."})
    assert r.status_code == 200
    with memory.engine.connect() as conn:
        now = named_keys(memory.index.pipeline, conn, [(fid, blocks["feed"], None)])[fid]
    assert _floor_keys(fid) == now and not _stored(left - now) and left - now


def test_deleting_an_account_deletes_its_floors_cached_vectors(tmp_path, tmp_path_factory):
    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    r = c.post(
        f"/floors/{fid}/blocks/{blocks['blog']}/events",
        headers=ann,
        json={"text": "Our new alarm code is 5512. The old one stopped working last week."},
    )
    assert r.status_code == 200
    _ask(c, ann, fid, "alarm?")
    made = _floor_keys(fid)
    assert made
    r = c.delete("/auth-service/account", headers=ann, json={"password": PW})
    assert r.status_code == 200, r.get_json()
    assert not _floor_keys(fid) and not _stored(made)


def test_writes_runs_of_the_model_leave_a_core_to_questions():
    """Four 1 MB writes at once had taken both cores from another user's questions (his
    median 6.8x of idle): every run of the model outside a question now takes a lane, and
    a question in flight takes one lane away from them (never the last)."""
    from memkit.models.encoders import Lanes

    lanes = Lanes(2)
    guard, now, peak = threading.Lock(), [0], [0]

    def write_run():
        with lanes.run():
            with guard:
                now[0] += 1
                peak[0] = max(peak[0], now[0])
            time.sleep(0.02)
            with guard:
                now[0] -= 1

    def runs(n=12):
        peak[0] = 0
        threads = [threading.Thread(target=write_run) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return peak[0]

    assert runs() == 2  # no question: both cores
    with lanes.question():
        assert runs() == 1  # a question in flight: one left to writes
        with lanes.question():
            assert runs() == 1  # never fewer than one: writes go on
    assert runs() == 2 and lanes.asking == 0
