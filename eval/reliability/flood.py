"""A flood of requests, and what it does to another user.

    # gunicorn (2 workers x 4 threads), SQLite: wrong application secrets from one address
    .venv/bin/python eval/reliability/flood.py
    # `memkit serve` (a thread per request)
    .venv/bin/python eval/reliability/flood.py --server serve
    # every request a new unknown application id from a new network
    .venv/bin/python eval/reliability/flood.py --server serve --spread
    # the other floods (--attack): see ATTACKS below
    .venv/bin/python eval/reliability/flood.py --server serve --attack long-email --spread

Bo signs up, posts on his floor, then queries it and reads his profile back to back, alone
for ``--baseline-seconds``; then ``--threads`` client threads from another loopback address
(127.0.0.2) send ``POST /agent/memory/query`` with ``X-App-Id: app_nope`` and a wrong
``X-App-Secret``, no token, back to back for ``--seconds``, while Bo goes on. Needs no
account. With ``--spread`` every request names a new made-up application id and comes
from a new client network (127.N.M.1, a /24 of its own), so no count per id or per network
can refuse it. Bo also signs in with
his password every 4 s (within the sign-in limit). Prints the flood's answers by status and
Bo's latencies alone and during the flood (median, p95, and the median's ratio), and the
server's resident memory before and after. SECURITY.md states the figures.

``--attack`` names another flood (ATTACKS): sign-ins naming a 990 kB e-mail address;
sign-ups of new addresses (each an argon2 hash; Bo then also changes his password every
4 s, the check that shared the sign-ups' argon2 slot); reset-code requests for made-up
addresses; Eve's own questions, back to back (use ``--threads 4``); Eve's 886 kB batches
sent chunked, with no Content-Length (``--threads 6``), or with it (``batches``: what the
write budget lets through either way); and 64 connections that trickle a
header byte every 3 s from 4 networks (``--threads 64``). Eve is a second signed-up user.

The two cores are shared by the server, Bo and the flood's client threads (all in this
machine), so some slowing is the clients' own CPU, which no server-side limit removes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from harness import BACKENDS, Client, Service, sign_up, table


class Serve(Service):
    """``memkit serve`` (Werkzeug, a thread per request) instead of gunicorn. Run as
    ``python -m memkit.cli`` from the checkout (as gunicorn is), so it serves this
    checkout's code even when the interpreter's venv has another tree installed editable
    (its ``memkit`` script would import that tree's)."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "memkit.cli", "serve", "--port", str(self.port)]


_spread = iter(range(10**9))  # the spread flood's requests, numbered (next() is atomic)
LONG_EMAIL = json.dumps({"email": "a" * 990_000 + "@example.com", "password": "whatever 1"})
LINE = "Line {i} of batch {n}, a long one about the harbour and its boats. " * 13  # 880 chars


def attack(kind: str, n: int, eve) -> tuple[str, str, str | bytes, dict]:
    """The ``n``-th request of a flood: (method, path, body, headers)."""
    json_headers = {"Content-Type": "application/json"}
    mine = {**json_headers, "Authorization": f"Bearer {eve.token}"} if eve else json_headers
    if kind == "app-secret":
        return (
            "POST",
            "/agent/memory/query",
            json.dumps({"user_id": "u_nobody", "query": "anything", "floor_ids": ["f_nothing"]}),
            {**json_headers, "X-App-Id": f"app_nope{n}", "X-App-Secret": "a wrong secret"},
        )
    if kind == "long-email":
        return "POST", "/auth-service/signin/email", LONG_EMAIL, json_headers
    if kind == "sign-up":
        body = {"name": f"Eve {n}", "email": f"eve{n}@example.com", "password": "eve pw 12345"}
        return "POST", "/auth-service/signup", json.dumps(body), json_headers
    if kind == "reset":
        body = {"mode": "reset_password", "email": f"nobody{n}@example.com"}
        return "POST", "/auth-service/send/validation/code", json.dumps(body), json_headers
    if kind == "query":
        body = {"user_id": eve.user_id, "query": f"what about boat {n}?", "floor_ids": [eve.floor]}
        return "POST", "/agent/memory/query", json.dumps(body), mine
    if kind in ("chunked", "batches"):
        # about 886 kB of new text each time (nothing the embedding cache has seen)
        body = json.dumps({"events": [{"text": LINE.format(i=i, n=n)} for i in range(1000)]})
        return "POST", f"/floors/{eve.floor}/blocks/{eve.blocks['feed']}/events/batch", body, mine
    raise ValueError(kind)


ATTACKS = ("app-secret", "long-email", "sign-up", "reset", "query", "chunked", "batches", "trickle")


def trickle_client(port: int, stop: threading.Event, statuses: Counter, lock, n: int) -> None:
    """A connection from one of 4 networks that sends a header byte every 3 s, for ever; a
    new one when the server closes it."""
    source = f"127.0.{n % 4 + 1}.{n // 4 % 250 + 2}"
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), 10, (source, 0)) as s:
                s.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n")
                while not stop.wait(3):
                    s.sendall(b"X")
            status = "held to the end"
        except OSError as exc:
            status = f"closed by the server ({type(exc).__name__})"
            stop.wait(0.5)
        with lock:
            statuses[status] += 1


