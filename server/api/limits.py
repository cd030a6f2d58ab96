"""Rate limits in two layers: per account, and per client address (looser).

The first layer counts per account: what the request names (the e-mail address or mobile
number of a sign-in, a code check or a sign-up; the bearer token's user for the changes of
address), so one account's failures cost only that account: another user behind the same
address (an office, a phone network's NAT, an attacker) is not locked out. An address is
counted as the account it names, however it is spelt (``identity``): "Ann@EXAMPLE.com",
"ann@ｅｘａｍｐｌｅ.com" and "ann@example.com" are one account, and so are "+447911123457"
and "+44 7911 123457 ext. 5". A request whose account is unknown (no usable field, a bad
token) counts against its address in this layer. The second layer counts per client
address at ``rate_limit_address_factor`` times the account's limit, bounding one address
that tries many accounts; an address is counted as its network (``network``: an IPv4 /24,
an IPv6 /64), so taking new addresses of one network does not reset the count. Either
answers 429 with Retry-After. Limits are named after settings: ``rate_limit_<name>`` (per
account).

``limits`` counts every request, before it runs. :class:`FailedCredentials` counts only
wrong passwords and application secrets, for operations an honest caller repeats at will
(an application signs every query with its secret), and refuses past the limit before the
argon2 check runs, so a flood of wrong secrets costs no argon2 work. :class:`Questions`
counts questions per asker and network, and bounds how many of one asker's run at once.
"""

from __future__ import annotations

import io
import ipaddress
import json
import math
import re
import threading
import time
import unicodedata
from collections import Counter
from contextlib import contextmanager

from flask import current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import parse_many
from limits.storage import MemoryStorage

from server.errors import ApiError, body
from server.models import MAX_EMAIL, MAX_MOBILE
from server.services.accounts import (
    BAD_APP_CREDENTIALS,
    bearer_token,
    normalize_email,
    normalize_mobile,
)

ADDRESS_FIELDS = {
    "email": "email",
    "new_email_id": "email",
    "mobile": "mobile",
    "new_mobile": "mobile",
}
# The longest address of each kind a request may name (the models refuse longer ones): a
# longer one is not normalised here, where its cost would come before any limit.
LONGEST = {"email": MAX_EMAIL, "mobile": MAX_MOBILE}


STRATEGY = "moving-window"  # at most N in any window's length, not 2N across a window's edge


class SerialMemoryStorage(MemoryStorage):
    """limits' in-process storage with every operation under one lock (``memory://`` is
    served by it: ``storage_uri``).

    limits' own takes a lock per key but reads and drops keys outside it: under concurrent
    first hits on a key a count is lost (measured: 10 of a burst of 24 passed a limit of 5,
    in CI and in ``tests/test_attacks_accounts.py``'s burst of sign-ups); its expiry timer
    rewrites a key's moving window while another thread adds to it."""

    STORAGE_SCHEME = ["memkit-memory"]

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options):
        self.serial = threading.RLock()
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)

    def __getstate__(self):
        state = super().__getstate__()
        del state["serial"]
        return state

    def __setstate__(self, state):
        self.serial = threading.RLock()
        super().__setstate__(state)


def _one_at_a_time(method):
    def run(self, *args, **kwargs):
        with self.serial:
            return method(self, *args, **kwargs)

    return run


for _name in (
    "incr",
    "decr",
    "get",
    "clear",
    "reset",
    "acquire_entry",
    "get_moving_window",
    "acquire_sliding_window_entry",
    "get_sliding_window",
    "clear_sliding_window",
    "_MemoryStorage__expire_events",  # the expiry timer's pass (a name-mangled method)
):
    setattr(SerialMemoryStorage, _name, _one_at_a_time(getattr(MemoryStorage, _name)))


def storage_uri(uri: str) -> str:
    """The limiter's storage: ``memory://`` (one process) as :class:`SerialMemoryStorage`;
    any other (``redis://``, ``memcached://``, ...) as limits serves it."""
    return "memkit-" + uri if uri.startswith("memory://") else uri


def looser(limit: str, factor: int) -> str:
    """``"5 per minute;30 per hour"`` times ``factor``: the counts, not the periods."""
    return re.sub(
        r"(\d+)(\s*(?:per|/))", lambda mo: f"{int(mo.group(1)) * factor}{mo.group(2)}", limit
    )


