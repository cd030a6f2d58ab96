"""Retrieval metrics over memkit tables, computed by ranx (a well-kept library), plus
LoCoMo's own recall (the share of a question's evidence found in the top k)."""

from __future__ import annotations

import warnings

import polars as pl
from ranx import Qrels, Run, evaluate


def to_ranx_qrels(qrels: pl.DataFrame) -> Qrels:
    d: dict[str, dict[str, int]] = {}
    for q, e, rel in qrels.select("query_id", "event_id", "relevance").iter_rows():
        if rel > 0:
            d.setdefault(q, {})[e] = int(rel)
    return Qrels(d)


def to_ranx_run(run: pl.DataFrame, query_ids=None) -> Run:
    d: dict[str, dict[str, float]] = {q: {} for q in (query_ids or [])}
    for q, e, s in run.select("query_id", "event_id", "score").iter_rows():
        d.setdefault(q, {})[e] = float(s)
    return Run(d)


def score_run(run: pl.DataFrame, qrels: pl.DataFrame, metrics=("ndcg@10", "mrr@10", "recall@10")) -> dict:
    """Mean of each metric over the queries that have relevant events."""
    q = to_ranx_qrels(qrels)
    r = to_ranx_run(run.filter(pl.col("query_id").is_in(list(q.keys()))), list(q.keys()))
    with warnings.catch_warnings():
        # ranx's numba kernels warn about a uint64 -> int64 cast of its own; harmless.
        warnings.filterwarnings("ignore", message="unsafe cast from uint64")
        out = evaluate(q, r, list(metrics), make_comparable=True)
    return {m: float(out[m]) for m in metrics} if len(metrics) > 1 else {metrics[0]: float(out)}
