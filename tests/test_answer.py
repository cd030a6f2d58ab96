"""Answer writing and the relevance gate of Pipeline.query."""

from datetime import datetime, timezone

import pytest

from memkit.answer import ExtractiveAnswerer, build_answerer
from memkit.errors import ValidationError
from memkit.pipeline import Pipeline
from tests.helpers import make_events

ITEMS = [
    {"text": "We drove to the coast. The lighthouse was closed for repairs! Fog all day.", "block_title": "Trips",
     "block_type_name": "blog", "created_at": datetime(2024, 4, 1, 12, tzinfo=timezone.utc)},
    {"text": "Lighthouse tours reopen in May.", "block_title": "Feed", "block_type_name": "feed",
     "created_at": "2024-04-20T09:00:00+00:00"},
    {"text": "Bread again today.", "block_title": "Feed", "block_type_name": "feed", "created_at": None},
]


def test_summary_quotes_the_sentences_that_answer_and_says_where_and_when():
    text = ExtractiveAnswerer(max_sentences=2).answer("is the lighthouse open?", ITEMS, summary=True)
    assert "“The lighthouse was closed for repairs!” (in “Trips”, on 1 April 2024)" in text
    assert "“Lighthouse tours reopen in May.” (in “Feed”, on 20 April 2024)" in text
    assert "Bread" not in text and "Fog" not in text and "1 more item" in text


def test_summary_without_shared_words_quotes_the_top_item():
    text = ExtractiveAnswerer().answer("anything new?", ITEMS[2:], summary=True)
    assert "“Bread again today.”" in text


def test_one_line_account_and_fallback():
    line = ExtractiveAnswerer().answer("lighthouse", ITEMS, summary=False)
    assert line == "Found 3 items for “lighthouse” (2 feed posts, 1 blog post); the best match was posted in “Trips” on 1 April 2024."
    assert "couldn't find anything about “zebras”" in ExtractiveAnswerer().answer(" zebras ", [], summary=True)
    with pytest.raises(ValidationError, match="answer.type"):
        build_answerer({"type": "oracle"})


@pytest.fixture(scope="module")
def events():
    return make_events(60, seed=5)


def test_gate_drops_semantic_only_rankings_below_the_threshold(events):
    dense = {"retriever": {"type": "dense"}, "relevance": {"min_similarity": 0.25}}
    gated = Pipeline.from_config(dense).fit(events)
    res = gated.query("kubernetes cluster autoscaling", k=5)
    assert not res.relevant and res.run.height == 0
    assert gated.query(events["text"][0], k=5).run.height == 5  # its own text: similarity 1
    open_ = Pipeline.from_config({"retriever": {"type": "dense"}}).fit(events)
    assert open_.query("kubernetes cluster autoscaling", k=5).run.height == 5  # no gate configured
    hybrid = Pipeline.from_config({"retriever": {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "dense"}]},
                                   "relevance": {"min_similarity": 0.99}}).fit(events)
    word = events["text"][0].split()[0]
    assert hybrid.query(word, k=5).relevant  # a term match counts whatever the similarity
    with pytest.raises(ValidationError, match="relevance.min_similarity"):
        Pipeline.from_config({"retriever": {"type": "bm25"}, "relevance": {"min_similarity": "high"}})
