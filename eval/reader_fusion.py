"""How much the reader should weigh against the ranker, chosen leaving each data set out.

    .venv/bin/python eval/reader_fusion.py            # every data set `memkit eval --all` scores
    .venv/bin/python eval/reader_fusion.py --cached   # re-score the cached candidates only
    .venv/bin/python eval/reader_fusion.py PATH ...   # these data sets

The reader re-orders a question's first N posts by ``a·logit(ranker p) + b·reader logit``
(memkit/reader.py, ReaderStage.fuse); the order depends only on N and the weight ratio
w = b / a. This script asks every data set once with `memkit/configs/reader.toml`, keeps each
question's first 8 posts with the ranker's probability and the reader's logit (the ranking
itself is left as the ranker made it), then for each (N, w) on a grid re-orders them and
scores nDCG@10, MRR@10, R@5 and R@10 with the data set's qrels. For each data set, the
(N, w) that does best on average over the *other* data sets is chosen and scored on it: the
leave-one-data-set-out figure. The candidates are cached (``--out``), nothing derived from
the data sets is written into the repository.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl

from memkit.cli import found_datasets
from memkit.config import load_config
from memkit.datasets import load_any
from memkit.evaluation.harness import evaluate_pipeline
from memkit.evaluation.metrics import per_query
from memkit.pipeline import Pipeline
from memkit.reader import ReaderStage, _logit

METRICS = ["ndcg@10", "mrr@10", "recall@5", "recall@10"]
HEADLINE = {"locomo": "mrr@10", "cast": "mrr@10"}  # else nDCG@10 (R@10 cannot move: N <= 8)
WEIGHTS = [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 100.0]
DEPTHS = [2, 3, 5, 8]


def headline(name: str) -> str:
    return next((m for key, m in HEADLINE.items() if key in name.lower()), "ndcg@10")


def candidates(path: Path, config: dict) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, str]:
    """(the ranker's run, the reader's candidates, qrels, name) for one data set."""
    ds = load_any(path)
    seen: list[dict] = []

    def rerank(self, question, run, items_of):  # record, leave the ranking as it is
        run = run.sort("rank") if "rank" in run.columns else run
        head = run.head(self.candidates)
        items = {
            getattr(it, "event_id", None) or it["event_id"]: it
            for it in items_of(head["event_id"].to_list())
        }
        head = head.filter(pl.col("event_id").is_in(list(items)))
        if head.height:
            logits = self.post_logits(question, [items[e] for e in head["event_id"].to_list()])
            for row, lg in zip(head.iter_rows(named=True), logits):
                seen.append(
                    {
                        **{c: row[c] for c in ("query_id", "event_id", "score", "rank")},
                        "reader": float(lg),
                    }
                )
        return run

    original = ReaderStage.rerank
    ReaderStage.rerank = rerank
    try:
        result = evaluate_pipeline(Pipeline.from_config(config), ds, answers=False)
    finally:
        ReaderStage.rerank = original
    cands = pl.DataFrame(
        seen,
        schema={
            "query_id": pl.Utf8,
            "event_id": pl.Utf8,
            "score": pl.Float64,
            "rank": pl.Int64,
            "reader": pl.Float64,
        },
    )
    headline_ids = result.per_query.filter(
        pl.col("category").is_null() | (pl.col("category") != "adversarial")
    )["query_id"]
    run = result.run.filter(pl.col("query_id").is_in(headline_ids.implode()))
    return run, cands, ds.qrels, ds.name


def reordered(run: pl.DataFrame, cands: pl.DataFrame, depth: int, w: float) -> pl.DataFrame:
    """``run`` with each question's first ``depth`` read posts ordered by the fusion."""
    if w == 0 or cands.height == 0:
        return run
    head = cands.filter(pl.col("rank") <= depth).with_columns(
        (
            pl.Series(_logit(cands.filter(pl.col("rank") <= depth)["score"].to_numpy()))
            + w * pl.col("reader")
        ).alias("z")
    )
    order = head.sort(["query_id", "z", "event_id"], descending=[False, True, False]).with_columns(
        pl.int_range(1, pl.len() + 1).over("query_id").alias("new")
    )
    slots = (
        head.sort(["query_id", "rank"])
        .with_columns(  # the ranks the head held
            pl.int_range(1, pl.len() + 1).over("query_id").alias("new")
        )
        .select("query_id", "new", pl.col("rank").alias("slot"))
    )
    moved = order.join(slots, on=["query_id", "new"]).select("query_id", "event_id", "slot")
    out = (
        run.join(moved, on=["query_id", "event_id"], how="left")
        .with_columns(pl.coalesce("slot", "rank").alias("rank"))
        .drop("slot")
    )
    return out.with_columns((1.0 / pl.col("rank")).alias("score"))


def grid(run, cands, qrels) -> dict:
    qrels = qrels.filter(pl.col("query_id").is_in(run["query_id"].unique().implode()))
    out = {}
    for depth in DEPTHS:
        for w in WEIGHTS:
            table = per_query(reordered(run, cands, depth, w), qrels, METRICS)
            out[(depth, w)] = {m: float(table[m].mean()) for m in METRICS}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="memkit/configs/reader.toml")
    ap.add_argument("--out", default=str(Path.home() / ".cache/memkit/reader-fusion"))
    ap.add_argument("--cached", action="store_true")
    ap.add_argument("datasets", nargs="*", help="data set paths (default: what eval --all scores)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = load_config(args.config)
    scores = {}
    paths = [Path(p) for p in args.datasets] or [p for p, _ in found_datasets()]
    for path in paths:
        name = path.stem if path.suffix else path.name
        files = [out / f"{name}-{kind}.parquet" for kind in ("run", "cands", "qrels")]
        if not (args.cached and all(f.exists() for f in files)):
            run, cands, qrels, _ = candidates(path, config)
            for f, frame in zip(files, (run, cands, qrels)):
                frame.write_parquet(f)
        run, cands, qrels = (pl.read_parquet(f) for f in files)
        scores[name] = grid(run, cands, qrels)
        base = scores[name][(DEPTHS[0], 0.0)][headline(name)]
        best = max(scores[name].items(), key=lambda kv: kv[1][headline(name)])
        print(
            f"{name}: {headline(name)} {base:.4f}; in-set best {best[1][headline(name)]:.4f} "
            f"at N={best[0][0]} w={best[0][1]}",
            flush=True,
        )
    print("\nleave one data set out: (N, w) chosen on the others' mean gain in their headline")
    print(f"{'data set':<28}{'N':>3}{'w':>6}{'ranker':>9}{'fused':>9}{'change':>9}")
    rows = []
    for held in scores:
        others = [n for n in scores if n != held]

        def gain(key, names=others):
            return np.mean(
                [
                    scores[n][key][headline(n)] - scores[n][(DEPTHS[0], 0.0)][headline(n)]
                    for n in names
                ]
            )

        key = max(scores[held], key=gain)
        base, got = (scores[held][k][headline(held)] for k in ((DEPTHS[0], 0.0), key))
        rows.append({"data set": held, "N": key[0], "w": key[1], "ranker": base, "fused": got})
        print(f"{held:<28}{key[0]:>3}{key[1]:>6}{base:>9.4f}{got:>9.4f}{got - base:>+9.4f}")
    (out / "lodo.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
