"""Bounds on what one request, one connection or one client may cost the service: the
length of an address before anything reads it, the bytes a write is charged however its
body is framed, the client address behind a proxy, how long a connection may take to send
its headers, and how often and how many at once one user may ask. Each test performs the
probe's attack; the server's are sent over real sockets to `memkit serve`'s server.
"""

from __future__ import annotations

import io
import json
import select
import socket
import threading
import time
import unicodedata

import phonenumbers
import pytest
import sqlalchemy as sa

import server.services.accounts as accounts
from memkit.config import resolve_config
from server.store.schema import conversation_turns
from tests.service_fixtures import NO_LIMITS, PW, all_rows, error_of, make_app, user
from tests.test_attacks import RESET, SEND, SIGNUP, VALIDATE, bearer, signed_up
from tests.test_attacks_accounts import Q, from_address

BM25 = str(resolve_config("bm25"))  # no model to load: these tests are about the requests


def bm25_app(tmp_path, tmp_path_factory, **settings):
    return make_app("sqlite", tmp_path, tmp_path_factory, pipeline_config=BM25, **settings)


# -- an over-long address is refused before anything reads it -----------------------------------
# Over their bounds, within an account operation's body bound (auth_body_bytes: 16 kB), so
# that the field's own check answers; a megabyte of them is refused before it is read
# (test_a_megabyte_sent_to_an_account_operation_is_refused_unread).
LONG_EMAIL = "a" * 12_000 + "@example.com"
LONG_MOBILE = "+44" + "7" * 12_000


@pytest.fixture
def long_reads(monkeypatch):
    """Every call that normalises or validates an address (NFKC, email_validator,
    phonenumbers), counted when it is given a value over 1,000 characters."""
    seen: list[str] = []

    def counted(real, name, position=0):
        def call(*args, **kwargs):
            value = args[position] if len(args) > position else None
            if isinstance(value, str) and len(value) > 1000:
                seen.append(name)
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(
        accounts, "validate_email", counted(accounts.validate_email, "validate_email")
    )
    monkeypatch.setattr(phonenumbers, "parse", counted(phonenumbers.parse, "phonenumbers.parse"))
    monkeypatch.setattr(
        unicodedata, "normalize", counted(unicodedata.normalize, "unicodedata.normalize", 1)
    )
    return seen


# (path, body, field refused, whether the request is signed in)
LONG_ADDRESSES = [
    (SIGNUP, {"name": "Mal", "email": LONG_EMAIL, "password": PW}, "email", False),
    (SIGNUP, {"name": "Mal", "mobile": LONG_MOBILE, "password": PW}, "mobile", False),
    ("/auth-service/signin/email", {"email": LONG_EMAIL, "password": PW}, "email", False),
    ("/auth-service/signin/mobile", {"mobile": LONG_MOBILE, "password": PW}, "mobile", False),
    (SEND, {"mode": "signup", "email": LONG_EMAIL}, "email", False),
    (SEND, {"mode": "reset_password", "mobile": LONG_MOBILE}, "mobile", False),
    (
        SEND,
        {"mode": "change_email", "new_email_id": LONG_EMAIL, "password": PW},
        "new_email_id",
        True,
    ),
    (
        SEND,
        {"mode": "change_mobile", "new_mobile": LONG_MOBILE, "password": PW},
        "new_mobile",
        True,
    ),
    (VALIDATE, {"email": LONG_EMAIL, "code": "123456", "password": PW}, "email", False),
    (RESET, {"email": LONG_EMAIL, "code": "123456", "new_password": PW}, "email", False),
    (RESET, {"mobile": LONG_MOBILE, "code": "123456", "new_password": PW}, "mobile", False),
    (
        "/auth-service/change/email",
        {"new_email_id": LONG_EMAIL, "activation_code": "123456"},
        "new_email_id",
        True,
    ),
    (
        "/auth-service/change/mobile",
        {"new_mobile": LONG_MOBILE, "code": "123456"},
        "new_mobile",
        True,
    ),
]


