"""LoCoMo-dev ablation: what each part of the indexed representation and the fusion adds.

    .venv/bin/python eval/locomo_ablation.py [--data PATH/locomo-dev.json]

Rows add one component at a time (speaker name, previous turn, next turn, session date,
fusion with MiniLM, session-level BM25 pooled into turn scores). Nothing in a row is
fitted on labels except the fusion weights, which are chosen by leave-one-conversation-out
cross-validation: for each of the five conversations, the weights with the best
recall@10 (categories 1-4) on the other four are used to score it. Prints a Markdown table (recall@5/10 for categories 1-4, recall@10 per
category) and the weight each fold chose.

The last row is a direction measured here before it becomes a pipeline part: a logistic
regression (scikit-learn) re-ranks the fused top 100 from features of every retriever
(min-max scores and reciprocal ranks of turn, text-only, previous-turn, next-turn and
session BM25 and of two MiniLM views; whether the question names the speaker; length;
whether the post is an image), trained on four conversations and scored on the fifth.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression

from memkit.datasets.locomo import read_locomo
from memkit.evaluation.tuning import cross_validate, fusion_tables, question_table, simplex_grid
from memkit.representation import add_context
from memkit.retrievers import build, convex

CATS = ["single-hop", "multi-hop", "temporal", "open-domain"]
METRICS = ["recall@5", "recall@10"]
WEIGHTS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]  # BM25's weight; MiniLM gets the rest
# (turn BM25, MiniLM, session BM25) on a 0.1 grid
WEIGHTS3 = [w for w in simplex_grid(3) if 0.2 <= w[0] and w[1] <= 0.5]
TEMPLATES = {
    "text": "{text}",
    "+ speaker": "{line}",
    "+ previous turn": "{prev_lines}\n{line}",
    "+ next turn": "{prev_lines}\n{line}\n{next_lines}",
    "+ date": "{date}. {prev_lines}\n{line}\n{next_lines}",
}


def table_of(run, ds) -> pl.DataFrame:
    """Per-query recall for the headline questions (categories 1-4), with conversation."""
    return question_table(run, ds, METRICS)


def row(name: str, t: pl.DataFrame, note: str = "") -> str:
    cells = [f"{t[m].mean():.4f}" for m in METRICS]
    cells += [f"{t.filter(pl.col('category') == c)['recall@10'].mean():.4f}" for c in CATS]
    return f"| {name} | " + " | ".join(cells) + f" | {note} |"


def cross_validated_fusion(runs, ds, grid=None) -> tuple[pl.DataFrame, list]:
    grid = grid or [(w, round(1 - w, 1)) for w in WEIGHTS]
    return cross_validate(fusion_tables(runs, ds, grid, metrics=METRICS), "recall@10")


def learned_rerank(parts: dict, fused, ds, events) -> pl.DataFrame:
    """Cross-validated re-ranking of ``fused`` (top 100) by a logistic regression."""
    cand = fused.select("query_id", "event_id", pl.col("score").alias("fused"), (1.0 / (pl.col("rank") + 5)).alias("fused_r"))
    for name, r in parts.items():
        lo, hi = pl.col("score").min().over("query_id"), pl.col("score").max().over("query_id")
        r = r.select("query_id", "event_id", pl.when(hi > lo).then((pl.col("score") - lo) / (hi - lo)).otherwise(1.0).alias(name),
                     (1.0 / (pl.col("rank") + 5)).alias(f"{name}_r"))
        cand = cand.join(r, on=["query_id", "event_id"], how="left")
    questions = ds.queries.select("query_id", pl.col("floor_ids").list.first().alias("conv"), pl.col("text").alias("q"))
    posts = events.select("event_id", pl.col("user_id").fill_null("").alias("spk"),
                          pl.col("text").str.len_chars().log1p().alias("loglen"),
                          pl.col("text").str.contains(r"\[image:").cast(pl.Float64).alias("img"))
    rel = ds.qrels.filter(pl.col("relevance") > 0).select("query_id", "event_id", pl.lit(1).alias("y"))
    cand = (cand.fill_null(0.0).join(questions, on="query_id").join(posts, on="event_id")
            .with_columns(pl.col("q").str.contains(pl.col("spk"), literal=True).cast(pl.Float64).alias("spk_in_q"))
            .join(rel, on=["query_id", "event_id"], how="left").with_columns(pl.col("y").fill_null(0)))
    features = ["fused", "fused_r", *[c for n in parts for c in (n, f"{n}_r")], "spk_in_q", "loglen", "img"]
    out = []
    for conv in sorted(cand["conv"].unique().to_list()):
        train, test = cand.filter(pl.col("conv") != conv), cand.filter(pl.col("conv") == conv)
        model = LogisticRegression(max_iter=2000).fit(train.select(features).to_numpy(), train["y"].to_numpy())
        p = model.predict_proba(test.select(features).to_numpy())[:, 1]
        out.append(test.select("query_id", "event_id").with_columns(pl.Series("score", np.asarray(p, np.float64))))
    return (pl.concat(out).sort(["query_id", "score", "event_id"], descending=[False, True, False])
            .with_columns(pl.col("score").cum_count().over("query_id").cast(pl.Int64).alias("rank"),
                          pl.lit("hybrid").alias("match_type")))


def main(argv=None) -> int:
    default = Path(os.environ.get("MEMKIT_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(default / "locomo" / "locomo-dev.json"))
    args = p.parse_args(argv)
    ds = read_locomo(args.data, "locomo-dev")
    events = add_context(ds.events, before=1, after=1)
    queries = ds.queries.select("query_id", "text", "floor_ids")

    def run(kind: str, template: str, depth: int = 100):
        return build({"type": kind, "doc_template": template}).fit(events).search(queries, depth)

    print("| representation / retriever | R@5 1-4 | R@10 1-4 | " + " | ".join(f"R@10 {c}" for c in CATS) + " | |")
    print("|---|" + "---:|" * (2 + len(CATS)) + "---|")
    bm25 = {}
    for name, template in TEMPLATES.items():
        bm25[name] = run("bm25", template)
        print(row(f"{name}: BM25", table_of(bm25[name], ds)), flush=True)
    dense = {name: run("dense", TEMPLATES[name]) for name in ("text", "+ speaker")}
    for name, r in dense.items():
        print(row(f"{name}: MiniLM", table_of(r, ds)), flush=True)
    print(row("text: hybrid 0.5/0.5 (the old default)", table_of(convex([bm25["text"], dense["text"]], [0.5, 0.5], top=50), ds)))
    for b in ("+ speaker", "+ previous turn", "+ date"):
        t, chosen = cross_validated_fusion([bm25[b], dense["+ speaker"]], ds)
        weights = ", ".join(f"{w[0]:.1f}" for _, w in chosen)
        print(row(f"BM25 ({b}) + MiniLM (+ speaker), convex, weight by CV", t, f"BM25 weight per fold: {weights}"),
              flush=True)
    session = run("bm25", "{session_text}", 400)  # every turn of a session gets its session's score
    print(row("session BM25 alone", table_of(session, ds)))
    t, chosen = cross_validated_fusion([bm25["+ date"], dense["+ speaker"], session], ds, WEIGHTS3)
    weights = "; ".join("/".join(f"{x:.1f}" for x in w) for _, w in chosen)
    print(row("**BM25 (+ date) + MiniLM (+ speaker) + session BM25, convex, weights by CV** (the default)", t,
              f"weights per fold: {weights}"), flush=True)
    parts = {"turn": bm25["+ date"], "text": bm25["+ speaker"], "dense": dense["+ speaker"], "session": session,
             "prev": run("bm25", "{prev_lines}", 400), "next": run("bm25", "{next_lines}", 400),
             "dense_prev": run("dense", "{prev_lines}\n{line}", 400)}
    fused = convex([bm25["+ date"], dense["+ speaker"], session], [0.4, 0.3, 0.3], top=100)
    print(row("the default's top 100 re-ranked by a logistic regression, trained by CV", table_of(
        learned_rerank(parts, fused, ds, events), ds), "not yet a pipeline part"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
