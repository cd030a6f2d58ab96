"""Retriever benchmark on generated events (memkit.datasets.synthetic), all in one process.

    .venv/bin/python eval/bench/retrievers.py [--n 100000] [--queries 300]

Prints markdown tables:
1. sparse: index build time and queries/s for TF-IDF, BM25 (memkit) and bm25s on the same
   events with the same analyzer, plus top-10 agreement between the two BM25s and the
   cost of adding 1,000 events (memkit: add; bm25s: has no add, so a full re-index);
2. dense: per-query latency of exact search and of HNSW (usearch) at several collection
   sizes, HNSW recall@10 against exact, and filtered searches on the largest size.
The first run encodes every event (minutes; cached in the embedding cache after that).
"""

from __future__ import annotations

import argparse
import time

import bm25s
import numpy as np

from memkit.core.text import Analyzer
from memkit.datasets.synthetic import generate_events, generate_queries
from memkit.models.encoders import get_encoder
from memkit.retrieval import BM25Retriever, DenseRetriever, Filters, TfidfRetriever


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


def sparse_table(events, queries, k=10):
    rows = []
    texts = events["text"].to_list()
    ours = {}
    for name, make in [("TF-IDF (memkit)", TfidfRetriever), ("BM25 (memkit)", BM25Retriever)]:
        r, build = timed(make().fit, events)
        r.search(queries[:5], k)  # warm-up, as for bm25s below
        run, qt = timed(r.search, queries, k)
        ours[name] = (r, run)
        rows.append((name, build, len(queries) / qt))
    analyzer = Analyzer()

    qtok = [analyzer(q) for q in queries]
    for backend in ("numba", "numpy"):

        def bm25s_build():
            ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend=backend)
            ref.index([analyzer(t) for t in texts], show_progress=False)
            return ref

        ref, build = timed(bm25s_build)
        ref.retrieve(
            qtok[:5], k=k, n_threads=1, show_progress=False
        )  # warm-up: numba compiles on first use
        (docs, ref_scores), qt = timed(ref.retrieve, qtok, k=k, n_threads=1, show_progress=False)
        rows.append(
            (f"BM25 (bm25s {bm25s.__version__}, {backend} backend)", build, len(queries) / qt)
        )

    # Agreement of the two BM25s: the top-10 scores are the same numbers (the events may
    # differ only where scores tie, as each library breaks ties its own way).
    r, run = ours["BM25 (memkit)"]
    agree = []
    for i, q in enumerate(map(str, range(len(queries)))):
        mine = np.sort(run.filter(run["query_id"] == q)["score"].to_numpy())[::-1]
        theirs = np.sort(ref_scores[i])[::-1][: len(mine)]
        agree.append(len(mine) == len(theirs[theirs > 0]) and np.allclose(mine, theirs, atol=1e-4))
    extra = generate_events(1000, seed=99)
    _, add_ours = timed(r.add, extra)
    _, add_ref = timed(
        lambda: bm25s.BM25(k1=1.2, b=0.75).index(
            [analyzer(t) for t in texts + extra["text"].to_list()], show_progress=False
        )
    )
    floor = Filters(floor_ids=[events["floor_id"][0]])
    _, fq = timed(r.search, queries, k, floor)
    print(
        f"\n### Sparse retrievers, {events.height:,} events, {len(queries)} queries, k={k}, one "
        "thread\n"
    )
    print("| retriever | build (s) | queries/s |")
    print("|---|---:|---:|")
    for name, b, qps in rows:
        print(f"| {name} | {b:.1f} | {qps:,.0f} |")
    print(
        f"\n- queries/s, BM25 memkit / bm25s numba: {rows[1][2] / rows[2][2]:.2f}x; / bm25s numpy: "
        f"{rows[1][2] / rows[3][2]:.2f}x; build time memkit / bm25s: {rows[1][1] / rows[2][1]:.2f}x"
    )
    print(
        "- queries whose top-10 BM25 scores are identical in memkit and bm25s: "
        f"{np.mean(agree):.1%}"
    )
    print(
        f"- adding 1,000 events: memkit add {add_ours:.2f} s; bm25s (no add) full re-index "
        f"{add_ref:.1f} s"
    )
    print(f"- memkit BM25 with a one-floor filter: {len(queries) / fq:,.0f} queries/s")