def identity(kind: str, value: str, region: str = "") -> str:
    """The account an e-mail address or mobile number names, as the limits count it: an
    address in Unicode compatibility form (NFKC: full-width letters are the plain ones),
    normalised as accounts are and in lower case; a number in E.164 (an extension is not
    part of it). A value that is neither is counted as its NFKC, case-folded text; one
    longer than an address may be (``LONGEST``, which the request is refused for) as its
    first characters, so that what this costs is bounded."""
    text = unicodedata.normalize("NFKC", value[: LONGEST[kind] + 1]).strip()
    try:
        return f"{kind}:" + (
            normalize_email(text) if kind == "email" else normalize_mobile(text, region)
        )
    except ApiError:
        return f"{kind}:{text.casefold()}"


def network(address: str) -> str:
    """The network a client address is counted as: an IPv4 address's /24, an IPv6 address's
    /64 (an IPv4-mapped one's as IPv4), so that new addresses of one network (an IPv6 /64 is
    2^64 of them) add to one count; anything else as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return str(ipaddress.IPv4Network((ip, 24), strict=False))
    return str(ipaddress.IPv6Network((ip, 64), strict=False))


def client_network() -> str:
    """The request's client address as counted per address (``network``)."""
    return network(get_remote_address())


def _token_user() -> str | None:
    try:
        token = bearer_token(request.headers.get("Authorization"))
        return (
            current_app.extensions["memkit"]["accounts"].authenticate(f"Bearer {token}")
            if token
            else None
        )
    except ApiError:
        return None


def _account(fields) -> str:
    """Who a request is about: the bearer token's user (``"token"``), or the first address
    field of the body; ``fields`` may be a function of the body giving either."""
    try:
        data = request.get_json(silent=True) if request.is_json else request.form.to_dict()
    except (
        ApiError
    ):  # a body the strict JSON reader refuses: the request fails with that 400 anyway
        data = None
    data = data if isinstance(data, dict) else {}
    if callable(fields):
        fields = fields(data)
    if fields == "token":
        user = _token_user()
        if user:
            return f"user:{user}"
    else:
        region = current_app.extensions["memkit"]["settings"].phone_region
        for name in fields:
            value = data.get(name)
            if isinstance(value, str) and len(value) > LONGEST[ADDRESS_FIELDS[name]]:
                break  # refused for its length: counted against its network, never read
            if isinstance(value, str) and value.strip():
                return identity(ADDRESS_FIELDS[name], value, region)
    return f"address:{client_network()}"


def make_limits(limiter: Limiter, settings):
    """``limits(name, account=fields or "token")``: a decorator applying both layers."""

    def limits(name: str, account):
        value = getattr(settings, f"rate_limit_{name}")

        def wrap(view):
            per_account = limiter.shared_limit(
                value, scope=f"{name}/account", key_func=lambda: _account(account)
            )
            per_address = limiter.shared_limit(
                looser(value, settings.rate_limit_address_factor), scope=f"{name}/address"
            )
            return per_address(per_account(view))

        return wrap

    return limits


def layered(limit: str, factor: int, kind: str, who: str, address: str) -> list[tuple]:
    """(limit item, storage key) of the two layers a count of ``kind`` adds to: ``who``'s
    under ``limit``, and the client network's under ``limit`` times ``factor``."""
    return [(item, f"memkit/{kind}/account/{who[:200]}") for item in parse_many(limit)] + [
        (item, f"memkit/{kind}/address/{network(address)}")
        for item in parse_many(looser(limit, factor))
    ]


def seconds_left(stats) -> int:
    """Seconds until a count's window (its ``get_window_stats``) lets one more in (at least
    1: Retry-After)."""
    return max(1, math.ceil(stats.reset_time - time.time()))


_WRITE_BUDGET = threading.Lock()  # a budget's test and its spending at once (see below)


