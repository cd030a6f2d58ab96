"""Fusion of runs, and the hybrid retriever that fuses any retrievers.

Fusion functions take run tables and return a run table; they never see an index, so
any retriever (or a run file from elsewhere) can feed them.

- ``rrf``: reciprocal rank fusion, ``sum_i w_i / (k + rank_i)`` (Cormack et al. 2009).
- ``convex``: a weighted sum of per-query normalised scores (min-max or z-score); an
  event missing from a run counts as that run's minimum (0 after min-max). Bruch et al.
  (2023) found a tuned convex combination beats RRF.

``match_type`` of a fused row says where it came from: ``keyword`` or ``semantic`` if
only runs of that kind returned it, ``hybrid`` if both kinds did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl

from memkit.config.model import HybridSpec
from memkit.core.errors import ValidationError
from memkit.core.tables import RUN_SCHEMA
from memkit.retrieval.base import (
    Catalog,
    Retriever,
    make_run,
    normalize_queries,
    query_filters,
    search_with_time,
)
from memkit.retrieval.registry import build, register


def _rank_and_cut(fused: pl.LazyFrame, k: int | None) -> pl.LazyFrame:
    fused = fused.sort(["query_id", "score", "event_id"], descending=[False, True, False])
    fused = fused.with_columns(
        pl.col("score").cum_count().over("query_id").cast(pl.Int64).alias("rank")
    )
    if k is not None:
        fused = fused.filter(pl.col("rank") <= k)
    return fused.select(list(RUN_SCHEMA)).cast(RUN_SCHEMA)


def _match_type() -> pl.Expr:
    kinds = pl.col("match_types").list.unique()
    return (
        pl.when(kinds.list.contains("hybrid") | (kinds.list.len() > 1))
        .then(pl.lit("hybrid"))
        .otherwise(kinds.list.first())
        .alias("match_type")
    )


def _check_weights(runs: Sequence[pl.DataFrame], weights) -> list[float]:
    if weights is None:
        return [1.0 / len(runs)] * len(runs)
    weights = list(weights)
    if len(weights) != len(runs):
        raise ValidationError("weights", f"expected {len(runs)} weights, got {len(weights)}")
    return [float(w) for w in weights]


def _rrf_weights(runs: Sequence, weights) -> list[float]:
    """RRF's weights: as given, else 1 for every run."""
    return _check_weights(runs, weights if weights is not None else [1.0] * len(runs))


def rrf(
    runs: Sequence[pl.DataFrame], k: int = 60, weights=None, top: int | None = None
) -> pl.DataFrame:
    """Reciprocal rank fusion of runs: ``sum_i w_i / (k + rank_i)``."""
    weights = _rrf_weights(runs, weights)
    if sum(r.height for r in runs) <= FEW_ROWS:
        return _convex_few(runs, weights, top, norm="rrf", rrf_k=k)
    parts = [
        r.lazy().with_columns((w / (k + pl.col("rank"))).alias("part"))
        for r, w in zip(runs, weights)
    ]
    return _fuse(parts, top)


def convex(
    runs: Sequence[pl.DataFrame], weights=None, norm: str = "minmax", top: int | None = None
) -> pl.DataFrame:
    """Convex combination of normalised scores: ``sum_i w_i * norm(score_i)``; ``norm =
    "none"`` for scores already on one scale (probabilities: a weighted mean, missing = 0)."""
    weights = _check_weights(runs, weights)
    if norm not in ("minmax", "zscore", "none"):
        raise ValidationError("norm", f"expected 'minmax', 'zscore' or 'none', got {norm!r}")
    if norm != "zscore" and sum(r.height for r in runs) <= FEW_ROWS:
        return _convex_few(runs, weights, top, norm)
    return _convex_frames(runs, weights, norm, top)


def _convex_frames(
    runs: Sequence[pl.DataFrame], weights: list[float], norm: str, top: int | None
) -> pl.DataFrame:
    """``convex`` as one polars query over any number of queries' runs."""
    parts = []
    for r, w in zip(runs, weights):
        s = pl.col("score")
        if norm == "none":
            z = s
        elif norm == "minmax":
            lo, hi = s.min().over("query_id"), s.max().over("query_id")
            z = pl.when(hi > lo).then((s - lo) / (hi - lo)).otherwise(1.0)
        else:
            mu, sd = s.mean().over("query_id"), s.std(ddof=0).over("query_id")
            # Missing = the run's minimum, so shift z-scores to start at 0 per query.
            z = pl.when(sd > 0).then((s - mu) / sd).otherwise(0.0)
            z = z - z.min().over("query_id")
        parts.append(r.lazy().with_columns((w * z).alias("part")))
    return _fuse(parts, top)