def flood_client(
    port: int,
    stop: threading.Event,
    statuses: Counter,
    lock: threading.Lock,
    spread: bool,
    kind: str = "app-secret",
    eve=None,
) -> None:
    """``kind``'s requests back to back on one kept-alive connection from 127.0.0.2
    (a new one after a failure: one per request would soon run out of local ports); with
    ``spread``, each on a new connection from a new /24 (wrong application secrets: under a
    new made-up id; otherwise under the same one)."""
    conn = None
    while not stop.is_set():
        source = "127.0.0.2"
        n = next(_spread)
        method, path, body, headers = attack(kind, n if spread or kind != "app-secret" else 0, eve)
        if spread:
            source = f"127.{n // 256 % 254 + 1}.{n % 256}.1"
            if conn is not None:
                conn.close()
                conn = None
        conn = conn or http.client.HTTPConnection(
            "127.0.0.1", port, timeout=10, source_address=(source, 0)
        )
        try:
            if kind in ("chunked", "batches"):  # no Content-Length: the body comes in 64 kB chunks
                data = body.encode()
                chunks = (data[i : i + 65536] for i in range(0, len(data), 65536))
                conn.request(method, path, chunks, dict(headers), encode_chunked=True)
            else:
                conn.request(method, path, body, dict(headers))
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException) as exc:
            status = (
                f"no answer in 10 s ({type(exc).__name__})"
                if isinstance(exc, TimeoutError)
                else f"no answer ({type(exc).__name__})"
            )
            conn.close()
            conn = None
        with lock:
            statuses[status] += 1


SIGN_IN_EVERY = 4.0  # seconds: 15 a minute, under the sign-in limit (20 a minute an account)
PASSWORDS = ("reliable pw 1", "reliable pw 2")


def bo_latencies(
    port: int, user, stop: threading.Event, change_password: bool = False, pace: float = 0.0
) -> dict[str, list[float]]:
    """Bo's query of his floor and his profile, alternately, until ``stop``, and a sign-in
    with his password every ``SIGN_IN_EVERY`` seconds (with ``change_password``, a change
    of his password too, from one of PASSWORDS to the other); each on a new connection, as
    a browser's or app's request may come, so it lands on whichever worker accepts it (a
    kept-alive one would stay on one worker, which the flood may not use). ``pace``: at
    least that many seconds from one query to the next (under the questions' own limit)."""
    out: dict[str, list[float]] = {"query": [], "profile": [], "sign-in": []}
    if change_password:
        out["password change"] = []
    body = {
        "user_id": user.user_id,
        "query": "what about the lighthouse?",
        "floor_ids": [user.floor],
    }
    last_sign_in = 0.0
    while not stop.is_set():
        began = time.monotonic()
        calls = [
            ("query", "POST", "/agent/memory/query", body),
            ("profile", "GET", "/auth-service/profile", None),
        ]
        if time.monotonic() - last_sign_in >= SIGN_IN_EVERY:
            last_sign_in = time.monotonic()
            sign_in = {"email": "bo@example.com", "password": user.password}
            calls.append(("sign-in", "POST", "/auth-service/signin/email", sign_in))
            if change_password:
                new = PASSWORDS[1 - PASSWORDS.index(user.password)]
                change = {"old_password": user.password, "new_password": new}
                calls.append(("password change", "POST", "/auth-service/change/password", change))
        for name, method, path, data in calls:
            t = time.perf_counter()
            client = Client(port, user.token)
            status, answer = client.call(method, path, data)
            client.conn.close()
            assert status == 200, answer
            out[name].append(time.perf_counter() - t)
            if name == "sign-in" or name == "password change":
                user.token = answer["token"]  # a change revokes every earlier token
            if name == "password change":
                user.password = data["new_password"]
        stop.wait(max(0.0, pace - (time.monotonic() - began)))
    return out


