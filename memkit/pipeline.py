"""The pipeline: the one object that answers a query in a notebook, an eval run and the
service. It is built from a TOML configuration (``Pipeline.from_config(path)``):

```toml
name = "hybrid"
[retriever]          # memkit.retrievers.build(...)
type = "hybrid"
...
[contextualizer]     # how follow-ups use earlier turns (default: none)
type = "none"
[answer]             # how the answer is written (memkit.answer; default: extractive)
type = "extractive"
[representation]     # context fields for doc templates (memkit.representation; default: none)
before = 1
after = 1
[relevance]          # when a query counts as having found nothing (default: no gate)
min_similarity = 0.25
[encoder]            # the model of every dense part, and how it learns (memkit.training; default: minilm)
model = "minilm"
[encoder.adapt]      # e.g. adapt to the events given to ``fit``
epochs = 1
```

``search`` answers independent queries in a batch (what eval does for most datasets);
``query`` answers one query of one user, contextualised by that user's earlier turns,
answered, and recorded into their history.

Relevance: a ranking counts as having found something when any item matched a query term
(sparse scores are positive only where a term matches) or, for items found only by
meaning, when the best cosine similarity reaches ``min_similarity``. Otherwise ``query``
returns no items and the answerer's fallback. Without ``min_similarity`` only an empty
ranking counts as nothing found. The gate keeps or drops the whole ranking,
so a query that finds something gets exactly the ranking ``memkit eval`` scores.

Encoder: with an ``[encoder]`` section, ``fit`` first resolves the model (training what
the cache does not hold yet, see memkit.training.EncoderStage) and gives it to every dense
part and the answer writer, so one pipeline never mixes two models. ``use_encoder(name)``
fixes the model instead (the service: the store names the active one), and ``fit`` then
keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from memkit.answer import Answer, build_answerer
from memkit.config import CONFIG_DIR, load_config
from memkit.conversation import ConversationStore, Turn, build_contextualizer
from memkit.errors import ValidationError
from memkit.representation import Representation
from memkit.retrievers import (
    DenseRetriever,
    Filters,
    HybridRetriever,
    LearnedRetriever,
    PgVectorRetriever,
    Retriever,
    build,
    convex,
)
from memkit.training import EncoderStage

DEFAULT_CONFIG = CONFIG_DIR / "default.toml"


@dataclass
class QueryResult:
    query: str
    effective_query: str
    run: pl.DataFrame  # query_id, event_id, score, rank, match_type (empty when nothing relevant)
    relevant: bool = True
    items: list[dict] | None = None  # the run's events as ``lookup`` described them
    answer: str | None = None
    written: Answer | None = None  # the answer with what it quotes, its date, whether it declined
    history: int = 0  # earlier turns of this user's conversation the contextualizer saw


class Pipeline:
    def __init__(self, retriever: Retriever, contextualizer=None, k: int = 10, name: str = "pipeline",
                 config: dict | None = None, conversations: ConversationStore | None = None, answerer=None,
                 min_similarity: float | None = None, representation: Representation | None = None,
                 encoder: EncoderStage | None = None):
        self.retriever = retriever
        self.encoder_stage = encoder
        self.encoder_fixed = False  # use_encoder() was called: fit keeps the model
        self.contextualizer = contextualizer or build_contextualizer(None)
        self.answerer = answerer or build_answerer(None)
        dense = _dense_part(retriever)
        if dense is not None and hasattr(self.answerer, "bind"):
            self.answerer.bind(dense._enc)  # sentence vectors from the same (cached) encoder
        self.min_similarity = min_similarity
        self.representation = representation
        self.k = k
        self.name = name
        self.config = config or {}
        idle = getattr(self.contextualizer, "idle_minutes", None)
        self.conversations = conversations or ConversationStore(
            idle_expiry=timedelta(minutes=idle) if idle else timedelta(minutes=30))

    @classmethod
    def from_config(cls, config: str | Path | dict | None = None) -> "Pipeline":
        """From a TOML path, an already-loaded config dict, or the project default."""
        if config is None:
            config = DEFAULT_CONFIG
        if not isinstance(config, dict):
            config = load_config(config)
        unknown = set(config) - {"name", "description", "retriever", "contextualizer", "answer", "relevance", "representation", "k",
                                 "eval", "encoder"}
        if unknown:
            raise ValidationError(sorted(unknown)[0], "unknown configuration section")
        relevance = dict(config.get("relevance", {}))
        min_similarity = relevance.pop("min_similarity", None)
        if relevance:
            raise ValidationError(f"relevance.{sorted(relevance)[0]}", "unknown setting (expected min_similarity)")
        if min_similarity is not None and (isinstance(min_similarity, bool) or not isinstance(min_similarity, (int, float))
                                           or not -1 <= min_similarity <= 1):
            raise ValidationError("relevance.min_similarity", f"expected a number in [-1, 1], got {min_similarity!r}")
        return cls(
            retriever=build(config["retriever"]),
            contextualizer=build_contextualizer(config.get("contextualizer")),
            answerer=build_answerer(config.get("answer")),
            min_similarity=None if min_similarity is None else float(min_similarity),
            representation=_representation(config.get("representation")),
            encoder=EncoderStage.from_config(config.get("encoder")),
            k=config.get("k", 10),
            name=config.get("name", "pipeline"),
            config=config,
        )

    def params(self) -> dict:
        return {"name": self.name, "k": self.k, "retriever": self.retriever.params(),
                "contextualizer": self.contextualizer.params(), "answer": self.answerer.params(),
                "relevance": {"min_similarity": self.min_similarity},
                "representation": self.representation.params() if self.representation else None,
                **({"encoder": self.encoder_stage.params()} if self.encoder_stage else {})}

    # -- the encoder ------------------------------------------------------------------
    def use_encoder(self, name: str, fixed: bool = True) -> "Pipeline":
        """Every dense part and the answer writer use this model (before ``fit``: vectors
        already indexed are not re-encoded). ``fixed``: later fits keep it."""
        for part in _dense_parts(self.retriever):
            part.encoder = name
        dense = _dense_part(self.retriever)
        if dense is not None and hasattr(self.answerer, "bind"):
            self.answerer.bind(dense._enc)
        self.encoder_fixed = fixed
        return self

    def encoder_name(self) -> str | None:
        """The model the dense parts use (None without one)."""
        dense = _dense_part(self.retriever)
        return None if dense is None else dense.params()["encoder"]

    # -- the index --------------------------------------------------------------------
    def fit(self, events: pl.DataFrame, hold_out: str | None = None) -> "Pipeline":
        """Index ``events``. With an ``[encoder]`` section (and no fixed model), first
        resolve the model: supervised on its datasets except ``hold_out`` (eval names the
        data set it scores), adapted on these events."""
        if self.encoder_stage is not None and not self.encoder_fixed:
            self.use_encoder(self.encoder_stage.resolve(events, hold_out), fixed=False)
        self.retriever.fit(self.documents(events))
        return self

    def documents(self, events: pl.DataFrame) -> pl.DataFrame:
        """What the retrievers index for these events: with a representation, the events
        with their context fields (neighbours looked up among the events given together)."""
        return self.representation(events) if self.representation else events

    def add(self, events: pl.DataFrame, only=None) -> "Pipeline":
        """Index more events (an event indexed before is replaced). ``only``: event ids;
        the others given serve as context only, e.g. the rest of a session."""
        self.retriever.add(_only(self.documents(events), only))
        return self

    def precompute(self, events: pl.DataFrame, only=None) -> None:
        """Encode these events (documents, and sentences for answers) into the embedding
        cache ahead of ``add``, so the index can take them in quickly."""
        self.retriever.precompute(_only(self.documents(events), only))
        if hasattr(self.answerer, "encode_sentences"):
            self.answerer.encode_sentences(_only(events, only))

    def remove(self, event_ids) -> "Pipeline":
        self.retriever.remove(event_ids)
        return self

    # -- asking -------------------------------------------------------------------------
    def search(self, queries, k: int | None = None, filters=None) -> pl.DataFrame:
        """Independent queries (no context), in one batch."""
        return self.retriever.search(queries, k or self.k, filters)

    def query(self, text: str, user_id: str | None = None, floor_ids=None, filters: Filters | dict | None = None,
              k: int | None = None, now: datetime | None = None, query_id: str = "q", lookup=None,
              summary: bool = True, authors=None) -> QueryResult:
        """One query of one user: contextualised by their history, searched, checked for
        relevance, answered (when ``lookup``, a function from event ids to item dicts, is
        given; ``authors``: the names the answer writer may take the question to be about,
        default every author it has seen) and recorded in the user's history."""
        history = self.conversations.history(user_id, now)
        effective = self.contextualizer.contextualize(text, history)
        f = Filters.from_dict(filters) if isinstance(filters, dict) or filters is None else filters
        if floor_ids is not None:
            f = f.with_floors(floor_ids)
        variants = (self.contextualizer.variants(text, history) if hasattr(self.contextualizer, "variants")
                    else [(effective, 1.0)])
        k = k or self.k
        depth = k if len(variants) == 1 else max(k, 100)  # fused variants: fuse deeper lists, then cut
        # The variants in one search: their encodings share one model call (memkit/retrievers/learned.py).
        ids = [f"{query_id}/{i}" for i in range(len(variants))]
        searched = self.retriever.search(pl.DataFrame({"query_id": ids, "text": [v for v, _ in variants]}), depth, f)
        runs = [searched.filter(pl.col("query_id") == i).with_columns(pl.lit(query_id).alias("query_id")) for i in ids]
        run = runs[0] if len(runs) == 1 else convex(runs, [w for _, w in variants], top=k)
        relevant = self.relevant(run, effective)
        if not relevant:
            run = run.clear()
        items = lookup(run["event_id"].to_list()) if lookup is not None else None
        written = self.answerer.write(text, items, summary, authors) if items is not None else None
        answer = written.text if written is not None else None
        turn = Turn(query=text, effective_query=effective, event_ids=run["event_id"].to_list(), answer=answer)
        if now is not None:
            turn.time = now
        self.conversations.record(user_id, turn)
        return QueryResult(query=text, effective_query=effective, run=run, relevant=relevant, items=items, answer=answer,
                           written=written, history=len(history))

    def relevant(self, run: pl.DataFrame, query: str) -> bool:
        """Whether a ranking found anything relevant (see the module's docstring)."""
        if run.height == 0:
            return False
        if self.min_similarity is None or (run["match_type"] != "semantic").any():
            return True
        dense = _dense_part(self.retriever)
        if dense is None:
            return True
        return float(dense.similarity(query, run["event_id"].to_list()).max()) >= self.min_similarity


