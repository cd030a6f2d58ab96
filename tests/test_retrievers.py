from pathlib import Path

import bm25s
import numpy as np
import polars as pl
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from memkit.core.errors import ValidationError
from memkit.core.tables import check_run
from memkit.core.text import Analyzer
from memkit.retrieval import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    TfidfRetriever,
    build,
    load,
)
from tests.helpers import make_events

QUERIES = [
    "support group",
    "camping with kids at the lake",
    "sourdough recipe",
    "kitten from the shelter",
]


def all_kinds():
    return {
        "tfidf": lambda: TfidfRetriever(),
        "bm25": lambda: BM25Retriever(k1=1.2, b=0.75),
        "dense": lambda: DenseRetriever(),
        # The HNSW path from the first event (with ef >= n the graph search is exhaustive).
        "dense-hnsw": lambda: DenseRetriever(exact_below=0),
        "hybrid-rrf": lambda: HybridRetriever(
            [BM25Retriever(), DenseRetriever()], method="rrf", rrf_k=60
        ),
        "hybrid-convex": lambda: HybridRetriever(
            [BM25Retriever(), DenseRetriever()], method="convex", weights=[0.4, 0.6]
        ),
    }


KINDS = list(all_kinds())


@pytest.fixture(scope="module")
def events():
    return make_events(120, seed=1)


@pytest.mark.parametrize("kind", KINDS)
def test_finds_the_relevant_post(kind, events):
    r = all_kinds()[kind]().fit(events)
    run = check_run(r.search(QUERIES, k=5))
    for qid, words in zip(
        ["0", "1", "2", "3"], ["support group", "camping", "sourdough", "kitten"]
    ):
        top = run.filter(pl.col("query_id") == qid)["event_id"][0]
        text = events.filter(pl.col("event_id") == top)["text"][0]
        assert words in text, (kind, qid, text)
    expected = {
        "tfidf": "keyword",
        "bm25": "keyword",
        "dense": "semantic",
        "dense-hnsw": "semantic",
    }.get(kind)
    if expected:
        assert set(run["match_type"]) == {expected}
    else:
        assert set(run["match_type"]) <= {"keyword", "semantic", "hybrid"} and "hybrid" in set(
            run["match_type"]
        )
    assert run.group_by("query_id").agg(pl.col("rank").max())["rank"].max() <= 5


def test_bm25_scores_equal_bm25s(events):
    r = BM25Retriever(k1=1.5, b=0.6, stopwords="lucene").fit(events)
    an = Analyzer(stopwords="lucene")
    ref = bm25s.BM25(k1=1.5, b=0.6, method="lucene")
    ref.index([an(t) for t in events["text"]], show_progress=False)
    for q in QUERIES:
        assert np.allclose(r.score(q), ref.get_scores(an(q)), atol=1e-5)


@pytest.mark.parametrize("sublinear", [False, True])
def test_tfidf_scores_equal_scikit_learn(events, sublinear):
    r = TfidfRetriever(sublinear_tf=sublinear).fit(events)
    vec = TfidfVectorizer(analyzer=Analyzer(), sublinear_tf=sublinear)
    docs = vec.fit_transform(events["text"].to_list())
    for q in QUERIES:
        expected = (docs @ vec.transform([q]).T).toarray().ravel()
        assert np.allclose(r.score(q), expected, atol=1e-9)


def assert_same_results(kind, a, b):
    """Exact retrievers: identical runs. HNSW is approximate and a graph grown by add()
    differs from one built at once, so there: the same scores for the same events and
    nearly the same events."""
    if kind != "dense-hnsw":
        assert a["event_id"].to_list() == b["event_id"].to_list()
        assert np.allclose(a["score"].to_numpy(), b["score"].to_numpy(), atol=1e-6)
        return
    assert (
        a.group_by("query_id")
        .len()
        .sort("query_id")
        .equals(b.group_by("query_id").len().sort("query_id"))
    )
    both = a.join(b, on=["query_id", "event_id"])
    assert np.allclose(both["score"], both["score_right"], atol=1e-5)
    assert both.height >= 0.9 * a.height


@pytest.mark.parametrize("kind", ["tfidf", "bm25", "dense", "dense-hnsw"])
def test_add_equals_refit(kind, events):
    first, rest = events.head(70), events.tail(50)
    grown = all_kinds()[kind]().fit(first).add(rest.head(20)).add(rest.tail(30))
    refit = all_kinds()[kind]().fit(events)
    assert_same_results(kind, grown.search(QUERIES, k=20), refit.search(QUERIES, k=20))


