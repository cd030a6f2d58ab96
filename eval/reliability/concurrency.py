"""Concurrency: writers and readers at once against several gunicorn workers.

    .venv/bin/python eval/reliability/concurrency.py --seconds 60  # SQLite, 3 workers
    .venv/bin/python eval/reliability/concurrency.py --seconds 60 --backend postgres

``--writers`` users each post into their own (public) floor for ``--seconds``: single
events (70%), batches of 5-20 (15%), edits of one of their events (10%) and deletes
(5%), every text holding a made-up word of its own. ``--readers`` other users query the
writers' floors and list their events meanwhile. Every response is counted by kind and
status; anything but a 2xx or a documented 429 is an error. Then, per writer, the floor's
stored events must be exactly the acknowledged ones (none lost, none duplicated, each
with its last acknowledged text, deleted ones gone), and a sample of them must be found
by a query for their word. Prints two markdown tables; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import BACKENDS, Client, Service, floor_events, found, sign_up, table


class Writer:
    """One user writing into their own floor; remembers what the service acknowledged."""

    def __init__(self, port: int, user, n: int, seed: int):
        self.client, self.user, self.n, self.rng = (
            Client(port, user.token, timeout=120),
            user,
            n,
            random.Random(seed),
        )
        self.path = f"/floors/{user.floor}/blocks/{user.blocks['feed']}/events"
        self.alive: dict[str, str] = {}  # event id -> its last acknowledged text
        self.deleted: set[str] = set()
        self.unsure: set[str] = (
            set()
        )  # words and event ids of requests that got no answer (connection lost)
        self.counter = 0

    def text(self) -> str:
        self.counter += 1
        return f"w{self.n}x{self.counter:05d}q wrote this note about the harbour at dusk"

    def step(self, counts: Counter) -> None:
        roll = self.rng.random()
        if roll < 0.70 or not self.alive:
            kind, method, path, body = "create", "POST", self.path, {"text": self.text()}
        elif roll < 0.85:
            kind, method, path = "batch", "POST", self.path + "/batch"
            body = {"events": [{"text": self.text()} for _ in range(self.rng.randint(5, 20))]}
        elif roll < 0.95:
            target = self.rng.choice(sorted(self.alive))
            kind, method, path, body = "edit", "PATCH", f"/events/{target}", {"text": self.text()}
        else:
            target = self.rng.choice(sorted(self.alive))
            kind, method, path, body = "delete", "DELETE", f"/events/{target}", None
        try:
            status, got = self.client.call(method, path, body)
        except OSError:
            counts[kind, "no answer"] += 1
            self.unsure.update(t.split()[0] for t in _texts(body))
            if kind in ("edit", "delete"):
                self.unsure.add(target)
            return
        counts[kind, status] += 1
        if status != 200:
            return
        if kind == "create":
            self.alive[got["event_id"]] = body["text"]
        elif kind == "batch":
            self.alive.update({e["event_id"]: e["text"] for e in got["events"]})
        elif kind == "edit":
            self.alive[target] = body["text"]
        else:
            self.alive.pop(target)
            self.deleted.add(target)


def _texts(body) -> list[str]:
    if not body:
        return []
    return [e["text"] for e in body.get("events", [])] or ([body["text"]] if "text" in body else [])


def read_once(
    client: Client, reader, floors: list[str], rng: random.Random, counts: Counter
) -> None:
    floor = rng.choice(floors)
    if rng.random() < 0.7:
        kind, method, path = "query", "POST", "/agent/memory/query"
        body = {
            "user_id": reader.user_id,
            "query": rng.choice(
                ["the harbour at dusk", "who wrote about dusk?", "notes from last week"]
            ),
            "floor_ids": rng.sample(floors, rng.randint(1, 3)),
        }
    else:
        kind, method, path, body = "list", "GET", f"/floors/{floor}/events?limit=20", None
    try:
        status, _ = client.call(method, path, body)
    except OSError:
        counts[kind, "no answer"] += 1
        return
    counts[kind, status] += 1


def check(port: int, writer: Writer, sample: int, rng: random.Random) -> dict:
    stored = floor_events(port, writer.user, writer.user.floor)
    ours = [e for e in stored if e["text"].startswith(f"w{writer.n}x")]
    by_id = {e["event_id"]: e["text"] for e in ours}
    event_of = {e["event_id"]: e for e in ours}
    words = Counter(e["text"].split()[0] for e in ours)
    lost = [
        i for i, text in writer.alive.items() if by_id.get(i) != text and i not in writer.unsure
    ]
    unexpected = [
        i for i in by_id if i not in writer.alive and by_id[i].split()[0] not in writer.unsure
    ]
    picks = rng.sample(sorted(writer.alive), min(sample, len(writer.alive)))
    client = Client(port, writer.user.token)
    searchable = sum(
        found(client, writer.user, writer.user.floor, writer.alive[i].split()[0], event_of[i])
        for i in picks
        if i in event_of
    )
    return {
        "writer": writer.n,
        "acknowledged alive": len(writer.alive),
        "deleted": len(writer.deleted),
        "stored": len(ours),
        "lost or stale": len(lost),
        "unexpected": len(unexpected),
        "duplicated": sum(n - 1 for n in words.values() if n > 1),
        "deleted but stored": len(writer.deleted & set(by_id)),
        "searchable": f"{searchable} / {len(picks)}",
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=BACKENDS, default="sqlite")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--sample", type=int, default=10, help="events per writer checked by a query")
    ap.add_argument("--dir", default="")
    args = ap.parse_args(argv)
    folder = Path(args.dir or tempfile.mkdtemp(prefix=f"concurrency-{args.backend}-"))
    folder.mkdir(parents=True, exist_ok=True)
    service = Service(args.backend, folder, workers=args.workers, threads=args.threads)
    try:
        print(
            f"1. {args.backend} store in {folder}; {args.workers} workers up in "
            f"{service.start():.1f} s",
            flush=True,
        )
        writers = [
            Writer(service.port, sign_up(service.port, folder, f"Writer{i}"), i, seed=i)
            for i in range(args.writers)
        ]
        readers = [sign_up(service.port, folder, f"Reader{i}") for i in range(args.readers)]
        floors = [w.user.floor for w in writers]
        for w in writers:  # readable by the readers
            assert w.client.call("POST", f"/floors/{w.user.floor}/public")[0] == 200
        Client(service.port, writers[0].user.token).call(
            "POST", writers[0].path, {"text": "warming up the model"}
        )
        counts: Counter = Counter()
        lock, deadline = threading.Lock(), time.monotonic() + args.seconds

        def write_loop(w: Writer) -> None:
            local: Counter = Counter()
            while time.monotonic() < deadline:
                w.step(local)
            with lock:
                counts.update(local)

        def read_loop(i: int) -> None:
            client, rng, local = (
                Client(service.port, readers[i].token, timeout=120),
                random.Random(100 + i),
                Counter(),
            )
            while time.monotonic() < deadline:
                read_once(client, readers[i], floors, rng, local)
            with lock:
                counts.update(local)

        with ThreadPoolExecutor(args.writers + args.readers) as pool:
            jobs = [pool.submit(write_loop, w) for w in writers] + [
                pool.submit(read_loop, i) for i in range(args.readers)
            ]
            for job in jobs:
                job.result()
        print(
            f"2. {args.seconds:.0f} s of {args.writers} writers and {args.readers} readers\n",
            flush=True,
        )
        kinds = ["create", "batch", "edit", "delete", "query", "list"]
        statuses = sorted({s for _, s in counts}, key=str)
        print(
            table([{"request": k, **{str(s): counts[k, s] for s in statuses}} for k in kinds])
            + "\n"
        )
        rng = random.Random(7)
        rows = [check(service.port, w, args.sample, rng) for w in writers]
        print(table(rows))
        errors = sum(n for (_, s), n in counts.items() if s not in (200, 429))
        bad = sum(
            r["lost or stale"] + r["unexpected"] + r["duplicated"] + r["deleted but stored"]
            for r in rows
        )
        unfound = sum(
            int(r["searchable"].split(" / ")[1]) - int(r["searchable"].split(" / ")[0])
            for r in rows
        )
        print(
            f"\nrequests {sum(counts.values())}, errors (not 200 or 429) {errors}, "
            f"lost/stale/unexpected/duplicated {bad}, sampled events not found {unfound}"
        )
        return 0 if errors == 0 and bad == 0 and unfound == 0 else 1
    finally:
        service.stop()


if __name__ == "__main__":
    raise SystemExit(main())
