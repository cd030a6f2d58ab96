"""`memkit adapt`: teach the served encoder the store's own posts, re-encode, switch.

    memkit adapt [--db URL] [--batch 500] [--threads N]      # same MEMKIT_* settings as the service

1. Train: pairs from the posts' own structure (a post and the one before it in its
   session, a reply and its post, a post and its block's title; memkit.training), starting
   from the served config's model (``[encoder] model``, its supervised model if it has
   one) and with its ``[encoder.adapt]`` settings (defaults if it has none). No labels.
   The model is kept in the cache by what made it, so an unchanged store trains nothing.
2. Re-encode into a new version (server/search/versions.py) while the current one serves:
   the in-memory backend builds the new index from the store and saves it beside
   ``index_dir`` (``<index_dir>.v<n>``); the PostgreSQL backend fills new vector tables
   (``<table>_v<n>``) in batches of ``--batch`` events, one transaction each, while every
   write also indexes into them. Answer sentences are encoded with the new model too.
3. Switch: one committed row makes the new version active (on PostgreSQL under an
   exclusive lock that writes take shared, after the last missing rows are filled); every
   process moves to it at its next query. The versions before the one replaced are
   dropped (their tables, saved indexes and stored model files).

Safe while the service runs. A failed run marks its version ``failed`` and changes nothing
that queries see.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl
import sqlalchemy as sa

from memkit.core.errors import ValidationError
from memkit.retrieval import PgVectorRetriever
from memkit.retrieval.postgres import postgres_parts
from memkit.training import EncoderStage, model_info
from server.search import versions
from server.search.index import SearchIndex, load_events, per_floor
from server.store.schema import blocks, events


@dataclass
class Report:
    encoder: str
    version: int  # the active version afterwards
    events: int
    pairs: int  # pairs trained on (after sampling)
    train_seconds: float  # 0 when the model was in the cache
    encode_seconds: float
    switch_seconds: float
    switched: bool  # False: the store's posts teach nothing new, the active model stays


def store_events(conn) -> pl.DataFrame:
    """Every event as the index loads it, with what structure pairs use besides: the post
    it replies to and its block's title."""
    frame = load_events(conn)
    replies = dict(
        conn.execute(
            sa.select(events.c.id, events.c.reply_to).where(events.c.reply_to.is_not(None))
        ).all()
    )
    titles = dict(conn.execute(sa.select(blocks.c.id, blocks.c.title)).all())
    return frame.with_columns(
        pl.col("event_id")
        .replace_strict(replies, default=None, return_dtype=pl.Utf8)
        .alias("reply_to"),
        pl.col("block_id")
        .replace_strict(titles, default=None, return_dtype=pl.Utf8)
        .alias("block_title"),
    )


def adapt(
    memory, batch: int = 500, threads: int | None = None, progress=None, jobs: int = 1
) -> Report:
    """Steps 1-3 of the module docstring for the service's ``Memory``. ``jobs``: on
    PostgreSQL, processes that re-encode side by side (one keeps about one core busy)."""
    if not (isinstance(jobs, int) and jobs >= 1):
        raise ValidationError("jobs", f"expected a whole number of at least 1, got {jobs!r}")
    say = progress or (lambda message: None)
    engine = memory.engine
    with engine.connect() as conn:
        frame = store_events(conn)
        current = versions.active(conn)
    if frame.height == 0:
        raise ValidationError("store", "no posts to learn from yet")
    base = memory.pipeline_for(versions.Version(0))
    if base.encoder_name() is None:
        raise ValidationError(
            "retriever", f"the served config ({memory.config_path}) has no dense retriever to adapt"
        )
    stage = base.encoder_stage or EncoderStage()
    if stage.adapt is None:  # the defaults if none is set
        stage = EncoderStage(model=stage.model, supervised=stage.supervised, adapt={})
    started = time.perf_counter()
    say(f"training on the pairs of {frame.height:,} posts")
    name = stage.resolve(frame, threads=threads)
    info = model_info(name)
    trained = time.perf_counter() - started
    say(f"trained {name} in {trained:.1f} s")
    if name == (current.encoder or base.encoder_name()):
        return Report(
            name, current.number, frame.height, info["pairs_used"], trained, 0.0, 0.0, False
        )
    vector_tables = [
        p.table for p in postgres_parts(base.retriever) if isinstance(p, PgVectorRetriever)
    ]
    with engine.begin() as conn:
        new = versions.begin(conn, name)
    say(f"version {new.number}: re-encoding the store with {name}")
    started = time.perf_counter()
    try:
        if memory.stateless:
            search = memory.builder(new)
            if jobs > 1:  # processes side by side, each a range of event ids (server/backfill.py)
                from server.backfill import fill_ranges

                say(f"  {jobs} processes re-encode a range of event ids each")
                fill_ranges(
                    memory.settings.as_dict(),
                    jobs,
                    batch,
                    report_every=10000,
                    version=new,
                )
            else:
                search.backfill(
                    batch,
                    progress=lambda n: say(
                        f"  {n:,} events re-encoded "
                        f"({n / (time.perf_counter() - started):.0f} posts/s)"
                    ),
                )
            encoded = time.perf_counter() - started
            say(f"re-encoded {frame.height:,} posts in {encoded:.1f} s")
            started = time.perf_counter()
            with (
                engine.begin() as conn
            ):  # no write is half-way while the last rows are filled and the version flips
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": versions.SWITCH_LOCK}
                )
                while ids := search.missing(conn, batch):
                    search.index(conn, ids)
                gone = versions.activate(conn, new)
                for old in gone:
                    for table in vector_tables:
                        conn.execute(sa.text(f"DROP TABLE IF EXISTS {old.table(table)}"))
        else:
            index = SearchIndex(
                engine, memory.pipeline_for(new), folder=new.folder(memory.settings.index_dir)
            ).start()
            took = time.perf_counter() - started
            say(f"index of {frame.height:,} posts built and saved in {took:.1f} s")
            per_floor(
                frame, index.pipeline.answerer.encode_sentences
            )  # answers read vectors, as after ingest
            encoded = time.perf_counter() - started
            say(f"answer sentences encoded; re-encoding took {encoded:.1f} s in all")
            started = time.perf_counter()
            with engine.begin() as conn:
                gone = versions.activate(conn, new)
            versions.remove_saved(memory.settings.index_dir, gone)
        say(f"switched to version {new.number} in {time.perf_counter() - started:.2f} s")
    except BaseException:
        with engine.begin() as conn:
            versions.fail(conn, new)
            for table in vector_tables:
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {new.table(table)}"))
        raise
    return Report(
        name,
        new.number,
        frame.height,
        info["pairs_used"],
        trained,
        encoded,
        time.perf_counter() - started,
        True,
    )
