"""Retrievers that keep their index in PostgreSQL, so that any number of stateless
processes (on any number of machines) search the same data.

- ``PgVectorRetriever`` (``type = "pgvector"``): sentence vectors in a pgvector column
  ``vector(dim)`` with an HNSW index (cosine ops). Scores are cosine similarities,
  ``match_type`` is ``semantic``.
- ``PgTextRetriever`` (``type = "pgtext"``): a ``tsvector`` column (text search config
  ``english`` by default) with a GIN index. A query is an OR of its terms (the terms of
  ``plainto_tsquery`` joined by ``|``), so, like BM25, an event matching any term is a
  candidate; candidates are scored by ``ts_rank`` (or ``ts_rank_cd``). ``match_type`` is
  ``keyword``, and every score is positive (only matching rows are returned), which the
  pipeline's relevance gate relies on.

Each retriever owns one table (``table``), keyed by ``event_id``, that also holds what
:class:`~memkit.retrieval.base.Filters` need: ``floor_id``, ``block_type``,
``created_at`` and ``tags``. Filters are SQL ``WHERE`` clauses of the same query that cuts
the top k, so they apply before the cut:

- A search that names floors is an exact scan over those floors' rows (ordered by an
  expression the HNSW index cannot serve, through the ``floor_id`` b-tree index): which
  rows a graph walk reaches depends on every row in the table, so an approximate answer
  would change with other people's (even private) posts. ``ts_rank`` needs no collection
  statistics, so full-text scores depend on each row alone.
- Otherwise pgvector >= 0.8 (``hnsw.iterative_scan = relaxed_order``) keeps walking the graph until
  k admitted rows are found; the rows are re-sorted by exact distance afterwards. If the
  graph still yields fewer than k rows (``hnsw.max_scan_tuples`` reached, or an older
  pgvector), the query is repeated as an exact scan over the admitted rows (ordered by an
  expression the HNSW index cannot serve), so a filtered search returns
  ``min(k, admitted)`` rows. The planner already picks the exact plan by itself where a
  floor filter is selective (the ``floor_id`` b-tree index is cheaper then).
- ``hnsw.ef_search`` is ``max(ef_search, k)`` (at most 1000) per query.

Full-text scoring has no top-k pruning: every row matching some query term is ranked. That
is what BM25 over an inverted index does too, but large collections with very common terms
pay for it.

The connection URL comes from ``url``: a ``postgresql://`` URL, or ``"env:NAME"`` to read
it from the environment variable ``NAME`` when the first connection is made (the default
is ``env:MEMKIT_DATABASE_URL``). Connections come from a ``psycopg_pool`` pool per process
(a forked child opens its own); a block that raises rolls its transaction back.
``fit``/``add``/``remove`` have the signatures of every retriever; to write inside a
transaction the caller owns (e.g. the service writing an event and its vectors in one
transaction), call them inside ``with writing_in(conn):`` (a psycopg connection): every
PostgreSQL retriever's writes in that block, in that thread, use ``conn``. The tables and
indexes are created on first use (``ensure_schema``, serialised by an advisory lock;
``CREATE EXTENSION vector`` needs a role that may create it).

``save`` writes only the parameters: the data lives in the database. ``fit`` empties the
table and indexes the given events.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np
import polars as pl

from memkit.config.model import PgTextSpec, PgVectorSpec
from memkit.core.errors import ValidationError
from memkit.models.encoders import Encoder, encode_documents, get_encoder
from memkit.retrieval.base import (
    Filters,
    Retriever,
    checked_search,
    document_text,
    run_table,
    walk,
)
from memkit.retrieval.registry import build, register

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

DDL_LOCK = 0x6D656D6B  # advisory lock key ("memk") serialising schema changes across processes
MAX_EF_SEARCH = 1000
MAX_CONNECTIONS = 16  # per process and database; a caller past it waits (30 s at most) for one


def resolve_url(url: str | None) -> str:
    """A libpq URL from a URL or ``env:NAME``; SQLAlchemy's ``postgresql+psycopg://``
    spelling is accepted."""
    if not url:
        raise ValidationError("url", "a PostgreSQL URL (or env:NAME) is needed")
    if url.startswith("env:"):
        name = url[4:]
        value = os.environ.get(name)
        if not value:
            raise ValidationError(
                "url", f"environment variable {name} is not set (it should hold a PostgreSQL URL)"
            )
        url = value
    url = re.sub(r"^postgresql\+\w+://", "postgresql://", url)
    if not url.startswith(("postgresql://", "postgres://")):
        raise ValidationError("url", "expected a postgresql:// URL")
    return url


def _safe(url: str) -> str:
    """A URL for logs and params: any password replaced."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


