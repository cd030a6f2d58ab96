"""The conversational query: ``POST /agent/memory/query``.

The request is ``QueryRequest`` (server/models.py, interface section 2.1): ``user_id``,
``query``, ``floor_ids``, ``filters`` (``time_from``, ``time_to``, ``types``, ``tags``; an
object or absent), ``k`` (1 to 50, default 10), ``include_metadata`` and ``summary_needed``
("0" or "1", both default "0"), ``app_id``; ``filter_types`` and ``filter_tags`` are
aliases of ``filters.types`` and ``filters.tags`` (not both spellings at once).

Here: who may ask (``user_id`` is the token's user, or a user the calling application
registered; ``app_id`` a registered application, the caller's own with application
credentials; every floor readable by the user) and the answer. Every refusal is a 422
naming the field, except a missing or bad token (401) and a body that is not JSON (415,
or 400 when it does not parse). A floor that does not exist and another user's private
floor get the same 422, so no error reveals that a private floor exists. Each query is
recorded in the user's conversation state.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from memkit.config import CONFIG_DIR, load_checked
from memkit.models.encoders import cache_scope, key_cache_with
from memkit.pipeline import Pipeline, Query
from memkit.retrieval import Filters, PgVectorRetriever, map_specs, with_settings
from memkit.training import EncoderStage
from server import models as m
from server.errors import NotFound, Unprocessable
from server.models import BLOCK_TYPES
from server.search import SearchIndex, StoredConversations, versions
from server.search.conversations import still_readable
from server.search.forgetting import CachedVectors
from server.search.items import StoredPosts
from server.search.store import StoreSearch
from server.services.floors import readable_floor
from server.store.db import one_connection, reading
from server.store.schema import apps, events, users

log = logging.getLogger(__name__)


@dataclass
class Caller:
    """Who sends the request: a user by bearer token, or an application by its secret."""

    user_id: str | None = None
    app_id: str | None = None


@dataclass
class Prepared:
    """What ``Memory.prepare`` read for a question before it is answered."""

    now: datetime
    history: list
    authors: list[str]
    version: versions.Version
    index: SearchIndex | StoreSearch | None = None  # the index open when it was read
    pending: list | None = None  # that index's log rows not applied yet


def _bad(field: str, message: str, code: str = "invalid") -> Unprocessable:
    return Unprocessable(f"{field}: {message}", field=field, code=code)


def floor_authors(conn, floor_ids: list[str]) -> list[str]:
    """The names of the people who posted in these floors, one for each person: the authors
    the answer writer knows of (who a question may be about, which capitalised words are
    names). Two people of one name give it twice, so that the writer names them apart
    ("Oli (u_1a2b3c)": memkit.answer.render.labelled) even where only one of them is
    quoted. Only these floors' authors, so whether someone posted elsewhere (privately,
    say) changes no answer."""
    posted = sa.select(events.c.user_id).where(events.c.floor_id.in_(floor_ids)).distinct()
    names = conn.execute(sa.select(users.c.name).where(users.c.id.in_(posted))).scalars()
    return sorted(n.strip() for n in names if isinstance(n, str) and n.strip())


class Memory:
    """Answers conversational queries over the store's events with the configured pipeline.

    The pipeline (model, index) is built on the first query, not at app start: accounts
    and floors work without loading the model. With ``search_backend = "postgres"`` the
    index is in the store (server/search/store.py): writes index their events inside their
    own transaction (``indexer``) and queries run side by side, with nothing to catch up.

    The encoder is the active version's (server/search/versions.py: `memkit adapt` trains
    one on the store's posts and switches to it); each query reads which version is active
    and, if this process holds another, opens that one first."""

    def __init__(self, engine: sa.Engine, settings):
        self.engine = engine
        self.settings = settings
        # The embedding cache's keys are keyed with the instance's secret (SECURITY.md).
        key_cache_with(settings.secret_key or None)
        self._index: SearchIndex | None = None
        self._version: versions.Version | None = None
        self._builders: dict[
            int, StoreSearch
        ] = {}  # postgres: versions being built, kept up to date by writes
        self._init_lock = threading.Lock()
        self.settle = False  # a served process: the heap is settled after an index opens
        self._naming: tuple[int, Pipeline] | None = None  # (version, pipeline): see _named_by
        self.vectors = CachedVectors(engine, self._named_by)
        # The served config, read and checked once: every pipeline this process opens (one
        # per encoder version) is built from this typed Config, not from the file again.
        self.config = load_checked(self.config_path)[1]
        idle = getattr(self.config.contextualizer, "idle_minutes", 30.0)
        self.conversations = StoredConversations(engine, idle_expiry=timedelta(minutes=idle))

    @property
    def stateless(self) -> bool:
        return self.settings.search_backend == "postgres"

    @property
    def config_path(self):
        default = "postgres.toml" if self.stateless else "default.toml"
        return self.settings.pipeline_config or CONFIG_DIR / default

    @property
    def index(self) -> SearchIndex | StoreSearch:
        """The index of the active encoder version. A process holding an older one opens
        the new one before answering (loaded from its saved folder, or built from the store
        with vectors the adapt run left in the embedding cache); queries that started
        before keep the old one they hold, so no query mixes two models."""
        with reading(self.engine) as conn:
            version = versions.active(conn)
        return self._index_of(version)

    def _index_of(self, version: versions.Version) -> SearchIndex | StoreSearch:
        """The open index, after opening ``version``'s if it is newer than the one open."""
        with self._init_lock:
            # Only forward: a thread that read the version just before a switch must not
            # take this process back to the old one.
            if self._index is None or version.number > self._version.number:
                self._index = self.open(version)
                self._version = version
                if self.settle:
                    settle_heap()
            return self._index

    @property
    def version(self) -> versions.Version | None:
        """The encoder version this process serves (None before its first query)."""
        return self._version

    def pipeline_for(self, version: versions.Version) -> Pipeline:
        """The served config's pipeline with a version's model and vector tables. Version 0
        (no `memkit adapt` yet) uses the config's own model: ``[encoder] model`` and, if the
        config asks, its supervised model (trained beforehand, never on the query path)."""
        url = self.engine.url.render_as_string(hide_password=False)

        def bind(spec):
            """A PostgreSQL part's settings as this service runs it: on the service's own
            database when it is the search backend (its foreign keys and write transactions
            need that), and a pgvector part on this version's vector table."""
            if spec.type in ("pgvector", "pgtext") and self.stateless:
                spec = with_settings(spec, url=url)
            if spec.type == "pgvector":
                table = spec.table or PgVectorRetriever.default_table
                spec = with_settings(spec, table=version.table(table))
            return spec

        config = self.config.model_copy(
            update={"retriever": map_specs(self.config.retriever, bind)}
        )
        encoder, stage = version.encoder, EncoderStage.from_config(config.encoder)
        if encoder is None and stage is not None:
            encoder = stage.resolve(allow_training=False)
        if encoder is not None:
            with self.engine.connect() as conn:
                versions.ensure_model(conn, encoder)
        return Pipeline.from_config(config, posts=StoredPosts(self.engine), encoder=encoder)

    def _named_by(self) -> Pipeline:
        """The pipeline whose cache entries a deleted post's are (server/search/forgetting.py):
        the open index's, or, in a process that has not opened one, a pipeline of the
        active version made for that (no index built)."""
        if self._index is not None:
            return self._index.pipeline
        with self.engine.connect() as conn:
            version = versions.active(conn)
        with self._init_lock:
            if self._naming is None or self._naming[0] != version.number:
                self._naming = (version.number, self.pipeline_for(version))
            return self._naming[1]

    def open(self, version: versions.Version) -> SearchIndex | StoreSearch:
        pipeline = self.pipeline_for(version)
        if self.stateless:
            return StoreSearch(self.engine, pipeline).start()
        index = SearchIndex(
            self.engine, pipeline, folder=version.folder(self.settings.index_dir)
        ).start()
        if self.settings.catch_up_seconds > 0:
            index.follow(self.settings.catch_up_seconds)  # the thread ends with the index it holds
        return index

    def indexer(self, conn, event_ids) -> None:
        """The Events service's hook inside each write's transaction: the PostgreSQL
        backend writes the events' vectors and text rows there (and, while `memkit adapt`
        re-encodes the store, into the new version's vector tables too); the memory one
        does nothing (its index catches up from the log)."""
        if self.stateless:
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": versions.SWITCH_LOCK}
            )
            self.index.index(conn, event_ids)
            new = versions.building(conn)
            if new is not None:
                self.builder(new).index(conn, event_ids)

    def builder(self, version: versions.Version) -> StoreSearch:
        """The vector tables of a version being built (PostgreSQL)."""
        with self._init_lock:
            if version.number not in self._builders:
                search = StoreSearch(self.engine, self.pipeline_for(version), kinds=("pgvector",))
                self._builders = {
                    version.number: search.start()
                }  # only the newest build is kept up to date
            return self._builders[version.number]

    def warm(self, settle: bool = False) -> "SearchIndex":
        """Build (or load) the index now rather than on the first query. ``settle``: this
        process serves requests from now on; settle its heap (``settle_heap``) now and
        whenever it opens a newer version's index."""
        self.settle = self.settle or settle
        return self.index

    def encode_ahead(self, floor_id: str, block_id: str, user_id: str, posts: list[dict]) -> None:
        """Before a create's transaction: encode the posts (with their sessions) into the
        shared embedding cache, so the catch-ups of every process (and the PostgreSQL
        indexer inside the transaction) find their vectors there. A failure is logged, not
        answered: the write goes on and whoever catches up encodes what is missing."""
        if self._index is not None:
            try:
                self._index.encode_ahead_of_write(floor_id, block_id, user_id, posts)
            except Exception:  # noqa: BLE001 - see above
                log.exception(
                    "encoding posts ahead of their write failed; their catch-up encodes them"
                )

    def catch_up(self, floor_ids, event_ids, encoded: bool = False) -> None:
        """After a write commits: an index already built applies the write's changes now,
        so the write is searchable when its request returns (other users' writes to the
        floor are not this request's to wait for). A failure is logged, not answered: the
        write is stored, and the next query of the floor catches up. ``encoded``: new posts
        that ``encode_ahead`` saw, not encoded again."""
        if self._index is not None:
            try:
                self._index.sync(floor_ids, event_ids=event_ids, encoded=encoded)
            except Exception:  # noqa: BLE001 - see above
                log.exception("catch-up after a committed write failed; the next query retries it")

    # -- who may ask --------------------------------------------------------------------
    def _authorize(self, conn, caller: Caller, req: m.QueryRequest) -> None:
        user = conn.execute(
            sa.select(users.c.id, users.c.app_id).where(users.c.id == req.user_id)
        ).first()
        if caller.user_id is not None:
            if req.user_id != caller.user_id or user is None:
                raise _bad("user_id", "must be the signed-in user's id", "invalid_user")
            if (
                req.app_id is not None
                and conn.execute(sa.select(apps.c.id).where(apps.c.id == req.app_id)).first()
                is None
            ):
                raise _bad("app_id", "no such application", "invalid_app")
        else:
            if user is None or user[1] != caller.app_id:
                raise _bad("user_id", "must be a user this application registered", "invalid_user")
            if req.app_id is not None and req.app_id != caller.app_id:
                raise _bad("app_id", "must be the calling application's id", "invalid_app")
        for i, fid in enumerate(req.floor_ids):
            try:
                readable_floor(conn, fid, req.user_id)
            except NotFound:
                raise _bad(
                    f"floor_ids[{i}]",
                    f"no floor {json.dumps(fid)} that you can read",
                    "invalid_floor",
                ) from None

    # -- the query ----------------------------------------------------------------------
    # One way down, in two steps (the query endpoint runs the first on one connection):
    # ``prepare`` reads what the question needs, ``answer`` hands the pipeline one typed
    # ``memkit.pipeline.Query`` (with the user's recent turns and the time of asking),
    # shapes the result's items into the response and stores the turn for the next question.
    def prepare(self, caller: Caller, req: m.QueryRequest) -> Prepared:
        """What a question needs from the store before it waits for anything: whether the
        caller may ask it, the user's turns still readable, the floors' authors, the
        active encoder version and the open index's log. Reads only, through ``reading``: inside
        ``one_connection`` (the query endpoint) on one connection, which goes back to the
        pool before the question waits for the index or the model."""
        now = datetime.now(timezone.utc)
        history = self.conversations.history(req.user_id, now)
        with reading(self.engine) as conn:
            self._authorize(conn, caller, req)
            authors = floor_authors(conn, req.floor_ids)
            # What earlier turns found is carried only as far as the asker can read it now.
            history = still_readable(conn, req.user_id, history)
            version = versions.active(conn)
        # The open index's log, on the same connection (an index is not opened here: that
        # takes connections of its own); used only if the question is answered from it.
        index = self._index
        pending = None if index is None else index.pending()
        return Prepared(now, history, authors, version, index, pending)

    def answer(self, req: m.QueryRequest, prepared: Prepared) -> dict:
        """The question answered (``prepare`` read what it needs); its turn stored."""
        f = req.filters
        types = None if f.types is None else sorted({"feed" if t == "post" else t for t in f.types})
        filters = Filters(types=types, tags=f.tags, time_from=f.time_from, time_to=f.time_to)
        include_metadata = req.include_metadata == "1"
        now, history, authors = prepared.now, prepared.history, prepared.authors
        index = self._index_of(prepared.version)
        # The asker's own writes to these floors committed before this query are in the index;
        # other users' are waited for at most others_writes_wait seconds (SECURITY.md).
        index.sync(
            req.floor_ids,
            author=req.user_id,
            others_wait=self.settings.others_writes_wait,
            pending=prepared.pending if index is prepared.index else None,
        )
        pipeline = index.pipeline
        # The asker's texts are encoded in their own scope: no vector another user's query
        # or post left in the cache is found, so no timing tells what others wrote or asked.
        # The posts the pipeline reads and the turn stored share one connection, taken at
        # the first read (after the question has the index): nothing here waits for a
        # second connection, and no model run waits on a database read.
        with (
            one_connection(self.engine),
            index.reading(),
            cache_scope(
                reads={f"floor:{f}" for f in req.floor_ids} | {f"user:{req.user_id}"},
                writes=f"user:{req.user_id}",
                private=True,
            ),
        ):
            result = pipeline.ask(
                Query(
                    req.query,
                    user_id=req.user_id,
                    floor_ids=req.floor_ids,
                    filters=filters,
                    now=now,
                    history=history,
                    k=req.k,
                    min_score=req.min_score,
                    summary=req.summary_needed == "1",
                    authors=authors,
                )
            )
            self.conversations.record(req.user_id, result.turn)
        items = []
        for item in result.items:
            out = {
                "block_type": BLOCK_TYPES.get(item.block_type, 0),
                "block_id": item.block_id,
                "block_title": item.block_title,
                "block_details": item.extra["block_details"],
                "event_id": item.event_id,
                "floor_uid": item.floor_id,
                "from_floor_uid": item.extra["from_floor_uid"],
                "user_id": item.user_id,
                "text": item.text,
                "score": round(float(item.score), 6),
                "match_type": item.match_type,
            }
            if include_metadata:
                out["metadata"] = item.extra["metadata"]
            items.append(out)
        body = {
            "user_id": req.user_id,
            "query": req.query,
            "effective_query": result.effective_query,
            "answer": result.answer,
            "items": items,
            "app_id": req.app_id,
        }
        if include_metadata:  # what was understood: the searched query and the context behind it
            body["metadata"] = {
                "effective_query": result.effective_query,
                "context_turns": result.history,
                "contextualizer": pipeline.contextualizer.params(),
                "pipeline": pipeline.name,
                "carried": result.carried.as_dict(),
                "declined": result.written.declined,
                "quoted": result.written.quoted,
            }
        return body


def settle_heap() -> None:
    """Collect once, then freeze whatever is alive (``gc.freeze``): the collector's full
    passes walk every object the process tracks, which with the models and an index loaded
    took about 200 ms, and a request caught behind one took 220-236 ms against its usual
    40 (the housewarming-mot-archivist walk, found with a ``gc.callbacks`` probe). Frozen
    objects are not walked again, so a full pass costs what was made since. Unfrozen first,
    so that an index replaced by a newer version's is collected, not kept."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