@pytest.mark.parametrize("kind", KINDS)
def test_added_event_found_by_next_search(kind, events):
    r = all_kinds()[kind]().fit(events)
    new = make_events(1, seed=99, prefix="new").with_columns(
        pl.lit("Zanzibar snorkelling trip with the octopus").alias("text")
    )
    r.add(new)
    run = r.search("snorkelling in Zanzibar", k=3)
    assert run["event_id"][0] == "new0"


@pytest.mark.parametrize("kind", KINDS)
def test_remove_and_replace(kind, events):
    r = all_kinds()[kind]().fit(events)
    top = r.search("kitten from the shelter", k=1)["event_id"][0]
    r.remove([top])
    assert top not in r.search("kitten from the shelter", k=50)["event_id"].to_list()
    assert len(r) == events.height - 1
    # Re-adding an id replaces the old event: its old text is no longer found.
    row = events.filter(pl.col("event_id") == "e0").with_columns(
        pl.lit("Zanzibar octopus").alias("text")
    )
    r.add(row)
    assert r.search("Zanzibar octopus", k=1)["event_id"][0] == "e0"
    assert len(r) == events.height - 1


@pytest.mark.parametrize("kind", ["tfidf", "bm25", "dense", "dense-hnsw"])
def test_remove_equals_refit_without(kind, events):
    gone = events["event_id"].head(30).to_list()
    r = all_kinds()[kind]().fit(events).remove(gone)
    refit = all_kinds()[kind]().fit(events.filter(~pl.col("event_id").is_in(gone)))
    assert_same_results(kind, r.search(QUERIES, k=15), refit.search(QUERIES, k=15))


@pytest.mark.parametrize("kind", ["tfidf", "bm25", "dense"])
def test_many_small_changes_equal_a_refit(kind, events):
    """A stream of small adds and removals (as a service's catch-ups make: more batches
    than the sparse index keeps segments, so segments are merged, and removals between
    them, so document frequencies are recounted) scores as a refit of what is left."""
    r = all_kinds()[kind]().fit(events.head(10))
    gone = []
    for start in range(10, events.height, 7):
        r.add(events.slice(start, 7))
        gone.append(events["event_id"][start - 3])
        r.remove(gone[-1:])
    assert kind == "dense" or 1 < len(r.index.segments) <= 8
    refit = all_kinds()[kind]().fit(events.filter(~pl.col("event_id").is_in(gone)))
    assert_same_results(kind, r.search(QUERIES, k=20), refit.search(QUERIES, k=20))


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_identical(kind, events, tmp_path):
    r = all_kinds()[kind]().fit(events.head(100)).add(events.tail(20)).remove(["e5"])
    r.save(tmp_path / "idx")
    back = load(tmp_path / "idx")
    assert type(back) is type(r) and back.params() == r.params()
    assert back.search(QUERIES, k=10).equals(r.search(QUERIES, k=10))
    # ... and keeps working after load.
    back.add(make_events(3, seed=7, prefix="late"))
    assert len(back) == len(r) + 3


def test_build_from_config_and_params_round_trip():
    spec = {
        "type": "hybrid",
        "method": "rrf",
        "rrf_k": 30,
        "retrievers": [{"type": "bm25", "k1": 0.9}, {"type": "dense"}],
    }
    r = build(spec)
    assert r.params()["rrf_k"] == 30 and r.params()["retrievers"][0]["k1"] == 0.9
    assert build(r.params()).params() == r.params()
    with pytest.raises(ValidationError, match="retriever.type"):
        build({"type": "magic"})
    with pytest.raises(ValidationError, match="retriever.k3: unknown setting"):
        build({"type": "bm25", "k3": 1})
    with pytest.raises(ValidationError, match="weights"):
        HybridRetriever([BM25Retriever(), TfidfRetriever()], weights=[1.0])


def test_bad_search_arguments(events):
    r = BM25Retriever().fit(events)
    with pytest.raises(ValidationError, match="k"):
        r.search("x", k=0)
    with pytest.raises(ValidationError, match="queries"):
        r.search([1, 2])
    with pytest.raises(ValidationError, match="event_id"):
        r.add(pl.concat([events.head(1), events.head(1)]))


def test_query_with_no_known_term_returns_nothing(events):
    r = BM25Retriever().fit(events)
    assert r.search("xyzzy plugh", k=5).height == 0


