"""The search index of an app process, caught up from the store.

The store is the truth. On start the index is built from every event in the store; after
that, every create, edit or delete of an event adds a row to ``event_log`` in the same
transaction (server/store/changes.py), and :meth:`SearchIndex.sync` (called before every
query) applies the rows it has not seen: an event still in the store is (re-)added, one
that is gone is removed. Any number of processes sharing the store stay in step this
way: a query sees every write of its asker committed before it (read your writes), and
other users' within about a second (below).

Applying a log row is idempotent, so rows are tracked by number: ``watermark`` is the
highest number below which every row has been applied. PostgreSQL hands out sequence
numbers at insert time but rows become visible at commit, so a row with a smaller
number can appear after a larger one; a missing number above the watermark is waited for
(re-checked at each sync) for ``gap_timeout`` seconds, after which it is taken to be a
rolled-back transaction. SQLite serialises writers, so there it never waits.

With a ``[representation]`` (neighbouring posts, session text), a post's indexed text
depends on its session (its block's posts of that day, in runs of at most 64), so a change
loads the sessions it touched (the log row names the block and the post's time) and
re-indexes the posts whose document changed: the index keeps a hash of each post's
document. A new post at the end of a busy day re-indexes its run, not the whole day.
Speakers are the authors' names.

Privacy is not the index's business: a query names its floors and the service checks
each against the store before searching, so making a floor private or deleting it takes
its events out of other users' results at once.

No write holds up other users (SECURITY.md). A query catches up only the log rows of the
floors it names (``sync(floors)``; each row carries its event's floor), because what it
returns depends on those floors alone; a batch being indexed elsewhere is not its
business. Of those rows it applies its asker's own; other users' it leaves to their own
requests and the background thread, waiting for them only until ``others_wait`` after
they were written. The slow part of a catch-up, encoding, runs before the index lock is
taken, and the index itself is changed ``WRITE_CHUNK`` documents at a time, so a search
waits at most for one chunk. Encodings run in the floor's scope of the embedding cache
(``floor_scope``): how long one takes tells nobody what other floors hold.

No stored value stops the index (SECURITY.md): what is loaded from the store is made
well-formed first (``load_events``), and a log row whose change still cannot be applied
is set aside (``set_aside``: its number, event and error, logged at ERROR) while the
rows around it go on. If a failure left the index half-changed, it is rebuilt from the
store, without the set-aside events, before the next search.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import logging
import os
import shutil
import threading
import time
import weakref
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

import polars as pl
import sqlalchemy as sa

from memkit.core.private import private_dir
from memkit.core.tables import events_frame
from memkit.models.encoders import cache_scope
from memkit.pipeline import Pipeline
from server.store.db import reading
from server.store.schema import blocks, event_log, events, stored_tags, users

log = logging.getLogger(__name__)

START_MARGIN = 1000  # log rows below the top at start that are re-checked for stragglers
WRITE_CHUNK = 64  # documents changed per hold of the index's write lock


class LogRow(NamedTuple):
    seq: int
    event_id: str
    block_id: str | None
    event_at: datetime | None
    floor_id: str | None  # None (rows written before the column existed): any floor
    author: str | None = None  # the event's author as the store holds it now (None: deleted since)
    at: datetime | None = None  # when the change was written


def load_events(
    conn,
    event_ids: list[str] | None = None,
    sessions: list[tuple] | None = None,
    chunk: int = 200,
    exclude: set[str] = frozenset(),
) -> pl.DataFrame:
    """Events of the store (all, these ids, or these sessions: ``(floor_id, block_id, day)``,
    a day of None meaning the whole block, a floor of None an unknown one) as memkit's
    events table plus ``speaker`` (the author's name), in posting order (time, then id),
    leaving out ``exclude``. Long lists of ids or sessions are asked for ``chunk`` at a time
    (SQLite limits an expression's depth). Whatever the store holds comes out well-formed
    (``_clean``)."""
    if event_ids is not None:
        return _concat(
            [
                _read(conn, events.c.id.in_(event_ids[i : i + chunk]), exclude)
                for i in range(0, len(event_ids), chunk)
            ]
            or [_read(conn, sa.false(), exclude)]
        )
    if sessions is not None:
        spans, wanted = _day_spans(sessions), {(b, d) for _, b, d in sessions}
        return _concat(
            [
                _read(
                    conn, sa.or_(*[_span(*span) for span in spans[i : i + chunk]]), exclude, wanted
                )
                for i in range(0, len(spans), chunk)
            ]
            or [_read(conn, sa.false(), exclude)]
        )
    return _read(conn, None, exclude)


def _read(conn, where, exclude: set[str], sessions: set[tuple] | None = None) -> pl.DataFrame:
    """The events ``where`` admits (all: None), less ``exclude``, and only those of
    ``sessions`` (``(block_id, day)``; a day of None: the whole block) when given."""
    q = (
        sa.select(
            events.c.id,
            events.c.floor_id,
            events.c.block_id,
            blocks.c.type,
            events.c.user_id,
            events.c.text,
            events.c.created_at,
            events.c.tags,
            users.c.name,
        )
        .join(blocks, blocks.c.id == events.c.block_id)
        .join(users, users.c.id == events.c.user_id)
        .order_by(events.c.created_at, events.c.id)
    )
    if where is not None:
        q = q.where(where)
    found = [
        r
        for r in conn.execute(q).all()
        if r[0] not in exclude
        and (sessions is None or (r[2], None) in sessions or (r[2], _day(r[6])) in sessions)
    ]
    rows = [_clean(r) for r in found]
    names = [_text(r[8]).strip() for r in found]
    return events_frame(rows, source="store").with_columns(pl.Series("speaker", names, pl.Utf8))


def _day_spans(sessions: list[tuple], gap: int = 7) -> list[tuple]:
    """Sessions as ranges of days to read per block, ``(floor, block, first day, last day)``
    (days None: the whole block): days of a block less than ``gap`` apart share a range, so
    a batch of posts spread over a block's days is one indexed range read of its floor, not
    one predicate per day; rows outside the sessions asked for are dropped after."""
    days: dict[tuple, set] = {}
    for floor, block, day in sessions:
        days.setdefault((floor, block), set()).add(day)
    spans = []
    for (floor, block), ds in days.items():
        if None in ds:
            spans.append((floor, block, None, None))
            continue
        ordered = sorted(ds)
        first = last = ordered[0]
        for d in ordered[1:]:
            if (d - last).days >= gap:
                spans.append((floor, block, first, last))
                first = d
            last = d
        spans.append((floor, block, first, last))
    return spans


def _span(floor_id: str | None, block_id: str, first: date | None, last: date | None):
    """One block's posts (on days ``first`` to ``last``), read through the floor and time
    index when the floor is known."""
    cond = [events.c.block_id == block_id] + (
        [events.c.floor_id == floor_id] if floor_id is not None else []
    )
    if first is not None:
        cond.append(
            events.c.created_at >= datetime(first.year, first.month, first.day, tzinfo=timezone.utc)
        )
        if last != date.max:  # the last day Python holds has no "next day" to stop before
            cond.append(
                events.c.created_at
                < datetime(last.year, last.month, last.day, tzinfo=timezone.utc) + timedelta(days=1)
            )
    return sa.and_(*cond)


def new_posts(conn, floor_id: str, block_id: str, user_id: str, posts: list[dict]) -> pl.DataFrame:
    """Posts about to be written (``event_id``, ``text``, ``tags``, ``created_at``) as
    ``load_events`` will read them once they are: the block's type, the author's name."""
    kind = conn.execute(sa.select(blocks.c.type).where(blocks.c.id == block_id)).scalar()
    name = conn.execute(sa.select(users.c.name).where(users.c.id == user_id)).scalar()
    rows = [
        _clean(
            (
                p["event_id"],
                floor_id,
                block_id,
                kind,
                user_id,
                p["text"],
                p["created_at"],
                p["tags"],
                name,
            )
        )
        for p in posts
    ]
    return events_frame(rows, source="store").with_columns(
        pl.Series("speaker", [_text(name).strip()] * len(rows), pl.Utf8)
    )


def _clean(r) -> dict:
    """A stored event as memkit's events table takes it, whatever the store holds (a row
    of an older version, or written by hand): tags keep only their strings, an empty block
    type reads "unknown", a time without a zone is UTC."""
    return {
        "event_id": r[0],
        "floor_id": r[1],
        "block_id": r[2],
        "block_type": _text(r[3]) or "unknown",
        "user_id": r[4],
        "text": _text(r[5]),
        "created_at": r[6],
        "tags": stored_tags(r[7]),
    }


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return (
        pl.concat(frames)
        .unique("event_id", keep="first", maintain_order=True)
        .sort(["created_at", "event_id"])
    )


def session_of(row) -> tuple:
    """An event's session: ``(floor_id, block_id, day)``, as ``load_events`` reads them."""
    return (row["floor_id"], row["block_id"], _day(row["created_at"]))


def _day(at: datetime | None) -> date | None:
    """The day of a stored time (the store gives UTC times: server/store/schema.py)."""
    return None if at is None else at.date()


class ReadWriteLock:
    """Any number of readers at once, or one writer; a waiting writer holds back new
    readers, so a catch-up is not starved by a stream of searches."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextmanager
    def reading(self):
        with self._cond:
            while self._writing or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def writing(self):
        with self._cond:
            self._waiting += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


ALL = "*"  # a claim on every floor


def _overlap(a: set[str], b: set[str]) -> bool:
    return bool(a and b) and (ALL in a or ALL in b or bool(a & b))


class FloorClaims:
    """Which floors are being caught up, each by one thread at a time. Floors partition
    events and sessions, so threads catching up different floors never touch the same
    documents and go on side by side; a thread waits only for its own floors (``ALL``:
    for every floor, e.g. a rebuild). Claims are taken all at once, so no two threads
    can wait for each other, and in turn: a claim waits for the claims on its floors made
    before it, never for later ones, so a thread that catches up a long batch a slice at
    a time lets a claim made meanwhile in after one slice."""

    def __init__(self):
        self._cond = threading.Condition()
        self._held: set[str] = set()
        self._waiting: dict[int, set[str]] = {}  # ticket -> floors, in the order claimed
        self._tickets = itertools.count()

    def _free(self, ticket: int, floors: set[str]) -> bool:
        return not _overlap(floors, self._held) and not any(
            _overlap(floors, other) for t, other in self._waiting.items() if t < ticket
        )

    @contextmanager
    def hold(self, floors: set[str]):
        with self._cond:
            ticket = next(self._tickets)
            self._waiting[ticket] = floors
            while not self._free(ticket, floors):
                self._cond.wait()
            del self._waiting[ticket]
            self._held |= floors
        try:
            yield
        finally:
            with self._cond:
                self._held -= floors
                self._cond.notify_all()


class SearchIndex:
    """``folder``, if given, is where the index is saved after a full build and loaded
    from at the next start (then caught up from the log), so a restart or a new worker
    process does not re-encode the store. A saved index made with other settings
    (``pipeline.params()`` differ) is ignored and rebuilt."""

    def __init__(
        self,
        engine: sa.Engine,
        pipeline: Pipeline,
        gap_timeout: float = 60.0,
        folder: str | Path | None = None,
    ):
        self.engine = engine
        self.pipeline = pipeline
        self.gap_timeout = gap_timeout
        self.folder = Path(folder) if folder else None
        self.started_from = None  # "store" (a full build) or "saved" (loaded, then caught up)
        self.lock = (
            threading.RLock()
        )  # the bookkeeping below (held briefly); builds, saves and loads
        self.claims = FloorClaims()  # the floors being caught up, one thread per floor
        self.readers = (
            ReadWriteLock()
        )  # searches run side by side; each chunk of a change waits for them
        self.watermark = 0  # every log row numbered <= watermark has been applied
        self._applied: set[int] = set()  # rows above the watermark already applied
        self._seen: set[int] = (
            set()
        )  # rows above the watermark known to exist (committed), applied or not
        self._gaps: dict[int, float] = {}  # missing numbers above the watermark -> first noticed
        self.applied_rows = 0  # log rows applied since start (for tests and monitoring)
        self.reindexed = (
            0  # documents (re-)added by catch-ups since start (for tests and monitoring)
        )
        self.set_aside: dict[
            int, dict
        ] = {}  # log rows that could not be applied: seq -> event id, error
        self._broken = (
            False  # a failed change may have left the index half-changed: rebuild before searching
        )
        self.rebuilds = 0  # rebuilds after such a failure (for tests and monitoring)
        self._doc_hash: dict[str, int] = {}  # event id -> hash of the document indexed for it
        self._encoding: dict[
            int, threading.Event
        ] = {}  # log rows being encoded by some thread -> done
        self._encoding_guard = threading.Lock()
        self._progress = threading.Condition(
            self.lock
        )  # notified when rows are applied or set aside
        self.following = False  # a background thread catches every floor up (follow)

    def reading(self):
        """Held while a query searches: changes wait for it, other queries do not."""
        return self.readers.reading()

    def start(self) -> "SearchIndex":
        """Load the saved index and catch up from the log, or build from every event in
        the store (and save it, when a folder is set)."""
        if self.folder is not None and self._load():
            self.sync()
            return self
        with self.claims.hold({ALL}):
            self._build()
        if self.folder is not None:
            self.save(self.folder)
        return self

    def _digest(self) -> str:
        """What the saved index was made by: the pipeline's settings, the dense model's
        exact name, which changes with its weights under the same config name (int8
        weights made 7-bit), and the analyzer's table of base forms (``memkit.core.text``'s
        ``IRREGULAR``, read by the BM25 parts): a saved index of older vectors or terms is
        rebuilt, not loaded."""
        from memkit.core.text import IRREGULAR
        from memkit.models.encoders import get_encoder

        name = self.pipeline.encoder_name()
        made_by = {
            "params": self.pipeline.params(),
            "weights": get_encoder(name).name if isinstance(name, str) else None,
            "base_forms": sorted(IRREGULAR.items()),
        }
        return hashlib.sha256(json.dumps(made_by, sort_keys=True, default=str).encode()).hexdigest()

    def save(self, folder: str | Path) -> Path:
        """Write the index and the log position it reflects (atomically: a folder is
        written beside it and renamed; if another process saved first, its copy stays)."""
        folder = Path(folder)
        with self.claims.hold({ALL}), self.lock:
            tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            private_dir(tmp)  # it holds the posts' text and vectors: the owner's alone (0700)
            self.pipeline.retriever.save(tmp / "retriever")
            pl.DataFrame(
                {"event_id": list(self._doc_hash), "hash": list(self._doc_hash.values())},
                schema={"event_id": pl.Utf8, "hash": pl.UInt64},
            ).write_parquet(tmp / "documents.parquet")
            state = {
                "digest": self._digest(),
                "watermark": self.watermark,
                "applied": sorted(self._applied),
                "events": len(self.pipeline.retriever.catalog),
                "hashes": _HASHES,
            }
            (tmp / "state.json").write_text(json.dumps(state))
            old = folder.with_name(f".{folder.name}.{os.getpid()}.old")
            if folder.exists():
                folder.rename(old)
            try:
                tmp.rename(folder)
            except OSError:  # another process renamed its copy in between: keep that one
                shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
        return folder

    def _load(self) -> bool:
        state_file = self.folder / "state.json"
        if not state_file.exists():
            return False
        state = json.loads(state_file.read_text())
        if state.get("digest") != self._digest():
            return False
        from memkit.retrieval import load as load_retriever

        with self.lock:
            self.pipeline.retriever = load_retriever(self.folder / "retriever")
            self.pipeline.retriever.warm()
            # What each saved document was made from, so catching up re-indexes only the
            # documents that changed since (hashes of another polars version are not comparable).
            docs = self.folder / "documents.parquet"
            self._doc_hash = (
                dict(pl.read_parquet(docs).iter_rows())
                if state.get("hashes") == _HASHES and docs.exists()
                else {}
            )
            self.watermark = state["watermark"]
            self._applied = set(state["applied"])
            self._seen = set(self._applied)
            self._gaps = {}
            self.started_from = "saved"
        return True

    def _build(self) -> None:
        """Index every event of the store (but the set-aside ones) from scratch (the
        caller holds the claim on every floor)."""
        self.started_from = "store"
        with self.lock, self.engine.connect() as conn:  # the caller holds every floor's claim
            top = conn.execute(sa.select(sa.func.max(event_log.c.seq))).scalar() or 0
            frame = load_events(conn, exclude={r["event_id"] for r in self.set_aside.values()})
            # Rows near the top may belong to transactions that commit later: re-check them.
            self.watermark = max(0, top - START_MARGIN)
            self._applied = {
                s
                for (s,) in conn.execute(
                    sa.select(event_log.c.seq).where(event_log.c.seq > self.watermark)
                )
            }
            self._seen = set(self._applied)
            self._gaps = {}
            with self.readers.writing():
                # Each floor's vectors (documents, answer sentences) made in its scope first,
                # where its queries look for them; fit then finds them all in the cache.
                docs, hashes, _ = self._changed(frame, indexed={})
                self._encode(frame, docs, list(hashes))
                self.pipeline.fit(frame, documents=docs)
                self._doc_hash = hashes
                self.pipeline.warm()
            self._broken = False
            self._advance()
            self._progress.notify_all()

    # -- catching up ----------------------------------------------------------------------------
    def follow(self, every: float) -> None:
        """Catch up every floor in the background every ``every`` seconds, so changes to
        floors nobody here asks about are applied too, off the requests' path. The thread
        holds the index weakly and ends with it, or when the process exits (``_stop_following``)."""
        ref = weakref.ref(self)
        self.following = True

        def loop():
            while not _EXITING.wait(every):
                index = ref()
                if index is None:
                    return
                try:
                    index.sync()
                except Exception:  # noqa: BLE001 - a store that is away now may be back at the next turn
                    log.warning(
                        "background catch-up failed; retrying in %s s", every, exc_info=True
                    )
                del index

        thread = threading.Thread(target=loop, name="memkit-catch-up", daemon=True)
        _FOLLOWERS.add(thread)
        thread.start()

    def sync(
        self,
        floors=None,
        author: str | None = None,
        event_ids=(),
        others_wait: float = 0.0,
        encoded: bool = False,
        pending: list[LogRow] | None = None,
    ) -> int:
        """Apply the log rows not applied yet, or only those of ``floors``; returns how
        many events changed. A query whose floors have nothing new takes no lock; rows are
        encoded before their floors are claimed, and the index is changed a slice of
        ``WRITE_CHUNK`` rows per claim, so catching up one floor holds up another floor's
        searches for one chunk, and another catch-up of the same floor for one slice.

        A request's own rows, and only those, are applied by it when the index follows the
        store in the background: ``event_ids`` (what a write wrote) and the rows of events
        by ``author`` (the asker of a query: read your writes). Other users' writes to the
        floors are applied by their own requests and the background thread; a query waits
        for them until ``others_wait`` seconds after they were written and then searches
        the index as it is, so nobody's write, however large, holds up someone else's
        queries longer than that, all told. ``encoded``: ``event_ids`` are new posts whose
        write encoded them ahead (``encode_ahead_of_write``), so a slice of them alone is
        applied without encoding first (what is missing is still encoded when it is
        applied). ``pending``: the log rows ``pending()`` read for this call, if its caller
        read them already (a question, on its first connection)."""
        rows = self.pending() if pending is None else pending
        named = None if floors is None else set(floors)
        mine = [r for r in rows if named is None or r.floor_id is None or r.floor_id in named]
        others: list[LogRow] = []
        split = self.following and (author is not None or bool(event_ids))
        if split:
            own = set(event_ids)
            is_own = [
                r.floor_id is None
                or r.event_id in own
                or (author is not None and r.author == author)
                for r in mine
            ]
            others = [r for r, o in zip(mine, is_own) if not o]
            mine = [r for r, o in zip(mine, is_own) if o]
        changed = self._catch_up(
            rows,
            mine,
            wait_for_encoding=not (split and event_ids),
            encoded=set(event_ids) if encoded else set(),
        )
        if others and others_wait > 0:
            self._wait_applied(others, others_wait)
        return changed

    def _catch_up(
        self,
        rows: list[LogRow],
        mine: list[LogRow],
        wait_for_encoding: bool,
        encoded: set[str] = frozenset(),
    ) -> int:
        """Encode and apply ``mine`` (of the pending ``rows``) a slice at a time, each
        slice encoded (no lock held; not when ``encoded`` holds all its events) and then
        applied under its floors' claim; so another thread that needs one of these rows
        waits for one slice, not for the whole batch."""
        changed = 0
        if mine:
            with self.lock:
                self._seen.update(r.seq for r in rows if r.seq > self.watermark)
            for i in range(0, len(mine), WRITE_CHUNK):
                part = mine[i : i + WRITE_CHUNK]
                if not all(r.event_id in encoded for r in part):
                    self._encode_ahead(part, wait_for_encoding)
                with self.claims.hold(
                    {ALL} if any(r.floor_id is None for r in part) else {r.floor_id for r in part}
                ):
                    with self.lock:
                        todo = [
                            r for r in part if r.seq > self.watermark and r.seq not in self._applied
                        ]
                    if todo and not self._broken:
                        changed += self._apply_each(todo)
        if self._broken:  # the store is the truth: start again from it
            with self.claims.hold({ALL}):
                if self._broken:
                    self.rebuilds += 1
                    self._build()
        if rows:
            with self.lock:
                self._seen.update(r.seq for r in rows if r.seq > self.watermark)
                self._advance()
        return changed

    def _wait_applied(self, rows: list[LogRow], seconds: float) -> None:
        """Wait until these rows are applied (or set aside) by whoever applies them, but
        not past ``seconds`` after the newest was written: rows older than that are not
        waited for at all."""
        now = datetime.now(timezone.utc)
        fresh = [r for r in rows if r.at is not None and (r.at - now).total_seconds() + seconds > 0]
        if not fresh:
            return
        seqs = {r.seq for r in fresh}
        timeout = max((r.at - now).total_seconds() for r in fresh) + seconds
        with self._progress:
            self._progress.wait_for(
                lambda: all(s <= self.watermark or s in self._applied for s in seqs), timeout
            )

    def pending(self) -> list[LogRow]:
        """Log rows above the watermark not applied yet (read without the lock: a row
        applied meanwhile is skipped later, under it)."""
        with reading(self.engine) as conn:
            rows = conn.execute(
                sa.select(
                    event_log.c.seq,
                    event_log.c.event_id,
                    event_log.c.block_id,
                    event_log.c.event_at,
                    event_log.c.floor_id,
                    events.c.user_id,
                    event_log.c.at,
                )
                .outerjoin(events, events.c.id == event_log.c.event_id)
                .where(event_log.c.seq > self.watermark)
                .order_by(event_log.c.seq)
            ).all()
        return [LogRow(*r) for r in rows if r[0] not in self._applied]

    def _frame(self, conn, rows: list[LogRow]) -> pl.DataFrame:
        """The events these rows name as the store holds them now (with a representation,
        their whole sessions: neighbours change too). Set-aside events stay out, unless
        these rows are about them (a later change may have mended them)."""
        with self.lock:
            skip = {v["event_id"] for v in self.set_aside.values()} - {r.event_id for r in rows}
        if self.pipeline.representation is None:
            return load_events(
                conn, event_ids=list(dict.fromkeys(r.event_id for r in rows)), exclude=skip
            )
        sessions = list(
            {(r.floor_id, r.block_id, _day(r.event_at)) for r in rows if r.block_id is not None}
        )
        return load_events(conn, sessions=sessions, exclude=skip)

    def _encode_ahead(self, rows: list[LogRow], wait: bool = True) -> None:
        """Encode the rows' documents into the embedding cache before the lock is taken,
        so the index is held only for the quick part. Rows another thread is encoding
        are waited for, not encoded twice; unless ``wait`` is false (what a write wrote:
        encoding it again costs less than waiting for another thread's slice). A failure
        here is left to the apply step."""
        done = threading.Event()
        with self._encoding_guard:
            mine = [r for r in rows if r.seq not in self._encoding or not wait]
            others = {self._encoding[r.seq] for r in rows if r.seq in self._encoding and wait}
            for r in mine:
                self._encoding.setdefault(r.seq, done)
        try:
            if mine:
                with self.engine.connect() as conn:
                    frame = self._frame(conn, mine)
                docs, _, changed = self._changed(frame)
                self._encode(frame, docs, changed)
        except Exception:  # noqa: BLE001 - the same work is done again, guarded, under the lock
            log.debug("encoding ahead failed; the catch-up will retry it", exc_info=True)
        finally:
            done.set()
            with self._encoding_guard:
                for r in mine:
                    if self._encoding.get(r.seq) is done:
                        del self._encoding[r.seq]
        for other in others:
            other.wait()

    def encode_ahead_of_write(
        self, floor_id: str, block_id: str, user_id: str, posts: list[dict]
    ) -> None:
        """Encode posts not written yet (``new_posts``) with the rest of their sessions into
        the embedding cache: the documents that will change when they are written, the new
        posts' own and their neighbours'."""
        with self.engine.connect() as conn:
            new = new_posts(conn, floor_id, block_id, user_id, posts)
            sessions = [
                (floor_id, block_id, day) for day in set(new["created_at"].dt.date().to_list())
            ]
            around = (
                load_events(conn, sessions=sessions)
                if self.pipeline.representation is not None
                else new.clear()
            )
        frame = pl.concat([around, new], how="diagonal_relaxed").sort(["created_at", "event_id"])
        docs, _, changed = self._changed(frame)
        self._encode(frame, docs, changed)  # in the floor's scope, where its catch-ups look

    def _apply_each(self, rows: list[LogRow]) -> int:
        """Apply the rows together; if that fails, one by one, setting aside each row that
        still fails (logged), so one bad row never holds back the others. A failure in the
        middle of changing the index marks it broken: it is rebuilt from the store."""
        try:
            return self._apply(rows)
        except Exception:  # noqa: BLE001 - narrowed down below, row by row
            if self._broken:
                log.error(
                    "change-log rows %s..%s left the search index half-changed; "
                    "rebuilding it from the store",
                    rows[0].seq,
                    rows[-1].seq,
                    exc_info=True,
                )
                return 0
            if len(rows) == 1:
                self._set_aside(rows[0])
                return 0
        changed, failed = 0, []
        for row in rows:
            try:
                changed += self._apply([row])
            except Exception:  # noqa: BLE001 - any failure: this row is set aside, the rest go on
                self._set_aside(row)
                failed.append(row)
                if self._broken:
                    return changed
        for row in failed[
            :-1
        ]:  # it may have failed for a neighbour in its session set aside after it
            try:
                changed += self._apply([row])
                log.warning(
                    "change-log row %s (event %s) applied once a neighbour was set aside",
                    row.seq,
                    row.event_id,
                )
            except Exception:  # noqa: BLE001 - stays set aside
                if self._broken:
                    return changed
        return changed

    def _set_aside(self, row: LogRow) -> None:
        error = log_error(row)
        with self.lock:
            self.set_aside[row.seq] = {"event_id": row.event_id, "error": error}
            self._applied.add(
                row.seq
            )  # not applied, but never tried again: the watermark may pass it
            self._progress.notify_all()

    def _apply(self, rows: list[LogRow]) -> int:
        """Apply log rows (their floors claimed by this thread): events gone from the store
        are removed, changed documents are (re-)indexed, ``WRITE_CHUNK`` at a time."""
        ids = list(dict.fromkeys(r.event_id for r in rows))
        with self.engine.connect() as conn:
            frame = self._frame(conn, rows)
        present = set(frame["event_id"].to_list())
        gone = [e for e in ids if e not in present]
        docs, hashes, changed = self._changed(frame)  # made once: hashed, encoded, indexed
        by_floor = self._encode(frame, docs, changed)  # cache hits after _encode_ahead
        try:
            if gone:
                with self.readers.writing():
                    self.pipeline.remove(gone)
                    for e in gone:
                        self._doc_hash.pop(e, None)
            for floor, floor_changed in by_floor.items():
                for i in range(0, len(floor_changed), WRITE_CHUNK):
                    part = floor_changed[i : i + WRITE_CHUNK]
                    with (
                        floor_scope(floor),
                        self.readers.writing(),
                    ):  # searches go on between chunks
                        self.pipeline.add(frame, only=part, documents=docs)  # replaces
                        self.pipeline.warm()
                        self._doc_hash.update({e: hashes[e] for e in part})
        except Exception:
            self._broken = True  # some retriever may hold the change and another not
            raise
        mended = set(ids)
        with self.lock:
            self.reindexed += len(changed)
            self._applied.update(r.seq for r in rows)
            self.applied_rows += len(rows)
            for seq in [s for s, v in self.set_aside.items() if v["event_id"] in mended]:
                del self.set_aside[seq]
            self._progress.notify_all()
        return len(ids)

    def _changed(self, frame: pl.DataFrame, indexed: dict | None = None):
        """The documents the retrievers would index for ``frame``'s events, a hash of each
        (event id -> hash), and the events whose document is not the one ``indexed`` (by
        default what the index holds)."""
        indexed = self._doc_hash if indexed is None else indexed
        docs = self.pipeline.documents(frame)
        hashes = _row_hashes(docs) if frame.height else {}
        return docs, hashes, [e for e, h in hashes.items() if indexed.get(e) != h]

    def _encode(self, frame: pl.DataFrame, docs: pl.DataFrame, changed: list[str]) -> dict:
        """Encode the ``changed`` events' documents (and answer sentences) into the embedding
        cache, each floor's in its scope (``floor_scope``); returns floor -> its changed ids."""
        floor_of = dict(zip(docs["event_id"].to_list(), docs["floor_id"].to_list()))
        by_floor: dict[str, list[str]] = {}
        for e in changed:
            by_floor.setdefault(floor_of[e], []).append(e)
        for floor, ids in by_floor.items():
            with floor_scope(floor):
                self.pipeline.precompute(frame, only=ids, documents=docs)
        return by_floor

    def _advance(self) -> None:
        """Move the watermark past applied rows and past numbers missing for longer than
        ``gap_timeout`` (rolled back); never past a row that exists but is not applied
        (another floor's, left for its own catch-up)."""
        now = time.monotonic()
        top = max(self._applied | self._seen, default=self.watermark)
        for s in range(self.watermark + 1, top):
            if s not in self._applied and s not in self._seen:
                self._gaps.setdefault(s, now)
        while True:
            nxt = self.watermark + 1
            if nxt in self._applied:
                self._applied.discard(nxt)
            elif (
                nxt in self._gaps
                and nxt not in self._seen
                and now - self._gaps[nxt] >= self.gap_timeout
            ):
                del self._gaps[nxt]
            else:
                break
            self._seen.discard(nxt)
            self.watermark = nxt


def floor_scope(floor_id: str):
    """The embedding cache's scope for encoding a floor's posts: only vectors made for the
    same floor are reused, so how long a write or a catch-up takes tells nobody what other
    floors hold (memkit.models.encoders.cache_scope; SECURITY.md)."""
    return cache_scope(reads={f"floor:{floor_id}"}, writes=f"floor:{floor_id}")


def per_floor(frame: pl.DataFrame, work) -> None:
    """``work(part)`` for each floor's events of ``frame`` (sessions never span floors), in
    that floor's scope."""
    for (floor_id,), part in frame.group_by("floor_id", maintain_order=True):
        with floor_scope(floor_id):
            work(part)


_EXITING = threading.Event()
_FOLLOWERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_following() -> None:
    """At exit, let each background catch-up finish the turn it is in, then end. A thread
    still inside ONNX Runtime when the interpreter tears the library down aborts the process
    ("terminate called without an active exception", SIGABRT: a gunicorn worker stopped by
    SIGTERM did)."""
    _EXITING.set()
    for thread in list(_FOLLOWERS):
        thread.join(timeout=30)


_HASHES = f"polars {pl.__version__}, seed 7"  # what makes a document's hash (saved with the index)


def _row_hashes(docs: pl.DataFrame) -> dict[str, int]:
    return dict(
        zip(
            docs["event_id"].to_list(),
            docs.select(sorted(docs.columns)).hash_rows(seed=7).to_list(),
        )
    )


def log_error(row: LogRow) -> str:
    """Log why a change-log row could not be applied (the trace, the row's number and
    event; never the event's text) and return the error's one-line summary."""
    import sys

    exc = sys.exc_info()[1]
    error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    log.error(
        "change-log row %s (event %s) cannot be applied to the search index; set aside: %s",
        row.seq,
        row.event_id,
        error,
        exc_info=True,
    )
    return error
