"""What a write costs the search index (server/services/events.py, server/search/index.py):
its posts are encoded once, before its transaction, into the embedding cache every process
shares; a process starting from a saved index re-indexes only the documents that changed
since it was saved."""

from __future__ import annotations

import pytest

from memkit.core.text import sentences
from memkit.models.encoders import EmbeddingCache
from memkit.retrieval import DenseRetriever, PgVectorRetriever, walk
from memkit.retrieval.base import document_text
from server import create_app
from server.search.index import load_events
from tests.service_fixtures import make_app, user

CONFIG = (
    '[representation]\nbefore = 1\nafter = 1\n[retriever]\ntype = "hybrid"\nweights = [0.5, 0.5]\n'
    '[[retriever.retrievers]]\ntype = "bm25"\ndoc_template = "{session_text}"\n'
    '[[retriever.retrievers]]\ntype = "dense"\ndoc_template = "{prev_lines}\\n{line}"\n'
)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql+pgvector"])
def test_a_write_is_encoded_before_its_transaction(kind, tmp_path, tmp_path_factory):
    """Inside the write's transaction (where its rows first exist) the vectors of every
    document the write changes, and of its posts' sentences, are already in the shared
    cache: no process catching up on the write (nor the PostgreSQL indexer in the
    transaction) has to encode them. With a representation a post's document holds its
    neighbours (here the post written before the batch), so documents are made over the
    written posts' whole sessions, as the index makes them."""
    extra = {} if kind != "sqlite" else {"pipeline_config": str(tmp_path / "ctx.toml")}
    (tmp_path / "ctx.toml").write_text(CONFIG)
    app = make_app(kind, tmp_path, tmp_path_factory, **extra)
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    memory, events = app.extensions["memkit"]["memory"], app.extensions["memkit"]["events"]
    path = f"/floors/{floor}/blocks/{blocks['forum']}/events"
    assert (
        c.post(
            path,
            headers=ann,
            json={"text": "First post. It is here.", "created_at": "2024-03-01T10:00:00Z"},
        ).status_code
        == 200
    )
    pipeline = memory.warm().pipeline
    dense = [
        p for p in walk(pipeline.retriever) if isinstance(p, (DenseRetriever, PgVectorRetriever))
    ]
    seen = {}

    def probe(conn, event_ids):  # the Events service's hook inside the transaction
        frame = load_events(conn, event_ids=list(event_ids))
        if pipeline.representation:  # documents as the index makes them: over whole sessions
            days = {
                (f, b, at.date())
                for f, b, at in frame.select("floor_id", "block_id", "created_at").iter_rows()
            }
            docs = pipeline.documents(load_events(conn, sessions=list(days)))
        else:
            docs = frame
        wanted = [
            (d.text_encoder, d.text_encoder.name, t.strip())
            for d in dense
            for t in document_text(docs, d.doc_template)
        ]
        answers = (
            pipeline.answerer.encoder
        )  # sentences: read in their post's line (encode_in_context)
        wanted += [
            (answers, f"{answers.name}#in", f"{pipeline._line(r).strip()}\x00{s}")
            for r in frame.to_dicts()
            for s in sentences(r["text"])
        ]
        keys: dict = {}  # each encoder's own on-disk cache (the one it was made with)
        for enc, model, text in wanted:
            keys.setdefault(enc, set()).add(EmbeddingCache.key(model, text))
        seen["wanted"] = sum(map(len, keys.values()))
        seen["found"] = sum(len(enc.cache.get_many(list(k), enc.dim)) for enc, k in keys.items())
        original(conn, event_ids)

    original, events.indexer = events.indexer, probe
    body = {
        "events": [
            {
                "text": f"Batch post {i} about a kayak. Then lunch {i}.",
                "created_at": f"2024-03-01T10:0{i}:30Z",
            }
            for i in range(1, 5)
        ]
    }
    assert c.post(path + "/batch", headers=ann, json=body).status_code == 200
    assert seen["wanted"] > 8 and seen["found"] == seen["wanted"]
    app.extensions["memkit"]["engine"].dispose()


def test_a_restart_reindexes_only_what_changed(tmp_path):
    """A process loading the saved index catches up on the changes made since and
    re-indexes only the documents they changed (the saved index keeps each document's
    hash), not every post of the sessions they touch: a new tag on one post of a busy
    block-day re-indexes that post, not its 30 neighbours."""
    (tmp_path / "ctx.toml").write_text(CONFIG)
    settings = {
        "database_url": f"sqlite:///{tmp_path / 'm.db'}",
        "outbox_dir": str(tmp_path / "o"),
        "secret_key": "k",
        "pipeline_config": str(tmp_path / "ctx.toml"),
        "index_dir": str(tmp_path / "index"),
    }
    app = create_app(settings)
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    path = f"/floors/{floor}/blocks/{blocks['feed']}/events"
    body = {
        "events": [
            {"text": f"morning note {i}", "created_at": f"2024-05-01T08:{i:02d}:00Z"}
            for i in range(31)
        ]
    }
    posted = c.post(path + "/batch", headers=ann, json=body).get_json()["events"]
    first = app.extensions["memkit"]["memory"].warm()
    assert first.started_from == "store" and (tmp_path / "index" / "state.json").exists()
    assert (
        c.patch(
            f"/events/{posted[7]['event_id']}", headers=ann, json={"tags": ["garden"]}
        ).status_code
        == 200
    )
    later = create_app({**settings, "secret_key": "k"})
    index = later.extensions["memkit"]["memory"].warm()
    assert index.started_from == "saved" and index.applied_rows == 1
    assert index.reindexed == 1  # without the saved hashes: all 31 posts of the session
    tagged = index.pipeline.search(["morning note 7"], k=31, filters={"tags": ["garden"]})[
        "event_id"
    ].to_list()
    assert tagged == [posted[7]["event_id"]]
    for a in (app, later):
        a.extensions["memkit"]["engine"].dispose()


def test_a_write_is_read_back_once_after_its_commit(tmp_path, tmp_path_factory, monkeypatch):
    """After a create commits, the index reads the written posts' sessions from the store
    once (to apply them), not a second time to encode what the write encoded ahead; the
    posts are searchable when the request returns."""
    from server.search.index import SearchIndex

    (tmp_path / "ctx.toml").write_text(CONFIG)
    app = make_app("sqlite", tmp_path, tmp_path_factory, pipeline_config=str(tmp_path / "ctx.toml"))
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    app.extensions["memkit"]["memory"].warm()
    reads, real = [], SearchIndex._frame

    def counted(self, conn, rows):
        reads.append([r.event_id for r in rows])
        return real(self, conn, rows)

    monkeypatch.setattr(SearchIndex, "_frame", counted)
    r = c.post(
        f"/floors/{floor}/blocks/{blocks['forum']}/events/batch",
        headers=ann,
        json={"events": [{"text": f"Kayak trip number {i}."} for i in range(3)]},
    )
    assert r.status_code == 200
    written = {e["event_id"] for e in r.get_json()["events"]}
    assert len(reads) == 1 and set(reads[0]) == written
    index = app.extensions["memkit"]["memory"].index
    assert {e for e in written if e in index.pipeline.retriever.catalog.position} == written