FEW_ROWS = 5000  # runs up to this many rows in all are fused by _convex_few


def _convex_few(
    runs: Sequence[pl.DataFrame],
    weights: list[float],
    top: int | None,
    norm: str = "minmax",
    rrf_k: int = 60,
) -> pl.DataFrame:
    """``convex`` (min-max, or none) of a few queries' runs in numpy: what the service
    does for every request (a question and its follow-up variants, one query id each).
    The same numbers as ``_convex_frames``' polars query, which costs about 1.7 ms in fixed
    overhead for a few hundred rows, more than the fusion itself; a test checks the two
    agree. ``norm="rrf"``: ``rrf``'s parts, ``1 / (rrf_k + rank)``, as its polars query
    sums them."""
    parts = _Parts(norm, rrf_k)
    for r, w in zip(runs, weights):
        if not r.height:
            continue
        qids = r["query_id"].to_list()
        events = np.array(r["event_id"].to_list())
        scores = r["score"].to_numpy()
        ranks = r["rank"].to_numpy()
        kinds = np.array(r["match_type"].to_list())
        rows: dict = {}
        if qids[0] == qids[-1] and len(set(qids)) == 1:
            rows[qids[0]] = slice(None)
        else:
            for i, q in enumerate(qids):
                rows.setdefault(q, []).append(i)
        for qid, at in rows.items():
            parts.add(qid, events[at], scores[at], ranks[at], kinds[at].tolist(), w)
    return parts.fused(top)


class _Parts:
    """A few queries' runs gathered for ``_convex_few``'s fusion: per query id, each run's
    keys (event ids), normalised and weighted parts, and match types, runs in order."""

    def __init__(self, norm: str, rrf_k: int):
        self.norm, self.rrf_k = norm, rrf_k
        self.by_query: dict = {}  # query id -> ([keys], [parts], [weights], [kinds])

    def add(self, qid, events: np.ndarray, scores, ranks, kinds: list[str], w: float) -> None:
        keys, parts, used, seen = self.by_query.setdefault(qid, ([], [], [], []))
        keys.append(events)
        if self.norm == "rrf":  # weighted as rrf's polars query weighs it
            parts.append(w / (self.rrf_k + ranks))
        else:
            parts.append(scores if self.norm == "none" else minmax(scores))
        used.append(1.0 if self.norm == "rrf" else w)
        seen += kinds

    def fused(self, top: int | None) -> pl.DataFrame:
        if not self.by_query:
            return pl.DataFrame(schema=RUN_SCHEMA)
        cols: dict[str, list] = {"query_id": [], "event_id": [], "score": [], "rank": []}
        match_types: list[str] = []
        for qid in sorted(self.by_query):
            keys, parts, used, kinds = self.by_query[qid]
            found, where, score = convex_sum(keys, parts, used)
            seen: list[set] = [set() for _ in found]
            for i, kind in zip(where.tolist(), kinds):
                seen[i].add(kind)
            order = np.lexsort((found, -score))[:top]
            match_types += [
                "hybrid" if len(seen[i]) > 1 or "hybrid" in seen[i] else next(iter(seen[i]))
                for i in order.tolist()
            ]
            cols["query_id"] += [qid] * len(order)
            cols["event_id"] += found[order].tolist()
            cols["score"] += score[order].tolist()
            cols["rank"] += range(1, len(order) + 1)
        return pl.DataFrame({**cols, "match_type": match_types}, schema=RUN_SCHEMA)


def minmax(scores: np.ndarray) -> np.ndarray:
    """One run's scores scaled to [0, 1] by its own minimum and maximum; all ones when
    they are all equal (a single hit, say)."""
    lo, hi = (float(scores.min()), float(scores.max())) if len(scores) else (0.0, 0.0)
    return (scores - lo) / (hi - lo) if hi > lo else np.ones(len(scores))


def convex_sum(
    keys: Sequence[np.ndarray], parts: Sequence[np.ndarray], weights: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One query's convex combination ``sum_i w_i * part_i`` over several runs, a key
    missing from a run counting 0 there: ``keys[i]`` are run i's keys (event ids or
    catalog positions) and ``parts[i]`` their normalised scores (``minmax``). Returns
    the distinct keys (ascending), each input key's index into them, and their fused
    scores (summed in run order). The hybrid's ``convex`` and the learned retriever's
    first stage both fuse with it."""
    found, where = np.unique(np.concatenate(keys), return_inverse=True)
    weighted = np.concatenate([w * z for z, w in zip(parts, weights)])
    return found, where, np.bincount(where, weights=weighted, minlength=len(found))


def _fuse(parts: list[pl.LazyFrame], top: int | None) -> pl.DataFrame:
    """The fused run, as one lazy query collected once: a query's fusion (two runs of a
    hundred rows) then costs one pass of polars' per-call overhead, not one per step."""
    parts = [p.select("query_id", "event_id", "part", "match_type") for p in parts]
    if not parts:
        return pl.DataFrame(schema=RUN_SCHEMA)
    fused = (
        pl.concat(parts)
        .group_by("query_id", "event_id")
        .agg(pl.col("part").sum().alias("score"), pl.col("match_type").alias("match_types"))
        .with_columns(_match_type())
    )
    return _rank_and_cut(fused, top).collect()


