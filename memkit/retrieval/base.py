"""The retriever contract, search filters, and the event catalog every retriever keeps.

A retriever is an estimator in scikit-learn's manner: the constructor only stores its
parameters, ``fit(events)`` indexes a collection and returns ``self``, ``add(events)``
indexes more (an ``event_id`` seen before replaces the old event), ``remove(ids)`` drops
events, ``search(queries, k, filters)`` returns a run table, ``save(dir)`` / ``load(dir)``
persist it, and ``params()`` is what MLflow logs.

Filters are applied before the top k is cut: each retriever scores only the events the
filters admit (a boolean mask over its catalog), so a filtered search returns exactly
what a brute-force search over the filtered events would.

The floors a search names are its whole world (its *scope*): collection statistics
(BM25's and TF-IDF's document frequencies, document count and average length) are
counted over those floors' events only, and a dense search over them is exact. A search
scoped to floors F therefore scores exactly as a retriever holding only F's events
would: what else is indexed (other people's private floors, say) changes nothing in its
results, not even a score. The other filters narrow what is returned, not the statistics.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import typing
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import polars as pl

from memkit.config.model import FromSpec, checked_with, construct, settings_of, typed
from memkit.core.errors import ValidationError
from memkit.core.tables import RUN_SCHEMA, UTC_US, parse_time
from memkit.models.encoders import Encoder
from memkit.retrieval.registry import build

NO_TIME = np.iinfo(np.int64).min  # created_at missing


class UndatedEventsWarning(UserWarning):
    """A time filter left out events that have no time (an empty ``created_at``)."""


# Set while the pipeline searches a time window a question names, whose undated posts are
# left out by design; a context variable, so a thread's setting is its own.
_UNDATED_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "undated_quiet", default=False
)


@contextlib.contextmanager
def undated_quiet() -> Iterator[None]:
    """Within it, a time filter leaving out undated events gives no UndatedEventsWarning."""
    token = _UNDATED_QUIET.set(True)
    try:
        yield
    finally:
        _UNDATED_QUIET.reset(token)


def _warn_undated(dropped: int) -> None:
    """Say that a time filter left out events without a time (once for each count: Python
    shows a warning of the same text from the same line once)."""
    if dropped:
        warnings.warn(
            f"a time filter (time_from/time_to) left out {dropped:,} event(s) that have no "
            "time (created_at is empty): an event without a time never matches a time range; "
            "search without the time bounds to find them",
            UndatedEventsWarning,
            stacklevel=1,
        )


@dataclass(frozen=True)
class Filters:
    """What a search may return. Every part is optional; parts combine with AND.

    - ``floor_ids``: only events in these floors.
    - ``time_from`` / ``time_to``: the event's own ``created_at`` within the range, both
      bounds inclusive; a naive time is UTC; a date alone as ``time_to`` is the end of that
      day (all of it is in); an event without a time never matches a range.
    - ``types``: only events whose block type is one of these.
    - ``tags``: only events carrying at least one of these tags.
    """

    floor_ids: tuple[str, ...] | None = None
    time_from: datetime | None = None
    time_to: datetime | None = None
    types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None

    def __post_init__(self):
        for name in ("floor_ids", "types", "tags"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValidationError(name, f"expected a list of strings, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("time_from", "time_to"):
            try:
                value = parse_time(getattr(self, name), end_of_day=name == "time_to")
                object.__setattr__(self, name, value)
            except (TypeError, ValueError):
                raise ValidationError(
                    name, f"expected an ISO 8601 time, got {getattr(self, name)!r}"
                ) from None
        if self.time_from and self.time_to and self.time_from > self.time_to:
            raise ValidationError("time_from", "must not be later than time_to")

    @classmethod
    def from_dict(cls, d: dict | None) -> "Filters":
        if d is None:
            return cls()
        unknown = set(d) - {"floor_ids", "time_from", "time_to", "types", "tags"}
        if unknown:
            raise ValidationError(sorted(unknown)[0], "unknown filter")
        return cls(**d)

    def with_floors(self, floor_ids: Sequence[str] | None) -> "Filters":
        """These filters narrowed to ``floor_ids`` as well (intersection)."""
        if floor_ids is None:
            return self
        floors = tuple(floor_ids)
        if self.floor_ids is not None:
            floors = tuple(f for f in floors if f in set(self.floor_ids))
        return Filters(floors, self.time_from, self.time_to, self.types, self.tags)

    def is_empty(self) -> bool:
        return all(
            getattr(self, n) is None for n in ("floor_ids", "time_from", "time_to", "types", "tags")
        )


class _Codes:
    """Strings to small integer codes (floors, block types, tags)."""

    def __init__(self, names: Iterable[str] = ()):
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        for n in names:
            self.code(n)

    def code(self, name: str) -> int:
        c = self.index.get(name)
        if c is None:
            c = self.index[name] = len(self.names)
            self.names.append(name)
        return c


class Catalog:
    """What a retriever knows of each indexed event besides its text: ids, floors, block
    types, times, tags and whether it is still alive. Positions are stable: an event
    keeps its row for life; a removed or replaced one is only marked dead."""

    def __init__(self):
        self.event_ids: list[str] = []
        self.position: dict[str, int] = {}
        self._floors, self._types, self._tags = _Codes(), _Codes(), _Codes()
        self._floor = np.zeros(0, np.int32)
        self._type = np.zeros(0, np.int32)
        self._time = np.zeros(0, np.int64)
        self.alive = np.zeros(0, bool)
        self._tag_rows: list[list[int]] = []  # tag code -> positions
        self._event_tags: list[tuple[int, ...]] = []
        self._mask_cache: dict[Filters, np.ndarray] = {}
        self._rows_cache: dict[
            int, tuple[np.ndarray, np.ndarray]
        ] = {}  # id(mask) -> (mask, its positions)

    def __len__(self) -> int:
        return len(self.event_ids)

    @property
    def n_alive(self) -> int:
        return len(self.position)  # exactly the alive events: dead ones leave it

    def append(self, events: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Add events; returns (new positions, positions of events they replace)."""
        start = len(self.event_ids)
        ids = events["event_id"].to_list()
        replaced = [self.position[i] for i in ids if i in self.position]
        if replaced:
            self.alive[replaced] = False
        for offset, eid in enumerate(ids):
            self.position[eid] = start + offset
        self.event_ids.extend(ids)
        floors = np.array([self._floors.code(f) for f in events["floor_id"].to_list()], np.int32)
        types = np.array([self._types.code(t) for t in events["block_type"].to_list()], np.int32)
        times = (
            events["created_at"]
            .cast(UTC_US)
            .dt.epoch("us")
            .fill_null(NO_TIME)
            .to_numpy()
            .astype(np.int64)
        )
        self._floor = np.concatenate([self._floor, floors])
        self._type = np.concatenate([self._type, types])
        self._time = np.concatenate([self._time, times])
        self.alive = np.concatenate([self.alive, np.ones(len(ids), bool)])
        self._index_tags(start, events["tags"].to_list())
        self._changed()
        return np.arange(start, start + len(ids)), np.array(sorted(set(replaced)), np.int64)

    def _index_tags(self, start: int, tag_lists: list) -> None:
        for offset, tags in enumerate(tag_lists):
            codes = tuple(sorted({self._tags.code(t) for t in tags or ()}))
            self._event_tags.append(codes)
            for c in codes:
                while c >= len(self._tag_rows):
                    self._tag_rows.append([])
                self._tag_rows[c].append(start + offset)

    def remove(self, event_ids: Iterable[str]) -> np.ndarray:
        """Mark events dead; unknown ids are ignored. Returns the positions removed."""
        pos = [self.position.pop(e) for e in event_ids if e in self.position]
        pos = np.array(sorted(pos), np.int64)
        self.alive[pos] = False
        self._changed()
        return pos

    def _changed(self) -> None:
        self._mask_cache.clear()
        self._rows_cache.clear()

    def rows(self, mask: np.ndarray) -> np.ndarray:
        """The positions a mask admits, ascending. A search's masks come from ``mask`` and
        ``scope``, which hand out the same array for the same filters until the catalog
        changes, so the positions are found once per filter and shared by every part of a
        hybrid and every query asking the same floors (cached by the mask's identity, the
        mask kept alive with them so the identity cannot be reused)."""
        hit = self._rows_cache.get(id(mask))
        if hit is not None and hit[0] is mask:
            return hit[1]
        if len(self._rows_cache) > 4096:
            self._rows_cache.clear()
        rows = np.flatnonzero(mask)
        self._rows_cache[id(mask)] = (mask, rows)
        return rows

    def scope(self, filters: Filters | None) -> np.ndarray | None:
        """Boolean mask of the alive events in the floors the filters name (None: no floor
        filter, the whole collection): what a search's statistics are counted over."""
        if filters is None or filters.floor_ids is None:
            return None
        return self.mask(Filters(floor_ids=filters.floor_ids))

    def mask(self, filters: Filters | None) -> np.ndarray:
        """Boolean mask of alive events the filters admit."""
        if filters is None or filters.is_empty():
            return self.alive
        cached = self._mask_cache.get(filters)
        if cached is not None:
            return cached
        m = self.alive.copy()
        if filters.floor_ids is not None:
            codes = [self._floors.index[f] for f in filters.floor_ids if f in self._floors.index]
            m &= np.isin(self._floor, codes)
        if filters.types is not None:
            codes = [self._types.index[t] for t in filters.types if t in self._types.index]
            m &= np.isin(self._type, codes)
        if filters.time_from is not None or filters.time_to is not None:
            has_time = self._time != NO_TIME
            if not _UNDATED_QUIET.get():
                _warn_undated(int(np.count_nonzero(m & ~has_time)))
            m &= has_time
            if filters.time_from is not None:
                m &= self._time >= _epoch_us(filters.time_from)
            if filters.time_to is not None:
                m &= self._time <= _epoch_us(filters.time_to)
        if filters.tags is not None:
            tagged = np.zeros(len(m), bool)
            for t in filters.tags:
                c = self._tags.index.get(t)
                if c is not None and c < len(self._tag_rows):
                    tagged[self._tag_rows[c]] = True
            m &= tagged
        if len(self._mask_cache) > 4096:
            self._changed()
        self._mask_cache[filters] = m
        return m

    # -- persistence --------------------------------------------------------------
    def to_frame(self) -> pl.DataFrame:
        times = [None if t == NO_TIME else int(t) for t in self._time]
        return pl.DataFrame(
            {
                "event_id": self.event_ids,
                "floor_id": [self._floors.names[c] for c in self._floor],
                "block_type": [self._types.names[c] for c in self._type],
                "created_at_us": times,
                "tags": [[self._tags.names[c] for c in codes] for codes in self._event_tags],
                "alive": self.alive,
            },
            schema={
                "event_id": pl.Utf8,
                "floor_id": pl.Utf8,
                "block_type": pl.Utf8,
                "created_at_us": pl.Int64,
                "tags": pl.List(pl.Utf8),
                "alive": pl.Boolean,
            },
        )

    @classmethod
    def from_frame(cls, frame: pl.DataFrame) -> "Catalog":
        cat = cls()
        events = frame.select(
            "event_id",
            "floor_id",
            "block_type",
            pl.from_epoch("created_at_us", time_unit="us")
            .dt.replace_time_zone("UTC")
            .alias("created_at"),
            "tags",
        )
        # Replay appends without replacement semantics: ids may repeat for dead rows.
        cat.event_ids = events["event_id"].to_list()
        cat._floor = np.array([cat._floors.code(f) for f in events["floor_id"].to_list()], np.int32)
        cat._type = np.array([cat._types.code(t) for t in events["block_type"].to_list()], np.int32)
        cat._time = frame["created_at_us"].fill_null(NO_TIME).to_numpy().astype(np.int64)
        cat.alive = frame["alive"].to_numpy().copy()
        cat._index_tags(0, events["tags"].to_list())
        cat.position = {e: i for i, e in enumerate(cat.event_ids) if cat.alive[i]}
        return cat