def test_a_document_of_several_lines_can_be_the_mean_of_its_lines(tmp_path):
    """lines = "mean": "{prev_lines}\\n{line}" is the word-weighted mean of the two lines'
    vectors (each line encoded once, shared with the next post's document), so indexing it
    sends the model no text a "{line}" part has not already sent."""
    from memkit.models.encoders import CachedEncoder, MiniLMEncoder
    from memkit.retrieval import DenseRetriever
    from memkit.retrieval.representation import add_context

    enc = CachedEncoder(MiniLMEncoder(), tmp_path / "c.sqlite")
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2024, 5, 1, 9, tzinfo=timezone.utc)  # one session: one block, one day, in order
    raw = make_events(6, seed=2).with_columns(
        pl.lit("b1").alias("block_id"),
        pl.Series("created_at", [t0 + timedelta(minutes=i) for i in range(6)]),
    )
    events = add_context(raw)
    assert events["prev_lines"][1] == events["line"][0]
    line = DenseRetriever(enc, doc_template="{line}").fit(events)
    before = enc.encoded
    mean = DenseRetriever(enc, doc_template="{prev_lines}\n{line}", lines="mean").fit(events)
    assert enc.encoded == before  # every line was encoded by the "{line}" part
    lines = events["line"].to_list()
    for i in range(1, len(lines)):
        a, b = enc.encode([lines[i - 1], lines[i]])
        wa, wb = len(lines[i - 1].split()), len(lines[i].split())
        want = (wa * a + wb * b) / np.linalg.norm(wa * a + wb * b)
        assert np.allclose(mean.vectors[i], want, atol=1e-5)
    assert np.allclose(
        mean.vectors[0], line.vectors[0], atol=1e-6
    )  # no previous line: the line itself
    assert mean.get_params()["lines"] == "mean" and "lines" not in line.get_params()
    with pytest.raises(ValidationError, match="lines"):
        DenseRetriever(enc, lines="sum")


@pytest.mark.parametrize("kind", KINDS)
def test_params_are_the_constructor_arguments(kind):
    import inspect

    r = all_kinds()[kind]()
    params = r.get_params()
    assert set(params) <= set(inspect.signature(type(r)).parameters)  # dense: no lines="whole"
    again = type(r)(**{k: build(v) if isinstance(v, dict) else v for k, v in params.items()})
    assert again.params() == r.params() and repr(again) == repr(r)


def test_walk_yields_the_tree_in_config_order():
    from memkit.retrieval import walk
    from memkit.retrieval.postgres import in_memory_parts

    first = {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "dense"}]}
    learned = build({"type": "learned", "first": first, "extra": [{"type": "tfidf"}]})
    kinds = [r.type_name for r in walk(learned)]
    assert kinds == ["learned", "hybrid", "bm25", "dense", "tfidf"]
    assert [r.type_name for r in in_memory_parts(learned)] == ["bm25", "dense", "tfidf"]
    assert learned.children() == [learned.first, *learned.extra] and not BM25Retriever().children()


def test_add_a_retriever_walkthrough(monkeypatch):
    """docs/LIBRARY.md's "Add a retriever" example runs as written (its asserts are the check)."""
    from memkit.retrieval import registry

    # The example registers a kind: on a copy of the registry, so other tests never see it.
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    page = (Path(__file__).parents[1] / "docs" / "LIBRARY.md").read_text()
    section = page[page.index("**Add a retriever.**") :]
    code = section[section.index("```python\n") + 10 : section.index("\n```\n")]
    assert len(code.splitlines()) <= 40
    exec(compile(code, "docs/LIBRARY.md (Add a retriever)", "exec"), {"__name__": "readme_example"})
    assert registry.REGISTRY["overlap"].__module__ == "readme_example"  # registered by it


def test_map_specs_changes_every_part_before_anything_is_built():
    """A caller sets a part's settings on the config, not on built retrievers: every spec of
    a learned ranker's tree is visited (its first hybrid's parts, its extra parts), the
    original dict is left as it was, and a dense part built from it has the new setting."""
    from memkit.retrieval import map_specs

    spec = {
        "type": "learned",
        "first": {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "dense"}]},
        "extra": [{"type": "dense", "doc_template": "{text}"}],
    }
    seen = []

    def visit(s):
        seen.append(s["type"])
        return {**s, "exact_below": 7} if s["type"] == "dense" else s

    out = map_specs(spec, visit)
    assert seen == ["bm25", "dense", "hybrid", "dense", "learned"]  # parts before their composite
    assert "exact_below" not in spec["first"]["retrievers"][1]  # the caller's dict is unchanged
    built = build(out["first"])
    assert [r.exact_below for r in built.retrievers if r.type_name == "dense"] == [7]
    assert out["extra"][0] == {"type": "dense", "doc_template": "{text}", "exact_below": 7}