def test_an_over_long_address_is_refused_naming_the_field_before_any_work(
    tmp_path, tmp_path_factory, long_reads
):
    """A 990 kB address cost ~0.6 s of normalising before the rate limiter could count it
    (the limiter's account key and the services both read it whole); one of 12 kB is
    refused by its field's bound, unread."""
    app = bm25_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    token = signed_up(c, app)
    before = all_rows(app)
    for path, body, field, signed_in in LONG_ADDRESSES:
        headers = bearer(token) if signed_in else {}
        r = c.post(path, json=body, headers=headers)
        err = error_of(r)
        assert r.status_code == 400 and err["field"] == field, (path, field, err)
        assert err["code"] == "too_long", err
        bound = "32" if "mobile" in field else "254"
        assert field in err["message"] and f"at most {bound} characters" in err["message"], err
        assert len(err["message"]) < 300, err  # what was sent is cut, not echoed whole
        assert long_reads == [], (path, field, long_reads)
        assert all_rows(app) == before, f"{path} {field}: the store changed"
    # The change of e-mail's multipart form is bounded the same way.
    r = c.post(
        "/auth-service/change/email",
        data={"new_email_id": LONG_EMAIL, "activation_code": "123456"},
        headers=bearer(token),
        content_type="multipart/form-data",
    )
    assert r.status_code == 400 and error_of(r)["field"] == "new_email_id", r.get_json()
    assert long_reads == [] and all_rows(app) == before