_POOLS: dict[tuple[int, str], "ConnectionPool"] = {}
_POOLS_LOCK = threading.Lock()


def pool(dsn: str) -> "ConnectionPool":
    """This process's psycopg pool for a database. A forked child (a gunicorn worker)
    opens its own: it must not use its parent's sockets, nor close them."""
    from psycopg_pool import ConnectionPool

    key = (os.getpid(), dsn)
    with _POOLS_LOCK:
        if key not in _POOLS:
            # No prepared statements: after five runs of a statement psycopg prepares it and
            # PostgreSQL may switch to a generic plan, chosen without the query's terms; for
            # full-text search that plan is several times slower once autovacuum has
            # re-analysed the table (eval/RESULTS.md). Each search is planned for its words.
            _POOLS[key] = ConnectionPool(
                dsn,
                min_size=1,
                max_size=MAX_CONNECTIONS,
                open=True,
                kwargs={"prepare_threshold": None},
                name=f"memkit-{len(_POOLS)}",
            )
        return _POOLS[key]


@atexit.register
def _close_pools() -> None:
    for (pid, _), p in list(_POOLS.items()):
        if pid == os.getpid():
            p.close()


_WRITING_IN: ContextVar = ContextVar("memkit_postgres_writes", default=None)


@contextmanager
def writing_in(conn):
    """Every PostgreSQL retriever's ``fit``/``add``/``remove`` inside this block writes
    on ``conn`` (a psycopg connection), in the transaction its caller owns, instead of a
    pooled connection of its own. The binding belongs to this thread (or task) only, so
    concurrent requests never share a connection; searches keep their pooled ones."""
    token = _WRITING_IN.set(conn)
    try:
        yield conn
    finally:
        _WRITING_IN.reset(token)


def _where(f: Filters | None) -> tuple[str, list]:
    """SQL conditions (AND-ed) and their parameters for memkit Filters."""
    if f is None or f.is_empty():
        return "TRUE", []
    parts, args = [], []
    if f.floor_ids is not None:
        parts.append("floor_id = ANY(%s)")
        args.append(list(f.floor_ids))
    if f.types is not None:
        parts.append("block_type = ANY(%s)")
        args.append(list(f.types))
    if (
        f.time_from is not None
    ):  # NULL times never compare true: an event without a time never matches
        parts.append("created_at >= %s")
        args.append(f.time_from)
    if f.time_to is not None:
        parts.append("created_at <= %s")
        args.append(f.time_to)
    if f.tags is not None:
        parts.append("tags && %s::text[]")
        args.append(list(f.tags))
    return " AND ".join(parts), args


def _utc(value):
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value


