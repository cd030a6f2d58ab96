"""The learned re-ranker (memkit/retrieval/learned.py)."""

import numpy as np
import polars as pl
import pytest

from memkit.core.errors import ValidationError
from memkit.core.tables import events_frame
from memkit.retrieval import Filters, build
from memkit.retrieval.registry import load as load_any
from tests.helpers import make_events

EVENTS = make_events(120, seed=11)
FIRST = {
    "type": "hybrid",
    "weights": [0.6, 0.4],
    "depth": 50,
    "retrievers": [{"type": "bm25"}, {"type": "dense"}],
}
EXTRA = [{"type": "bm25", "doc_template": "{user_id}: {text}"}]


@pytest.fixture(scope="module")
def plain():
    return build({"type": "learned", "first": FIRST, "extra": EXTRA, "candidates": 30}).fit(EVENTS)


def model_for(r, weights: dict) -> dict:
    names = r.feature_names()
    return {
        "features": names,
        "coef": [weights.get(n, 0.0) for n in names],
        "intercept": 0.0,
        "mean": [0.0] * len(names),
        "scale": [1.0] * len(names),
    }


def test_without_a_model_it_ranks_as_its_first_stage(plain):
    first = build(FIRST).fit(EVENTS)
    for q in ("dog shoes", "support group", "bread"):
        got, want = plain.search(q, k=10), first.search(q, k=10)
        assert got["event_id"].to_list() == want["event_id"].to_list()
        assert np.allclose(got["score"].to_numpy(), want["score"].to_numpy())


def test_the_model_orders_candidates_by_its_score(plain):
    r = build(
        {
            "type": "learned",
            "first": FIRST,
            "extra": EXTRA,
            "candidates": 30,
            "model": model_for(plain, {"log_length": -1.0}),
        }
    ).fit(EVENTS)
    run = r.search("dog shoes", k=30)
    lengths = {e: len(t) for e, t in zip(EVENTS["event_id"], EVENTS["text"])}
    got = [lengths[e] for e in run["event_id"]]
    assert got == sorted(got)  # shortest first: the model alone decides the order
    assert set(run["event_id"]) == set(
        plain.search("dog shoes", k=30)["event_id"]
    )  # same candidates


def test_with_models_ranks_a_copy_and_leaves_the_fitted_one_as_it_was(plain):
    """A training loop tries models on one fitted index: ``with_models`` returns a copy that
    ranks as a retriever built with that model would, and the original still ranks without."""
    model = model_for(plain, {"log_length": -1.0})
    before = plain.search("dog shoes", k=10)
    tried = plain.with_models(model)
    built = build(
        {"type": "learned", "first": FIRST, "extra": EXTRA, "candidates": 30, "model": model}
    ).fit(EVENTS)
    assert tried is not plain and plain.model is None
    got, want = tried.search("dog shoes", k=10), built.search("dog shoes", k=10)
    assert got["event_id"].to_list() == want["event_id"].to_list()
    assert got["event_id"].to_list() != before["event_id"].to_list()
    assert plain.search("dog shoes", k=10).equals(before)
    with pytest.raises(ValidationError, match="passage_model"):
        plain.with_models(None, model)  # a passage model needs a chat model too


def test_filters_reach_every_part(plain):
    f = Filters(floor_ids=["alice"], tags=["pets"])
    run = plain.search("dog", k=50, filters=f)
    rows = {r["event_id"]: r for r in EVENTS.iter_rows(named=True)}
    assert run.height and all(
        rows[e]["floor_id"] == "alice" and "pets" in rows[e]["tags"] for e in run["event_id"]
    )


def test_bad_models_name_the_field(plain):
    with pytest.raises(ValidationError, match="retriever.model"):
        build({"type": "learned", "first": FIRST, "model": {"coef": [1.0]}})
    bad = model_for(plain, {}) | {"features": ["fused", "colour"] + plain.feature_names()[2:]}
    with pytest.raises(ValidationError, match="colour"):
        build({"type": "learned", "first": FIRST, "extra": EXTRA, "model": bad})
    with pytest.raises(ValidationError, match="retriever.first"):
        build({"type": "learned", "first": {"type": "bm25"}})


def joined_features(r, query: str, filters=None):
    """The features as joins of run tables: the definition the array code must match."""
    import polars as pl

    depth = max(r.candidates, r.first.depth)
    parts = [p.search(query, depth, filters) for p in r.first.retrievers]
    cand = r.first.fuse(parts, r.candidates)
    parts += [p.search(query, depth, filters) for p in r.extra]
    cand = cand.select(
        "event_id",
        "match_type",
        pl.col("score").alias("fused"),
        (1.0 / (pl.col("rank") + 5)).alias("fused_r"),
    )
    for i, run in enumerate(parts):
        lo, hi = pl.col("score").min(), pl.col("score").max()
        run = run.select(
            "event_id",
            pl.when(hi > lo)
            .then((pl.col("score") - lo) / (hi - lo))
            .otherwise(1.0)
            .alias(f"part{i}"),
            (1.0 / (pl.col("rank") + 5)).alias(f"part{i}_r"),
        )
        cand = cand.join(run, on="event_id", how="left")
    return cand.fill_null(0.0)


@pytest.mark.parametrize(
    "query,filters",
    [
        ("dog shoes", None),
        ("support group meeting", None),
        ("bread", None),
        ("dog", Filters(floor_ids=["alice"])),
        ("zzzz unknown", None),
    ],
)
def test_features_equal_the_joins_of_the_runs(plain, query, filters):
    got = plain.features(query, filters)
    want = joined_features(plain, query, filters)
    assert got["event_id"].to_list() == want["event_id"].to_list()
    assert got["match_type"].to_list() == want["match_type"].to_list()
    for col in [c for c in want.columns if c not in ("event_id", "match_type")]:
        assert np.allclose(got[col].to_numpy(), want[col].to_numpy(), atol=1e-9), col