def test_a_megabyte_sent_to_an_account_operation_is_refused_unread(
    tmp_path, tmp_path_factory, long_reads
):
    """Sign-up, sign-in and the codes need a few hundred bytes; a 990 kB body of theirs was
    parsed whole (JSON, then the model) before anything refused it, and a flood of them
    from many networks slowed other users 22x under `memkit serve`. Past auth_body_bytes
    such a body is a 413 before it is read, whether it says its length or is chunked."""
    app = bm25_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    before = all_rows(app)
    huge = {"email": "a" * 990_000 + "@example.com", "password": PW}
    for path in (SIGNUP, "/auth-service/signin/email", SEND, VALIDATE, RESET):
        r = c.post(path, json=huge)
        assert r.status_code == 413 and error_of(r)["code"] == "too_large", (path, r.get_json())
    r = c.post(
        "/auth-service/signin/email",
        input_stream=io.BytesIO(json.dumps(huge).encode()),  # no Content-Length: chunked
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    assert r.status_code == 413, r.get_json()
    assert long_reads == [] and all_rows(app) == before
    # A post of the same size is still taken where posts go (max_body_bytes: 1 MB).
    token = signed_up(c, app)
    profile = c.get("/auth-service/profile", headers=bearer(token)).get_json()["pod_info"]
    feed = next(b["block_id"] for b in profile["blocks"] if b["type"] == "feed")
    r = c.post(
        f"/floors/{profile['floor_uid']}/blocks/{feed}/events",
        json={"text": "long post " * 1_900},
        headers=bearer(token),
    )
    assert r.status_code == 200, r.get_json()


def test_the_longest_address_the_bound_allows_still_signs_up(tmp_path, tmp_path_factory):
    """254 characters (RFC 5321's path limit less its angle brackets) is an address."""
    app = bm25_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    longest = "l" * 64 + "@" + "a" * 63 + "." + "b" * 63 + "." + "c" * 57 + ".com"
    assert len(longest) == 254
    signed_up(c, app, email=longest)
    r = c.post("/auth-service/signin/email", json={"email": longest, "password": PW})
    assert r.status_code == 200, r.get_json()
    r = c.post(SIGNUP, json={"name": "Mal", "email": "x" + longest, "password": PW})
    assert r.status_code == 400 and error_of(r)["field"] == "email"


def test_the_limiters_account_key_reads_no_over_long_address(
    tmp_path, tmp_path_factory, long_reads
):
    """An over-long address is counted against its client network, unread: many of them
    from one network are held by that network's count (not one new account each)."""
    app = bm25_app(tmp_path, tmp_path_factory, rate_limit_sign_in="2 per minute")
    c = app.test_client()
    statuses = [
        c.post(
            "/auth-service/signin/email",
            json={"email": f"{i}{LONG_EMAIL}", "password": PW},
            **from_address("10.9.9.9"),
        ).status_code
        for i in range(3)
    ]
    assert statuses == [400, 400, 429]
    assert long_reads == []
    r = c.post(
        "/auth-service/signin/email",
        json={"email": "ann@example.com", "password": PW},
        **from_address("10.9.10.9"),
    )
    assert r.status_code == 401  # another network: not held


# -- a real server on loopback ------------------------------------------------------------------
class Served:
    """`memkit serve`'s server (server/cli.py's BoundedServer) on a free loopback port, in a
    thread; ``handler`` and ``server`` override their class attributes."""

    def __init__(self, app, handler: dict | None = None, server: dict | None = None) -> None:
        from server.cli import BoundedServer, QuietHandler

        handler_class = type("Handler", (QuietHandler,), handler or {})
        server_class = type("Server", (BoundedServer,), server or {})
        self.server = server_class("127.0.0.1", 0, app, handler=handler_class)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def connect(self, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
        """A connection from ``source``: any 127.0.0.0/8 address is this host's loopback, so
        each 127.0.N.x is a client of another /24 network."""
        return socket.create_connection(
            ("127.0.0.1", self.port), timeout=timeout, source_address=(source, 0)
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def read_answer(s: socket.socket) -> tuple[int, dict | None]:
    """The status and JSON body of the server's answer (it closes every connection)."""
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def chunked_post(s: socket.socket, path: str, headers: dict, payload: bytes, chunk=4096) -> None:
    """POST ``payload`` with Transfer-Encoding: chunked (no Content-Length)."""
    head = [f"POST {path} HTTP/1.1", "Host: x", "Transfer-Encoding: chunked"]
    head += [f"{k}: {v}" for k, v in {"Content-Type": "application/json", **headers}.items()]
    s.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    try:
        for i in range(0, len(payload), chunk):
            part = payload[i : i + chunk]
            s.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):  # refused before the whole body was read
        pass


# -- a chunked body is charged the bytes it carried ---------------------------------------------
def test_a_chunked_upload_spends_the_write_budget_by_the_bytes_it_sends(tmp_path, tmp_path_factory):
    """Six 886 kB batches sent chunked were accepted in 8 s: the budget read Content-Length,
    which a chunked body has not, and charged each 1 kB."""
    app = bm25_app(
        tmp_path, tmp_path_factory, rate_limit_write="50 per minute", max_body_bytes=100_000
    )
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    bo, bo_fid, bo_blocks = user(c, app, "Bo")
    batch = json.dumps({"events": [{"text": "y" * 16_000}, {"text": "z" * 16_000}]}).encode()
    assert 32_000 < len(batch) < 33_000
    served = Served(app)
    try:
        feed = f"/floors/{fid}/blocks/{blocks['feed']}/events/batch"
        answers = []
        for _ in range(2):
            s = served.connect()
            chunked_post(s, feed, ann, batch)
            answers.append(read_answer(s))
        assert answers[0][0] == 200, answers[0]
        status, body = answers[1]  # 33 + 33 kB: past 50 kB in the minute
        assert status == 429 and body["error"]["code"] == "rate_limited", body
        assert "33 kB" in body["error"]["message"], body
        listed = c.get(f"/floors/{fid}/events?limit=100", headers=ann).get_json()["events"]
        assert len(listed) == 2  # the refused batch stored nothing

        # A chunked body over max_body_bytes is a 413, and stores nothing.
        before = all_rows(app)
        s = served.connect()
        big = json.dumps({"events": [{"text": "w" * 19_000} for _ in range(8)]}).encode()
        chunked_post(s, f"/floors/{bo_fid}/blocks/{bo_blocks['feed']}/events/batch", bo, big)
        status, body = read_answer(s)
        assert status == 413, body
        assert all_rows(app) == before
    finally:
        served.close()


def test_writers_sending_at_once_spend_one_budget(tmp_path, tmp_path_factory, monkeypatch):
    """Six 886 kB batches sent at once (chunked, so each took a while to read) had all passed
    the budget's test before any of them spent it: four got in under a budget of two. The
    test is held open here (a slow count) so that every writer reaches it together."""
    app = bm25_app(
        tmp_path, tmp_path_factory, rate_limit_write="70 per minute", max_body_bytes=100_000
    )
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    strategy = app.extensions["memkit"]["limiter"].limiter
    test = strategy.test

    def slow_test(*args, **kwargs):
        time.sleep(0.05)
        return test(*args, **kwargs)

    monkeypatch.setattr(strategy, "test", slow_test)
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events/batch"
    statuses, start = [], threading.Barrier(6)

    def write(n):
        batch = {"events": [{"text": f"{n} " + "y" * 15_000}, {"text": f"{n} " + "z" * 15_000}]}
        start.wait()
        statuses.append(app.test_client().post(feed, json=batch, headers=ann).status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 200, 429, 429, 429, 429]  # 31 kB each: two fit in 70
    listed = c.get(f"/floors/{fid}/events?limit=100", headers=ann).get_json()["events"]
    assert len(listed) == 4


def test_a_write_past_the_budget_by_its_stated_length_is_refused_unread(tmp_path, tmp_path_factory):
    """A body whose Content-Length alone passes what is left of the budget is refused
    before it is read (the flood's refused batches were each read, 886 kB, for a 429)."""
    app = bm25_app(
        tmp_path, tmp_path_factory, rate_limit_write="50 per minute", max_body_bytes=100_000
    )
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events/batch"
    batch = json.dumps({"events": [{"text": "y" * 15_000}, {"text": "z" * 15_000}]}).encode()
    assert c.post(feed, data=batch, content_type="application/json", headers=ann).status_code == 200

    class Unread(io.BytesIO):
        reads = 0

        def read(self, *args):
            Unread.reads += 1
            return super().read(*args)

        def readinto(self, buffer):
            Unread.reads += 1
            return super().readinto(buffer)

    answer = c.post(
        feed,
        input_stream=Unread(batch),
        content_type="application/json",
        headers={**ann, "Content-Length": str(len(batch))},
    )
    assert answer.status_code == 429, answer.get_json()
    assert "31 kB" in error_of(answer)["message"]
    assert Unread.reads == 0


# -- behind a proxy, clients are counted by the address it forwards -----------------------------
def test_behind_a_trusted_proxy_each_client_is_counted_by_its_own_address(
    tmp_path, tmp_path_factory
):
    """Behind docs/DEPLOYMENT.md's proxy every request came from its address: 25 reset codes for
    made-up addresses refused a real user's own for a minute. With ``trusted_proxies`` the
    proxy's X-Forwarded-For is the client's address."""
    app = bm25_app(tmp_path, tmp_path_factory, trusted_proxies=1)  # send_code: 25 per address
    c = app.test_client()
    signed_up(c, app)
    proxy = from_address("127.0.0.1")  # every request comes from the proxy

    def reset_code(email, client):
        return c.post(
            SEND,
            json={"mode": "reset_password", "email": email},
            headers={"X-Forwarded-For": client},
            **proxy,
        ).status_code

    flood = [reset_code(f"made.up{i}@example.com", "203.0.113.7") for i in range(26)]
    assert flood == [200] * 25 + [429]
    assert reset_code("ann@example.com", "198.51.100.9") == 200  # the user's own request

    def sign_in(i, client):  # a new account each time: only the address's count can refuse
        return c.post(
            "/auth-service/signin/email",
            json={"email": f"nobody{i}@example.com", "password": "wrong password"},
            headers={"X-Forwarded-For": client},
            **proxy,
        ).status_code

    assert [sign_in(i, "203.0.113.7") for i in range(101)] == [401] * 100 + [429]
    assert sign_in(101, "198.51.100.9") == 401
    # Only the address the proxy appended is taken: what a client put before it is not.
    assert sign_in(102, "198.51.100.9, 203.0.113.7") == 429


def test_without_a_trusted_proxy_a_forged_forwarded_address_changes_nothing(
    tmp_path, tmp_path_factory
):
    app = bm25_app(tmp_path, tmp_path_factory)  # trusted_proxies: 0
    assert app.extensions["memkit"]["settings"].trusted_proxies == 0
    c = app.test_client()
    statuses = [
        c.post(
            SEND,
            json={"mode": "reset_password", "email": f"made.up{i}@example.com"},
            headers={"X-Forwarded-For": f"198.51.{i}.9"},  # a new "address" each time
            **from_address("10.3.3.3"),
        ).status_code
        for i in range(26)
    ]
    assert statuses == [200] * 25 + [429]


# -- trickling clients cannot hold `memkit serve` -----------------------------------------------
def _closed(s: socket.socket) -> bool:
    """Has the server closed ``s`` (without waiting)?"""
    try:
        if not select.select([s], [], [], 0)[0]:
            return False
        return s.recv(1) == b""
    except OSError:
        return True


def test_a_request_line_and_headers_trickled_byte_by_byte_are_dropped_at_a_deadline(
    tmp_path, tmp_path_factory
):
    """A byte every few seconds kept a connection (and its thread) for ever: the timeout
    was per read. The request line and headers now have a deadline of their own."""
    app = bm25_app(tmp_path, tmp_path_factory)
    served = Served(app, handler={"timeout": 1.0, "header_deadline": 2.0})
    try:
        s = served.connect()
        s.sendall(b"GET /openapi.json HTTP/1.1\r\nX-Pad: ")
        start = time.monotonic()
        while not _closed(s) and time.monotonic() - start < 8:
            try:
                s.sendall(b"a")  # within the per-read timeout, every time
            except OSError:
                break
            time.sleep(0.3)
        assert time.monotonic() - start < 6  # dropped soon after its deadline, not held
    finally:
        served.close()


def test_trickling_connections_from_several_networks_cannot_keep_an_honest_client_out(
    tmp_path, tmp_path_factory
):
    """64 connections, 16 from each of four networks, each trickling its headers, took every
    thread of `memkit serve`: an honest client waited in the listen queue for as long as
    they trickled. A new connection to a full server now takes the place of one still
    waiting for its client, from the network that holds the most."""
    app = bm25_app(tmp_path, tmp_path_factory)
    served = Served(app)  # the real bounds: 64 connections, 16 per network, 5 s per read
    stop = threading.Event()
    tricklers = [served.connect(f"127.0.{n}.{h}") for n in range(1, 5) for h in range(2, 18)]
    try:
        for s in tricklers:
            s.sendall(b"GET /openapi.json HTTP/1.1\r\nX-Pad: ")

        def trickle():
            while not stop.wait(1.0):
                for s in tricklers:
                    try:
                        s.sendall(b"a")
                    except OSError:
                        pass

        threading.Thread(target=trickle, daemon=True).start()
        deadline = time.monotonic() + 10
        while sum(served.server._open.values()) < 64 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(served.server._open.values()) == 64  # the server is full
        honest = served.connect("127.0.9.2", timeout=5)
        honest.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, body = read_answer(honest)  # before: no answer (a timeout here)
        assert status == 200 and body["openapi"].startswith("3.")
        # The honest client's own network, and any other, can still connect after it.
        status, _ = _get(served, "127.0.10.2")
        assert status == 200
    finally:
        stop.set()
        for s in tricklers:
            s.close()
        served.close()


def _get(served: Served, source: str) -> tuple[int, dict | None]:
    s = served.connect(source, timeout=5)
    s.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return read_answer(s)


# -- questions are limited per user -------------------------------------------------------------
def _ask(c, headers, uid, floor, query="what did I post?", **extra):
    return c.post(
        Q, headers=headers, json={"user_id": uid, "query": query, "floor_ids": [floor]}, **extra
    )


def _uid(c, headers) -> str:
    return c.get("/auth-service/profile", headers=headers).get_json()["profile"]["user_id"]


def test_questions_are_limited_per_user_and_another_users_are_still_answered(
    tmp_path, tmp_path_factory
):
    """One account asking on four connections slowed another user 3.6x: questions had no
    limit."""
    app = bm25_app(tmp_path, tmp_path_factory, rate_limit_query="3 per minute")
    c = app.test_client()
    ann, ann_floor, _ = user(c, app, "Ann")
    bo, bo_floor, _ = user(c, app, "Bo")
    ann_id, bo_id = _uid(c, ann), _uid(c, bo)
    assert [_ask(c, ann, ann_id, ann_floor).status_code for _ in range(3)] == [200] * 3
    r = _ask(c, ann, ann_id, ann_floor)
    assert r.status_code == 429 and error_of(r)["code"] == "rate_limited", r.get_json()
    assert 0 < int(r.headers["Retry-After"]) <= 60
    with app.extensions["memkit"]["engine"].connect() as conn:
        turns = conn.execute(
            sa.select(sa.func.count()).where(conversation_turns.c.user_id == ann_id)
        ).scalar()
    assert turns == 3  # the refused question recorded no turn
    assert _ask(c, bo, bo_id, bo_floor).status_code == 200  # another user's own count


def test_a_networks_questions_are_limited_times_the_address_factor(tmp_path, tmp_path_factory):
    app = bm25_app(
        tmp_path, tmp_path_factory, rate_limit_query="2 per minute", rate_limit_address_factor=2
    )
    c = app.test_client()
    people = [user(c, app, name) for name in ("Ann", "Bo", "Cy")]
    ids = [_uid(c, h) for h, _, _ in people]
    asked = [
        _ask(c, h, uid, floor, **from_address(f"10.4.4.{i}")).status_code
        for i, ((h, floor, _), uid) in enumerate(zip(people, ids, strict=True))
        for _ in range(2)
    ]
    assert asked == [200] * 4 + [429] * 2  # the network's 4 a minute: Cy is held by it
    h, floor, _ = people[2]
    assert _ask(c, h, ids[2], floor, **from_address("10.4.5.1")).status_code == 200


def test_at_most_two_questions_of_one_user_are_answered_at_once(tmp_path, tmp_path_factory):
    app = bm25_app(tmp_path, tmp_path_factory, queries_in_flight=2)
    c = app.test_client()
    ann, ann_floor, _ = user(c, app, "Ann")
    bo, bo_floor, _ = user(c, app, "Bo")
    ann_id, bo_id = _uid(c, ann), _uid(c, bo)
    memory = app.extensions["memkit"]["memory"]
    real, release, waiting = memory.answer, threading.Event(), threading.Semaphore(0)

    def held_answer(req, prepared):  # Ann's answers wait until released: they stay in flight
        if req.user_id == ann_id:
            waiting.release()
            release.wait(30)
        return real(req, prepared)

    memory.answer = held_answer
    answers: list = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(_ask(app.test_client(), ann, ann_id, ann_floor))
        )
        for _ in range(2)
    ]
    try:
        for t in threads:
            t.start()
        assert waiting.acquire(timeout=30) and waiting.acquire(timeout=30)  # two in flight
        r = _ask(c, ann, ann_id, ann_floor)
        assert r.status_code == 429 and error_of(r)["code"] == "rate_limited", r.get_json()
        assert int(r.headers["Retry-After"]) >= 1
        assert _ask(c, bo, bo_id, bo_floor).status_code == 200  # another user is answered
    finally:
        release.set()
        for t in threads:
            t.join(30)
    assert [a.status_code for a in answers] == [200, 200]
    memory.answer = real
    assert _ask(c, ann, ann_id, ann_floor).status_code == 200  # her slots are free again