def timed(
    port: int, user, seconds: float, change_password: bool = False, pace: float = 0.0
) -> dict[str, list[float]]:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    return bo_latencies(port, user, stop, change_password, pace)


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its children (the server's workers)."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(p.memory_info().rss for p in procs) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=BACKENDS, default="sqlite")
    ap.add_argument("--server", choices=["gunicorn", "serve"], default="gunicorn")
    ap.add_argument("--threads", type=int, default=32, help="flood threads")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--baseline-seconds", type=float, default=20)
    ap.add_argument(
        "--spread",
        action="store_true",
        help="every request from a new client network (wrong application secrets: under a new "
        "made-up application id)",
    )
    ap.add_argument("--attack", choices=ATTACKS, default="app-secret", help="the flood")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memkit-flood-"))
    service = (Serve if args.server == "serve" else Service)(args.backend, folder)
    pace = 0.0
    if args.attack == "query":
        # Eve's questions meet the served limits (60 a minute, 2 at once); Bo asks within
        # them, one question every 1.2 s
        service.env.pop("MEMKIT_RATE_LIMIT_QUERY", None)
        pace = 1.2
    try:
        service.start()
        bo = sign_up(service.port, folder, "Bo")
        bo.password = PASSWORDS[0]
        eve = sign_up(service.port, folder, "Eve")
        client = Client(service.port, bo.token)
        for text in (
            "The harbour lighthouse was repainted white.",
            "We walked to the lighthouse at dawn.",
        ):
            assert (
                client.call(
                    "POST", f"/floors/{bo.floor}/blocks/{bo.blocks['feed']}/events", {"text": text}
                )[0]
                == 200
            )
        changes = args.attack == "sign-up"  # the sign-ups' argon2 hashes against a change's
        timed(service.port, bo, 3, changes, pace)  # warm up: the model and the index are loaded
        alone = timed(service.port, bo, args.baseline_seconds, changes, pace)
        memory_before = rss_mib(service.proc.pid)

        stop, statuses, lock = threading.Event(), Counter(), threading.Lock()
        flood = [
            threading.Thread(target=trickle_client, args=(service.port, stop, statuses, lock, n))
            if args.attack == "trickle"
            else threading.Thread(
                target=flood_client,
                args=(service.port, stop, statuses, lock, args.spread, args.attack, eve),
            )
            for n in range(args.threads)
        ]
        for t in flood:
            t.start()
        peak = [memory_before]

        def sample():  # the server's memory twice a second while the flood lasts
            while not stop.is_set():
                peak.append(rss_mib(service.proc.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample)
        sampler.start()
        time.sleep(1)  # the flood is on
        during = timed(service.port, bo, args.seconds, changes, pace)
        stop.set()
        for t in [*flood, sampler]:
            t.join()
    finally:
        service.stop()

    def row(name, xs):
        return {
            "Bo's requests": name,
            "n": len(xs),
            "median s": f"{statistics.median(xs):.3f}",
            "p95 s": f"{sorted(xs)[int(0.95 * (len(xs) - 1))]:.3f}",
        }

    print(
        f"\n{args.server}, {args.backend}: {args.threads} threads, flood {args.attack}"
        f"{' from a new network each request' if args.spread else ''} for "
        f"{args.seconds:.0f} s; Bo alone for {args.baseline_seconds:.0f} s, then "
        "throughout the flood\n"
    )
    print(
        table(
            [row(f"{k}, alone", alone[k]) for k in alone]
            + [row(f"{k}, during the flood", during[k]) for k in during]
        )
    )
    print(
        f"\nthe flood's answers: {dict(sorted(statuses.items(), key=str))} "
        f"({sum(statuses.values())} in all)"
    )
    for k in alone:
        print(
            f"Bo's {k} median during the flood: "
            f"{statistics.median(during[k]) / statistics.median(alone[k]):.2f}x alone"
        )
    print(
        f"server memory (RSS, all processes): {memory_before:.0f} MiB before the flood, at most "
        f"{max(peak):.0f} MiB during it"
    )


if __name__ == "__main__":
    main()
