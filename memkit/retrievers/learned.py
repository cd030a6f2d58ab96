"""A learned re-ranker over the candidates of a hybrid.

``LearnedRetriever`` asks a hybrid (``first``) for its top ``candidates``, describes each
candidate by features from every retriever it holds (the hybrid's parts and ``extra``
ones: each run's min-max score and ``1 / (rank + 5)``, absent = 0), plus whether the
question names the post's speaker, the post's log length and whether it is an image,
and orders them by a linear model (a logistic regression: standardised features times
coefficients). The model is plain numbers in the config's ``[retriever.model]`` table,
written by ``eval/train_ranker.py``, which also reports its leave-one-conversation-out
score. Without a model it ranks exactly as ``first``.

Filters reach every retriever before its top k, as everywhere in memkit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import polars as pl

from memkit.errors import ValidationError
from memkit.retrievers.base import Retriever, normalize_queries, query_filters
from memkit.retrievers.hybrid import HybridRetriever
from memkit.tables import RUN_SCHEMA

POST_FEATURES = ["speaker_in_query", "log_length", "image"]


class LearnedRetriever(Retriever):
    type_name = "learned"
    match_type = "hybrid"

    def __init__(self, first: dict | HybridRetriever, extra: Sequence[dict | Retriever] = (), candidates: int = 100,
                 model: dict | None = None):
        super().__init__()
        from memkit.retrievers import build

        self.first = build(first) if isinstance(first, dict) else first
        if not isinstance(self.first, HybridRetriever):
            raise ValidationError("retriever.first", "expected a hybrid retriever (type = \"hybrid\")")
        self.extra = [build(r) if isinstance(r, dict) else r for r in extra]
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ValidationError("retriever.candidates", f"expected a positive integer, got {candidates!r}")
        self.candidates = candidates
        self.model = _check_model(model, self.feature_names()) if model is not None else None
        self._posts: dict[str, tuple[str, float, float]] = {}

    def feature_names(self) -> list[str]:
        names = ["fused", "fused_r"]
        for i in range(len(self.first.retrievers) + len(self.extra)):
            names += [f"part{i}", f"part{i}_r"]
        return names + POST_FEATURES

    def get_params(self) -> dict:
        return {"candidates": self.candidates, "first": self.first.params(), "extra": [r.params() for r in self.extra],
                "model": self.model}

    # -- the index: every retriever holds every event -------------------------------
    def _all(self) -> list[Retriever]:
        return [self.first, *self.extra]

    def _describe(self, events: pl.DataFrame) -> None:
        speakers = (events["speaker"] if "speaker" in events.columns else events["user_id"]).fill_null("").to_list()
        texts = events["text"].to_list()
        for eid, spk, text in zip(events["event_id"].to_list(), speakers, texts):
            self._posts[eid] = (spk, math.log1p(len(text)), float("[image:" in text))

    def fit(self, events):
        for r in self._all():
            r.fit(events)
        self._posts = {}
        self._describe(events)
        self.catalog = self.first.catalog
        return self

    def add(self, events):
        for r in self._all():
            r.add(events)
        self._describe(events)
        self.catalog = self.first.catalog
        return self

    def remove(self, event_ids):
        event_ids = list(event_ids)
        for r in self._all():
            r.remove(event_ids)
        for e in event_ids:
            self._posts.pop(e, None)
        return self

    # -- asking -------------------------------------------------------------------------
    def features(self, queries, filters=None) -> pl.DataFrame:
        """The candidates of every query with their features (and the fused match_type)."""
        frame = normalize_queries(queries)
        per = query_filters(frame, filters)
        plain = frame.select("query_id", "text")
        depth = max(self.candidates, self.first.depth)
        parts = [r.search(plain, depth, per) for r in self.first.retrievers]
        fused = self.first.fuse(parts, self.candidates)
        parts += [r.search(plain, depth, per) for r in self.extra]
        cand = fused.select("query_id", "event_id", "match_type", pl.col("score").alias("fused"),
                            (1.0 / (pl.col("rank") + 5)).alias("fused_r"))
        for i, run in enumerate(parts):
            lo, hi = pl.col("score").min().over("query_id"), pl.col("score").max().over("query_id")
            run = run.select("query_id", "event_id", pl.when(hi > lo).then((pl.col("score") - lo) / (hi - lo)).otherwise(1.0).alias(f"part{i}"),
                             (1.0 / (pl.col("rank") + 5)).alias(f"part{i}_r"))
            cand = cand.join(run, on=["query_id", "event_id"], how="left")
        cand = cand.fill_null(0.0)
        asked = dict(zip(frame["query_id"].to_list(), frame["text"].to_list()))
        posts = [self._posts.get(e, ("", 0.0, 0.0)) for e in cand["event_id"].to_list()]
        named = [float(bool(p[0]) and p[0] in asked[q]) for q, p in zip(cand["query_id"].to_list(), posts)]
        return cand.with_columns(pl.Series("speaker_in_query", named, pl.Float64),
                                 pl.Series("log_length", [p[1] for p in posts], pl.Float64),
                                 pl.Series("image", [p[2] for p in posts], pl.Float64))

    def score(self, cand: pl.DataFrame) -> np.ndarray:
        if self.model is None:
            return cand["fused"].to_numpy()
        m = self.model
        x = cand.select(m["features"]).to_numpy()
        z = (x - np.asarray(m["mean"])) / np.asarray(m["scale"])
        return z @ np.asarray(m["coef"]) + m["intercept"]

    def search(self, queries, k: int = 10, filters=None) -> pl.DataFrame:
        cand = self.features(queries, filters)
        cand = cand.with_columns(pl.Series("score", self.score(cand), pl.Float64))
        ranked = cand.sort(["query_id", "score", "event_id"], descending=[False, True, False]).with_columns(
            pl.col("score").cum_count().over("query_id").cast(pl.Int64).alias("rank"))
        return ranked.filter(pl.col("rank") <= k).select(list(RUN_SCHEMA)).cast(RUN_SCHEMA)

    def save(self, folder):
        """Every retriever it holds (``first``, ``extra0``, ...), the per-post features and
        the spec (candidates and model), so a service starts without re-encoding."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"type": self.type_name, "candidates": self.candidates, "model": self.model}
        (folder / "retriever.json").write_text(json.dumps(spec, indent=2))
        self.first.save(folder / "first")
        for i, r in enumerate(self.extra):
            r.save(folder / f"extra{i}")
        ids = list(self._posts)
        pl.DataFrame({"event_id": ids, "speaker": [self._posts[e][0] for e in ids],
                      "log_length": [self._posts[e][1] for e in ids], "image": [self._posts[e][2] for e in ids]},
                     schema={"event_id": pl.Utf8, "speaker": pl.Utf8, "log_length": pl.Float64,
                             "image": pl.Float64}).write_parquet(folder / "posts.parquet")
        return folder

    @classmethod
    def load(cls, folder):
        from memkit.retrievers import load as load_any

        folder = Path(folder)
        spec = json.loads((folder / "retriever.json").read_text())
        extra = sorted(folder.glob("extra*"), key=lambda p: int(p.name[5:]))
        obj = cls(load_any(folder / "first"), [load_any(p) for p in extra], candidates=spec["candidates"],
                  model=spec["model"])
        posts = pl.read_parquet(folder / "posts.parquet")
        obj._posts = {e: (s, ll, im) for e, s, ll, im in posts.iter_rows()}
        obj.catalog = obj.first.catalog
        return obj


def _check_model(model: dict, names: list[str]) -> dict:
    need = {"features", "coef", "intercept", "mean", "scale"}
    if not isinstance(model, dict) or set(model) != need:
        raise ValidationError("retriever.model", f"expected a table with exactly {sorted(need)}")
    n = len(model["features"])
    unknown = set(model["features"]) - set(names)
    if unknown:
        raise ValidationError("retriever.model.features", f"unknown feature(s) {sorted(unknown)}; known: {names}")
    for key in ("coef", "mean", "scale"):
        if len(model[key]) != n:
            raise ValidationError(f"retriever.model.{key}", f"expected {n} numbers (one per feature)")
    if any(s <= 0 for s in model["scale"]):
        raise ValidationError("retriever.model.scale", "expected positive numbers")
    return {k: (list(v) if isinstance(v, list) else float(v)) if k != "features" else list(v) for k, v in model.items()}
