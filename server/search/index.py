"""The search index of an app process, caught up from the store.

The store is the truth. On start the index is built from every event in the store; after
that, every create, edit or delete of an event adds a row to ``event_log`` in the same
transaction (server/store/changes.py), and :meth:`SearchIndex.sync` (called before every
query) applies the rows it has not seen: an event still in the store is (re-)added, one
that is gone is removed. Any number of processes sharing the store stay in step this
way, and a query sees every write committed before it (read your writes).

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
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import sqlalchemy as sa

from memkit.pipeline import Pipeline
from memkit.tables import events_frame
from server.store.schema import blocks, event_log, events, users

START_MARGIN = 1000  # log rows below the top at start that are re-checked for stragglers


def load_events(conn, event_ids: list[str] | None = None, sessions: list[tuple] | None = None,
                chunk: int = 200) -> pl.DataFrame:
    """Events of the store (all, these ids, or these sessions: ``(block_id, day)``, a day
    of None meaning the whole block) as memkit's events table plus ``speaker`` (the
    author's name), in posting order (time, then id). Long lists of ids or sessions are
    asked for ``chunk`` at a time (SQLite limits an expression's depth)."""
    if event_ids is not None and len(event_ids) > chunk:
        return _concat([load_events(conn, event_ids=event_ids[i : i + chunk]) for i in range(0, len(event_ids), chunk)])
    if sessions is not None and len(sessions) > chunk:
        return _concat([load_events(conn, sessions=sessions[i : i + chunk]) for i in range(0, len(sessions), chunk)])
    q = (sa.select(events.c.id, events.c.floor_id, events.c.block_id, blocks.c.type, events.c.user_id, events.c.text,
                   events.c.created_at, events.c.tags, users.c.name)
         .join(blocks, blocks.c.id == events.c.block_id).join(users, users.c.id == events.c.user_id)
         .order_by(events.c.created_at, events.c.id))
    if event_ids is not None:
        q = q.where(events.c.id.in_(event_ids))
    if sessions is not None:
        q = q.where(sa.or_(sa.false(), *[_session(b, d) for b, d in sessions]))
    found = conn.execute(q).all()
    rows = [{"event_id": r[0], "floor_id": r[1], "block_id": r[2], "block_type": r[3], "user_id": r[4], "text": r[5],
             "created_at": r[6], "tags": r[7]} for r in found]
    names = [r[8] for r in found]
    return events_frame(rows, source="store").with_columns(pl.Series("speaker", names, pl.Utf8))


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames).unique("event_id", keep="first", maintain_order=True).sort(["created_at", "event_id"])


def _session(block_id: str, day: date | None):
    if day is None:
        return events.c.block_id == block_id
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    return sa.and_(events.c.block_id == block_id, events.c.created_at >= start,
                   events.c.created_at < start + timedelta(days=1))


def _day(at: datetime | None) -> date | None:
    if at is None:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).date()


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