def spend_write_budget(user_id: str) -> None:
    """A write (a post, a batch, an edit) spends the writer's budget: its body's kilobytes
    against ``rate_limit_write`` per user and, times ``rate_limit_address_factor``, per client
    network. Past either, 429 with Retry-After before anything is parsed or stored (encoding
    a megabyte of posts takes tens of core-seconds).

    The bytes charged are those read, not what a header says (a chunked body, which has no
    Content-Length, was charged 1 kB whatever it carried; ``ChunkedBody`` now gives it one).
    A body whose stated length would already pass the limit is refused before it is read;
    otherwise it is read whole here, at most ``max_body_bytes`` of it (past that, 413), and
    kept for the request's parse. The test and the spending hold one lock: six writers
    sending at once had all passed the test before any spent, and four 886 kB batches got in
    under a budget of two."""
    ext = current_app.extensions["memkit"]
    settings, strategy = ext["settings"], ext["limiter"].limiter
    limit = settings.rate_limit_write
    counts = layered(
        limit, settings.rate_limit_address_factor, "write", f"user:{user_id}", get_remote_address()
    )

    def refuse_past(kilobytes: int) -> None:
        over = [c for c in counts if not strategy.test(*c, cost=kilobytes)]
        if over:
            raise ApiError(
                f"too much written in too short a time: this request's {kilobytes:,} kB would "
                f"pass the limit of {limit} (kB of request bodies); try again later",
                code="rate_limited",
                status=429,
                headers={
                    "Retry-After": str(
                        max(seconds_left(strategy.get_window_stats(*c)) for c in over)
                    )
                },
            )

    refuse_past(max(1, math.ceil((request.content_length or 0) / 1000)))
    kilobytes = max(1, math.ceil(len(request.get_data(cache=True)) / 1000))
    with _WRITE_BUDGET:
        refuse_past(kilobytes)
        for item, key in counts:
            strategy.hit(item, key, cost=kilobytes)


class Questions:
    """Questions counted per asker (a signed-in user; an application's user, counted apart
    from the same user's own questions) and per client network: ``rate_limit_query``, per
    network times ``rate_limit_address_factor``; and at most ``queries_in_flight`` of one
    asker's answered at once (in this process). A question costs the cores a write's
    encoding does, so one account asking on many connections would otherwise slow every
    other user's. ``admitted(who)`` wraps a question: past either bound, 429 with Retry-After
    before anything is read; a refused question is not counted."""

    def __init__(self, limiter: Limiter, settings):
        self.limiter, self.settings = limiter, settings
        self._in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def admitted(self, who: str):
        strategy, settings = self.limiter.limiter, self.settings
        most = settings.queries_in_flight
        counts = layered(
            settings.rate_limit_query,
            settings.rate_limit_address_factor,
            "query",
            who,
            get_remote_address(),
        )
        with self._lock:  # the test and the count at once: concurrent questions cannot slip past
            if most and self._in_flight[who] >= most:
                raise ApiError(
                    f"at most {most} questions of one user are answered at once; wait for an "
                    "answer before asking again",
                    code="rate_limited",
                    status=429,
                    headers={"Retry-After": "1"},
                )
            over = [(item, key) for item, key in counts if not strategy.test(item, key)]
            if over:
                wait = max(seconds_left(strategy.get_window_stats(*c)) for c in over)
                raise ApiError(
                    f"too many questions in too short a time (the limit is "
                    f"{settings.rate_limit_query}); try again later",
                    code="rate_limited",
                    status=429,
                    headers={"Retry-After": str(wait)},
                )
            for item, key in counts:
                strategy.hit(item, key)
            self._in_flight[who] += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[who] -= 1
                if not self._in_flight[who]:
                    del self._in_flight[who]


