"""Durability: SIGKILL the server during concurrent writes, restart it, check every write.

    # SQLite (WAL), in-memory index
    .venv/bin/python eval/reliability/durability.py --backend sqlite
    # PostgreSQL store, in-memory index
    .venv/bin/python eval/reliability/durability.py --backend postgres
    # PostgreSQL store and index
    .venv/bin/python eval/reliability/durability.py --backend pgvector

1. gunicorn (2 workers x 4 threads) on a fresh store in ``--dir``; one user signs up.
2. ``--clients`` threads post ``--writes`` events, each holding a made-up word of its own
   ("qx00042zv"). Once ``--kill-at`` of them have been answered 200, the whole gunicorn
   process group gets SIGKILL; the writes still in flight or not yet sent fail.
3. gunicorn starts again on the same store: the in-memory backends first load the index
   saved at the first start and catch up from the store's log (the rows of every write
   since), then, stopped once more with the saved index deleted, rebuild it from the
   store's events; the checks run after each start.
4. Checks: every write answered 200 is listed with its text (lost = 0) and found by a
   query for its word; a write that got no answer is either stored and found, or absent;
   in the store, no event lacks its change-log row (or, with pgvector, its search rows),
   and no change-log row names a missing event (half-written = 0).

Prints a markdown table (a row per restart) and exits 1 if anything is lost,
half-written or not found.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa
from harness import BACKENDS, Client, Service, database_url, floor_events, found, sign_up, table


def word(i: int) -> str:
    return f"qx{i:05d}zv"


def write_all(
    port: int, user, n: int, clients: int, kill_after: int, service: Service
) -> dict[int, str | None]:
    """Post n events from ``clients`` threads; SIGKILL once ``kill_after`` are answered.
    Returns write number -> event id (None: no 200 came back)."""
    path = f"/floors/{user.floor}/blocks/{user.blocks['feed']}/events"
    acked: dict[int, str | None] = {}
    lock, killed = threading.Lock(), threading.Event()

    def one(i: int, client: Client) -> None:
        try:
            status, body = client.call(
                "POST", path, {"text": f"note {word(i)}: the durability probe number {i}"}
            )
        except OSError:
            status, body = None, {}
        with lock:
            acked[i] = body.get("event_id") if status == 200 else None
            if sum(v is not None for v in acked.values()) >= kill_after and not killed.is_set():
                killed.set()
                service.kill()

    local = threading.local()

    def run(i: int) -> None:
        if not hasattr(local, "client"):
            local.client = Client(port, user.token, timeout=60)
        one(i, local.client)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(n)))
    return acked


def half_written(backend: str, folder: Path) -> int:
    """Rows of one write without the rest of that write."""
    engine = sa.create_engine(
        database_url(backend, folder).replace("postgresql://", "postgresql+psycopg://")
    )
    checks = [
        "SELECT count(*) FROM events e WHERE NOT EXISTS "
        "(SELECT 1 FROM event_log l WHERE l.event_id = e.id)",
        "SELECT count(*) FROM event_log l WHERE NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.id = l.event_id)",
    ]
    with engine.connect() as conn:
        if backend == "pgvector":
            search = [
                t
                for (t,) in conn.execute(
                    sa.text(
                        "SELECT table_name FROM information_schema.tables WHERE table_name LIKE "
                        "'memkit\\_%'"
                    )
                )
            ]
            checks += [
                "SELECT count(*) FROM events e WHERE NOT EXISTS "
                f"(SELECT 1 FROM {t} s WHERE s.event_id = e.id)"
                for t in search
            ]
        bad = sum(conn.execute(sa.text(q)).scalar() for q in checks)
    engine.dispose()
    return bad


def check(port: int, user, acked: dict, args, folder: Path, how: str) -> tuple[dict, bool]:
    """One table row (what survived, whole, and what a query finds) and whether all is well."""
    ok = {i: e for i, e in acked.items() if e}
    stored = {
        e["text"].split()[1].rstrip(":"): e
        for e in floor_events(port, user, user.floor)
        if e["text"].startswith("note ")
    }
    lost = [i for i, e in ok.items() if word(i) not in stored or stored[word(i)]["event_id"] != e]
    unanswered_kept = [i for i in acked if not acked[i] and word(i) in stored]
    to_find = [(i, stored[word(i)]) for i in sorted(ok) + unanswered_kept]
    local = threading.local()

    def look(item) -> bool:
        if not hasattr(local, "client"):
            local.client = Client(port, user.token)
        return found(local.client, user, user.floor, word(item[0]), item[1])

    with ThreadPoolExecutor(4) as pool:
        hits = list(pool.map(look, to_find))
    if lost or not all(hits):
        print(
            "   lost:",
            [word(i) for i in lost][:20],
            " not found:",
            [(word(i), e["event_id"]) for (i, e), hit in zip(to_find, hits) if not hit][:20],
        )
    half = half_written(args.backend, folder)
    row = {
        "backend": args.backend,
        "restart": how,
        "writes sent": args.writes,
        "answered 200": len(ok),
        "unanswered but stored": len(unanswered_kept),
        "unanswered and absent": args.writes - len(ok) - len(unanswered_kept),
        "lost": len(lost),
        "half-written": half,
        "searchable": f"{sum(hits)} / {len(to_find)}",
    }
    return row, not lost and not half and all(hits)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=BACKENDS, default="sqlite")
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument(
        "--kill-at", type=float, default=0.4, help="fraction of writes answered before the SIGKILL"
    )
    ap.add_argument(
        "--dir", default="", help="a fresh folder for the store (default: a temporary one)"
    )
    args = ap.parse_args(argv)
    folder = Path(args.dir or tempfile.mkdtemp(prefix=f"durability-{args.backend}-"))
    folder.mkdir(parents=True, exist_ok=True)
    service = Service(args.backend, folder)
    try:
        print(
            f"1. {args.backend} store in {folder}; gunicorn up in {service.start():.1f} s",
            flush=True,
        )
        user = sign_up(service.port, folder, "Dora")
        warm = Client(
            service.port, user.token
        )  # load the model in the workers before the clock starts
        warm.call(
            "POST",
            f"/floors/{user.floor}/blocks/{user.blocks['feed']}/events",
            {"text": "warming up"},
        )
        t = time.perf_counter()
        acked = write_all(
            service.port, user, args.writes, args.clients, int(args.writes * args.kill_at), service
        )
        ok = {i: e for i, e in acked.items() if e}
        print(
            f"2. {args.writes} writes sent in {time.perf_counter() - t:.1f} s: {len(ok)} answered "
            f"200, then SIGKILL; {args.writes - len(ok)} without an answer",
            flush=True,
        )
        service.stop()  # (already dead: the SIGKILL)
        rows, passed = [], []
        for how in (
            ("saved index + log", "rebuilt from the store")
            if args.backend != "pgvector"
            else ("store",)
        ):
            if how == "rebuilt from the store":
                service.stop()
                shutil.rmtree(folder / "index", ignore_errors=True)
            print(f"3. restarted ({how}) in {service.start():.1f} s", flush=True)
            row, good = check(service.port, user, acked, args, folder, how)
            rows.append(row)
            passed.append(good)
        print("4. checked\n\n" + table(rows))
        return 0 if all(passed) else 1
    finally:
        service.stop()


if __name__ == "__main__":
    raise SystemExit(main())
