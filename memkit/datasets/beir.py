"""BEIR layout (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) to a memkit Dataset.

Each corpus document becomes one event in a single floor named after the folder; its
text is ``title`` and ``text`` joined by a blank line (as BEIR's own retrievers index
them). Only queries that have qrels in the split are kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from memkit.core.errors import DatasetError
from memkit.core.tables import Dataset, events_frame, qrels_frame, queries_frame


def _jsonl(path: Path):
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(
                        [(str(path), n, None, f"not valid JSON: {exc.msg}")]
                    ) from None


def read_beir(folder: str | Path, split: str = "test", name: str | None = None) -> Dataset:
    folder = Path(folder)
    name = name or folder.name
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for p in (folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path):
        if not p.exists():
            raise DatasetError([(str(p), None, None, "file not found")])
    events = []
    for n, doc in _jsonl(folder / "corpus.jsonl"):
        if "_id" not in doc:
            raise DatasetError([(str(folder / "corpus.jsonl"), n, "_id", "is required")])
        title, text = doc.get("title") or "", doc.get("text") or ""
        events.append(
            {
                "event_id": str(doc["_id"]),
                "floor_id": name,
                "block_id": str(doc["_id"]),
                "block_type": "blog",
                "user_id": None,
                "text": f"{title}\n\n{text}".strip(),
                "created_at": None,
                "tags": [],
            }
        )
    qrels = pl.read_csv(
        qrels_path, separator="\t", schema_overrides={"query-id": pl.Utf8, "corpus-id": pl.Utf8}
    )
    qrels = qrels.rename({"query-id": "query_id", "corpus-id": "event_id", "score": "relevance"})
    wanted = set(qrels["query_id"])
    queries = [
        {"query_id": str(q["_id"]), "text": q["text"], "floor_ids": [name]}
        for _, q in _jsonl(folder / "queries.jsonl")
        if str(q["_id"]) in wanted
    ]
    return Dataset(
        name=name,
        events=events_frame(events, str(folder / "corpus.jsonl")),
        queries=queries_frame(queries, str(folder / "queries.jsonl")),
        qrels=qrels_frame(
            qrels.select("query_id", "event_id", pl.col("relevance").cast(pl.Int64)).to_dicts(),
            str(qrels_path),
        ),
        info={"source": "BEIR", "split": split},
    )
