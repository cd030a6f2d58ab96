import json

import polars as pl
import pytest

from memkit.core.tables import read_dataset
from memkit.datasets import load_any
from memkit.evaluation.compare import comparison_table, paired_test
from memkit.evaluation.harness import evaluate_config, run_queries
from memkit.pipeline import Pipeline
from memkit.question.conversation import CONTEXTUALIZERS, Reading
from tests.conftest import shared_dataset


class Recorder:
    """Appends every earlier query of the user, and records what it was shown."""

    type_name = "recorder"
    seen: list = []

    def read(self, query, history, window=None, names=()):
        Recorder.seen.append((query, [t.query for t in history]))
        return Reading(query, [(" ".join([t.query for t in history] + [query]), 1.0)])

    def params(self):
        return {"type": self.type_name}


@pytest.fixture
def recorder():
    CONTEXTUALIZERS["recorder"] = Recorder
    Recorder.seen = []
    yield Recorder
    del CONTEXTUALIZERS["recorder"]


BM25 = {"name": "bm25", "retriever": {"type": "bm25"}}


def tiny(tmp_path):
    events = [
        {"event_id": f"e{i}", "floor_id": "f", "block_id": "f/b", "block_type": "forum", "text": t}
        for i, t in enumerate(
            [
                "breast cancer types ductal lobular",
                "lobular carcinoma spread rate",
                "sourdough starter recipe",
                "bread flour hydration",
            ]
        )
    ]
    queries = [
        {"query_id": "solo1", "text": "sourdough starter", "floor_ids": ["f"]},
        {"query_id": "solo2", "text": "flour", "floor_ids": ["f"]},
        {
            "query_id": "c1-2",
            "text": "how fast does it spread",
            "conversation_id": "c1",
            "turn": 2,
            "floor_ids": ["f"],
            "rewrite": "how fast does lobular carcinoma spread",
        },
        {
            "query_id": "c1-1",
            "text": "types of breast cancer",
            "conversation_id": "c1",
            "turn": 1,
            "floor_ids": ["f"],
        },
        {
            "query_id": "c2-1",
            "text": "bread hydration",
            "conversation_id": "c2",
            "turn": 1,
            "floor_ids": ["f"],
        },
    ]
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels.tsv").write_text("query_id\tevent_id\trelevance\nc1-2\te1\t2\nsolo1\te2\t1\n")
    return read_dataset(folder)


def test_independent_queries_see_no_context_and_conversations_go_in_turn_order(tmp_path, recorder):
    ds = tiny(tmp_path)
    pipe = Pipeline.from_config({**BM25, "contextualizer": {"type": "recorder"}})
    pipe.fit(ds.events)
    run, eff, _ = run_queries(pipe, ds.queries)
    conv_calls = [s for s in recorder.seen if s[0] != "sourdough starter" and s[0] != "flour"]
    # c1 is asked turn 1 then turn 2, as one user; c2 starts with no history.
    assert conv_calls == [
        ("types of breast cancer", []),
        ("how fast does it spread", ["types of breast cancer"]),
        ("bread hydration", []),
    ]
    effective = dict(eff.iter_rows())
    assert effective["solo2"] == "flour"  # no context from solo1
    assert effective["c1-2"] == "types of breast cancer how fast does it spread"
    assert set(run["query_id"]) == {"solo1", "solo2", "c1-1", "c1-2", "c2-1"}
    assert not pipe.conversations.history("eval-user/c1")  # the harness leaves no state behind


def test_rewrite_field_asks_the_rewrite(tmp_path):
    ds = tiny(tmp_path)
    res = evaluate_config(BM25, ds, query_field="rewrite")
    eff = dict(res.effective_queries.iter_rows())
    assert eff["c1-2"] == "how fast does lobular carcinoma spread"
    assert eff["solo1"] == "sourdough starter"  # no rewrite: the text itself
    assert res.name == "bm25+rewrite"
    assert res.per_query.filter(pl.col("query_id") == "c1-2")["mrr@10"][0] == 1.0


def test_comparison_table_and_paired_test(tmp_path):
    ds = load_any(shared_dataset("cast2021"))
    a = evaluate_config(BM25, ds)
    b = evaluate_config(
        {**BM25, "name": "bm25-rewrite"}, ds, query_field="rewrite", name="bm25-rewrite"
    )
    table = comparison_table([a, b], ds, baseline="bm25")
    assert table["config"].to_list() == ["bm25", "bm25-rewrite"]
    assert table["p(mrr@10)"][0] is None and 0.0 <= table["p(mrr@10)"][1] <= 1.0
    assert table["mrr@10"][1] > table["mrr@10"][0]  # the human rewrite helps follow-ups
    assert paired_test([1, 0, 1, 1], [1, 0, 1, 1]) == 1.0
    assert paired_test([1.0] * 30, [0.0] * 29 + [1.0]) < 0.001
    with pytest.raises(Exception, match="baseline"):
        comparison_table([a, b], ds, baseline="nope")
