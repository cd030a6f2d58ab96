"""Retrievers: one contract, several kinds (two keep their index in PostgreSQL), built from config dicts.

>>> build({"type": "bm25", "k1": 0.9, "b": 0.4})
BM25Retriever(k1=0.9, b=0.4, ...)
"""

from __future__ import annotations

from pathlib import Path

from memkit.errors import ValidationError
from memkit.retrievers.base import Filters, Retriever
from memkit.retrievers.dense import DenseRetriever
from memkit.retrievers.hybrid import HybridRetriever, convex, rrf
from memkit.retrievers.learned import LearnedRetriever
from memkit.retrievers.postgres import PgTextRetriever, PgVectorRetriever, PostgresRetriever
from memkit.retrievers.sparse import BM25Retriever, TfidfRetriever

REGISTRY: dict[str, type[Retriever]] = {
    "tfidf": TfidfRetriever,
    "bm25": BM25Retriever,
    "dense": DenseRetriever,
    "hybrid": HybridRetriever,
    "learned": LearnedRetriever,
    "pgvector": PgVectorRetriever,  # index in PostgreSQL (memkit/retrievers/postgres.py)
    "pgtext": PgTextRetriever,
}


def build(spec: dict) -> Retriever:
    """A retriever from a config dict: ``{"type": ..., **params}``."""
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValidationError("retriever", f"expected a table with a 'type', got {spec!r}")
    kind = spec["type"]
    if kind not in REGISTRY:
        raise ValidationError("retriever.type", f"expected one of {sorted(REGISTRY)}, got {kind!r}")
    params = {k: v for k, v in spec.items() if k != "type"}
    try:
        return REGISTRY[kind](**params)
    except TypeError as exc:
        raise ValidationError(f"retriever.{kind}", str(exc)) from None


def load(folder: str | Path) -> Retriever:
    """Load any saved retriever."""
    import json

    spec = json.loads((Path(folder) / "retriever.json").read_text())
    if spec.get("type") == "hybrid":
        return HybridRetriever.load(folder)
    if spec.get("type") == "learned":
        return LearnedRetriever.load(folder)
    if spec.get("type") in ("pgvector", "pgtext"):
        return PostgresRetriever.load(folder)  # only the parameters: the data is in the database
    return Retriever.load(folder)


__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Filters",
    "HybridRetriever",
    "LearnedRetriever",
    "PgTextRetriever",
    "PgVectorRetriever",
    "PostgresRetriever",
    "Retriever",
    "TfidfRetriever",
    "build",
    "convex",
    "load",
    "rrf",
]