def _only(frame: pl.DataFrame, event_ids) -> pl.DataFrame:
    return frame if event_ids is None else frame.filter(pl.col("event_id").is_in(list(event_ids)))


def _representation(spec: dict | None) -> Representation | None:
    if spec is None:
        return None
    unknown = set(spec) - {"before", "after", "max_session", "chat_types", "chat_max_chars"}
    if unknown:
        raise ValidationError(f"representation.{sorted(unknown)[0]}",
                              "unknown setting (expected before, after, max_session, chat_types, chat_max_chars)")
    return Representation(**spec)


def _dense_parts(r: Retriever) -> list[DenseRetriever | PgVectorRetriever]:
    """Every part that scores by an encoder's cosine similarity, in config order."""
    if isinstance(r, (DenseRetriever, PgVectorRetriever)):
        return [r]
    if isinstance(r, HybridRetriever):
        return [d for part in r.retrievers for d in _dense_parts(part)]
    if isinstance(r, LearnedRetriever):
        return [d for part in [r.first, *r.extra] for d in _dense_parts(part)]
    return []


def _dense_part(r: Retriever) -> DenseRetriever | PgVectorRetriever | None:
    """The first part that scores by the encoder's cosine similarity (``similarity`` and
    ``_enc``): the relevance gate and the answerer use it."""
    return next(iter(_dense_parts(r)), None)
