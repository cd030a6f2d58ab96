"""How long one user's large write holds up another user's queries.

    .venv/bin/python eval/reliability/stall.py                       # SQLite, a batch of 1,000
    .venv/bin/python eval/reliability/stall.py --backend postgres --batch 1000
    .venv/bin/python eval/reliability/stall.py --stranger          # the batch goes into Bo's floor
    .venv/bin/python eval/reliability/stall.py --long tiny --writers 4  # four 1 MB requests at once

The service runs under gunicorn with one worker (so the writer and the reader share one
in-memory index: the case where a write could hold a query) and four threads. Ann owns a
floor; Bo owns another with a few posts. Bo queries his floor back to back, first alone
(the baseline), then while Ann posts one batch of ``--batch`` new posts (the batch's
request returns once the worker has indexed them: encoded, then added to the index in
chunks). Prints the batch's time and Bo's query latencies alone and during the batch
(median, 95th percentile, max); the longest of Bo's queries during the batch is the
figure SECURITY.md states. The two cores are shared: during the batch Bo's queries also
wait for the CPU the encoding uses, which is no lock's doing.

With ``--long prose`` or ``--long tiny`` each of ``--writers`` users
posts one request of 49 posts of 20,000 characters (about 1 MB, the most a request may
carry) into their own blog at the same time: ordinary prose, or tiny sentences ("Ok 17.")
that cost a run of the model each before they were joined; the server's CPU seconds for
the requests are printed beside Bo's latencies, so the two shapes' costs can be compared
in one sitting.

With ``--stranger`` Bo's floor is public and Ann posts her batch into it (a query used to
wait until every write to its floor was indexed, 67 s for a stranger's 1,000-event batch);
Bo's queries of his own floor then wait for Ann's posts at most ``others_writes_wait``
(1 s), and his own writes are his queries' only wait.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from harness import BACKENDS, Client, Service, sign_up, table

WORDS = (
    "lake kayak bread violin garden marathon sunrise harbour lighthouse puppy recipe concert "
    "pottery museum train bicycle picnic thunder library camera festival orchard market winter "
    "summer journey"
).split()


def latencies(
    client: Client, user, seconds: float | None = None, stop: threading.Event | None = None
) -> list[float]:
    """Bo's queries back to back (for ``seconds``, or until ``stop`` is set); their times."""
    out, started = [], time.perf_counter()
    body = {
        "user_id": user.user_id,
        "query": "what about the lighthouse and the harbour?",
        "floor_ids": [user.floor],
        "summary_needed": "1",
    }
    while (stop is None and time.perf_counter() - started < seconds) or (
        stop is not None and not stop.is_set()
    ):
        t = time.perf_counter()
        status, answer = client.call("POST", "/agent/memory/query", body)
        assert status == 200 and answer["items"], answer
        out.append(time.perf_counter() - t)
    return out


def long_text(shape: str, rng: random.Random, chars: int = 20_000) -> str:
    """A post of ``chars`` characters: prose (sentences of 12 to 22 words) or tiny
    sentences ("Ok 17.")."""
    out: list[str] = []
    while sum(map(len, out)) + len(out) < chars:
        if shape == "tiny":  # numbers drawn at random: no two posts alike (nothing cached)
            out.append(f"Ok {rng.randint(0, 99_999)}.")
        else:
            n = rng.randint(12, 22)
            out.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
    return " ".join(out)[:chars]