def dense_table(events, queries, sizes, k=10):
    enc = get_encoder("minilm")
    t = time.perf_counter()
    vecs = enc.encode(events["text"].to_list(), show_progress=True)
    enc_s = time.perf_counter() - t
    qv = enc.encode(queries)
    print(
        f"\n### Dense retrieval (MiniLM, 384 d), {len(queries)} queries, k={k}, one query at a "
        "time, HNSW with the default parameters\n"
    )
    print(f"(encoding {events.height:,} events took {enc_s:.0f} s, from the cache where warm)\n")
    print(
        "| events | exact ms/query | HNSW build (s) | HNSW ms/query | HNSW recall@10 vs exact | "
        "speed-up |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    largest = None
    for n in sizes:
        sub = events.head(n)
        exact = DenseRetriever(exact_below=10**9)
        exact.catalog.append(sub)
        exact.add_vectors(vecs[:n])
        hnsw = DenseRetriever(exact_below=0)
        hnsw.catalog.append(sub)
        hnsw.add_vectors(vecs[:n])
        _, build = timed(hnsw._graph)
        mask = [exact.catalog.alive] * 1
        ex, te = timed(
            lambda: [exact.search_vectors(qv[i : i + 1], k, mask)[0] for i in range(len(qv))]
        )
        hn, th = timed(
            lambda: [hnsw.search_vectors(qv[i : i + 1], k, mask)[0] for i in range(len(qv))]
        )
        recall = np.mean([len(set(a[0]) & set(b[0])) / k for a, b in zip(ex, hn)])
        print(
            f"| {n:,} | {1000 * te / len(qv):.2f} | {build:.1f} | {1000 * th / len(qv):.2f} | "
            f"{recall:.3f} | {te / th:.1f}x |"
        )
        largest = (exact, hnsw)
    exact, hnsw = largest
    graph, default_ef = hnsw._graph(), hnsw.expansion_search
    full = [exact.catalog.alive]
    ref = [exact.search_vectors(qv[i : i + 1], k, full)[0][0] for i in range(len(qv))]
    print(f"\nHNSW search breadth (expansion_search) on {sizes[-1]:,} events:\n")
    print("| expansion_search | ms/query | recall@10 vs exact |")
    print("|---:|---:|---:|")
    for ef in (64, 128, 256, 512, 1024):
        graph.expansion_search = ef
        got, th = timed(
            lambda: [hnsw.search_vectors(qv[i : i + 1], k, full)[0][0] for i in range(len(qv))]
        )
        recall = np.mean([len(set(a) & set(b)) / k for a, b in zip(ref, got)])
        print(
            f"| {ef}{' (default)' if ef == default_ef else ''} | {1000 * th / len(qv):.2f} | "
            f"{recall:.3f} |"
        )
    graph.expansion_search = default_ef
    print(f"\nFiltered searches on {sizes[-1]:,} events (HNSW retriever; exact as reference):\n")
    print("| filter | admits | ms/query | recall@10 vs exact |")
    print("|---|---:|---:|---:|")
    for label, f in [
        ("one floor", Filters(floor_ids=[events["floor_id"][0]])),
        ("block type forum", Filters(types=["forum"])),
        ("tag travel", Filters(tags=["travel"])),
        ("last 6 months", Filters(time_from="2024-07-01")),
    ]:
        m = hnsw.catalog.mask(f)
        ex = [exact.search_vectors(qv[i : i + 1], k, [m])[0] for i in range(len(qv))]
        hn, th = timed(
            lambda: [hnsw.search_vectors(qv[i : i + 1], k, [m])[0] for i in range(len(qv))]
        )
        ok = all(m[p].all() for p, _ in hn)
        recall = np.mean([len(set(a[0]) & set(b[0])) / max(1, len(a[0])) for a, b in zip(ex, hn)])
        assert ok, "a filtered HNSW search returned an event the filter does not admit"
        print(f"| {label} | {m.mean():.1%} | {1000 * th / len(qv):.2f} | {recall:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--sizes", default="5000,10000,20000,50000,100000")
    ap.add_argument("--skip-dense", action="store_true")
    args = ap.parse_args()
    events = generate_events(args.n, seed=0)
    queries = generate_queries(args.queries, seed=1)
    sparse_table(events, queries)
    if not args.skip_dense:
        sizes = [s for s in map(int, args.sizes.split(",")) if s <= args.n]
        dense_table(events, queries, sizes)


if __name__ == "__main__":
    main()
