"""Where a query's and an ingest's time goes: the service in this process, under cProfile.

    .venv/bin/python eval/bench/stages.py --events 20000 --dir /work/bench/m20k            # queries
    .venv/bin/python eval/bench/stages.py --events 20000 --dir /work/bench/m20k --ingest 1000

Uses the service benchmark's store (eval/bench/service.py, ``--dir`` reused) and asks its
questions through the Flask test client, one at a time (the users ask several each, so
follow-ups are carried), or posts ``--ingest`` new events through the batch endpoint.
Prints, per query (or per event), the cumulative time of each stage: the functions named
in ``STAGES`` (a stage's time includes the stages it calls), then cProfile's top functions
by own time. Times under cProfile run slower than without it, Python-heavy code more so:
read the shares, not the absolute figures.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import (  # noqa: E402
    add_store_arguments,
    fresh_events,
    open_store,
    query_bodies,
    settings_for,
    token_of,
)

# (label, file suffix, function name): a stage is every call of that function.
STAGES = [
    ("request (whole)", "flask/app.py", "full_dispatch_request"),
    ("  auth: token", "services/accounts.py", "authenticate"),
    ("  request model (pydantic)", "api/openapi.py", "body"),
    ("  Memory.query", "services/memory.py", "query"),
    ("    authorize", "services/memory.py", "_authorize"),
    ("    floor authors", "services/memory.py", "floor_authors"),
    ("    active version", "search/versions.py", "active"),
    ("    index sync", "search/index.py", "sync"),
    ("    Pipeline.query", "memkit/pipeline.py", "query"),
    ("      history", "search/conversations.py", "history"),
    ("      record turn", "search/conversations.py", "record"),
    ("      retriever search", "retrievers/learned.py", "search"),
    ("        candidates+features", "retrievers/learned.py", "_features_one"),
    ("        bm25 search", "retrievers/sparse.py", "_search_batch"),
    ("        dense search", "retrievers/dense.py", "_search_batch"),
    ("        encode (cache)", "memkit/models/encoders.py", "encode"),
    ("        model forward", "sentence_transformers/SentenceTransformer.py", "encode"),
    ("        score", "retrievers/learned.py", "_score"),
    ("      convex fusion", "retrievers/hybrid.py", "convex"),
    ("      relevance gate", "memkit/pipeline.py", "relevant"),
    ("      lookup", "services/memory.py", "_lookup"),
    ("      answer", "memkit/answer/extractive.py", "write"),
    ("        candidates", "memkit/answer/extractive.py", "candidates"),
    ("        sentence vectors", "memkit/answer/extractive.py", "score"),
    # ingest
    ("  Events.create_many", "services/events.py", "create_many"),
    ("  catch-up (after write)", "services/memory.py", "catch_up"),
    ("    encode ahead", "search/index.py", "_encode_ahead"),
    ("    apply", "search/index.py", "_apply"),
    ("    documents (representation)", "memkit/pipeline.py", "documents"),
    ("    precompute", "memkit/pipeline.py", "precompute"),
    ("    answer sentences", "memkit/answer/extractive.py", "encode_sentences"),
    ("    load events", "search/index.py", "load_events"),
    ("    retriever add", "retrievers/learned.py", "add"),
]


def count_model_runs() -> dict:
    """Count the texts sent to the ONNX encoders from here on (every thread)."""
    from memkit.models.encoders import OnnxMiniLMEncoder

    runs = {"encode": 0, "spans": 0, "spans_parts": 0, "multiline": 0}
    encode, spans = OnnxMiniLMEncoder.encode, OnnxMiniLMEncoder.encode_spans

    def counted_encode(self, texts, show_progress=None):
        runs["encode"] += len(texts)
        runs["multiline"] += sum("\n" in t for t in texts)  # documents with neighbours' lines
        return encode(self, texts, show_progress)

    def counted_spans(self, texts, parts):
        runs["spans"] += len(texts)
        runs["spans_parts"] += sum(map(len, parts))
        return spans(self, texts, parts)

    OnnxMiniLMEncoder.encode, OnnxMiniLMEncoder.encode_spans = counted_encode, counted_spans
    return runs


def stage_table(stats: pstats.Stats, n: int, unit: str) -> list[str]:
    out = [f"| stage | ms per {unit} | calls per {unit} |", "|---|---:|---:|"]
    for label, suffix, name in STAGES:
        ct, calls = 0.0, 0
        for (file, _, func), (_, nc, _, cum, _) in stats.stats.items():
            if func == name and file.endswith(suffix):
                ct += cum
                calls += nc
        if calls:
            out.append(f"| {label} | {1000 * ct / n:.2f} | {calls / n:.1f} |")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_arguments(ap, 20_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument(
        "--ingest",
        type=int,
        default=0,
        help="profile this many new events through the batch endpoint",
    )
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument(
        "--items-only", action="store_true", help='ask with summary_needed "0" (no answer written)'
    )
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument(
        "--callers", default="", help="also print who calls the functions matching this"
    )
    ap.add_argument("--stats", default="", help="also save the profile here (pstats format)")
    args = ap.parse_args(argv)
    folder, meta, pg = open_store(args, "bench-service")
    from server import create_app

    app = create_app(settings_for(args, folder))
    app.extensions["memkit"]["memory"].warm()
    client = app.test_client()
    bodies = query_bodies(args.queries + args.warmup, meta["floors"], meta["users"], seed=11)
    if args.items_only:
        bodies = [(token, {**body, "summary_needed": "0"}) for token, body in bodies]

    def ask(token, body):
        r = client.post(
            "/agent/memory/query", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 200, r.get_json()

    for token, body in bodies[: args.warmup]:
        ask(token, body)
    if (
        not args.ingest
    ):  # first without the profiler: CPU time per query, which other processes' load barely changes
        cpu, t = time.process_time(), time.perf_counter()
        for token, body in bodies[args.warmup :]:
            ask(token, body)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - t
        print(
            f"{args.queries} queries without the profiler: {1000 * cpu / args.queries:.1f} ms CPU, "
            f"{1000 * wall / args.queries:.1f} ms wall per query (load {os.getloadavg()[0]:.1f})\n"
        )
    runs = count_model_runs()
    prof = cProfile.Profile()
    t = time.perf_counter()
    if args.ingest:
        frame = fresh_events(args.ingest)
        floor = meta["floors"][1]
        owner = int(floor[len("f_floor") :]) % meta["users"]
        texts, tags, times = (
            frame["text"].to_list(),
            frame["tags"].to_list(),
            frame["created_at"].to_list(),
        )
        prof.enable()
        for start in range(0, args.ingest, args.batch):
            body = {
                "events": [
                    {
                        "text": texts[i],
                        "tags": list(tags[i] or []),
                        "created_at": times[i].isoformat(),
                    }
                    for i in range(start, min(args.ingest, start + args.batch))
                ]
            }
            r = client.post(
                f"/floors/{floor}/blocks/b_{floor[2:]}_forum/events/batch",
                json=body,
                headers={"Authorization": f"Bearer {token_of(owner)}"},
            )
            assert r.status_code == 200, r.get_json()
        prof.disable()
        n, unit = args.ingest, "event"
    else:
        prof.enable()
        for token, body in bodies[args.warmup :]:
            ask(token, body)
        prof.disable()
        n, unit = args.queries, "query"
    wall = time.perf_counter() - t
    stats = pstats.Stats(prof)
    if args.stats:
        stats.dump_stats(args.stats)
    print(f"{n} {unit}s in {wall:.1f} s under cProfile: {1000 * wall / n:.1f} ms per {unit}\n")
    print("\n".join(stage_table(stats, n, unit)))
    print(
        f"\ntexts the model read, per {unit}: {runs['encode'] / n:.2f} alone (encode; "
        f"{runs['multiline'] / n:.2f} with neighbours' lines), {runs['spans'] / n:.2f} with their "
        f"sentences (encode_spans); {runs['spans_parts'] / n:.2f} sentences read in their post\n"
    )
    stats.sort_stats("tottime").print_stats(args.top)
    if args.callers:
        stats.print_callers(args.callers)
    if pg is not None:
        pg.cleanup()


if __name__ == "__main__":
    main()