def test_the_first_stage_must_fuse_by_convex_min_max():
    with pytest.raises(ValidationError, match="retriever.first"):
        build({"type": "learned", "first": {**FIRST, "method": "rrf"}})


def test_posts_that_stand_alone_are_scored_by_the_passage_model(plain):
    """With a ``chat`` column (memkit/retrieval/representation.py), chat lines take ``model`` and
    the other posts ``passage_model``: here opposite orders by length, so each shape's
    order shows which model scored it."""
    events = EVENTS.with_columns((EVENTS["block_type"] != "blog").alias("chat"))
    r = build(
        {
            "type": "learned",
            "first": FIRST,
            "extra": EXTRA,
            "candidates": 30,
            "model": model_for(plain, {"log_length": -1.0}),
            "passage_model": model_for(plain, {"log_length": 1.0}),
        }
    ).fit(events)
    run = r.search("dog shoes", k=30)
    chat = dict(zip(events["event_id"], events["chat"]))
    lengths = {e: len(t) for e, t in zip(EVENTS["event_id"], EVENTS["text"])}
    lines = [lengths[e] for e in run["event_id"] if chat[e]]
    alone = [lengths[e] for e in run["event_id"] if not chat[e]]
    assert lines and alone and lines == sorted(lines) and alone == sorted(alone, reverse=True)
    with pytest.raises(ValidationError, match="retriever.passage_model"):
        build(
            {
                "type": "learned",
                "first": FIRST,
                "extra": EXTRA,
                "passage_model": model_for(plain, {}),
            }
        )


def test_blog_shift_moves_blog_posts_among_chat_lines_only_and_survives_saving(plain, tmp_path):
    """``blog_shift`` is added to the passage model's score of a post in a block of no chat
    type: with the same model for both shapes, a large shift puts every blog post above every
    chat line; a long chat line (standing alone, in a feed) is not moved; a list of blog
    posts alone keeps its scores; a saved ranker loads it."""
    long_line = "dog shoes " + "and more words about the walk " * 20
    events = pl.concat(
        [
            EVENTS,
            EVENTS.head(1).with_columns(
                pl.lit("long").alias("event_id"),
                pl.lit(long_line).alias("text"),
                pl.lit("feed").alias("block_type"),
            ),
        ]
    )
    events = events.with_columns(
        (pl.col("block_type") != "blog").alias("chat_block"),
        ((pl.col("block_type") != "blog") & (pl.col("text").str.len_chars() <= 500)).alias("chat"),
    )
    same = model_for(plain, {"fused": 1.0})
    spec = {"type": "learned", "first": FIRST, "extra": EXTRA, "candidates": 40, "model": same}
    block = dict(zip(events["event_id"], events["chat_block"]))
    even = build({**spec, "passage_model": same}).fit(events).search("dog shoes", k=40)
    assert [block[e] for e in even["event_id"]] != sorted(block[e] for e in even["event_id"])
    shifted = build({**spec, "passage_model": same, "blog_shift": 100.0}).fit(events)
    run = shifted.search("dog shoes", k=40)
    shapes = [block[e] for e in run["event_id"]]
    assert False in shapes and True in shapes and shapes == sorted(shapes)
    assert "long" in run["event_id"].to_list()  # the long chat line is among the chat lines
    assert run["event_id"].to_list().index("long") >= shapes.count(False)
    blogs = events.filter(~pl.col("chat_block"))
    alone = build({**spec, "passage_model": same, "blog_shift": 100.0}).fit(blogs)
    plain_blogs = build({**spec, "passage_model": same}).fit(blogs)
    assert (
        alone.search("dog shoes", k=10)["score"].to_list()
        == plain_blogs.search("dog shoes", k=10)["score"].to_list()
    )
    again = load_any(shifted.save(tmp_path / "r"))
    assert again.blog_shift == 100.0
    assert again.search("dog shoes", k=40)["event_id"].to_list() == run["event_id"].to_list()


def test_a_chat_line_that_names_a_date_is_dated_and_the_feature_survives_saving(plain, tmp_path):
    """``dated``: a chat line with a time in it ("last weekend", resolved against its own
    time, or a date written out) is 1, any other post 0; posts that stand alone are 0
    whatever they say (their model does not use it); a saved ranker loads the same values."""
    texts = [
        "we went camping last weekend",
        "the camping trip was fun",
        "camping on 3 May 2023 was cold",
        "camping gear review from last week",
    ]
    rows = [
        {
            "event_id": f"d{i}",
            "floor_id": "f",
            "block_id": "f/b",
            "block_type": "feed" if i < 3 else "blog",
            "user_id": "ann",
            "text": t,
            "created_at": f"2023-05-0{i + 4}T10:00:00",
            "tags": [],
        }
        for i, t in enumerate(texts)
    ]
    events = events_frame(rows)
    events = events.with_columns((events["block_type"] != "blog").alias("chat"))
    r = build(
        {
            "type": "learned",
            "first": FIRST,
            "extra": EXTRA,
            "candidates": 30,
            "model": model_for(plain, {"dated": 1.0}),
        }
    ).fit(events)
    run = r.search("camping", k=4)
    assert run["event_id"].to_list()[:2] == ["d0", "d2"]  # the dated chat lines first
    feats = r.features("camping").select("event_id", "dated").sort("event_id")
    assert feats["dated"].to_list() == [1.0, 0.0, 1.0, 0.0]
    loaded = type(r).load(r.save(tmp_path / "ranker"))
    assert loaded.features("camping").select("event_id", "dated").sort("event_id").equals(feats)
