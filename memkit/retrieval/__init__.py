"""Retrievers: one contract, several kinds (two keep their index in PostgreSQL), built
from typed specs or config dicts by the registry (memkit/retrieval/registry.py).

>>> build({"type": "bm25", "k1": 0.9, "b": 0.4})
BM25Retriever(k1=0.9, b=0.4, ...)
"""

from __future__ import annotations

from memkit.retrieval.base import Filters, Retriever, walk
from memkit.retrieval.dense import DenseRetriever
from memkit.retrieval.hybrid import HybridRetriever, convex, rrf
from memkit.retrieval.learned import LearnedRetriever
from memkit.retrieval.postgres import PgTextRetriever, PgVectorRetriever, PostgresRetriever
from memkit.retrieval.registry import REGISTRY, build, load, map_specs, register, with_settings
from memkit.retrieval.sparse import BM25Retriever, TfidfRetriever

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Filters",
    "HybridRetriever",
    "LearnedRetriever",
    "PgTextRetriever",
    "PgVectorRetriever",
    "PostgresRetriever",
    "REGISTRY",
    "Retriever",
    "TfidfRetriever",
    "build",
    "convex",
    "load",
    "map_specs",
    "register",
    "rrf",
    "walk",
    "with_settings",
]
