"""Retrieval metrics over memkit tables, computed in Polars.

- ``recall@k``: the share of a query's relevant events found in the top k (LoCoMo's own
  definition of recall, and the usual one for binary relevance);
- ``ndcg@k``: linear gain ``rel / log2(rank + 1)``, normalised by the ideal ordering (as
  trec_eval's ``ndcg_cut`` and ranx's ``ndcg``);
- ``mrr@k``: reciprocal rank of the first relevant event within the top k, else 0.

Only queries with at least one relevant event are scored. Metrics follow the run's ``rank``
column. ``tests/test_metrics.py`` checks every number against ranx and against trec_eval
(pytrec-eval-terrier) reading the written TREC run file. (ranx itself is not called here:
its numba kernels compile anew in every process, ~30 s, longer than a whole eval.)
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

METRICS = ["recall@5", "recall@10", "recall@25", "recall@50", "ndcg@10", "mrr@10"]


def _parse(metric: str) -> tuple[str, int]:
    name, _, k = metric.partition("@")
    if name not in ("recall", "ndcg", "mrr") or not k.isdigit():
        raise ValueError(f"metric: expected recall@k, ndcg@k or mrr@k, got {metric!r}")
    return name, int(k)


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, metrics=METRICS) -> pl.DataFrame:
    """One row per query with relevant events: ``query_id`` and one column per metric."""
    metrics = list(metrics)
    parsed = [_parse(m) for m in metrics]
    rel = qrels.filter(pl.col("relevance") > 0).select(
        "query_id", "event_id", pl.col("relevance").cast(pl.Float64)
    )
    kmax = max(k for _, k in parsed)
    hits = (
        run.filter(pl.col("rank") <= kmax)
        .select("query_id", "event_id", "rank")
        .join(rel, on=["query_id", "event_id"], how="inner")
    )
    # Ideal DCG at each cut-off: relevances sorted descending per query.
    ideal = rel.sort(["query_id", "relevance"], descending=[False, True]).with_columns(
        pl.int_range(1, pl.len() + 1).over("query_id").alias("irank")
    )
    base = rel.group_by("query_id").agg(pl.len().alias("n_rel"))
    cols = []
    for m, (name, k) in zip(metrics, parsed):
        top = hits.filter(pl.col("rank") <= k)
        if name == "recall":
            part = top.group_by("query_id").agg(pl.len().alias("_v")).join(base, on="query_id")
            part = part.select("query_id", (pl.col("_v") / pl.col("n_rel")).alias(m))
        elif name == "mrr":
            part = top.group_by("query_id").agg((1.0 / pl.col("rank").min()).alias(m))
        else:
            dcg = top.group_by("query_id").agg(
                (pl.col("relevance") / (pl.col("rank") + 1).log(2)).sum().alias("dcg")
            )
            idcg = (
                ideal.filter(pl.col("irank") <= k)
                .group_by("query_id")
                .agg((pl.col("relevance") / (pl.col("irank") + 1).log(2)).sum().alias("idcg"))
            )
            part = dcg.join(idcg, on="query_id").select(
                "query_id", (pl.col("dcg") / pl.col("idcg")).alias(m)
            )
        cols.append(part)
    out = base.select("query_id")
    for part in cols:
        out = out.join(part, on="query_id", how="left")
    return out.fill_null(0.0).sort("query_id")


def score_run(
    run: pl.DataFrame, qrels: pl.DataFrame, metrics=("ndcg@10", "mrr@10", "recall@10")
) -> dict:
    """Mean of each metric over the queries that have relevant events."""
    table = per_query(run, qrels, list(metrics))
    return {m: float(table[m].mean()) if table.height else math.nan for m in metrics}


def summarize(
    table: pl.DataFrame,
    queries: pl.DataFrame,
    metrics=METRICS,
    exclude_from_headline=("adversarial",),
) -> dict:
    """Means overall (``all``), for the headline subset (all but the excluded categories,
    e.g. LoCoMo's adversarial questions) and per category."""
    joined = (
        table
        if "category" in table.columns
        else table.join(queries.select("query_id", "category"), on="query_id", how="left")
    )
    out = {"all": {m: float(joined[m].mean()) for m in metrics} | {"queries": joined.height}}
    cats = [c for c in joined["category"].unique().to_list() if c is not None]
    if cats:
        head = joined.filter(
            ~pl.col("category").is_in(list(exclude_from_headline)) | pl.col("category").is_null()
        )
        if head.height != joined.height:
            out["headline"] = {m: float(head[m].mean()) for m in metrics} | {"queries": head.height}
        for c in sorted(cats):
            sub = joined.filter(pl.col("category") == c)
            out[f"category:{c}"] = {m: float(sub[m].mean()) for m in metrics} | {
                "queries": sub.height
            }
    return out


def write_trec_run(run: pl.DataFrame, path, tag: str = "memkit") -> None:
    """A standard TREC run file: ``qid Q0 docid rank score tag``.

    trec_eval and most TREC tools re-sort by score, held in single precision, and break
    ties their own way. So scores are written as float32 values that strictly decrease in
    rank order (a score that does not is lowered one float32 step below the one before):
    any tool then reads exactly memkit's ranking.
    """
    run = run.sort("query_id", "rank")
    qid = run["query_id"].to_list()
    s32 = run["score"].to_numpy().astype(np.float32)
    follows = np.zeros(len(qid), bool)  # the row before is of the same query
    follows[1:] = np.array(qid[1:]) == np.array(qid[:-1]) if len(qid) > 1 else []
    low = np.float32(-np.inf)
    done = -1
    for i in np.flatnonzero(
        follows & (s32 >= np.roll(s32, 1))
    ).tolist():  # ties (rare): lower them one by one
        j = max(i, done + 1)
        while j < len(s32) and follows[j] and s32[j] >= s32[j - 1]:
            s32[j] = np.nextafter(s32[j - 1], low, dtype=np.float32)
            j += 1
        done = j - 1
    # Each float32 is written as the shortest decimal that reads back as it (polars' CSV
    # writer), so the scores stay strictly decreasing in every tool's reading.
    pl.DataFrame(
        {
            "qid": qid,
            "q0": "Q0",
            "docid": run["event_id"],
            "rank": run["rank"],
            "score": s32,
            "tag": tag,
        }
    ).write_csv(path, separator=" ", include_header=False, quote_style="never")


def read_trec_run(path) -> pl.DataFrame:
    """Read a TREC run file back into a run table (match_type unknown: ``keyword``)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            q, _, e, rank, score, _tag = line.split()
            rows.append((q, e, float(score), int(rank), "keyword"))
    return pl.DataFrame(
        rows,
        schema={
            "query_id": pl.Utf8,
            "event_id": pl.Utf8,
            "score": pl.Float64,
            "rank": pl.Int64,
            "match_type": pl.Utf8,
        },
        orient="row",
    )
