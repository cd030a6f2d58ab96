"""The service's PostgreSQL search backend (search_backend = "postgres") beyond the query
API tests: its settings are checked at start, and a store written before it was switched
on is filled by the backfill command."""

from __future__ import annotations

import pytest

from memkit.config import CONFIG_DIR
from memkit.core.errors import ValidationError
from server import create_app
from server.backfill import main as backfill
from tests.service_fixtures import postgres_url, user

Q = "/agent/memory/query"


def test_the_postgres_backend_needs_postgresql_and_postgres_retrievers(tmp_path, tmp_path_factory):
    base = {"outbox_dir": str(tmp_path / "outbox"), "secret_key": "test-secret"}
    with pytest.raises(ValueError, match="needs a PostgreSQL database_url"):
        create_app(
            {**base, "database_url": f"sqlite:///{tmp_path / 'm.db'}", "search_backend": "postgres"}
        )
    with pytest.raises(ValueError, match="search_backend"):
        create_app(
            {**base, "database_url": f"sqlite:///{tmp_path / 'm.db'}", "search_backend": "elastic"}
        )
    bm25 = tmp_path / "bm25.toml"
    bm25.write_text('[retriever]\ntype = "bm25"\n')
    with pytest.raises(ValidationError, match="PostgreSQL retrievers only"):
        create_app(
            {
                **base,
                "database_url": postgres_url(tmp_path_factory),
                "search_backend": "postgres",
                "pipeline_config": str(bm25),
            }
        )


@pytest.mark.heavy  # a backfill of the store (5 s)
def test_backfill_indexes_events_written_before_the_backend(
    tmp_path, tmp_path_factory, monkeypatch
):
    url = postgres_url(tmp_path_factory)
    base = {
        "database_url": url,
        "outbox_dir": str(tmp_path / "outbox"),
        "secret_key": "test-secret",
    }
    before = create_app(base)  # the in-memory backend: nothing is written to search tables
    c = before.test_client()
    ann, floor, blocks = user(c, before, "Ann")
    ann_id = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]
    ids = [
        c.post(
            f"/floors/{floor}/blocks/{blocks['feed']}/events", headers=ann, json={"text": t}
        ).get_json()["event_id"]
        for t in ("The quokka smiled at the camera.", "We planted rhubarb behind the shed.")
    ]
    before.extensions["memkit"]["engine"].dispose()

    after = create_app(
        {**base, "search_backend": "postgres"}
    )  # the default config: memkit/config/postgres.toml
    memory = after.extensions["memkit"]["memory"]
    assert memory.config_path == CONFIG_DIR / "postgres.toml"
    ask = lambda q: [  # noqa: E731
        i["event_id"]
        for i in after.test_client()
        .post(
            Q,
            headers=ann,
            json={
                "user_id": ann_id,
                "query": q,
                "floor_ids": [floor],
            },
        )
        .get_json()["items"]
    ]
    assert ask("quokka") == []  # started at once, without indexing the store
    first, second = sorted(ids)
    with memory.engine.connect() as conn:
        assert memory.index.missing(conn, 10) == [first, second]
    assert memory.index.backfill(after=first) == 1  # a range of ids: only those above ``after``
    with memory.engine.connect() as conn:
        assert memory.index.missing(conn, 10) == [first]
        assert memory.index.missing(conn, 10, upto=first) == [first]
        assert memory.index.missing(conn, 10, after=first) == []
    assert ask("rhubarb")[:1] == [second] and first not in ask("quokka")
    for name, value in (
        ("DATABASE_URL", url),
        ("SEARCH_BACKEND", "postgres"),
        ("SECRET_KEY", "test-secret"),
        ("OUTBOX_DIR", str(tmp_path / "outbox")),
    ):
        monkeypatch.setenv(f"MEMKIT_{name}", value)
    assert backfill(["--batch", "1", "--jobs", "2"]) == 0  # the rest, two processes (ranges of ids)
    assert ask("quokka")[:1] == [ids[0]] and ask("rhubarb")[:1] == [ids[1]]
    with memory.engine.connect() as conn:
        assert memory.index.missing(conn, 10) == []
    assert backfill([]) == 0  # nothing left: a second run does nothing
    after.extensions["memkit"]["engine"].dispose()