def _epoch_us(dt: datetime) -> int:
    return (
        int(dt.timestamp() * 1_000_000)
        if dt.microsecond == 0
        else int(dt.timestamp()) * 1_000_000 + dt.microsecond
    )


def top_k(scores: np.ndarray, mask: np.ndarray | None, k: int, positive_only: bool = False):
    """Indices and scores of the k best admitted entries, best first.

    Ties are broken by position (earlier first), so the result is a pure function of the
    scores and the mask: the brute-force oracle in the tests relies on that.
    """
    admitted = np.ones(len(scores), bool) if mask is None else mask.copy()
    if positive_only:
        admitted &= scores > 0
    cand = np.flatnonzero(admitted)
    if len(cand) == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    s = scores[cand]
    if len(cand) > k:
        kth = np.partition(s, len(s) - k)[len(s) - k]
        keep = s >= kth
        cand, s = cand[keep], s[keep]
    order = np.lexsort((cand, -s))[:k]
    return cand[order], s[order].astype(np.float64)


def normalize_queries(queries: Any) -> pl.DataFrame:
    """A str, a list of str, or a frame with ``query_id`` and ``text`` (and optionally
    ``floor_ids``) to a frame with ``query_id, text, floor_ids``."""
    if isinstance(queries, str):
        queries = [queries]
    if isinstance(queries, pl.DataFrame):
        if "query_id" not in queries.columns or "text" not in queries.columns:
            raise ValidationError("queries", "a query frame needs query_id and text columns")
        cols = ["query_id", "text"] + (["floor_ids"] if "floor_ids" in queries.columns else [])
        return queries if queries.columns == cols else queries.select(cols)
    queries = list(queries)
    if not all(isinstance(q, str) for q in queries):
        raise ValidationError("queries", "expected a string, a list of strings or a query frame")
    return pl.DataFrame({"query_id": [str(i) for i in range(len(queries))], "text": queries})