@register
class HybridRetriever(Retriever):
    """Fuses the runs of several retrievers, each asked for ``depth`` candidates under the
    same filters (so the fused list is filtered before its top k, too)."""

    type_name = "hybrid"
    match_type = "hybrid"
    child_params = ("retrievers",)

    spec = HybridSpec

    def _built(self) -> None:
        self.retrievers = [r if isinstance(r, Retriever) else build(r) for r in self.retrievers]

    def children(self) -> list[Retriever]:
        return list(self.retrievers)

    def _reset(self) -> None:
        for r in self.retrievers:
            r._reset()
            r.catalog = Catalog()

    def fit(self, events):
        for r in self.retrievers:
            r.fit(events)
        self.catalog = self.retrievers[0].catalog
        return self

    def add(self, events):
        for r in self.retrievers:
            r.add(events)
        self.catalog = self.retrievers[0].catalog
        return self

    def remove(self, event_ids):
        event_ids = list(event_ids)
        for r in self.retrievers:
            r.remove(event_ids)
        return self

    def search(self, queries, k: int = 10, filters=None, now=None) -> pl.DataFrame:
        frame = normalize_queries(queries)
        per = query_filters(frame, filters)
        depth = max(k, self.depth)
        plain = frame if frame.columns == ["query_id", "text"] else frame.select("query_id", "text")
        if not all(type(r).search is Retriever.search for r in self.retrievers):
            runs = [  # PostgreSQL's own
                search_with_time(r, plain, depth, per, now) for r in self.retrievers
            ]
            return self.fuse(runs, k)
        qids, texts = plain["query_id"].to_list(), plain["text"].to_list()
        hits = [
            r.search_batch(
                texts,
                depth,
                [r.catalog.mask(f) for f in per],
                [r.catalog.scope(f) for f in per],
                now=now,
            )
            for r in self.retrievers
        ]
        rows = sum(len(pos) for found in hits for pos, _ in found)
        if rows > FEW_ROWS or (self.method == "convex" and self.norm == "zscore"):
            runs = [
                make_run(qids, found, r.catalog.event_ids, r.match_type)
                for found, r in zip(hits, self.retrievers)
            ]
            return self.fuse(runs, k)
        return self._fuse_few(qids, hits, k)

    def _fuse_few(self, qids: list[str], hits: list, k: int) -> pl.DataFrame:
        """``fuse`` of a few queries' leaf hits (catalog positions and scores, best first)
        without a run table per part: the rows ``_convex_few`` reads from them, in the
        same order, so the same run (a test checks it)."""
        rrf_ = self.method == "rrf"
        weights = (_rrf_weights if rrf_ else _check_weights)(hits, self.weights)
        parts = _Parts("rrf" if rrf_ else self.norm, self.rrf_k)
        for found, r, w in zip(hits, self.retrievers, weights):
            ids = r.catalog.event_ids
            for qid, (pos, sc) in zip(qids, found):
                if len(pos):
                    events = np.array([ids[p] for p in pos])
                    parts.add(
                        qid,
                        events,
                        np.asarray(sc, np.float64),  # as the run table holds them
                        np.arange(1, len(pos) + 1),
                        [r.match_type] * len(pos),
                        w,
                    )
        return parts.fused(k)

    def fuse(self, runs: list[pl.DataFrame], k: int | None) -> pl.DataFrame:
        if self.method == "rrf":
            return rrf(runs, k=self.rrf_k, weights=self.weights, top=k)
        return convex(runs, weights=self.weights, norm=self.norm, top=k)

    def save(self, folder):
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "retriever.json").write_text(json.dumps(self.params(), indent=2))
        for i, r in enumerate(self.retrievers):
            r.save(folder / f"part{i}")
        return folder

    @classmethod
    def load(cls, folder):
        folder = Path(folder)
        parts = sorted(folder.glob("part*"), key=lambda p: int(p.name[4:]))
        spec = json.loads((folder / "retriever.json").read_text())
        children = [Retriever.load(p) for p in parts]
        spec = {k: v for k, v in spec.items() if k not in ("type", "retrievers")}
        hybrid = cls(children, **spec)
        hybrid.catalog = children[0].catalog
        return hybrid

    def __len__(self):
        return len(self.retrievers[0])
