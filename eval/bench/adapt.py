"""How long `memkit adapt` takes on a store of generated posts (memkit.datasets.synthetic).

    # SQLite store, in-memory index
    .venv/bin/python eval/bench/adapt.py --events 20000
    # pgvector rows in PostgreSQL
    .venv/bin/python eval/bench/adapt.py --events 20000 --backend postgres

Steps, each printed as it finishes, then one markdown table row:

1. the store: ``--events`` generated posts written straight into the tables, as
   eval/bench/service.py writes them (reused from ``--dir`` when it exists);
2. `memkit adapt` on it (server/search/adapt.py) with the served config (the service's
   default, or postgres.toml): pairs from the posts' structure, training (at most
   ``max_pairs`` of them, so its time does not grow with the store), re-encoding every
   post into the new version (with the answers' sentences) and the switch;
3. a worker's switch: a fresh process opening the new version, as a running worker does
   at its first query after the switch (the in-memory backend loads the saved index; the
   PostgreSQL one has nothing to load), and one query through it.

Re-encoding is timed with the embedding cache of ``MEMKIT_CACHE_DIR``: run with a fresh one
(``MEMKIT_CACHE_DIR=$(mktemp -d)``), or the vectors of a model trained by an earlier run are
read from it instead of encoded. A model already in the cache is not trained again; the
table then shows the training time recorded when it was trained.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import add_store_arguments, open_store, plain_encoder_rate, settings_for  # noqa: E402  (the service benchmark's store)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_arguments(ap, 20_000)
    ap.add_argument(
        "--batch", type=int, default=500, help="events per transaction re-encoding PostgreSQL rows"
    )
    ap.add_argument("--threads", type=int, help="PyTorch threads while training")
    ap.add_argument(
        "--jobs", type=int, default=1, help="PostgreSQL: processes that re-encode side by side"
    )
    ap.add_argument(
        "--plain",
        type=int,
        default=3000,
        help="posts plain sentence-transformers encodes for the yardstick",
    )
    args = ap.parse_args(argv)
    folder, _, pg = open_store(args, "bench-adapt")

    from memkit.training import model_info
    from server import create_app
    from server.search.adapt import adapt, store_events

    try:
        app = create_app(settings_for(args, folder))
        memory = app.extensions["memkit"]["memory"]
        t = time.perf_counter()
        r = adapt(
            memory,
            batch=args.batch,
            threads=args.threads,
            jobs=args.jobs,
            progress=lambda m: print("  ", m, flush=True),
        )
        total = time.perf_counter() - t
        trained = model_info(r.encoder)[
            "train_seconds"
        ]  # the loop's own time, also for a model trained before
        app.extensions["memkit"]["engine"].dispose()
        print(
            f"2. adapt: {r.encoder} (version {r.version}, switched: {r.switched}): {r.pairs:,} "
            f"pairs trained in {trained:.1f} s (this run's pairs and training: "
            f"{r.train_seconds:.1f} s), {r.events:,} posts re-encoded in {r.encode_seconds:.1f} s, "
            f"switch {r.switch_seconds:.2f} s ({total:.1f} s in all)",
            flush=True,
        )

        t = time.perf_counter()
        worker = create_app(settings_for(args, folder))
        index = worker.extensions["memkit"]["memory"].index
        opened = time.perf_counter() - t
        assert index.pipeline.encoder_name() == r.encoder
        t = time.perf_counter()
        res = index.pipeline.query("Any tips on sourdough baking?", user_id="u_bench00", k=10)
        asked = time.perf_counter() - t
        worker.extensions["memkit"]["engine"].dispose()
        print(
            f"3. a worker opens version {r.version} in {opened:.1f} s "
            f"({getattr(index, 'started_from', '-')}); a query: {len(res.run)} items in "
            f"{asked * 1000:.0f} ms",
            flush=True,
        )
        with app.extensions["memkit"]["engine"].connect() as conn:
            texts = store_events(conn)["text"].sample(min(args.plain, r.events), seed=0).to_list()
    finally:
        if pg is not None:
            pg.cleanup()
    plain = plain_encoder_rate(texts)
    rate = r.events / max(r.encode_seconds, 1e-9)
    print(
        f"4. plain sentence-transformers on {len(texts):,} of the posts: {plain:.0f} texts/s; "
        f"re-encoding / plain = {rate / plain:.2f}x",
        flush=True,
    )
    print()
    print(
        "| backend | posts | pairs trained | training s | re-encoding s | posts/s re-encoded | "
        "plain encoder texts/s | re-encoding / plain | switch s | worker opens new version s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {args.backend} | {r.events:,} | {r.pairs:,} | {trained:.0f} | {r.encode_seconds:.0f} | "
        f"{rate:.0f} | {plain:.0f} | {rate / plain:.2f}x | {r.switch_seconds:.2f} | {opened:.1f} |"
    )


if __name__ == "__main__":
    main()