def query_filters(queries: pl.DataFrame, filters) -> list[Filters | None]:
    """One Filters per query: the given filters (one for all, or one per query),
    narrowed to the query's own ``floor_ids`` where the frame has them."""
    n = queries.height
    if filters is None or isinstance(filters, (Filters, dict)):
        base = Filters.from_dict(filters) if isinstance(filters, dict) else filters
        per = [base] * n
    else:
        per = list(filters)
        if len(per) != n:
            raise ValidationError(
                "filters", f"expected one Filters per query ({n}), got {len(per)}"
            )
    if "floor_ids" in queries.columns:
        floors = queries["floor_ids"].to_list()
        per = [
            (f or Filters()).with_floors(fl) if fl is not None else f for f, fl in zip(per, floors)
        ]
    return per


def checked_search(queries, k, filters) -> tuple[pl.DataFrame, list]:
    """A search's arguments checked: the queries as a frame and one filter per query."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValidationError("k", f"expected a positive integer, got {k!r}")
    frame = normalize_queries(queries)
    return frame, query_filters(frame, filters)


def run_table(per_query: Iterable[tuple[str, Sequence[str], Sequence[float], Any]]) -> pl.DataFrame:
    """A run table (``RUN_SCHEMA``) from, per query, ``(query_id, event ids best first,
    their scores, match type)``; the match type is one string for every row of the query
    or one per row. Ranks count from 1 within each query."""
    qid, eid, score, rank, kind = [], [], [], [], []
    for q, ids, scores, match_type in per_query:
        n = len(ids)
        qid.extend([q] * n)
        eid.extend(ids)
        score.extend(scores)
        rank.extend(range(1, n + 1))
        kind.extend([match_type] * n if isinstance(match_type, str) else match_type)
    return pl.DataFrame(
        {"query_id": qid, "event_id": eid, "score": score, "rank": rank, "match_type": kind},
        schema=RUN_SCHEMA,
    )


def make_run(
    query_ids: list[str],
    hits: list[tuple[np.ndarray, np.ndarray]],
    event_ids: list[str],
    match_type: str,
):
    """Run table from per-query (catalog positions, scores)."""
    return run_table(
        (q, [event_ids[p] for p in pos], sc.tolist(), match_type)
        for q, (pos, sc) in zip(query_ids, hits)
    )


class Retriever(FromSpec):
    """Base class. A built-in kind is built from its spec (``spec = BM25Spec``): the
    spec's fields are its settings, given as keywords (the first ones by position too:
    ``HybridRetriever([bm25, dense])``), checked by the spec, kept as attributes of the
    same names and read back by ``get_params``; a part may be given built (a retriever
    for a spec, an encoder for its name) and is kept as given. What the settings make is
    made in ``_built``. A kind registered at run time without a spec stores its own
    ``__init__`` arguments under their names instead. Each kind implements ``_reset``,
    ``_index``, ``_unindex``, ``_search_batch``, ``_save_state`` and ``_load_state``; the
    catalog, filters, ids and the run table are handled here. ``@register``
    (registry.py) makes it buildable from a config dict. A composite kind (hybrid,
    learned) returns its parts from ``children`` (``walk`` then finds them) and overrides
    the public methods it fans out to them."""

    match_type = "keyword"
    type_name = "base"
    section = "retriever"
    # The config keys that hold the specs of a composite's parts (``map_specs`` follows them).
    child_params: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "spec" in vars(cls):  # the settings in the spec's order, by position or keyword
            cls.__signature__ = cls.__signature__.replace(
                parameters=[
                    p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
                    for p in cls.__signature__.parameters.values()
                ]
            )

    def __init__(self, *args: Any, **settings: Any) -> None:
        spec = getattr(type(self), "spec", None)
        if spec is None:  # a kind without a spec keeps its own arguments
            if args or settings:
                raise TypeError(f"{type(self).__name__} has no spec to take settings from")
            self.catalog = Catalog()
            return
        names = list(settings_of(spec))
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} settings")
        for name, value in zip(names, args):
            if name in settings:
                raise TypeError(f"{type(self).__name__} got {name!r} twice")
            settings[name] = value
        # the spec's own type: a subclass registered under another name keeps its settings
        tag = typing.get_args(spec.model_fields["type"].annotation)[0]
        checked = checked_with(
            spec, self.section, {"type": tag, **{k: _param_value(v) for k, v in settings.items()}}
        )
        self._take(checked, {k: v for k, v in settings.items() if _holds_built(v)})

    def _take(self, spec: Any, given: dict[str, Any] | None = None) -> None:
        """The checked settings as attributes, the parts ``given`` built kept as given."""
        self.catalog = Catalog()
        for name in settings_of(type(self).spec):
            value = getattr(spec, name)
            if given and name in given:
                value = _keep_built(given[name], value)
            setattr(self, name, value)
        self._built()

    # -- the contract ---------------------------------------------------------------
    def fit(self, events: pl.DataFrame) -> "Retriever":
        self._reset()
        self.catalog = Catalog()
        self.add(events)
        return self

    def add(self, events: pl.DataFrame) -> "Retriever":
        if events.height == 0:
            return self
        dup = events["event_id"].is_duplicated()
        if dup.any():
            raise ValidationError(
                "event_id", f"repeated within one add: {events.filter(dup)['event_id'][0]!r}"
            )
        new_pos, replaced = self.catalog.append(events)
        if len(replaced):
            self._unindex(replaced)
        self._index(events, new_pos)
        return self

    def remove(self, event_ids: Iterable[str]) -> "Retriever":
        pos = self.catalog.remove(event_ids)
        if len(pos):
            self._unindex(pos)
        return self

    def search(self, queries, k: int = 10, filters=None, now=None) -> pl.DataFrame:
        """The run of these queries. ``now``: the time each was asked (one datetime for
        all, or one per query, None where unknown), given to a kind whose
        ``_search_batch`` takes a ``now`` keyword; the built-in kinds do not read it."""
        frame, per = checked_search(queries, k, filters)
        masks = [self.catalog.mask(f) for f in per]
        hits = self.search_batch(
            frame["text"].to_list(), k, masks, [self.catalog.scope(f) for f in per], now=now
        )
        return make_run(frame["query_id"].to_list(), hits, self.catalog.event_ids, self.match_type)

    def search_batch(
        self,
        texts: list[str],
        k: int,
        masks: list[np.ndarray],
        scopes: list | None = None,
        now=None,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The raw candidates of a leaf retriever: per query, the catalog positions
        (best first) and scores of the k best its mask admits, with statistics counted
        over its scope (a mask or None). A composite (hybrid, learned) asks its parts this
        with masks of its own catalog, which holds the same events at the same positions.
        ``now`` as for ``search``; a hook taking ``now`` gets one time (or None) per query."""
        if _takes_now(type(self)):
            return self._search_batch(texts, k, masks, scopes, now=asking_times(now, len(texts)))
        return self._search_batch(texts, k, masks, scopes)

    def children(self) -> list["Retriever"]:
        """The retrievers this one holds, in config order (none for a leaf)."""
        return []

    def params(self) -> dict:
        return {"type": self.type_name, **self.get_params()}

    def precompute(self, events: pl.DataFrame) -> None:
        """Do the slow part of indexing these events ahead (e.g. encode them into the
        embedding cache), so a later ``add`` is quick. Touches no index state. Here: the
        children's (nothing for a leaf)."""
        for child in self.children():
            child.precompute(events)

    def warm(self) -> None:
        """Build what a search would otherwise build lazily (after ``fit``/``add``), so
        that concurrent searches only read. Here: the children's (nothing for a leaf)."""
        for child in self.children():
            child.warm()

    @classmethod
    def from_spec(cls, spec: Any) -> "Retriever":
        """One of these from its typed spec (memkit.config.model) or a config dict, which is
        checked into one first: ``BM25Retriever.from_spec(BM25Spec(type="bm25", k1=0.9))``.
        The spec's ``type`` must be this class's (``build`` picks the class for you)."""
        spec = typed("retriever", spec)
        if spec.type != cls.type_name:
            raise ValidationError(
                "retriever.type",
                f"expected {cls.type_name!r} for {cls.__name__}, got {spec.type!r}",
            )
        return construct(cls, spec, f"retriever.{spec.type}")

    def get_params(self) -> dict:
        """The settings, in the scikit-learn manner: each field of the spec (a kind without
        one: each parameter of ``__init__``) read back from the attribute of the same name,
        so ``type(r)(**r.get_params())`` builds an equal one. A retriever inside is given
        as its ``params()`` (a config dict), an encoder as its name, so the result is plain
        JSON (what ``save`` writes to retriever.json)."""
        spec = getattr(type(self), "spec", None)
        names = init_params(type(self)) if spec is None else list(settings_of(spec))
        return {name: _param_value(getattr(self, name)) for name in names}

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "retriever.json").write_text(json.dumps(self._spec(), indent=2))
        self.catalog.to_frame().write_parquet(folder / "catalog.parquet")
        self._save_state(folder)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Retriever":
        folder = Path(folder)
        spec = json.loads((folder / "retriever.json").read_text())
        obj = build(spec)
        if cls is not Retriever and not isinstance(obj, cls):
            raise ValidationError(
                "folder", f"{folder} holds a {spec.get('type')} retriever, not {cls.type_name}"
            )
        obj.catalog = Catalog.from_frame(pl.read_parquet(folder / "catalog.parquet"))
        obj._load_state(folder)
        return obj

    def _spec(self) -> dict:
        return self.params()

    def __len__(self) -> int:
        return self.catalog.n_alive

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- for subclasses -------------------------------------------------------------
    def _reset(self) -> None:
        raise NotImplementedError

    def _index(self, events: pl.DataFrame, positions: np.ndarray) -> None:
        raise NotImplementedError

    def _unindex(self, positions: np.ndarray) -> None:
        raise NotImplementedError

    def _search_batch(
        self, texts: list[str], k: int, masks: list[np.ndarray], scopes: list | None = None
    ):
        """Per query, (positions, scores) of the k best admitted by its mask; ``scopes``
        (per query a mask or None) is what statistics are counted over (see above)."""
        raise NotImplementedError

    def _save_state(self, folder: Path) -> None:
        raise NotImplementedError

    def _load_state(self, folder: Path) -> None:
        raise NotImplementedError