class SearchIndex:
    """``folder``, if given, is where the index is saved after a full build and loaded
    from at the next start (then caught up from the log), so a restart or a new worker
    process does not re-encode the store. A saved index made with other settings
    (``pipeline.params()`` differ) is ignored and rebuilt."""

    def __init__(self, engine: sa.Engine, pipeline: Pipeline, gap_timeout: float = 60.0, folder: str | Path | None = None):
        self.engine = engine
        self.pipeline = pipeline
        self.gap_timeout = gap_timeout
        self.folder = Path(folder) if folder else None
        self.started_from = None  # "store" (a full build) or "saved" (loaded, then caught up)
        self.lock = threading.RLock()  # catch-ups, saves and loads of this process take turns
        self.readers = ReadWriteLock()  # searches run side by side; applying changes waits for them
        self.watermark = 0  # every log row numbered <= watermark has been applied
        self._applied: set[int] = set()  # rows above the watermark already applied
        self._gaps: dict[int, float] = {}  # missing numbers above the watermark -> first noticed
        self.applied_rows = 0  # log rows applied since start (for tests and monitoring)
        self.reindexed = 0  # documents (re-)added by catch-ups since start (for tests and monitoring)
        self._doc_hash: dict[str, int] = {}  # event id -> hash of the document indexed for it

    def reading(self):
        """Held while a query searches: catch-ups wait for it, other queries do not."""
        return self.readers.reading()

    def start(self) -> "SearchIndex":
        """Load the saved index and catch up from the log, or build from every event in
        the store (and save it, when a folder is set)."""
        if self.folder is not None and self._load():
            self.sync()
            return self
        self._build()
        if self.folder is not None:
            self.save(self.folder)
        return self

    def _digest(self) -> str:
        return hashlib.sha256(json.dumps(self.pipeline.params(), sort_keys=True, default=str).encode()).hexdigest()

    def save(self, folder: str | Path) -> Path:
        """Write the index and the log position it reflects (atomically: a folder is
        written beside it and renamed; if another process saved first, its copy stays)."""
        folder = Path(folder)
        with self.lock:
            tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            self.pipeline.retriever.save(tmp / "retriever")
            state = {"digest": self._digest(), "watermark": self.watermark, "applied": sorted(self._applied),
                     "events": len(self.pipeline.retriever.catalog)}
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
        from memkit.retrievers import load as load_retriever

        with self.lock:
            self.pipeline.retriever = load_retriever(self.folder / "retriever")
            self.pipeline.retriever.warm()
            self.watermark = state["watermark"]
            self._applied = set(state["applied"])
            self._gaps = {}
            with self.engine.connect() as conn:  # authors' names for answers
                names = [{"speaker": n} for (n,) in conn.execute(sa.select(users.c.name))]
            self.pipeline.answerer.prepare(names, encode=False)
            self.started_from = "saved"
        return True

    def _build(self) -> None:
        self.started_from = "store"
        with self.lock, self.engine.connect() as conn:
            top = conn.execute(sa.select(sa.func.max(event_log.c.seq))).scalar() or 0
            frame = load_events(conn)
            # Rows near the top may belong to transactions that commit later: re-check them.
            self.watermark = max(0, top - START_MARGIN)
            self._applied = {s for (s,) in conn.execute(sa.select(event_log.c.seq).where(event_log.c.seq > self.watermark))}
            self._gaps = {}
            self.pipeline.fit(frame)
            self._doc_hash = self._hashes(frame)
            self.pipeline.retriever.warm()
            self.pipeline.answerer.prepare(frame, encode=False)  # authors' names; sentences encode on first use
            self._advance()

    def sync(self) -> int:
        """Apply the log rows not applied yet; returns how many events changed."""
        with self.lock:
            with self.engine.connect() as conn:
                rows = conn.execute(sa.select(event_log.c.seq, event_log.c.event_id, event_log.c.block_id,
                                              event_log.c.event_at)
                                    .where(event_log.c.seq > self.watermark).order_by(event_log.c.seq)).all()
                new = [r for r in rows if r[0] not in self._applied]
                ids = list(dict.fromkeys(r[1] for r in new))
                if not ids:
                    frame = None
                elif self.pipeline.representation is not None:  # neighbours changed too: the whole sessions
                    frame = load_events(conn, sessions=list({(r[2], _day(r[3])) for r in new if r[2] is not None}))
                else:
                    frame = load_events(conn, event_ids=ids)
            if ids:
                present = set(frame["event_id"].to_list())
                gone = [e for e in ids if e not in present]
                hashes = self._hashes(frame) if frame.height else {}
                changed = [e for e, h in hashes.items() if self._doc_hash.get(e) != h]
                if changed:  # the slow part (encoding) first, while searches go on
                    self.pipeline.precompute(frame, only=changed)
                with self.readers.writing():
                    if gone:
                        self.pipeline.remove(gone)
                        for e in gone:
                            self._doc_hash.pop(e, None)
                    if changed:
                        self.pipeline.add(frame, only=changed)  # an event indexed before is replaced
                        self.pipeline.answerer.prepare(frame, encode=False)
                    self.pipeline.retriever.warm()
                self._doc_hash.update(hashes)
                self.reindexed += len(changed)
                self._applied.update(r[0] for r in new)
                self.applied_rows += len(new)
            self._advance()
            return len(ids)

    def _hashes(self, frame: pl.DataFrame) -> dict[str, int]:
        """Event id -> a hash of the document the retrievers would index for it."""
        docs = self.pipeline.documents(frame)
        return dict(zip(docs["event_id"].to_list(), docs.select(sorted(docs.columns)).hash_rows(seed=7).to_list()))

    def _advance(self) -> None:
        now = time.monotonic()
        top = max(self._applied, default=self.watermark)
        for s in range(self.watermark + 1, top):
            if s not in self._applied:
                self._gaps.setdefault(s, now)
        while True:
            nxt = self.watermark + 1
            if nxt in self._applied:
                self._applied.discard(nxt)
            elif nxt in self._gaps and now - self._gaps[nxt] >= self.gap_timeout:
                del self._gaps[nxt]
            else:
                break
            self.watermark = nxt
