"""A flood of wrong application secrets from one address, and what it does to another user.

    # gunicorn (2 workers x 4 threads), SQLite
    .venv/bin/python eval/reliability/flood.py
    # `memkit serve` (a thread per request)
    .venv/bin/python eval/reliability/flood.py --server serve
    # the spread flood of issue 42: every request a new unknown id from a new network
    .venv/bin/python eval/reliability/flood.py --server serve --spread

Bo signs up, posts on his floor, then queries it and reads his profile back to back, alone
for ``--baseline-seconds``; then ``--threads`` client threads from another loopback address
(127.0.0.2) send ``POST /agent/memory/query`` with ``X-App-Id: app_nope`` and a wrong
``X-App-Secret``, no token, back to back for ``--seconds``, while Bo goes on. Needs no
account: the attack of issue 26, finding 1. With ``--spread`` (issue 42, finding 1) every
request names a new made-up application id and comes from a new client network (127.N.M.1,
a /24 of its own), so no count per id or per network can refuse it. Bo also signs in with
his password every 4 s (within the sign-in limit). Prints the flood's answers by status and
Bo's latencies alone and during the flood (median, p95, and the median's ratio), and the
server's resident memory before and after. SECURITY.md ("Round 3", "Round 4") states the
figures.

The two cores are shared by the server, Bo and the flood's client threads (all in this
machine), so some slowing is the clients' own CPU, which no server-side limit removes.
"""

from __future__ import annotations

import argparse
import http.client
import json
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


def flood_client(
    port: int, stop: threading.Event, statuses: Counter, lock: threading.Lock, spread: bool
) -> None:
    """Wrong application secrets back to back on one kept-alive connection from 127.0.0.2
    (a new one after a failure: one per request would soon run out of local ports); with
    ``spread``, each on a new connection from a new /24, under a new made-up id."""
    headers = {
        "Content-Type": "application/json",
        "X-App-Id": "app_nope",
        "X-App-Secret": "a wrong secret",
    }
    body = json.dumps({"user_id": "u_nobody", "query": "anything", "floor_ids": ["f_nothing"]})
    conn = None
    while not stop.is_set():
        source = "127.0.0.2"
        if spread:
            n = next(_spread)
            source = f"127.{n // 256 % 254 + 1}.{n % 256}.1"
            headers["X-App-Id"] = f"app_nope{n}"
            if conn is not None:
                conn.close()
                conn = None
        conn = conn or http.client.HTTPConnection(
            "127.0.0.1", port, timeout=10, source_address=(source, 0)
        )
        try:
            conn.request("POST", "/agent/memory/query", body, dict(headers))
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


def bo_latencies(port: int, user, stop: threading.Event) -> dict[str, list[float]]:
    """Bo's query of his floor and his profile, alternately, until ``stop``, and a sign-in
    with his password every ``SIGN_IN_EVERY`` seconds; each on a new connection, as a
    browser's or app's request may come, so it lands on whichever worker accepts it (a
    kept-alive one would stay on one worker, which the flood may not use)."""
    out: dict[str, list[float]] = {"query": [], "profile": [], "sign-in": []}
    body = {
        "user_id": user.user_id,
        "query": "what about the lighthouse?",
        "floor_ids": [user.floor],
    }
    sign_in = {"email": "bo@example.com", "password": "reliable pw 1"}
    last_sign_in = 0.0
    while not stop.is_set():
        calls = [
            ("query", "POST", "/agent/memory/query", body),
            ("profile", "GET", "/auth-service/profile", None),
        ]
        if time.monotonic() - last_sign_in >= SIGN_IN_EVERY:
            last_sign_in = time.monotonic()
            calls.append(("sign-in", "POST", "/auth-service/signin/email", sign_in))
        for name, method, path, data in calls:
            t = time.perf_counter()
            client = Client(port, user.token)
            status, answer = client.call(method, path, data)
            client.conn.close()
            assert status == 200, answer
            out[name].append(time.perf_counter() - t)
    return out


def timed(port: int, user, seconds: float) -> dict[str, list[float]]:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    return bo_latencies(port, user, stop)


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
        help="every request a new made-up application id from a new client network",
    )
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memkit-flood-"))
    service = (Serve if args.server == "serve" else Service)(args.backend, folder)
    try:
        service.start()
        bo = sign_up(service.port, folder, "Bo")
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
        timed(service.port, bo, 3)  # warm up: the model and the index are loaded
        alone = timed(service.port, bo, args.baseline_seconds)
        memory_before = rss_mib(service.proc.pid)

        stop, statuses, lock = threading.Event(), Counter(), threading.Lock()
        flood = [
            threading.Thread(
                target=flood_client, args=(service.port, stop, statuses, lock, args.spread)
            )
            for _ in range(args.threads)
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
        during = timed(service.port, bo, args.seconds)
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
        f"\n{args.server}, {args.backend}: {args.threads} threads sending a wrong application "
        f"secret{' under a new id from a new network each time' if args.spread else ''} for "
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