def walk(retriever: Retriever) -> Iterator[Retriever]:
    """The retriever and every retriever inside it, depth first in config order (a hybrid,
    then its parts; a learned one, then its first stage's tree, then its extra parts)."""
    yield retriever
    for child in retriever.children():
        yield from walk(child)


def asking_times(now, n: int) -> list[datetime | None]:
    """``now`` (None, one time for all or one per query) as one time or None per query."""
    if now is None or isinstance(now, datetime):
        return [now] * n
    times = list(now)
    if len(times) != n:
        raise ValidationError("now", f"expected one time per query ({n}), got {len(times)}")
    if not all(t is None or isinstance(t, datetime) for t in times):
        raise ValidationError("now", "expected datetimes (or None where the time is unknown)")
    return times


@functools.cache
def _takes_now(cls: type) -> bool:
    """Whether a kind's ``_search_batch`` reads the time of asking (a ``now`` parameter)."""
    return "now" in inspect.signature(cls._search_batch).parameters


def search_with_time(retriever: "Retriever", queries, k: int, filters, now) -> pl.DataFrame:
    """``retriever.search`` with the time of asking, where its ``search`` takes one (a kind
    that overrides ``search`` without ``now`` is asked without it)."""
    if now is not None and "now" in inspect.signature(retriever.search).parameters:
        return retriever.search(queries, k, filters, now=now)
    return retriever.search(queries, k, filters)