def server_cpu(pid: int) -> float:
    """CPU seconds the server (its processes) has used."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(sum(p.cpu_times()[:2]) for p in procs)


def summary(name: str, xs: list[float]) -> dict:
    xs = sorted(xs)
    return {
        "Bo's queries": name,
        "n": len(xs),
        "median s": f"{statistics.median(xs):.2f}",
        "p95 s": f"{xs[min(len(xs) - 1, int(0.95 * len(xs)))]:.2f}",
        "max s": f"{xs[-1]:.2f}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=BACKENDS, default="sqlite")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--baseline-seconds", type=float, default=20)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument(
        "--stranger", action="store_true", help="Ann posts her batch into Bo's public floor"
    )
    ap.add_argument(
        "--long",
        choices=["prose", "tiny"],
        help="each writer posts 49 posts of 20,000 characters of this shape (about 1 MB)",
    )
    ap.add_argument(
        "--writers",
        type=int,
        default=1,
        help="with --long: users writing at once (give --threads more than this: each write "
        "holds a thread until its posts are indexed)",
    )
    ap.add_argument(
        "--posts", type=int, default=49, help="with --long: posts in each writer's request"
    )
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="memkit-stall-"))
    service = Service(args.backend, folder, workers=1, threads=args.threads)
    try:
        service.start()
        ann, bo = sign_up(service.port, folder, "Ann"), sign_up(service.port, folder, "Bo")
        bo_client = Client(service.port, bo.token)
        for text in (
            "The harbour lighthouse was repainted white.",
            "We walked to the lighthouse at dawn.",
            "Fresh fish at the harbour market today.",
        ):
            status, _ = bo_client.call(
                "POST", f"/floors/{bo.floor}/blocks/{bo.blocks['feed']}/events", {"text": text}
            )
            assert status == 200
        latencies(bo_client, bo, 3)  # warm up: the model and the index are loaded
        alone = latencies(bo_client, bo, args.baseline_seconds)

        if args.long:
            long_writes(service, folder, bo_client, bo, alone, args)
            return
        rng = random.Random(7)
        batch = {
            "events": [
                {
                    "text": " ".join(rng.choice(WORDS) for _ in range(14))
                    + f" (post {i} of run {time.time()})"
                }
                for i in range(args.batch)
            ]
        }
        stop, during, took = threading.Event(), [], []

        target = bo if args.stranger else ann
        if args.stranger:
            assert bo_client.call("POST", f"/floors/{bo.floor}/public")[0] == 200

        def write():
            t = time.perf_counter()
            status, body = Client(service.port, ann.token, timeout=1800).call(
                "POST", f"/floors/{target.floor}/blocks/{target.blocks['feed']}/events/batch", batch
            )
            took.append(time.perf_counter() - t)
            assert status == 200, body
            stop.set()

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(0.2)  # the batch is in
        during = latencies(bo_client, bo, stop=stop)
        writer.join()
        where = "into Bo's public floor" if args.stranger else "into her own floor"
        print(
            f"\n{args.backend}: Ann's batch of {args.batch} posts {where} took {took[0]:.1f} s; Bo "
            f"queried his own floor alone for {args.baseline_seconds:.0f} s, then throughout the "
            "batch\n"
        )
        print(table([summary("alone", alone), summary("during the batch", during)]))
        print(
            f"\nthe longest any of Bo's queries took during the batch: {max(during):.2f} s "
            f"({max(during) / statistics.median(alone):.1f}x his median alone)"
        )
    finally:
        service.stop()


def long_writes(service, folder: Path, bo_client: Client, bo, alone: list[float], args) -> None:
    """``--writers`` users each post one request of 49 long posts at once, while Bo queries."""
    rng = random.Random(7)
    writers = [sign_up(service.port, folder, f"Writer{i}") for i in range(args.writers)]
    batches = [
        {"events": [{"text": long_text(args.long, rng)} for _ in range(args.posts)]}
        for _ in writers
    ]
    sizes = [len(json.dumps(b).encode()) for b in batches]
    stop, took = threading.Event(), []

    def write(user, batch):
        t = time.perf_counter()
        status, body = Client(service.port, user.token, timeout=1800).call(
            "POST", f"/floors/{user.floor}/blocks/{user.blocks['blog']}/events/batch", batch
        )
        took.append(time.perf_counter() - t)
        assert status == 200, body

    threads = [threading.Thread(target=write, args=wb) for wb in zip(writers, batches)]
    cpu = server_cpu(service.proc.pid)
    for t in threads:
        t.start()

    def all_written():
        for t in threads:
            t.join()
        stop.set()

    threading.Thread(target=all_written).start()
    time.sleep(0.2)
    during = latencies(bo_client, bo, stop=stop)
    cpu = server_cpu(service.proc.pid) - cpu
    print(
        f"\n{args.backend}: {args.writers} users each posted {args.posts} posts of 20,000 "
        "characters of "
        f"{args.long} at once ({min(sizes):,}-{max(sizes):,} bytes a request); the last "
        f"answered after {max(took):.1f} s; the server used {cpu:.1f} CPU seconds meanwhile "
        f"({cpu / args.writers:.1f} a request, Bo's queries included)\n"
    )
    print(table([summary("alone", alone), summary("during the writes", during)]))
    print(
        f"\nBo's median during the writes: "
        f"{statistics.median(during) / statistics.median(alone):.2f}x alone"
    )


if __name__ == "__main__":
    main()
