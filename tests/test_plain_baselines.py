"""The baseline configs are their retriever alone: a row named ``bm25`` in a comparison is
BM25, not BM25 with date filtering and a changed-facts reorder (which a config turns on by
naming them: ``time_windows``, ``changed_facts``). Every stage beyond the retriever is named
in eval's tables and the MLflow run's tags."""

from __future__ import annotations

import json

import mlflow
import polars as pl
import pytest

from memkit.config import load_checked, resolve_config
from memkit.core.tables import read_dataset
from memkit.evaluation.compare import comparison_table
from memkit.evaluation.harness import evaluate_config
from memkit.evaluation.tracking import log_result
from memkit.pipeline import Pipeline

PLAIN = ["bm25", "tfidf", "dense", "hybrid", "hybrid-rrf", "dense-line", "locomo-context"]
SERVED = ["default", "default-fresh", "default-lean", "postgres", "reader"]

POSTS = [  # (time, text): a plan that moved, and the same people in another month
    ("2026-01-10T10:00:00Z", "Hiking with Ana in the mountains, a long day"),
    ("2026-03-02T09:00:00Z", "Dinner with Ana is on Friday at the harbour restaurant"),
    ("2026-03-20T18:00:00Z", "Dinner with Ana moved to Saturday, same restaurant"),
    ("2026-03-15T12:00:00Z", "Bought new boots for hiking"),
    ("2026-02-11T08:00:00Z", "Ana lent me her tent for the mountains"),
]
QUESTIONS = [
    ("q1", "What did I do with Ana in January?", "e0"),
    ("q2", "When is the dinner with Ana?", "e2"),
    ("q3", "Who lent me a tent?", "e4"),
]


def dated(tmp_path):
    folder = tmp_path / "dated"
    folder.mkdir()
    events = [
        {
            "event_id": f"e{i}",
            "floor_id": "f",
            "block_id": "f/feed",
            "block_type": "feed",
            "user_id": "me",
            "text": text,
            "created_at": when,
        }
        for i, (when, text) in enumerate(POSTS)
    ]
    queries = [
        {"query_id": q, "text": t, "floor_ids": ["f"], "time": "2026-03-25T12:00:00Z"}
        for q, t, _ in QUESTIONS
    ]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels.tsv").write_text(
        "query_id\tevent_id\trelevance\n" + "".join(f"{q}\t{e}\t1\n" for q, _, e in QUESTIONS)
    )
    return read_dataset(folder)


def ranked(run: pl.DataFrame) -> dict[str, list[str]]:
    return {
        q: frame.sort("rank")["event_id"].to_list()
        for (q,), frame in run.group_by("query_id", maintain_order=True)
    }


def alone(name: str, ds) -> dict[str, list[str]]:
    """The run of the config's retriever searched on its own: fitted as the pipeline fits it
    (on the posts as the config represents them), then asked directly, no pipeline stage."""
    pipeline = Pipeline.from_config(resolve_config(name))
    pipeline.fit(ds.events)
    queries = ds.queries.select("query_id", "text", "floor_ids")
    return ranked(pipeline.retriever.search(queries, k=100))


@pytest.mark.parametrize("name", PLAIN)
def test_a_baseline_config_scores_its_retriever_alone(tmp_path, name):
    ds = dated(tmp_path)
    result = evaluate_config(name, ds, answers=False)
    assert result.stages == []
    assert ranked(result.run) == alone(name, ds)


def test_the_stages_change_this_floor_so_the_check_above_can_fail(tmp_path):
    """With the stages named, BM25's ranking of these questions is not BM25's: the January
    question keeps January's post alone and the moved dinner goes first."""
    ds = dated(tmp_path)
    staged = evaluate_config(
        {
            "name": "bm25+stages",
            "retriever": {"type": "bm25"},
            "time_windows": True,
            "changed_facts": True,
        },
        ds,
        answers=False,
    )
    assert staged.stages == ["time windows", "changed facts"]
    assert ranked(staged.run) != alone("bm25", ds)
    assert ranked(staged.run)["q1"][0] == "e0"
    assert ranked(staged.run)["q2"][0] == "e2"


@pytest.mark.parametrize("name", SERVED)
def test_the_served_configs_name_the_stages_they_run(name):
    _, checked = load_checked(resolve_config(name))
    assert checked.time_windows and checked.changed_facts
    stages = Pipeline.from_config(resolve_config(name)).stages()
    assert {"time windows", "changed facts", "follow-ups (topic)"} <= set(stages), stages


def test_eval_tables_and_tags_name_each_rows_stages(tmp_path):
    ds = dated(tmp_path)
    plain = evaluate_config("bm25", ds, answers=False)
    staged = evaluate_config(
        {"name": "bm25-dated", "retriever": {"type": "bm25"}, "time_windows": True},
        ds,
        answers=False,
    )
    table = comparison_table([plain, staged], ds, baseline="bm25")
    assert table["stages"].to_list() == ["retriever alone", "time windows"]

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = log_result(staged, experiment="stages", uri=uri)
    tags = mlflow.MlflowClient(uri).get_run(run_id).data.tags
    assert tags["stages"] == "time windows"
