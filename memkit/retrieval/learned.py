"""A learned re-ranker over the candidates of a hybrid.

``LearnedRetriever`` asks a hybrid (``first``) for its top ``candidates``, describes each
candidate by features from every retriever it holds (the hybrid's parts and ``extra``
ones: each run's min-max score and ``1 / (rank + 5)``, absent = 0), plus whether the
question names the post's speaker, the post's log length, whether it is an image and
whether it names a date (a relative time such as "last weekend" resolved against the post's
own time, or a date written in it: memkit/language/timeref.py; evidence for "when" questions),
and orders them by a linear model (a logistic regression: standardised features times
coefficients). The model is plain numbers in the config's ``[retriever.model]`` table,
written by ``memkit train ranker``, which also reports its cross-validated score. Without
a model it ranks exactly as ``first``.

Two shapes, two models: with a ``[representation]`` that tells chat lines from posts that
stand alone (its ``chat`` column), ``passage_model`` scores the posts that stand alone and
``model`` the chat lines. The same feature means different things on the two shapes (dense
similarity to a four-word chat line is weak evidence, to a passage strong; a passage has
no neighbours or session), so one linear model fitted on both compromises on each; both
estimate the chance that a post is relevant, so their scores share one ranking.

Filters reach every retriever before its top k, as everywhere in memkit.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
from pydantic import BaseModel

from memkit.config.model import LearnedSpec
from memkit.core.errors import ValidationError
from memkit.core.linear import check_linear, linear_score
from memkit.language.timeref import dates_in
from memkit.retrieval.base import Retriever, normalize_queries, query_filters, run_table
from memkit.retrieval.hybrid import HybridRetriever, convex_sum, minmax
from memkit.retrieval.registry import build, register
from memkit.retrieval.registry import load as load_any

POST_FEATURES = ["speaker_in_query", "log_length", "image", "dated"]


class Post(NamedTuple):
    """What the ranker keeps of an indexed post."""

    speaker: str
    log_length: float
    image: float
    chat: bool
    dated: float
    chat_block: bool  # in a block of a chat type, however long (False: a blog's post)


NO_POST = Post("", 0.0, 0.0, True, 0.0, True)  # a post the ranker was not given
POST_SCHEMA = {
    "speaker": pl.Utf8,
    "log_length": pl.Float64,
    "image": pl.Float64,
    "chat": pl.Boolean,
    "dated": pl.Float64,
    "chat_block": pl.Boolean,
}


@register
class LearnedRetriever(Retriever):
    type_name = "learned"
    match_type = "hybrid"
    child_params = ("first", "extra")

    spec = LearnedSpec

    def _built(self) -> None:
        self.first = self.first if isinstance(self.first, Retriever) else build(self.first)
        self._weights = _convex_weights(self.first)
        self.extra = [r if isinstance(r, Retriever) else build(r) for r in self.extra]
        self.model, self.passage_model = self._checked(self.model, self.passage_model)
        # added to the passage model's score of a post in a block that is no chat (a blog's,
        # not a long chat line): the passage model was fitted on a data set of passages only,
        # so its intercept holds that set's base rate, not that of a floor's blog posts
        self.blog_shift = float(self.blog_shift)
        self._posts: dict[str, Post] = {}

    def with_models(
        self, model: dict | None, passage_model: dict | None = None
    ) -> "LearnedRetriever":
        """A copy that ranks with these models (checked as the constructor checks them),
        sharing this one's fitted parts and catalog: a training loop scores candidate
        models on one index without refitting it or changing this one."""
        out = copy.copy(self)
        out.model, out.passage_model = self._checked(model, passage_model)
        return out

    def _checked(self, model, passage_model) -> tuple:
        """The models as plain dicts (a spec's as it was written), checked against the
        features this retriever makes."""
        model, passage_model = (
            m.model_dump(exclude_unset=True) if isinstance(m, BaseModel) else m
            for m in (model, passage_model)
        )
        names = self.feature_names()
        chat = None if model is None else check_linear(model, names, "retriever.model")
        passage = (
            None
            if passage_model is None
            else check_linear(passage_model, names, "retriever.passage_model")
        )
        if passage is not None and chat is None:
            raise ValidationError(
                "retriever.passage_model", "needs a [retriever.model] for chat lines too"
            )
        return chat, passage

    def feature_names(self) -> list[str]:
        names = ["fused", "fused_r"]
        for i in range(len(self.first.retrievers) + len(self.extra)):
            names += [f"part{i}", f"part{i}_r"]
        return names + POST_FEATURES

    # -- the index: every retriever holds every event -------------------------------
    def children(self) -> list[Retriever]:
        return [self.first, *self.extra]

    def _describe(self, events: pl.DataFrame) -> None:
        speakers = (
            (events["speaker"] if "speaker" in events.columns else events["user_id"])
            .fill_null("")
            .to_list()
        )
        texts = events["text"].to_list()
        chat = events["chat"].to_list() if "chat" in events.columns else [True] * events.height
        block = events["chat_block"].to_list() if "chat_block" in events.columns else chat
        times = (
            events["created_at"].to_list()
            if "created_at" in events.columns
            else [None] * events.height
        )
        for eid, spk, text, c, at, b in zip(
            events["event_id"].to_list(), speakers, texts, chat, times, block
        ):
            self._posts[eid] = Post(
                spk,
                math.log1p(len(text)),
                float("[image:" in text),
                bool(c),
                float(bool(c) and bool(dates_in(text, at))),
                bool(b),
            )

    def fit(self, events):
        for r in self.children():
            r.fit(events)
        self._posts = {}
        self._describe(events)
        self.catalog = self.first.catalog
        return self

    def add(self, events):
        for r in self.children():
            r.add(events)
        self._describe(events)
        self.catalog = self.first.catalog
        return self

    def remove(self, event_ids):
        event_ids = list(event_ids)
        for r in self.children():
            r.remove(event_ids)
        for e in event_ids:
            self._posts.pop(e, None)
        return self

    # -- asking -------------------------------------------------------------------------
    def features(self, queries, filters=None) -> pl.DataFrame:
        """The candidates of every query with their features (and the fused match_type).

        Computed per query on arrays of catalog positions (every retriever holds the same
        events at the same positions, as each gets the same fit/add/remove calls), which
        is several times faster than joining run tables and gives the same numbers."""
        frame = normalize_queries(queries)
        names = self.feature_names()
        cols: dict[str, list] = {
            "query_id": [],
            "event_id": [],
            "match_type": [],
            **{n: [] for n in names},
        }
        for qid, (eids, kinds, x) in zip(
            frame["query_id"].to_list(), self._candidates(frame, filters)
        ):
            cols["query_id"].extend([qid] * len(eids))
            cols["event_id"].extend(eids)
            cols["match_type"].extend(kinds)
            for c, name in enumerate(names):
                cols[name].extend(x[:, c].tolist())
        schema = {
            "query_id": pl.Utf8,
            "event_id": pl.Utf8,
            "match_type": pl.Utf8,
            **{n: pl.Float64 for n in names},
        }
        return pl.DataFrame(cols, schema=schema)

    def _candidates(self, frame: pl.DataFrame, filters, now=None):
        """Per query: its candidates' event ids, match types and feature matrix. Every part
        searches all the queries in one call (a query's variants share the model call that
        encodes them and their floors' rows: memkit/retrieval/dense.py)."""
        per = query_filters(frame, filters)
        depth = max(self.candidates, self.first.depth)
        texts = frame["text"].to_list()
        catalog = self.first.catalog
        masks = [
            catalog.mask(f) for f in per
        ]  # the same positions in every part: one mask serves all
        scopes = [catalog.scope(f) for f in per]
        hits = []  # per part, per query: (positions best first, scores)
        for r in self._all_parts():
            if len(r.catalog) != len(catalog):
                raise RuntimeError("the learned retriever's parts hold different events")
            hits.append(r.search_batch(texts, depth, masks, scopes, now=now))
        kinds = [r.match_type for r in self._all_parts()]
        for q, text in enumerate(texts):
            yield self._features_one(
                text, [(h[q][0], h[q][1], kind) for h, kind in zip(hits, kinds)]
            )

    def is_chat(self, event_ids) -> np.ndarray:
        """Per event: whether it is a chat line (scored by ``model``) or stands alone."""
        return np.array([self._posts.get(e, NO_POST).chat for e in event_ids], bool)

    def in_chat_block(self, event_ids) -> np.ndarray:
        """Per event: whether its block is of a chat type (a long chat line too)."""
        return np.array([self._posts.get(e, NO_POST).chat_block for e in event_ids], bool)

    def _features_one(self, text: str, hits: list) -> tuple[list[str], list[str], np.ndarray]:
        """One query's candidates from its parts' ``hits`` ((positions, scores, match type)
        per part): event ids, match types and the feature matrix (rows in the first stage's
        order, columns as ``feature_names``). Array code throughout: it runs for every
        query, on up to ``depth`` hits of every part."""
        ids = self.first.catalog.event_ids
        parts = []  # per retriever: (positions best first, min-max scores, match type)
        for pos, sc, kind in hits:
            parts.append((np.asarray(pos, np.int64), minmax(sc), kind))
        first = parts[: len(self.first.retrievers)]
        width = 2 + 2 * len(parts) + len(POST_FEATURES)
        if not sum(len(pos) for pos, _, _ in first):
            return [], [], np.zeros((0, width))
        found, _, fused = convex_sum(
            [pos for pos, _, _ in first], [z for _, z, _ in first], self._weights
        )
        names = np.array([ids[p] for p in found])
        best = np.lexsort((names, -fused))[: self.candidates]  # best fused first, ties by event id
        order = found[best]
        x = np.zeros((len(order), width))
        x[:, 0] = fused[best]
        x[:, 1] = 1.0 / (np.arange(1, len(order) + 1) + 5)
        by_pos = np.argsort(order)
        sorted_order = order[by_pos]
        kinds = [set() for _ in order]
        for j, (pos, z, kind) in enumerate(parts):
            at = np.minimum(np.searchsorted(sorted_order, pos), len(order) - 1)
            hit = sorted_order[at] == pos
            rows = by_pos[at[hit]]
            x[rows, 2 + 2 * j] = z[hit]
            x[rows, 3 + 2 * j] = 1.0 / (np.flatnonzero(hit) + 6)  # 1 / (rank + 5), ranks from 1
            if j < len(first):
                for i in rows.tolist():
                    kinds[i].add(kind)
        eids = names[best].tolist()
        posts = [self._posts.get(e, NO_POST) for e in eids]
        c = 2 + 2 * len(parts)
        x[:, c] = [float(bool(p.speaker) and p.speaker in text) for p in posts]
        x[:, c + 1] = [p.log_length for p in posts]
        x[:, c + 2] = [p.image for p in posts]
        x[:, c + 3] = [p.dated for p in posts]
        return eids, [_kind(k) for k in kinds], x

    def score(self, cand: pl.DataFrame) -> np.ndarray:
        """Scores of a ``features`` table's rows (all feature columns present)."""
        return self._score(cand.select(self.feature_names()).to_numpy(), cand["event_id"].to_list())

    def _score(self, x: np.ndarray, event_ids) -> np.ndarray:
        """Scores of candidate rows (columns as ``feature_names``): each post by its shape's
        model."""
        if self.model is None:
            return x[:, 0]
        names = self.feature_names()
        out = linear_score(self.model, x[:, [names.index(n) for n in self.model["features"]]])
        if self.passage_model is not None:
            alone = ~self.is_chat(event_ids)
            if alone.any():
                cols = [names.index(n) for n in self.passage_model["features"]]
                out[alone] = linear_score(self.passage_model, x[alone][:, cols])
            if self.blog_shift:
                # only where blog posts compete with chat lines: a list of one shape is
                # ranked by its own model, and its probabilities stay as that model gives them
                blog = ~self.in_chat_block(event_ids)
                if blog.any() and not blog.all():
                    out[blog] += self.blog_shift
        return out

    def search(self, queries, k: int = 10, filters=None, now=None) -> pl.DataFrame:
        frame = normalize_queries(queries)
        return run_table(self._ranked(frame, filters, k, now))

    def _ranked(self, frame: pl.DataFrame, filters, k: int, now=None):
        """Per query: its k best candidates by the model, as ``run_table`` takes them."""
        for qid, (ids, types, x) in zip(
            frame["query_id"].to_list(), self._candidates(frame, filters, now)
        ):
            s = self._score(x, ids)
            order = sorted(range(len(ids)), key=lambda i: (-s[i], ids[i]))[:k]
            yield (
                qid,
                [ids[i] for i in order],
                [float(s[i]) for i in order],
                [types[i] for i in order],
            )

    def _all_parts(self) -> list[Retriever]:
        return [*self.first.retrievers, *self.extra]

    def save(self, folder):
        """Every retriever it holds (``first``, ``extra0``, ...), the per-post features and
        the spec (candidates and model), so a service starts without re-encoding."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        spec = {
            "type": self.type_name,
            "candidates": self.candidates,
            "model": self.model,
            "passage_model": self.passage_model,
            "blog_shift": self.blog_shift,
        }
        (folder / "retriever.json").write_text(json.dumps(spec, indent=2))
        self.first.save(folder / "first")
        for i, r in enumerate(self.extra):
            r.save(folder / f"extra{i}")
        ids = list(self._posts)
        columns = {name: [getattr(self._posts[e], name) for e in ids] for name in Post._fields}
        pl.DataFrame(
            {"event_id": ids, **columns}, schema={"event_id": pl.Utf8, **POST_SCHEMA}
        ).write_parquet(folder / "posts.parquet")
        return folder

    @classmethod
    def load(cls, folder):
        folder = Path(folder)
        spec = json.loads((folder / "retriever.json").read_text())
        extra = sorted(folder.glob("extra*"), key=lambda p: int(p.name[5:]))
        obj = cls(
            load_any(folder / "first"),
            [load_any(p) for p in extra],
            candidates=spec["candidates"],
            model=spec["model"],
            passage_model=spec.get("passage_model"),
            blog_shift=spec.get("blog_shift", 0.0),
        )
        posts = pl.read_parquet(folder / "posts.parquet")
        if "chat" not in posts.columns:  # saved before posts had a shape
            posts = posts.with_columns(pl.lit(True).alias("chat"))
        if (
            "dated" not in posts.columns
        ):  # saved before posts had dates (a model that reads them makes a new index anyway)
            posts = posts.with_columns(pl.lit(0.0).alias("dated"))
        if "chat_block" not in posts.columns:  # saved before: a post that stands alone was a blog's
            posts = posts.with_columns(pl.col("chat").alias("chat_block"))
        obj._posts = {
            e: Post(*rest) for e, *rest in posts.select("event_id", *Post._fields).iter_rows()
        }
        obj.catalog = obj.first.catalog
        return obj


def _convex_weights(hybrid: HybridRetriever) -> list[float]:
    if hybrid.method != "convex" or hybrid.norm != "minmax":
        raise ValidationError(
            "retriever.first", 'expected method = "convex" and norm = "minmax" for the first stage'
        )
    n = len(hybrid.retrievers)
    return [float(w) for w in hybrid.weights] if hybrid.weights is not None else [1.0 / n] * n


def _kind(kinds: set) -> str:
    return "hybrid" if len(kinds) > 1 or "hybrid" in kinds else next(iter(kinds))
