"""Stateless search over PostgreSQL (``search_backend = "postgres"``): the index lives in
the store, so any number of app processes on any number of machines serve the same data
with nothing to build, load or catch up.

The pipeline's retrievers must all be PostgreSQL ones (``pgvector``, ``pgtext``; see
memkit/retrieval/postgres.py), for example memkit/config/postgres.toml; they are pointed
at the service's own database (``database_url``), whatever URL the config names.
Fusion, the relevance gate, answers and conversation state stay in the memkit pipeline.

Writes: the Events service calls :meth:`StoreSearch.index` inside each create, edit and
batch create transaction, after the rows are written; it encodes the events and upserts
their vector and text rows on the same connection, so an event and its index rows commit
together or not at all, and a query in any process sees every write committed before it.

Deletes: each search table gets a foreign key ``event_id -> events.id ON DELETE CASCADE``
(added at start if missing). Deleting an event, an account (users -> floors/events
cascade) or anything else that removes event rows removes their search rows in the same
transaction; nothing else has to remember to. (A join against ``events`` at query time
would do it too, but costs every query a join; the cascade costs only the delete.)

Privacy is checked per query, as with the in-memory index: the service refuses floors the
user may not read before searching, and the search is restricted to the named floors in
SQL, so making a floor private takes its events out of other users' results at once.

Authors' names for answers (who wrote what) are looked up per query among the searched
floors' authors, as for the in-memory index (server/services/memory.py).

Start-up is cheap: ``CREATE ... IF NOT EXISTS`` of the tables, indexes and foreign keys,
no index build. A store that already holds events written without this backend (or before
it was switched on) is filled by the backfill command, ``python -m server.backfill``
(:meth:`StoreSearch.backfill`: events that lack a row in a search table, in batches).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext

import sqlalchemy as sa

from memkit.core.errors import ValidationError
from memkit.pipeline import Pipeline
from memkit.retrieval.postgres import (
    DDL_LOCK,
    in_memory_parts,
    postgres_parts,
    resolve_url,
    writing_in,
)
from server.search.index import load_events, new_posts, per_floor

log = logging.getLogger(__name__)


def _driver(conn):
    """The psycopg connection under a SQLAlchemy connection (same transaction)."""
    return conn.connection.driver_connection


class StoreSearch:
    """The same surface as :class:`~server.search.index.SearchIndex` where the service
    uses it (``pipeline``, ``lock``, ``sync``), but with nothing held in the process."""

    started_from = "store"
    applied_rows = 0

    def __init__(self, engine: sa.Engine, pipeline: Pipeline, kinds: tuple[str, ...] | None = None):
        if engine.dialect.name != "postgresql":
            raise ValueError("search_backend = 'postgres' needs a PostgreSQL database_url")
        others = in_memory_parts(pipeline.retriever)
        if others:
            names = sorted({type(r).__name__ for r in others})
            raise ValidationError(
                "retriever",
                f"search_backend = 'postgres' needs PostgreSQL retrievers only "
                f"(pgvector, pgtext); the config also has {names}",
            )
        if pipeline.representation is not None:
            raise ValidationError(
                "representation", "search_backend = 'postgres' does not support [representation]"
            )
        self.engine = engine
        self.pipeline = pipeline
        # ``kinds``: only these retriever types, e.g. ("pgvector",) to re-encode a new
        # encoder version's vector tables while the text tables stay as they are.
        self.parts = [
            p for p in postgres_parts(pipeline.retriever) if kinds is None or p.type_name in kinds
        ]
        url = engine.url.render_as_string(hide_password=False)
        for r in self.parts:  # built on it by MemoryService.pipeline_for, never changed after
            if resolve_url(r.url) != resolve_url(url):
                raise ValidationError(
                    "retriever.url",
                    "a PostgreSQL part of the search backend must use the service's own "
                    "database (its foreign keys and write transactions need it)",
                )
        self.lock = nullcontext()  # nothing in the process to protect: queries run side by side

    def reading(self):
        return nullcontext()

    def start(self) -> "StoreSearch":
        """Make the search tables and indexes if missing, and tie their rows to events."""
        for r in self.parts:
            r.ensure_schema()
        with self.engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": DDL_LOCK})
            for r in self.parts:
                name = f"{r.table}_event_fk"
                exists = conn.execute(
                    sa.text("SELECT 1 FROM pg_constraint WHERE conname = :n"), {"n": name}
                ).first()
                if not exists:
                    conn.execute(
                        sa.text(
                            f"DELETE FROM {r.table} t WHERE NOT EXISTS "
                            f"(SELECT 1 FROM events e WHERE e.id = t.event_id)"
                        )
                    )
                    conn.execute(
                        sa.text(
                            f"ALTER TABLE {r.table} ADD CONSTRAINT {name} FOREIGN KEY (event_id) "
                            f"REFERENCES events (id) ON DELETE CASCADE"
                        )
                    )
        return self

    def pending(self) -> list:
        return []  # every write is in the store when it commits

    def sync(
        self, floors=None, author=None, event_ids=(), others_wait: float = 0.0, pending=None
    ) -> int:
        return 0

    # -- writes -----------------------------------------------------------------------------
    def index(self, conn, event_ids: list[str]) -> None:
        """The Events service's indexer: inside the write's transaction, after its rows."""
        frame = load_events(conn, event_ids=list(event_ids))

        def index_floor(
            part,
        ):  # in the floor's scope of the embedding cache (server/search/index.py)
            # Sentences first, as Pipeline.precompute: the run of the model that reads a
            # post's sentences in the post also gives the post's own vector, which the
            # vector table then finds in the cache (one run per post, not two).
            self.pipeline.answerer.encode_sentences(part)  # sentence vectors for answers, at ingest
            with writing_in(_driver(conn)):  # the write's own transaction
                for r in self.parts:
                    r.add(part)

        per_floor(frame, index_floor)

    def encode_ahead_of_write(
        self, floor_id: str, block_id: str, user_id: str, posts: list[dict]
    ) -> None:
        """Encode posts not written yet into the embedding cache (vectors and answer
        sentences), so the write's transaction finds them there instead of holding its
        rows locked while they are encoded."""
        with self.engine.connect() as conn:
            frame = new_posts(conn, floor_id, block_id, user_id, posts)

        per_floor(
            frame, self.pipeline.precompute
        )  # in the floor's scope, where the transaction's indexer looks

    def missing(self, conn, limit: int, after: str = "", upto: str | None = None) -> list[str]:
        """Events lacking a row in some search table (up to ``limit``, in id order, with
        ids above ``after`` and at most ``upto``): a backfill walks on from its last batch
        instead of probing the events it has already indexed again, which made a batch's
        cost grow with the store's size."""
        lacking = " OR ".join(
            f"NOT EXISTS (SELECT 1 FROM {r.table} t WHERE t.event_id = e.id)" for r in self.parts
        )
        bound = " AND e.id <= :upto" if upto is not None else ""
        rows = conn.execute(
            sa.text(
                f"SELECT e.id FROM events e WHERE e.id > :after{bound} AND ({lacking}) "
                f"ORDER BY e.id LIMIT :n"
            ),
            {"n": limit, "after": after, "upto": upto},
        )
        return [r[0] for r in rows]

    def backfill(
        self, batch: int = 500, progress=None, after: str = "", upto: str | None = None
    ) -> int:
        """Index every event that has no search rows yet, ``batch`` per transaction;
        returns how many. Safe to run while the service writes (upserts by event id;
        an event written meanwhile is indexed by its own write's transaction).
        ``after``/``upto``: only events with ids in that range, so several processes
        can fill disjoint parts of a large store side by side."""
        done, last = 0, after
        while True:
            with self.engine.begin() as conn:
                ids = self.missing(conn, batch, after=last, upto=upto)
                if not ids:
                    return done
                self.index(conn, ids)
            done, last = done + len(ids), ids[-1]
            if progress is not None:
                progress(done)
