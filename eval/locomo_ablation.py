"""LoCoMo-dev ablation: what each part of the indexed representation and the fusion adds.

    .venv/bin/python eval/locomo_ablation.py [--data PATH/locomo-dev.json]

Rows add one component at a time (speaker name, previous turn, next turn, session date,
fusion with MiniLM, session-level BM25 pooled into turn scores). Nothing in a row is
fitted on labels except the fusion weights, which are chosen by leave-one-conversation-out
cross-validation: for each of the five conversations, the weights with the best
recall@10 (categories 1-4) on the other four are used to score it. Prints a Markdown table
(recall@5/10 for categories 1-4, recall@10 per category) and the weight each fold chose.

The learned re-ranker on top of the last row is trained and cross-validated by
eval/train_ranker.py.
"""

from __future__ import annotations

import argparse
import sys

import polars as pl

from memkit.datasets import data_root
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


def main(argv=None) -> int:
    default = data_root()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(default / "locomo" / "locomo-dev.json"))
    args = p.parse_args(argv)
    ds = read_locomo(args.data, "locomo-dev")
    events = add_context(ds.events, before=1, after=1)
    queries = ds.queries.select("query_id", "text", "floor_ids")

    def run(kind: str, template: str, depth: int = 100):
        return build({"type": kind, "doc_template": template}).fit(events).search(queries, depth)

    print(
        "| representation / retriever | R@5 1-4 | R@10 1-4 | "
        + " | ".join(f"R@10 {c}" for c in CATS)
        + " | |"
    )
    print("|---|" + "---:|" * (2 + len(CATS)) + "---|")
    bm25 = {}
    for name, template in TEMPLATES.items():
        bm25[name] = run("bm25", template)
        print(row(f"{name}: BM25", table_of(bm25[name], ds)), flush=True)
    dense = {name: run("dense", TEMPLATES[name]) for name in ("text", "+ speaker", "+ next turn")}
    for name, r in dense.items():
        print(row(f"{name}: MiniLM", table_of(r, ds)), flush=True)
    print(
        row(
            "text: hybrid 0.5/0.5 (the old default)",
            table_of(convex([bm25["text"], dense["text"]], [0.5, 0.5], top=50), ds),
        )
    )
    for b in ("+ speaker", "+ previous turn", "+ date"):
        t, chosen = cross_validated_fusion([bm25[b], dense["+ speaker"]], ds)
        weights = ", ".join(f"{w[0]:.1f}" for _, w in chosen)
        print(
            row(
                f"BM25 ({b}) + MiniLM (+ speaker), convex, weight by CV",
                t,
                f"BM25 weight per fold: {weights}",
            ),
            flush=True,
        )
    session = run("bm25", "{session_text}", 400)  # every turn of a session gets its session's score
    print(row("session BM25 alone", table_of(session, ds)))
    t, chosen = cross_validated_fusion([bm25["+ date"], dense["+ speaker"], session], ds, WEIGHTS3)
    weights = "; ".join("/".join(f"{x:.1f}" for x in w) for _, w in chosen)
    print(
        row(
            "**BM25 (+ date) + MiniLM (+ speaker) + session BM25, convex, weights by CV** (= "
            "locomo-context, the default's first stage)",
            t,
            f"weights per fold: {weights}",
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