LONG_POST = " ".join(
    [
        f"Day {i} of the survey: we counted gulls and terns along the north shore again."
        for i in range(30)
    ]
    + ["At the very end we found a beehive in the old lighthouse, full of honey."]
)


@pytest.mark.parametrize("exact_below", [50_000, 0])
def test_a_long_post_is_scored_by_its_best_part(exact_below, tmp_path):
    """passages = "best": a post longer than the encoder's window is also read in runs of
    sentences, and scores as the best of its whole vector and its parts, so a question
    about its last sentence (past the encoder's 256 word pieces) finds it. Filters and
    removals hold for the parts as for the post; the parts survive a save and load."""
    from memkit.core.text import chunks

    events = make_events(40, seed=3)
    long_id = events["event_id"][5]
    events = events.with_columns(
        pl.when(pl.col("event_id") == long_id)
        .then(pl.lit(LONG_POST))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    query = "beehive full of honey in the lighthouse"
    whole = DenseRetriever(exact_below=exact_below).fit(events)
    best = DenseRetriever(exact_below=exact_below, passages="best", passage_words=40).fit(events)
    enc = best.text_encoder
    q = enc.encode([query])[0]
    want = max(
        float(whole.vectors[5] @ q), max(float(v @ q) for v in enc.encode(chunks(LONG_POST, 40)))
    )
    assert want > float(whole.vectors[5] @ q) + 0.1  # the whole vector misses the last sentence
    run = best.search([query], k=5)
    assert run["event_id"][0] == long_id
    assert run["score"][0] == pytest.approx(want, abs=1e-5)
    assert float(best.similarity(query, [long_id])[0]) == pytest.approx(want, abs=1e-5)
    # short posts score as their whole vector, as without parts
    short = whole.search([query], k=40).filter(pl.col("event_id") != long_id)
    mine = best.search([query], k=40).filter(pl.col("event_id") != long_id)
    assert short["event_id"].to_list() == mine["event_id"].to_list()
    assert np.allclose(short["score"].to_numpy(), mine["score"].to_numpy(), atol=1e-6)
    # a filter that leaves the long post out, and its removal, leave its parts out too
    floor = events["floor_id"][5]
    other = [f for f in events["floor_id"].unique().to_list() if f != floor]
    elsewhere = best.search([query], k=5, filters={"floor_ids": other})
    assert long_id not in elsewhere["event_id"].to_list()
    best.save(tmp_path / "r")
    loaded = DenseRetriever.load(tmp_path / "r")
    assert loaded.search([query], k=5)["event_id"].to_list() == run["event_id"].to_list()
    best.remove([long_id])
    assert long_id not in best.search([query], k=40)["event_id"].to_list()
    assert best.get_params()["passages"] == "best" and "passages" not in whole.get_params()
    with pytest.raises(ValidationError, match="passages"):
        DenseRetriever(passages="max")


@pytest.mark.parametrize("kind", ["bm25", "tfidf"])
def test_indexes_shared_between_fits_stay_apart(kind, events, monkeypatch):
    """With ``share_indexes`` (the eval's), a second fit on the same texts starts as a copy
    of the first: it scores the same, and a change to either leaves the other as it was."""
    from memkit.retrieval import sparse

    alone = all_kinds()[kind]().fit(events).search(QUERIES, k=20)
    monkeypatch.setattr(sparse, "_SHARED", {})
    first = all_kinds()[kind]().fit(events)
    second = all_kinds()[kind]().fit(events)
    assert len(sparse._SHARED) == 1
    assert_same_results(kind, first.search(QUERIES, k=20), alone)
    assert_same_results(kind, second.search(QUERIES, k=20), alone)
    top = first.search("kitten from the shelter", k=1)["event_id"][0]
    first.remove([top])
    second.add(
        make_events(1, seed=99, prefix="new").with_columns(
            pl.lit("kitten kitten shelter shelter").alias("text")
        )
    )
    third = all_kinds()[kind]().fit(events)  # from the shared copy, untouched by either
    assert_same_results(kind, third.search(QUERIES, k=20), alone)
    assert top not in first.search("kitten from the shelter", k=50)["event_id"].to_list()
    assert second.search("kitten from the shelter", k=1)["event_id"][0] == "new0"
