"""The pipeline: the one object that answers a query in a notebook, an eval run and the
service. It is built from a TOML configuration (``Pipeline.from_config(path)``):

```toml
name = "hybrid"
[retriever]          # memkit.retrievers.build(...)
type = "hybrid"
...
[contextualizer]     # how follow-ups use earlier turns (default: none)
type = "none"
```

``search`` answers independent queries in a batch (what eval does for most datasets);
``query`` answers one query of one user, contextualised by that user's earlier turns and
recorded into their history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from memkit.config import CONFIG_DIR, load_config
from memkit.conversation import ConversationStore, Turn, build_contextualizer
from memkit.errors import ValidationError
from memkit.retrievers import Filters, Retriever, build

DEFAULT_CONFIG = CONFIG_DIR / "default.toml"


@dataclass
class QueryResult:
    query: str
    effective_query: str
    run: pl.DataFrame  # query_id, event_id, score, rank, match_type


class Pipeline:
    def __init__(self, retriever: Retriever, contextualizer=None, k: int = 10, name: str = "pipeline",
                 config: dict | None = None, conversations: ConversationStore | None = None):
        self.retriever = retriever
        self.contextualizer = contextualizer or build_contextualizer(None)
        self.k = k
        self.name = name
        self.config = config or {}
        self.conversations = conversations or ConversationStore()

    @classmethod
    def from_config(cls, config: str | Path | dict | None = None) -> "Pipeline":
        """From a TOML path, an already-loaded config dict, or the project default."""
        if config is None:
            config = DEFAULT_CONFIG
        if not isinstance(config, dict):
            config = load_config(config)
        unknown = set(config) - {"name", "description", "retriever", "contextualizer", "k", "eval"}
        if unknown:
            raise ValidationError(sorted(unknown)[0], "unknown configuration section")
        return cls(
            retriever=build(config["retriever"]),
            contextualizer=build_contextualizer(config.get("contextualizer")),
            k=config.get("k", 10),
            name=config.get("name", "pipeline"),
            config=config,
        )

    def params(self) -> dict:
        return {"name": self.name, "k": self.k, "retriever": self.retriever.params(),
                "contextualizer": self.contextualizer.params()}

    # -- the index --------------------------------------------------------------------
    def fit(self, events: pl.DataFrame) -> "Pipeline":
        self.retriever.fit(events)
        return self

    def add(self, events: pl.DataFrame) -> "Pipeline":
        self.retriever.add(events)
        return self

    def remove(self, event_ids) -> "Pipeline":
        self.retriever.remove(event_ids)
        return self

    # -- asking -------------------------------------------------------------------------
    def search(self, queries, k: int | None = None, filters=None) -> pl.DataFrame:
        """Independent queries (no context), in one batch."""
        return self.retriever.search(queries, k or self.k, filters)

    def query(self, text: str, user_id: str | None = None, floor_ids=None, filters: Filters | dict | None = None,
              k: int | None = None, now: datetime | None = None, query_id: str = "q") -> QueryResult:
        """One query of one user: contextualised by their history, then recorded in it."""
        history = self.conversations.history(user_id, now)
        effective = self.contextualizer.contextualize(text, history)
        f = Filters.from_dict(filters) if isinstance(filters, dict) or filters is None else filters
        if floor_ids is not None:
            f = f.with_floors(floor_ids)
        run = self.retriever.search(pl.DataFrame({"query_id": [query_id], "text": [effective]}), k or self.k, f)
        turn = Turn(query=text, effective_query=effective, event_ids=run["event_id"].to_list())
        if now is not None:
            turn.time = now
        self.conversations.record(user_id, turn)
        return QueryResult(query=text, effective_query=effective, run=run)