class FailedCredentials:
    """Wrong credentials counted per identity (a user, an application id) and per client
    address, in the limiter's storage (so across processes when it is shared).

    ``check(name, who)`` wraps the one call that checks a credential: if either count has
    reached ``rate_limit_<name>`` (per address: times ``rate_limit_address_factor``) it
    answers 429 with Retry-After without calling; a call that fails with
    ``bad_credentials`` or ``bad_app_credentials`` is counted. A check still running counts
    as a failure until it ends, so concurrent tries cannot all pass a count taken before
    any of them failed (within a process)."""

    FAILURES = ("bad_credentials", "bad_app_credentials")

    def __init__(self, limiter: Limiter, settings):
        self.limiter, self.settings = limiter, settings
        self._running: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _counts(self, name: str, who: str, address: str) -> list[tuple]:
        """(limit, storage key, running key) of each count a failure of ``name`` by ``who``
        from ``address`` adds to."""
        limit = getattr(self.settings, f"rate_limit_{name}")
        factor = self.settings.rate_limit_address_factor
        keys = layered(limit, factor, f"failed/{name}", who, address)
        return [(item, key, f"{key}/{item}") for item, key in keys]

    def _wait(self, counts: list[tuple]) -> int | None:
        """Seconds until every count lets one more failure in; None if they all do now
        (the caller holds the lock)."""
        strategy = self.limiter.limiter
        waits = [
            seconds_left(stats)
            for item, key, busy in counts
            if (stats := strategy.get_window_stats(item, key)).remaining - self._running[busy] <= 0
        ]
        return max(waits) if waits else None

    def failed(self, name: str, who: str, address: str) -> None:
        """Count one failure of ``name`` by ``who`` from ``address`` (checked elsewhere)."""
        for item, key, _ in self._counts(name, who, address):
            self.limiter.limiter.hit(item, key)

    def refused(self, name: str, who: str, address: str) -> int | None:
        """Would ``check`` refuse this now? The seconds to wait, or None (for the early
        refusal of :class:`RefuseUnchecked`)."""
        counts = self._counts(name, who, address)
        with self._lock:
            return self._wait(counts)

    @contextmanager
    def check(self, name: str, who: str):
        counts = self._counts(name, who, get_remote_address())
        with self._lock:
            wait = self._wait(counts)
            if wait is not None:
                raise ApiError(
                    "too many failed attempts; try again later",
                    code="rate_limited",
                    status=429,
                    headers={"Retry-After": str(wait)},
                )
            self._running.update(busy for _, _, busy in counts)
        failed = False
        try:
            yield
        except ApiError as exc:
            failed = exc.code in self.FAILURES
            raise
        finally:
            with self._lock:
                for item, key, busy in counts:
                    if failed:
                        self.limiter.limiter.hit(item, key)
                    self._running[busy] -= 1
                    if not self._running[busy]:
                        del self._running[busy]


