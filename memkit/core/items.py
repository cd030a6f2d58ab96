"""What a query returns about each post, and where the pipeline reads it from.

An :class:`Item` is one ranked post as the answer writer, the conversation and a caller
see it: its text, who wrote it (``speaker``, the author's name), when, in which block,
and its ``score``: the calibrated probability that it answers the question (see
memkit.ranking.calibration). The pipeline reads items from an :class:`ItemSource` given at
construction: :class:`Posts` (in memory, filled by ``Pipeline.fit``/``add``: notebooks and
eval) or the service's own store (server/search/items.py), so the pipeline never has to
ask its caller for anything while it answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Iterable, Protocol

import polars as pl

from memkit.core.tables import parse_time


@dataclass(frozen=True)
class Item:
    event_id: str
    text: str
    speaker: str | None = None  # the author's name (LoCoMo: the speaker)
    user_id: str | None = None
    created_at: datetime | None = None  # aware UTC
    floor_id: str | None = None
    block_id: str | None = None
    block_type: str | None = None  # feed, blog, forum, quiz
    block_title: str | None = None
    score: float = 0.0  # probability of relevance (calibrated) where the pipeline has a calibration
    match_type: str = "hybrid"
    extra: dict = field(
        default_factory=dict, compare=False
    )  # what a source adds (the service: its own fields)

    def scored(self, score: float, match_type: str) -> "Item":
        return replace(self, score=score, match_type=match_type)

    def get(self, key: str, default=None):
        """Dict-style reads, for code that takes plain dicts too (the answer writers)."""
        return getattr(self, key, default) if key in ITEM_FIELDS else self.extra.get(key, default)

    def __getitem__(self, key: str):
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value


_MISSING = object()
ITEM_FIELDS = frozenset(Item.__dataclass_fields__) - {"extra"}


class ItemSource(Protocol):
    def items(self, event_ids: list[str]) -> list[Item]:
        """The posts with these ids, in this order; ids no longer there are left out."""


def default_title(block_id: str | None) -> str | None:
    """A readable block title from a converted data set's block id ("conv-26/session_3" ->
    "Session 3"), where the data set names none."""
    tail = (block_id or "").rsplit("/", 1)[-1].replace("_", " ").strip()
    return tail[:1].upper() + tail[1:] if tail else None


class Posts:
    """Items kept in memory, from the events frames the pipeline indexes (``speaker``
    and ``block_title`` columns where present, else the author id and a title made from
    the block id)."""

    def __init__(self):
        self._items: dict[str, Item] = {}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, events: pl.DataFrame) -> None:
        cols = set(events.columns)
        for r in events.iter_rows(named=True):
            meta = r.get("metadata")
            title = (
                r.get("block_title")
                if "block_title" in cols
                else _from_metadata(meta, "block_title")
            )
            self._items[r["event_id"]] = Item(
                event_id=r["event_id"],
                text=r.get("text") or "",
                speaker=(r.get("speaker") if "speaker" in cols else None) or r.get("user_id"),
                user_id=r.get("user_id"),
                created_at=parse_time(r.get("created_at")),
                floor_id=r.get("floor_id"),
                block_id=r.get("block_id"),
                block_type=r.get("block_type"),
                block_title=title or default_title(r.get("block_id")),
            )

    def remove(self, event_ids: Iterable[str]) -> None:
        for e in event_ids:
            self._items.pop(e, None)

    def items(self, event_ids: list[str]) -> list[Item]:
        return [self._items[e] for e in event_ids if e in self._items]


def _from_metadata(meta: str | None, key: str):
    if not meta:
        return None
    import json

    try:
        return json.loads(meta).get(key)
    except (ValueError, AttributeError):
        return None


def as_datetime(value) -> datetime | None:
    """A datetime, or ISO text read as one; None when it is neither."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def timestamp(value) -> float:
    """Seconds since 1970 (an unknown time first), for ordering posts by when they were posted."""
    value = as_datetime(value)
    return value.timestamp() if value is not None else float("-inf")
