"""Train the learned re-ranker of a config, report its cross-validated score, write its model.

    .venv/bin/python eval/train_ranker.py [--config eval/configs/default.toml] [--data PATH/locomo-dev.json] [--write]

The config's retriever must be ``type = "learned"``. Its candidates and features are
computed once; a logistic regression (scikit-learn, standardised features) is then
trained on four conversations and scored on the fifth, for each conversation in turn:
that held-out score is the estimate to report. Finally it is trained on all five; with
``--write`` its numbers replace the config's ``[retriever.model]`` table (kept last in
the file). The model is 58 numbers (coefficient, mean and scale of 19 features, an intercept); no data is stored.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl

from memkit.config import load_config
from memkit.datasets.locomo import read_locomo
from memkit.evaluation.tuning import question_table, training_args
from memkit.linear import fit_linear, linear_score, toml_table
from memkit.pipeline import Pipeline
from memkit.retrievers import LearnedRetriever

MARK = "# [retriever.model] is written by eval/train_ranker.py --write"
CATS = ["single-hop", "multi-hop", "temporal", "open-domain"]


def ranked(cand: pl.DataFrame, scores: np.ndarray) -> pl.DataFrame:
    return (cand.select("query_id", "event_id", "match_type").with_columns(pl.Series("score", scores, pl.Float64))
            .sort(["query_id", "score", "event_id"], descending=[False, True, False])
            .with_columns(pl.col("score").cum_count().over("query_id").cast(pl.Int64).alias("rank")))


def report(name: str, table: pl.DataFrame) -> str:
    cats = " ".join(f"{c} {table.filter(pl.col('category') == c)['recall@10'].mean():.4f}" for c in CATS)
    return f"{name}: R@5 {table['recall@5'].mean():.4f} R@10 {table['recall@10'].mean():.4f} (R@10 {cats})"


def main(argv=None) -> int:
    args = training_args(__doc__, argv, "the model")

    config = load_config(args.config)
    config["retriever"].pop("model", None)
    pipeline = Pipeline.from_config(config)
    if not isinstance(pipeline.retriever, LearnedRetriever):
        print(f"{args.config}: the retriever is not type = \"learned\"", file=sys.stderr)
        return 2
    ds = read_locomo(args.data, "locomo-dev")
    pipeline.fit(ds.events)
    cand = pipeline.retriever.features(ds.queries.select("query_id", "text", "floor_ids"))
    rel = ds.qrels.filter(pl.col("relevance") > 0).select("query_id", "event_id", pl.lit(1).alias("y"))
    conv = ds.queries.select("query_id", pl.col("floor_ids").list.first().alias("conv"))
    cand = cand.join(rel, on=["query_id", "event_id"], how="left").with_columns(pl.col("y").fill_null(0)).join(conv, on="query_id")
    names = pipeline.retriever.feature_names()
    x, y = cand.select(names).to_numpy(), cand["y"].to_numpy()

    print(report("first stage (the hybrid alone)", question_table(ranked(cand, cand["fused"].to_numpy()), ds)))
    held = np.zeros(cand.height)
    for c in sorted(cand["conv"].unique().to_list()):
        train_rows = (cand["conv"] != c).to_numpy()
        held[~train_rows] = linear_score(fit_linear(x[train_rows], y[train_rows], names), x[~train_rows])
    print(report("re-ranked, leave-one-conversation-out", question_table(ranked(cand, held), ds)))
    model = fit_linear(x, y, names)
    print(report("re-ranked, trained on all (in-sample, flatters)", question_table(ranked(cand, linear_score(model, x)), ds)))

    if args.write:
        text = Path(args.config).read_text()
        text = text.split(MARK)[0].rstrip() + "\n\n" + MARK + "\n" + toml_table("retriever.model", model)
        Path(args.config).write_text(text)
        print(f"model written to {args.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