class PostgresRetriever(Retriever):
    """What both PostgreSQL retrievers share: the table of filter columns, connections,
    writes (upsert by event id), removal and the run table."""

    default_table = "memkit_rows"
    type_name = "postgres"

    def _built(self) -> None:
        self.table = self.table or self.default_table
        self._ready = False

    def get_params(self) -> dict:
        """The constructor's arguments, with any password in ``url`` hidden."""
        params = super().get_params()
        if not self.url.startswith("env:"):
            params["url"] = _safe(self.url)
        return params

    # -- connections and schema ----------------------------------------------------------
    def _pool(self) -> "ConnectionPool":
        return pool(resolve_url(self.url))

    @contextmanager
    def connection(self, conn=None):
        """A caller's connection as is (its transaction is the caller's), else a pooled
        one in a transaction of its own. The schema is made first, in its own transaction."""
        self.ensure_schema()
        if conn is not None:
            yield conn
        else:
            with self._pool().connection() as own:
                yield own

    def ensure_schema(self) -> None:
        if self._ready:
            return
        with self._pool().connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
            for statement in self._ddl():
                conn.execute(statement)
        self._ready = True

    def _ddl(self) -> list[str]:
        t = self.table
        return [
            f"CREATE INDEX IF NOT EXISTS {t}_floor ON {t} (floor_id)",
            "CREATE TABLE IF NOT EXISTS memkit_fitted "
            "(name text PRIMARY KEY, fingerprint text NOT NULL)",
        ]

    def _columns(self) -> str:
        return (
            "event_id text PRIMARY KEY, floor_id text NOT NULL, block_type text NOT NULL, "
            "created_at timestamptz, tags text[] NOT NULL DEFAULT '{}'"
        )

    # -- the contract ----------------------------------------------------------------------
    def fit(self, events: pl.DataFrame) -> "PostgresRetriever":
        """The table holds exactly ``events``. A table this retriever last filled by a fit
        of the same events (same texts, metadata and parameters: ``memkit_fitted`` keeps a
        fingerprint, which any later add or remove clears) is left as it is: re-running an
        evaluation does not rewrite thousands of rows it already holds."""
        mark = self._fingerprint(events)
        with self.connection(_WRITING_IN.get()) as c:
            row = c.execute(
                "SELECT fingerprint FROM memkit_fitted WHERE name = %s", (self.table,)
            ).fetchone()
            if row is not None and row[0] == mark:
                return self
            c.execute(f"DELETE FROM {self.table}")
            with writing_in(c):
                self.add(events)
            # Statistics for the planner now, not when autovacuum gets round to it: on a
            # table just filled, full-text search took 45 ms a query instead of 9 (SciFact).
            c.execute(f"ANALYZE {self.table}")
            c.execute(
                "INSERT INTO memkit_fitted (name, fingerprint) VALUES (%s, %s) ON CONFLICT (name) "
                "DO UPDATE SET fingerprint = EXCLUDED.fingerprint",
                (self.table, mark),
            )
        return self

    def _fingerprint(self, events: pl.DataFrame) -> str:
        h = hashlib.sha256(json.dumps(self.get_params(), sort_keys=True, default=str).encode())
        h.update(self._made_by().encode())
        meta = events.select("event_id", "floor_id", "block_type", "created_at", "tags").rows()
        h.update(repr(meta).encode())
        for text in document_text(events, self.doc_template):
            h.update(text.encode() + b"\x00")
        return h.hexdigest()

    def _made_by(self) -> str:
        """What computes the rows besides the parameters (the vector table: the encoder's
        exact name, which changes with its weights while the config says "minilm-int8")."""
        return ""

    def _unmark(self, c) -> None:
        c.execute("DELETE FROM memkit_fitted WHERE name = %s", (self.table,))

    def add(self, events: pl.DataFrame) -> "PostgresRetriever":
        if events.height == 0:
            return self
        dup = events["event_id"].is_duplicated()
        if dup.any():
            raise ValidationError(
                "event_id", f"repeated within one add: {events.filter(dup)['event_id'][0]!r}"
            )
        values = self._values(events)
        meta = list(
            zip(
                events["event_id"].to_list(),
                events["floor_id"].to_list(),
                events["block_type"].to_list(),
                [_utc(t) for t in events["created_at"].to_list()],
                [list(t or []) for t in events["tags"].to_list()],
            )
        )
        rows = [(*m, v) for m, v in zip(meta, values)]
        col, expr = self._value_column()
        sql = (
            f"INSERT INTO {self.table} (event_id, floor_id, block_type, created_at, tags, {col}) "
            f"VALUES (%s, %s, %s, %s, %s, {expr}) ON CONFLICT (event_id) DO UPDATE SET "
            f"floor_id = EXCLUDED.floor_id, block_type = EXCLUDED.block_type, "
            f"created_at = EXCLUDED.created_at, "
            f"tags = EXCLUDED.tags, {col} = EXCLUDED.{col}"
        )
        with self.connection(_WRITING_IN.get()) as c, c.cursor() as cur:
            self._unmark(c)
            cur.executemany(sql, rows)
        return self

    def remove(self, event_ids: Iterable[str]) -> "PostgresRetriever":
        ids = list(event_ids)
        if ids:
            with self.connection(_WRITING_IN.get()) as c:
                self._unmark(c)
                c.execute(f"DELETE FROM {self.table} WHERE event_id = ANY(%s)", (ids,))
        return self

    def search(self, queries, k: int = 10, filters=None, now=None) -> pl.DataFrame:
        # ``now`` (the time of asking) is the contract's; the SQL scoring does not read it
        frame, per = checked_search(queries, k, filters)
        hits = self._search_all(frame["text"].to_list(), k, per)
        return run_table(
            (q, [e for e, _ in found], [float(s) for _, s in found], self.match_type)
            for q, found in zip(frame["query_id"].to_list(), hits)
        )

    def __len__(self) -> int:
        with self.connection() as c:
            return int(c.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def event_ids(self) -> set[str]:
        with self.connection() as c:
            return {r[0] for r in c.execute(f"SELECT event_id FROM {self.table}")}

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "retriever.json").write_text(json.dumps(self.params(), indent=2))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "PostgresRetriever":
        return build(json.loads((Path(folder) / "retriever.json").read_text()))

    def _reset(self) -> None:  # the data lives in the database; fit empties the table
        pass

    # -- for subclasses ----------------------------------------------------------------------
    def _values(self, events: pl.DataFrame) -> list:
        raise NotImplementedError

    def _value_column(self) -> tuple[str, str]:
        raise NotImplementedError

    def _search_all(
        self, texts: list[str], k: int, filters: list[Filters | None]
    ) -> list[list[tuple[str, float]]]:
        raise NotImplementedError