def test_under_a_thread_per_connection_refusals_and_code_requests_wait(tmp_path, tmp_path_factory):
    """Under `memkit serve` (refused_delay > 0) every 429, every refusal of an account
    operation and every code request's answer waits refused_delay: a spread flood of them
    (32 threads, a new network each request) got 1,759 answers in 25 s and slowed another
    user 13-22x; waiting, each connection sends one a second. Other answers do not wait."""
    app = bm25_app(tmp_path, tmp_path_factory, refused_delay=0.3, **NO_LIMITS)
    c = app.test_client()
    token = signed_up(c, app)

    def took(method, path, **kwargs) -> tuple[int, float]:
        t = time.monotonic()
        r = getattr(c, method)(path, **kwargs)
        return r.status_code, time.monotonic() - t

    status, seconds = took(
        "post", "/auth-service/signin/email", json={"email": "x", "password": PW}
    )
    assert status == 400 and seconds >= 0.3
    status, seconds = took("post", SEND, json={"mode": "reset_password", "email": "n@example.com"})
    assert status == 200 and seconds >= 0.3  # the same wait whether or not the account exists
    status, seconds = took("get", "/auth-service/profile", headers=bearer(token))
    assert status == 200 and seconds < 0.3
    status, seconds = took("get", "/floors/f_nothing", headers=bearer(token))
    assert status == 404 and seconds < 0.3  # not an account operation, not a 429


def test_sign_ups_keep_their_argon2_slot_three_times_a_hashs_time(monkeypatch):
    """A spread flood of sign-ups took a core with argon2 (another user's query 2.24x): the
    sign-up slot now stays held three times each hash's own time, a quarter of a core."""

    class Slow:
        def hash(self, password):
            time.sleep(0.05)
            return "hashed"

    hasher = accounts._Argon2(Slow())
    t = time.monotonic()
    hasher.hash("pw", "sign_up")
    assert time.monotonic() - t >= 0.2
    t = time.monotonic()
    hasher.hash("pw", "other")  # a password change's hash is not held back
    assert time.monotonic() - t < 0.15
