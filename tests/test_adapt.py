"""`memkit adapt` on a running service: train on the store's posts, re-encode into a new
index version, switch every process at its next query; never a query that mixes models.

The posts are the exchanges of tests/test_training.py (made-up words only the store's own
structure can teach), written through the API on SQLite (in-memory index) and on
PostgreSQL with pgvector (vector rows re-encoded in batches while writes go on).
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np
import pytest
import sqlalchemy as sa

from memkit.cli import main
from memkit.models.encoders import get_encoder, models_dir
from memkit.retrieval.base import document_text
from server import create_app
from server.cli import encoder_line
from server.search import versions
from server.search.adapt import adapt
from server.search.index import load_events
from server.search.store import StoreSearch
from server.store.schema import encoder_versions
from tests.service_fixtures import make_app, same_store, user
from tests.test_training import SETTINGS, T0, exchanges

pytestmark = pytest.mark.slow

Q = "/agent/memory/query"
ADAPT = "\n".join(
    f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in SETTINGS.__dict__.items()
)


def served(name: str, parts: list[str], representation: bool) -> str:
    """A served config: a convex hybrid of ``parts`` (TOML tables), adapted with SETTINGS."""
    head = f'name = "{name}"\n' + (
        "[representation]\nbefore = 1\nafter = 0\n" if representation else ""
    )
    tables = "".join(f"[[retriever.retrievers]]\n{part}\n" for part in parts)
    return (
        f'{head}[retriever]\ntype = "hybrid"\nmethod = "convex"\nweights = [0.5, 0.5]\n{tables}'
        f"[encoder.adapt]\n{ADAPT}\n"
    )


MEMORY_CONFIG = served(
    "adapt-memory",
    ['type = "bm25"\ndoc_template = "{line}"', 'type = "dense"\ndoc_template = "{line}"'],
    representation=True,
)
POSTGRES_CONFIG = served(
    "adapt-postgres", ['type = "pgtext"', 'type = "pgvector"'], representation=False
)


def post_exchanges(c, ann, floor, block, rounds, first_day: int = 0) -> list[str]:
    """Each exchange of ``rounds`` on a day of its own (a session of two posts)."""
    texts = exchanges(rounds)["text"].to_list()
    body = [
        {
            "text": t,
            "created_at": (T0 + timedelta(days=first_day + j // 2, minutes=j % 2)).isoformat(),
        }
        for j, t in enumerate(texts)
    ]
    r = c.post(f"/floors/{floor}/blocks/{block}/events/batch", headers=ann, json={"events": body})
    assert r.status_code == 200, r.get_json()
    return [e["event_id"] for e in r.get_json()["events"]]


def service(kind, tmp_path, tmp_path_factory, config: str, **extra):
    (tmp_path / "served.toml").write_text(config)
    app = make_app(
        kind, tmp_path, tmp_path_factory, pipeline_config=str(tmp_path / "served.toml"), **extra
    )
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    uid = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]

    def ask(text):
        r = c.post(
            Q, headers=ann, json={"user_id": uid, "query": text, "floor_ids": [floor], "k": 5}
        )
        assert r.status_code == 200, r.get_json()
        return r.get_json()["items"]

    return app, c, ann, floor, blocks, ask


def active_rows(app):
    with app.extensions["memkit"]["engine"].connect() as conn:
        return conn.execute(
            sa.select(encoder_versions.c.version, encoder_versions.c.state).order_by(
                encoder_versions.c.version
            )
        ).all()


@pytest.mark.heavy
def test_adapt_switches_every_process_at_its_next_query(
    tmp_path, tmp_path_factory, monkeypatch, capsys
):
    index_dir = str(tmp_path / "index")
    app, c, ann, floor, blocks, ask = service(
        "sqlite", tmp_path, tmp_path_factory, MEMORY_CONFIG, index_dir=index_dir
    )
    post_exchanges(c, ann, floor, blocks["feed"], range(4))
    assert ask("Tell me about the zorvex")
    memory = app.extensions["memkit"]["memory"]
    before = memory.index
    assert before.pipeline.encoder_name() == "minilm"
    said = encoder_line(memory)  # what `memkit serve` prints at start
    assert "minilm (the configuration's own model)" in said and "run `memkit adapt`" in said

    settings = app.extensions["memkit"]["settings"]
    for name, value in (
        ("DATABASE_URL", settings.database_url),
        ("PIPELINE_CONFIG", settings.pipeline_config),
        ("INDEX_DIR", index_dir),
        ("SECRET_KEY", settings.secret_key),
        ("OUTBOX_DIR", settings.outbox_dir),
    ):
        monkeypatch.setenv(f"MEMKIT_{name}", value)
    assert main(["adapt"]) == 0  # as an operator runs it, in a process of its own
    out = capsys.readouterr().out
    assert "version 1 active: minilm-ft-" in out
    name = out.split("active: ")[1].split(",")[0]
    assert active_rows(app) == [(1, "active")]

    # A query that started before the switch keeps the model and vectors it began with.
    assert before.pipeline.encoder_name() == "minilm"
    assert ask("Tell me about the zorvex")  # the next query switches this process
    after = memory.index
    assert (
        after is not before
        and after.pipeline.encoder_name() == name
        and after.started_from == "saved"
    )
    dense = after.pipeline.retriever.retrievers[1]
    with app.extensions["memkit"]["engine"].connect() as conn:
        frame = load_events(conn)
    docs = document_text(after.pipeline.documents(frame), "{line}")
    rows = [dense.catalog.position[e] for e in frame["event_id"]]
    assert np.allclose(
        dense.vectors[rows], get_encoder(name).encode(docs), atol=1e-5
    )  # every vector: the new model
    assert after.pipeline.answerer.encoder.name == name
    assert (
        encoder_line(memory)
        == f"encoder: {name} (version 1, adapted to this store's posts by `memkit adapt`)"
    )

    # The same posts teach nothing new: no training, no switch.
    monkeypatch.setattr(
        "memkit.training.encoder._fit", lambda *a, **k: pytest.fail("trained again")
    )
    assert main(["adapt"]) == 0 and "nothing to switch" in capsys.readouterr().out
    assert active_rows(app) == [(1, "active")]

    # Another process on the same store starts on the new version, from its saved index.
    other = create_app(same_store(settings, index_dir=index_dir))
    assert other.extensions["memkit"]["memory"].index.pipeline.encoder_name() == name
    assert other.extensions["memkit"]["memory"].index.started_from == "saved"
    other.extensions["memkit"]["engine"].dispose()

    # A post written after the switch is indexed with the new model.
    new_id = c.post(
        f"/floors/{floor}/blocks/{blocks['blog']}/events",
        headers=ann,
        json={"text": "The krestin sang all night"},
    ).get_json()["event_id"]
    assert new_id in [i["event_id"] for i in ask("krestin")]
    assert np.allclose(
        dense.vectors[dense.catalog.position[new_id]],
        get_encoder(name).encode(["Ann: The krestin sang all night"])[0],
        atol=1e-5,
    )

    # A thread that read the active version just before the switch does not take the process back.
    monkeypatch.setattr(versions, "active", lambda conn: versions.Version(0))
    assert memory.index is after
    app.extensions["memkit"]["engine"].dispose()


@pytest.mark.heavy
def test_adapt_on_postgres_re_encodes_rows_in_batches_while_writes_go_on(
    tmp_path, tmp_path_factory, monkeypatch
):
    app, c, ann, floor, blocks, ask = service(
        "postgresql+pgvector", tmp_path, tmp_path_factory, POSTGRES_CONFIG
    )
    post_exchanges(c, ann, floor, blocks["feed"], range(4))
    memory = app.extensions["memkit"]["memory"]
    engine = app.extensions["memkit"]["engine"]
    assert ask("Tell me about the zorvex")
    assert memory.index.pipeline.retriever.retrievers[1].table == "memkit_vectors"

    def tables():
        with engine.connect() as conn:
            return set(
                conn.execute(
                    sa.text(
                        "SELECT tablename FROM pg_tables WHERE tablename LIKE 'memkit_vectors%'"
                    )
                ).scalars()
            )

    # A run that fails half-way changes nothing queries or writes see.
    def broken(self, *a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(StoreSearch, "backfill", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        adapt(memory)
    monkeypatch.undo()
    assert active_rows(app) == [(1, "failed")] and tables() == {"memkit_vectors"}
    assert ask("Tell me about the zorvex") and memory.index.pipeline.encoder_name() == "minilm"

    # Re-encoding in batches of 4; a post arrives half-way and goes into both versions.
    written = []

    def write_once(message):
        if "re-encoded" in message and not written:
            written.append(
                c.post(
                    f"/floors/{floor}/blocks/{blocks['blog']}/events",
                    headers=ann,
                    json={"text": "The yaddle slept in the barn"},
                ).get_json()["event_id"]
            )

    report = adapt(memory, batch=4, progress=write_once)
    assert report.switched and report.version == 2 and report.events == 64 and written
    assert active_rows(app) == [(1, "failed"), (2, "active")]
    assert tables() == {"memkit_vectors", "memkit_vectors_v2"}
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT e.text, v.embedding::text FROM events e JOIN memkit_vectors_v2 v "
                "ON v.event_id = e.id"
            )
        ).all()
        assert len(rows) == 65  # every event, the one written during the re-encode included
        got = np.array([[float(x) for x in v.strip("[]").split(",")] for _, v in rows], np.float32)
        assert np.allclose(got, get_encoder(report.encoder).encode([t for t, _ in rows]), atol=1e-4)
    ask("yaddle")
    part = memory.index.pipeline.retriever.retrievers[1]
    assert (
        part.table == "memkit_vectors_v2" and memory.index.pipeline.encoder_name() == report.encoder
    )
    items = ask("yaddle")
    assert written[0] in [i["event_id"] for i in items]

    # The model's files are in the store: a machine whose cache lacks them unpacks them.
    folder = models_dir() / report.encoder
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    import shutil

    shutil.rmtree(folder)
    with engine.connect() as conn:
        versions.ensure_model(conn, report.encoder)
    assert hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() == digest

    # More posts, another run: version 3; the version before the replaced one is dropped.
    post_exchanges(c, ann, floor, blocks["forum"], range(4, 5), 100)
    third = adapt(
        memory, batch=50, jobs=2
    )  # two processes, a range of event ids each (server/backfill.py)
    assert third.version == 3 and third.encoder != report.encoder
    assert tables() == {"memkit_vectors_v2", "memkit_vectors_v3"}
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT e.text, v.embedding::text FROM events e JOIN memkit_vectors_v3 v "
                "ON v.event_id = e.id"
            )
        ).all()
        assert len(rows) == conn.execute(sa.text("SELECT count(*) FROM events")).scalar() > 65
        got = np.array([[float(x) for x in v.strip("[]").split(",")] for _, v in rows], np.float32)
        assert np.allclose(got, get_encoder(third.encoder).encode([t for t, _ in rows]), atol=1e-4)
    assert (
        ask("Tell me about the zorvex")
        and memory.index.pipeline.retriever.retrievers[1].table == "memkit_vectors_v3"
    )
    with engine.connect() as conn:
        assert conn.execute(
            sa.select(encoder_versions.c.version).where(encoder_versions.c.model.is_not(None))
        ).scalars().all() == [2, 3]
    engine.dispose()