class ChunkedBody:
    """WSGI middleware: a body sent without a length (``Transfer-Encoding: chunked``) is read
    here, at most ``max_bytes`` of it, and handed on as a body of that length; one longer is
    answered 413, as a body whose Content-Length is too large is. Without this, what counts
    a body by its length (the write budget) saw none, and werkzeug cut a body past
    ``max_body_bytes`` at that length without a word (a 400 for broken JSON, not a 413)."""

    BODY = json.dumps(body("too_large", "request body too large")).encode()

    def __init__(self, wsgi_app, max_bytes: int, auth_bytes: int | None = None) -> None:
        self.wsgi_app, self.max_bytes = wsgi_app, max_bytes
        self.auth_bytes = max_bytes if auth_bytes is None else min(auth_bytes, max_bytes)

    def bound(self, environ) -> int:
        """The most bytes this request's body may have: an account operation's (sign-up,
        sign-in, codes: anyone may send them, with no account) ``auth_bytes``, which is far
        more than any of their fields can hold, so a megabyte of them is refused unread."""
        path = environ.get("PATH_INFO", "")
        return self.auth_bytes if path.startswith("/auth-service/") else self.max_bytes

    def __call__(self, environ, start_response):
        bound = self.bound(environ)
        if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0  # Flask answers a malformed length itself
            if length > bound:
                return self._too_large(start_response)
            return self.wsgi_app(environ, start_response)
        stream, parts, size = environ["wsgi.input"], [], 0
        while size <= bound:
            part = stream.read(min(1 << 16, bound + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
        if size > bound:
            return self._too_large(start_response)
        environ["wsgi.input"] = io.BytesIO(b"".join(parts))
        environ["CONTENT_LENGTH"] = str(size)
        environ.pop("HTTP_TRANSFER_ENCODING")
        environ.pop("wsgi.input_terminated", None)
        return self.wsgi_app(environ, start_response)

    def _too_large(self, start_response):
        start_response(
            "413 REQUEST ENTITY TOO LARGE",
            [("Content-Type", "application/json"), ("Content-Length", str(len(self.BODY)))],
        )
        return [self.BODY]


class Tarpit:
    """WSGI middleware for servers with a thread per connection (``memkit serve``): every
    429, an account operation's refusal (any 4xx of an ``/auth-service/`` request) and every
    answer to a request for a code are sent ``delay`` seconds late (less what the request
    took). Anyone may send account operations with no account, from as many networks as
    they hold, so no count refuses a spread flood of them, and a refused request costs
    Flask's work again at once if its client may send the next one at once; waiting for
    each answer slows such a flood to a request a second per connection, while an honest
    user waits a second once. 0 (under a pool of threads, where a waiting answer would hold
    a thread): off."""

    CODES = "/auth-service/send/validation/code"

    def __init__(self, wsgi_app, delay: float) -> None:
        self.wsgi_app, self.delay = wsgi_app, delay

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if self.delay <= 0:
            return self.wsgi_app(environ, start_response)
        account = path.startswith("/auth-service/")
        began = time.monotonic()
        seen = {}

        def noted(status, headers, exc_info=None):
            seen["status"] = status
            return start_response(status, headers, exc_info)

        out = self.wsgi_app(environ, noted)
        status = seen.get("status", "")
        if status[:3] == "429" or account and (path == self.CODES or status[:1] == "4"):
            time.sleep(max(0.0, self.delay - (time.monotonic() - began)))
        return out


class RefuseUnchecked:
    """WSGI middleware: a request signed with an application secret whose application id or
    client address has used up its failures is answered 429 here, before Flask parses it,
    routes it or logs it: answering a flood of them costs the process as little as it can,
    which is what keeps other users' requests quick while it lasts (SECURITY.md).
    Flask's own check (``FailedCredentials.check``) refuses the same requests otherwise.

    ``refused_delay`` seconds pass before such a 429 is sent (a tarpit: a flood of requests
    each waiting for its answer slows to a trickle). Only for servers with a thread per
    connection, such as ``memkit serve``'s: there a waiting answer holds nothing anyone else
    needs, while in a pool of threads (gunicorn) it would hold a thread, so it is 0 there."""

    BODY = json.dumps(body("rate_limited", "too many failed attempts; try again later")).encode()
    UNKNOWN = json.dumps(body("bad_app_credentials", BAD_APP_CREDENTIALS)).encode()
    # the operations an application signs with its secret (and no bearer token)
    SIGNED = {"/agent/memory/query", "/auth-service/external/register"}

    def __init__(
        self,
        wsgi_app,
        failed: FailedCredentials,
        known_app,
        refused_delay: float = 0.0,
        app_registered=None,
    ):
        self.wsgi_app, self.failed, self.known_app, self.refused_delay = (
            wsgi_app,
            failed,
            known_app,
            refused_delay,
        )
        self.app_registered = app_registered

    def __call__(self, environ, start_response):
        app_id = environ.get("HTTP_X_APP_ID")
        if app_id and not environ.get("HTTP_AUTHORIZATION"):
            address = environ.get("REMOTE_ADDR") or "127.0.0.1"
            wait = self.failed.refused("app_secret", app_id.strip(), address)
            if wait is not None and not self.known_app(app_id, environ.get("HTTP_X_APP_SECRET")):
                return self._refuse(start_response, "429 TOO MANY REQUESTS", self.BODY, wait)
            # An id no application has (a flood of made-up ids, each from a new network, that
            # no count refuses) is answered here as Flask would answer it, 401, after the same
            # wait as a refusal: it costs one indexed read, not a request through Flask.
            secret = environ.get("HTTP_X_APP_SECRET")
            if (
                self.app_registered is not None
                and environ.get("REQUEST_METHOD") == "POST"
                and environ.get("PATH_INFO") in self.SIGNED
                and secret
                and not self.known_app(app_id, secret)  # an application known: no read
                and not self.app_registered(app_id.strip())
            ):
                self.failed.failed("app_secret", app_id.strip(), address)  # counted as Flask would
                return self._refuse(start_response, "401 UNAUTHORIZED", self.UNKNOWN)
        return self.wsgi_app(environ, start_response)

    def _refuse(self, start_response, status: str, body: bytes, wait: int | None = None):
        time.sleep(self.refused_delay if wait is None else min(self.refused_delay, wait))
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if wait is not None:
            headers.append(("Retry-After", str(wait)))
        else:
            headers.append(("WWW-Authenticate", "Bearer"))
        start_response(status, headers)
        return [body]