def _vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v.tolist()) + "]"


@register
class PgVectorRetriever(PostgresRetriever):
    """Cosine similarity of sentence embeddings, searched by pgvector's HNSW index.

    ``graph = false`` makes no HNSW index: a search that names floors never uses it (it
    is an exact scan over the floors' rows, above), and the service's searches always
    name floors, while the graph costs every insert an update (a large part of indexing
    a million rows) and its size on disk. Searches without floors then scan exactly."""

    match_type = "semantic"
    type_name = "pgvector"
    default_table = "memkit_vectors"

    spec = PgVectorSpec

    def _built(self) -> None:
        super()._built()
        self.pgvector_version: str | None = None
        # searches the graph answered with fewer than k rows (for tests and monitoring)
        self.exact_fallbacks = 0

    def _made_by(self) -> str:
        # the model's exact name, not its config name: the weights can change under the
        # same config name (int8 weights made 7-bit), and a table filled with the older
        # vectors must not be taken for one of the newer
        return str(self.text_encoder.name)

    @property
    def text_encoder(self) -> Encoder:
        """The model behind ``encoder`` (a name, resolved here, or an Encoder itself)."""
        return get_encoder(self.encoder) if isinstance(self.encoder, str) else self.encoder

    def ensure_schema(self) -> None:
        if self._ready:
            return
        super().ensure_schema()
        with self._pool().connection() as conn:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        self.pgvector_version = row[0]

    def _iterative(self) -> bool:
        v = tuple(int(p) for p in re.findall(r"\d+", self.pgvector_version or "0")[:2])
        return self.iterative_scan != "off" and v >= (0, 8)

    def _ddl(self) -> list[str]:
        t, dim = self.table, int(self.text_encoder.dim)
        graph = (
            [
                f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} "
                f"USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {int(self.m)}, ef_construction = {int(self.ef_construction)})"
            ]
            if self.graph
            else []
        )
        return [
            "CREATE EXTENSION IF NOT EXISTS vector",
            f"CREATE TABLE IF NOT EXISTS {t} ({self._columns()}, embedding vector({dim}) NOT NULL)",
            *graph,
            *super()._ddl(),
        ]

    def _values(self, events: pl.DataFrame) -> list:
        vecs = encode_documents(self.text_encoder, document_text(events, self.doc_template))
        return [_vector_literal(v) for v in vecs]

    def precompute(self, events: pl.DataFrame) -> None:
        encode_documents(self.text_encoder, document_text(events, self.doc_template))

    def _value_column(self) -> tuple[str, str]:
        return "embedding", "%s::vector"

    def _search_all(self, texts, k, filters):
        q = self.text_encoder.encode(texts)
        with self.connection() as c:
            return [self._search_one(c, _vector_literal(v), k, f) for v, f in zip(q, filters)]

    def _search_one(self, c, qv: str, k: int, f: Filters | None) -> list[tuple[str, float]]:
        where, args = _where(f)
        t = self.table
        if (
            f is not None and f.floor_ids is not None
        ) or not self.graph:  # scoped (see the module's docstring) or no graph
            return self._exact(c, qv, k, where, args)
        c.execute(
            "SELECT set_config('hnsw.ef_search', %s, true)",
            (str(min(MAX_EF_SEARCH, max(self.ef_search, k))),),
        )
        if self._iterative():
            c.execute(
                "SELECT set_config('hnsw.iterative_scan', %s, true), "
                "set_config('hnsw.max_scan_tuples', %s, true)",
                (self.iterative_scan, str(self.max_scan_tuples)),
            )
        # The graph's candidates, re-sorted exactly (relaxed_order may return them a little
        # out of order).
        rows = c.execute(
            f"WITH c AS MATERIALIZED (SELECT event_id, embedding <=> %s::vector AS d "
            f"FROM {t} WHERE {where} ORDER BY embedding <=> %s::vector LIMIT %s) "
            f"SELECT event_id, 1 - d FROM c ORDER BY d, event_id",
            (qv, *args, qv, k),
        ).fetchall()
        if (
            len(rows) < k
        ):  # the graph gave fewer than k: exact over the admitted rows (no index can order this)
            self.exact_fallbacks += 1
            return self._exact(c, qv, k, where, args)
        return [(r[0], float(r[1])) for r in rows]

    def _exact(self, c, qv: str, k: int, where: str, args: list) -> list[tuple[str, float]]:
        rows = c.execute(
            f"SELECT event_id, 1 - (embedding <=> %s::vector) AS s FROM {self.table} WHERE {where} "
            f"ORDER BY (embedding <=> %s::vector) + 0, event_id LIMIT %s",
            (qv, *args, qv, k),
        ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def similarity(self, text: str, event_ids: list[str]) -> np.ndarray:
        """Cosine similarity of one query to indexed events (by id; -1 for one not indexed)."""
        if not event_ids:
            return np.zeros(0, np.float32)
        qv = _vector_literal(self.text_encoder.encode([text])[0])
        with self.connection() as c:
            found = dict(
                c.execute(
                    f"SELECT event_id, 1 - (embedding <=> %s::vector) FROM {self.table} "
                    f"WHERE event_id = ANY(%s)",
                    (qv, list(event_ids)),
                ).fetchall()
            )
        return np.array([found.get(e, -1.0) for e in event_ids], np.float32)


@register
class PgTextRetriever(PostgresRetriever):
    """PostgreSQL full-text search: any query term matches, ranked by ts_rank."""

    match_type = "keyword"
    type_name = "pgtext"
    default_table = "memkit_text"

    spec = PgTextSpec

    def _built(self) -> None:
        super()._built()
        self.normalization = int(self.normalization)

    def _ddl(self) -> list[str]:
        t = self.table
        return [
            f"CREATE TABLE IF NOT EXISTS {t} ({self._columns()}, tsv tsvector NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {t}_tsv ON {t} USING gin (tsv)",
            *super()._ddl(),
        ]

    def _values(self, events: pl.DataFrame) -> list:
        return document_text(events, self.doc_template)

    def _value_column(self) -> tuple[str, str]:
        return "tsv", f"to_tsvector('{self.config}'::regconfig, %s)"

    def or_query(self) -> str:
        """SQL for the query's terms joined by OR: plainto_tsquery's parse (stemming,
        stopwords), with its AND (and any phrase) operators replaced by |."""
        return (
            f"regexp_replace(plainto_tsquery('{self.config}'::regconfig, %s)::text, "
            f"' (&|<[0-9]+>|<->) ', ' | ', 'g')::tsquery"
        )

    def _search_all(self, texts, k, filters):
        out = []
        with self.connection() as c:
            for text, f in zip(texts, filters):
                where, args = _where(f)
                rows = c.execute(
                    f"WITH q AS (SELECT {self.or_query()} AS q) "
                    f"SELECT event_id, {self.rank}(tsv, q.q, %s) AS s FROM {self.table}, q "
                    f"WHERE numnode(q.q) > 0 AND tsv @@ q.q AND {where} "
                    f"ORDER BY s DESC, event_id LIMIT %s",
                    (text, self.normalization, *args, k),
                ).fetchall()
                out.append([(r[0], float(r[1])) for r in rows])
        return out


def postgres_parts(r: Retriever) -> list[PostgresRetriever]:
    """The PostgreSQL retrievers inside a retriever (itself, a hybrid's parts, ...)."""
    return [p for p in walk(r) if isinstance(p, PostgresRetriever)]


def in_memory_parts(r: Retriever) -> list[Retriever]:
    """The leaf retrievers that keep their index in this process (not in PostgreSQL)."""
    return [p for p in walk(r) if not p.children() and not isinstance(p, PostgresRetriever)]
