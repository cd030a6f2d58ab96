"""Context fields for the indexed text (memkit/representation.py)."""

from datetime import datetime, timezone

import polars as pl
import pytest

from memkit.errors import ValidationError
from memkit.pipeline import Pipeline
from memkit.representation import add_context
from server import create_app

T = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def chat():
    rows = [("s1", "Ann", "Guess what, I got a new job!"), ("s1", "Bo", "Congrats! Where?"), ("s1", "Ann", "At the zoo."),
            ("s2", "Bo", "My sister visited.")]
    return pl.DataFrame({"event_id": [f"e{i}" for i in range(4)], "floor_id": ["f"] * 4, "block_id": [r[0] for r in rows],
                         "block_type": ["feed"] * 4, "user_id": [r[1] for r in rows], "text": [r[2] for r in rows],
                         "created_at": [T] * 4, "tags": [[]] * 4},
                        schema_overrides={"created_at": pl.Datetime("us", "UTC")})


def test_neighbours_stay_inside_their_block_and_keep_order():
    ctx = add_context(chat(), before=1, after=1)
    assert ctx["prev_text"].to_list() == ["", "Guess what, I got a new job!", "Congrats! Where?", ""]
    assert ctx["next_speaker"].to_list() == ["Bo", "Ann", "", ""]
    assert ctx["date"][0] == "8 May 2023" and ctx["speaker"][3] == "Bo"
    assert ctx["session_text"][0] == "Ann: Guess what, I got a new job!\nBo: Congrats! Where?\nAnn: At the zoo."
    assert ctx["session_text"][3] == "Bo: My sister visited."
    two = add_context(chat(), before=2, after=0)
    assert two["prev_text"][2] == "Guess what, I got a new job! / Congrats! Where?" and two["next_text"][0] == ""
    with pytest.raises(ValidationError, match="representation.before"):
        add_context(chat(), before=-1)


def test_the_previous_turn_finds_an_answer_that_does_not_repeat_the_question():
    config = {"retriever": {"type": "bm25", "doc_template": "{prev_speaker}: {prev_text}\n{speaker}: {text}"},
              "representation": {"before": 1, "after": 0}}
    with_context = Pipeline.from_config(config).fit(chat())
    assert "e2" in with_context.search("Where is Ann's new job?", k=3)["event_id"].to_list()
    plain = Pipeline.from_config({"retriever": {"type": "bm25"}}).fit(chat())
    assert "e2" not in plain.search("Where is Ann's new job?", k=3)["event_id"].to_list()  # "At the zoo." alone


def test_the_service_refuses_a_representation_it_cannot_keep_in_step(tmp_path):
    config = tmp_path / "ctx.toml"
    config.write_text('[representation]\nbefore = 1\n[retriever]\ntype = "bm25"\n')
    app = create_app({"database_url": f"sqlite:///{tmp_path / 'm.db'}", "outbox_dir": str(tmp_path / "o"),
                      "secret_key": "k", "pipeline_config": str(config)})
    with pytest.raises(ValueError, match="representation"):
        _ = app.extensions["memkit"]["memory"].index