def init_params(cls: type) -> list[str]:
    """The named parameters of ``cls.__init__``; a ``**kwargs`` passes on to the base
    class's ``__init__``, whose parameters follow."""
    names: list[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        more = False
        for p in inspect.signature(init).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                more = True
            elif p.name != "self" and p.kind is not p.VAR_POSITIONAL and p.name not in names:
                names.append(p.name)
        if not more:
            break
    return names


def _holds_built(value: Any) -> bool:
    """Whether a setting is (or holds) a built part: a retriever or an encoder."""
    if isinstance(value, (list, tuple)):
        return any(_holds_built(v) for v in value)
    return isinstance(value, (Retriever, Encoder))


def _keep_built(given: Any, checked: Any) -> Any:
    """A setting as the spec checked it, with the built parts it was given kept."""
    if isinstance(given, (Retriever, Encoder)):
        return given
    if isinstance(given, (list, tuple)) and isinstance(checked, list):
        return [_keep_built(g, c) for g, c in zip(given, checked)]
    return checked


def _param_value(value: Any) -> Any:
    """A parameter as config: a retriever as its config dict, an encoder as its name, in
    a list too."""
    if isinstance(value, Retriever):
        return value.params()
    if isinstance(value, (list, tuple)):
        return [_param_value(v) for v in value]
    if isinstance(value, Encoder):
        return value.name
    return value


def document_text(events: pl.DataFrame, template: str) -> list[str]:
    """The text a retriever indexes for each event, from a template over its fields,
    e.g. ``"{text}"`` or ``"{user_id}: {text}"``; a missing field renders as empty."""
    if template == "{text}":
        return events["text"].to_list()
    cols = [c for c in events.columns if "{" + c + "}" in template or "{" + c + ":" in template]
    out = []
    for row in events.select(cols).iter_rows(named=True):
        out.append(
            template.format_map({k: ("" if v is None else v) for k, v in row.items()}).strip()
        )
    return out
