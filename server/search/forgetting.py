"""A deleted or rewritten post's vectors leave the embedding cache (SECURITY.md).

The cache keeps a vector per text the model read: a post's document (with its neighbours,
where the representation joins them), its line and its sentences. Which entries a post
made is not stored anywhere; it is named again from the post. Before a delete, an edit or
an account's deletion, ``CachedVectors.pending`` names the entries the served pipeline
made for the sessions the change touches, as the store holds them then
(``memkit.models.encoders.naming_cache_keys``: the same code that encodes them, with no model run);
after the commit, ``Pending.forget`` names them again from what the store holds now and
deletes those no longer named, under the floor's namespace. A vector the same text made in
another floor stays, recorded for that floor. A deleted floor's namespace goes whole. A
write refused after its posts were encoded (``CachedVectors.unwritten``) forgets what
they made the same way.

Not covered: vectors an earlier encoder version made (`memkit adapt` switched since), and
other processes' in-memory copies of recent vectors (kept at most until they restart).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from memkit.models.encoders import forget_vectors, naming_cache_keys
from memkit.pipeline import Pipeline
from server.search.index import load_events, per_floor, session_of

log = logging.getLogger(__name__)


def named_keys(pipeline: Pipeline, conn, sessions: list[tuple]) -> dict[str, set[str]]:
    """Per floor, the cache keys of what ``pipeline`` encodes for these sessions' posts."""
    out: dict[str, set[str]] = {}
    if not sessions:
        return out
    frame = load_events(conn, sessions=sessions)

    def name(part) -> None:
        with naming_cache_keys() as keys:
            pipeline.precompute(part)
        out.setdefault(part["floor_id"][0], set()).update(keys)

    if frame.height:
        per_floor(frame, name)
    return out


class Pending:
    """Entries named before a change, to compare with those named after its commit."""

    def __init__(self, vectors: CachedVectors | None, sessions: list[tuple], before):
        self.vectors, self.sessions, self.before = vectors, sessions, before

    def forget(self, floors=(), rows=()) -> None:
        """After the commit: delete what the sessions no longer name (nor those of ``rows``,
        the changed events as stored now: an edit may move a post to another day), and
        ``floors``' namespaces whole (deleted floors). Logged, never raised: the change is
        stored."""
        if self.vectors is None or not (self.before or floors):
            return
        sessions = list(dict.fromkeys([*self.sessions, *map(session_of, rows)]))
        try:
            with self.vectors.engine.connect() as conn:
                after = named_keys(self.vectors.pipeline(), conn, sessions)
            for floor, keys in self.before.items():
                forget_vectors(keys - after.get(floor, set()), f"floor:{floor}")
            for floor in floors:
                forget_vectors(None, f"floor:{floor}")
        except Exception:  # noqa: BLE001 - see above
            log.exception("deleting a changed post's cached vectors failed")


class CachedVectors:
    """The served pipeline's cache entries for the store's posts. ``pipeline()`` gives the
    pipeline whose encodings are named (the open index's, or one made for naming)."""

    def __init__(self, engine, pipeline: Callable[[], Pipeline]):
        self.engine, self.pipeline = engine, pipeline

    def pending(self, conn, rows) -> Pending:
        """Before changing these events (rows with floor_id, block_id, created_at) in
        ``conn``'s transaction."""
        sessions = list(dict.fromkeys(session_of(r) for r in rows))
        try:
            return Pending(self, sessions, named_keys(self.pipeline(), conn, sessions))
        except Exception:  # noqa: BLE001 - the change goes on; its vectors stay
            log.exception("naming a post's cached vectors failed")
            return Pending(None, sessions, {})

    def unwritten(self, sessions: list[tuple], named: dict[str, set[str]]) -> Pending:
        """For a write that was refused after its posts were encoded: ``named`` (per floor)
        is what their encoding made; ``forget`` deletes what the store does not name."""
        return Pending(self, list(dict.fromkeys(sessions)), named)


NOTHING = Pending(None, [], {})


class NoVectors:
    """For services built without a search (tests of accounts): a change forgets nothing."""

    def pending(self, conn, rows) -> Pending:
        return NOTHING

    def unwritten(self, sessions, named) -> Pending:
        return NOTHING


NO_VECTORS = NoVectors()
