"""Tuning fusion weights honestly: leave-one-group-out cross-validation.

Anything chosen by looking at labels must be scored on questions it was not chosen on.
Here a group is a conversation (a question's first floor): for each group, the setting
with the best mean metric on the other groups is chosen and scored on that group; the
held-out scores together are the cross-validated estimate.

    runs = [part.fit(events).search(queries, 400) for part in parts]
    tables = fusion_tables(runs, dataset, grid)          # one per-query table per setting
    held_out, chosen = cross_validate(tables, "recall@10")
"""

from __future__ import annotations

from typing import Hashable, Sequence

import polars as pl

from memkit.core.tables import Dataset
from memkit.evaluation.metrics import METRICS, per_query
from memkit.retrieval import convex


def question_table(
    run: pl.DataFrame, dataset: Dataset, metrics=METRICS, exclude: Sequence[str] = ("adversarial",)
) -> pl.DataFrame:
    """Per-query metrics with ``group`` (the question's conversation) and ``category``;
    questions in the ``exclude`` categories are left out (LoCoMo's headline)."""
    q = dataset.queries.select(
        "query_id",
        pl.col("floor_ids").list.first().alias("group"),
        pl.col("category")
        if "category" in dataset.queries.columns
        else pl.lit(None).alias("category"),
    )
    q = q.filter(~pl.col("category").is_in(list(exclude)) | pl.col("category").is_null())
    return q.join(per_query(run, dataset.qrels, metrics), on="query_id", how="inner")


def fusion_tables(
    runs: list[pl.DataFrame],
    dataset: Dataset,
    grid: Sequence[Sequence[float]],
    top: int = 50,
    metrics=METRICS,
) -> dict[tuple, pl.DataFrame]:
    """For each weight vector of ``grid``: the per-query table of the convex fusion."""
    return {
        tuple(w): question_table(convex(runs, list(w), top=top), dataset, metrics) for w in grid
    }


def cross_validate(
    tables: dict[Hashable, pl.DataFrame], metric: str = "recall@10"
) -> tuple[pl.DataFrame, list]:
    """Leave-one-group-out: returns the held-out per-query table and ``(group, chosen setting)``."""
    settings = list(tables)
    groups = sorted(tables[settings[0]]["group"].unique().to_list())
    held, chosen = [], []
    for g in groups:
        train = {s: tables[s].filter(pl.col("group") != g)[metric].mean() for s in settings}
        best = max(settings, key=lambda s: train[s])  # ties: the first in grid order
        chosen.append((g, best))
        held.append(tables[best].filter(pl.col("group") == g))
    return pl.concat(held), chosen


def simplex_grid(parts: int, step: float = 0.1, minimum: float = 0.1) -> list[tuple[float, ...]]:
    """Weight vectors of ``parts`` entries, each >= ``minimum``, summing to 1, on a grid."""
    n = round(1 / step)
    lo = round(minimum / step)

    def rec(left, k):
        if k == 1:
            return [(left,)] if left >= lo else []
        return [(i, *rest) for i in range(lo, left + 1) for rest in rec(left - i, k - 1)]

    return [tuple(round(i * step, 10) for i in w) for w in rec(n, parts)]
