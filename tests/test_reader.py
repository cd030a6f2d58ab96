"""The reader (memkit/ranking/reader.py): passages as it reads them, which texts it reads, and the
packaged model: it loads offline, agrees with the float model it was exported from, and
tells an answer from a near miss in a pipeline."""

import json
from datetime import datetime

import numpy as np
import pytest

from memkit.core.text import chunks
from memkit.question.kinds import is_question
from memkit.ranking.reader import MAX_CHUNKS, READER_DIR, Reader, ReaderStage, best_chunks, passage
from tests.helpers import ranking


def test_chunks_keep_whole_sentences_within_the_word_budget():
    text = " ".join(f"Sentence number {i} has five words." for i in range(20))
    parts = chunks(text, max_words=12)
    assert all(len(p.split()) <= 12 for p in parts)
    assert " ".join(parts) == text  # nothing lost, nothing repeated
    long = "word " * 80
    assert chunks(long.strip() + ". Short one.", max_words=12) == [long.strip() + ".", "Short one."]
    assert chunks("") == [] and chunks(None) == []


def test_passage_names_who_and_when():
    assert passage("We drove to Zion", "Mia", "3 May 2026") == "Mia, 3 May 2026: We drove to Zion"
    assert passage("We drove to Zion") == "We drove to Zion"


def test_best_chunks_keep_those_sharing_most_words_in_reading_order():
    parts = [f"filler text {i}" for i in range(10)] + ["the boiler repair cost 180 pounds"]
    keep = best_chunks("how much did the boiler repair cost?", parts, limit=MAX_CHUNKS)
    assert len(keep) == MAX_CHUNKS and 10 in keep and keep == sorted(keep)


@pytest.mark.parametrize(
    "text, asked",
    [
        ("When did Mia drive to Zion?", True),
        ("how much was the cabin", True),
        ("and the vet bill?", True),
        ("Vitamin D deficiency causes rickets in children.", False),
        ("I went hiking with my dog yesterday", False),
    ],
)
def test_is_question(text, asked):
    assert is_question(text) is asked


def test_stage_fuses_and_reorders_only_its_candidates():
    stage = ReaderStage(candidates=2, coef=[1.0, 0.0], intercept=0.0)
    # with the reader's weight at 0 the fused probability is the ranker's own
    assert np.allclose(stage.fuse(np.array([0.2, 0.7]), np.array([5.0, -5.0])), [0.2, 0.7])
    stage = ReaderStage(candidates=2, coef=[0.0, 1.0], intercept=0.0, min_probability=0.5)
    run = ranking(["a", "b", "c"], [0.9, 0.8, 0.7])
    stage.post_logits = lambda question, items: np.array([-3.0, 2.0])  # b answers, a does not
    out = stage.rerank("q?", run, lambda ids: [{"event_id": i, "text": i} for i in ids])
    assert out["event_id"].to_list() == ["b", "a", "c"]
    assert out["rank"].to_list() == [1, 2, 3]
    scores = out["score"].to_list()
    assert scores == sorted(scores, reverse=True)  # the unread post sits below the read ones
    assert stage.answers(out)
    stage.post_logits = lambda question, items: np.array([-3.0, -2.0])
    assert not stage.answers(
        stage.rerank("q?", run, lambda ids: [{"event_id": i, "text": i} for i in ids])
    )


def test_packaged_reader_agrees_with_the_model_it_was_exported_from(monkeypatch):
    """reader.json keeps the float model's logits on a fixed sample, written when it was
    trained (memkit train reader): the int8 file loaded offline gives the same order and
    logits within 0.2 on average, 0.75 at most (int8 weights; 0.12 and 0.51
    when it was shipped)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Reader().available  # the model ships with the package
    info = json.loads((READER_DIR / "reader.json").read_text())
    sample = info["sample"]
    reader = Reader()
    got = np.array([reader.logits(s["question"], [s["passage"]])[0] for s in sample])
    want = np.array([s["float_logit"] for s in sample])
    assert np.abs(got - want).mean() < 0.2 and np.abs(got - want).max() < 0.75
    assert np.corrcoef(got, want)[0, 1] > 0.98


def test_packaged_reader_prefers_the_answer_to_the_near_miss():
    reader = Reader()
    p = reader.probabilities(
        "What is Priya's brother called?",
        [
            "Priya, 3 May 2026: My brother Arjun lands on Friday, can't wait to see him",
            "Priya, 4 May 2026: We adopted a kitten called Miso, she is tiny",
        ],
    )
    assert p[0] > p[1]


POSTS = [
    ("e1", "Priya", "2026-05-01T10:00:00", "We adopted a kitten called Miso, she is tiny"),
    ("e2", "Sam", "2026-05-02T09:00:00", "Dinner for Mum is on Thursday 19 March at the Grill"),
    ("e3", "Priya", "2026-05-03T18:00:00", "Miso knocked a plant off the windowsill last night"),
    ("e4", "Sam", "2026-05-04T12:00:00", "The boiler engineer replaced the pump, 180 pounds"),
    ("e5", "Lee", "2026-05-05T12:00:00", "Ran the park run in 24 minutes this morning"),
]


def _pipeline(**reader):
    from memkit.config import CONFIG_DIR, load_config, resolve_config
    from memkit.core.tables import events_frame
    from memkit.pipeline import Pipeline

    config = load_config(resolve_config("default-fresh"))  # the packaged MiniLM, no training
    config["reader"] = {**load_config(CONFIG_DIR / "reader.toml")["reader"], **reader}
    events = events_frame(
        {
            "event_id": i,
            "floor_id": "f",
            "block_id": "f/chat",
            "block_type": "feed",
            "user_id": u,
            "created_at": t,
            "text": x,
        }
        for i, u, t, x in POSTS
    )
    return Pipeline.from_config(config).fit(events)


def test_the_served_pipeline_reads_questions_and_scores_with_the_fused_probability():
    pipe = _pipeline()
    res = pipe.query("What is the name of Priya's kitten?", user_id="u", now=datetime(2026, 6, 1))
    assert res.question.asks and res.question.kind == "what"
    assert res.items[0].event_id == "e1" and res.relevant and not res.written.declined
    assert 0.0 < res.items[0].score < 1.0
    assert "Miso" in res.answer


def test_when_no_post_is_likely_enough_the_answer_declines_and_shows_nothing():
    pipe = _pipeline(min_probability=0.999)
    res = pipe.query("How fast was Lee's park run?", user_id="u", now=datetime(2026, 6, 1))
    assert not res.relevant and res.written.declined and res.items == []
    assert res.run.height > 0  # the ranking is kept for eval; nothing is shown
    # a text that is not a question is left to the ranker and its own gate
    assert not pipe.reader.applies("Ran the park run this morning")


def test_a_very_long_question_is_read_not_refused():
    reader = Reader()
    long = "what about " + " ".join(["supercalifragilistic"] * 300) + "?"
    assert reader.logits(long, ["Tom, 5 May 2026: we drove to Zion"]).shape == (1,)


def test_eval_reads_a_pair_once_and_finds_its_logit_in_the_cache(tmp_path, monkeypatch):
    """With remember_logits (memkit eval), a (question, passage) logit is kept in the
    embedding cache under the model file's hash; the next read of the pair runs no model
    and gives the same number. Without it (the service) nothing is written."""
    import memkit.ranking.reader as reader_module

    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reader_module, "REMEMBER", False)  # an in-process eval may have set it
    reader = Reader()
    runs = []
    real = reader._run
    monkeypatch.setattr(reader, "_run", lambda q, ps: runs.append(len(ps)) or real(q, ps))
    question, passages = "Who organised the trip?", ["Mia organised the Zion trip", "Rain all day"]
    plain = reader.logits(question, passages)
    assert not (tmp_path / "embeddings.sqlite").exists()  # the service's reads stay off disk
    monkeypatch.setattr(reader_module, "REMEMBER", True)
    first = reader.logits(question, passages)
    again = reader.logits(question, [passages[1], "A third post", passages[0]])
    assert runs == [2, 2, 1]  # the second call read only the new passage
    assert np.array_equal(first, plain)
    assert again[0] == first[1] and again[2] == first[0]
    assert reader.name.startswith("reader/") and len(reader.name) == len("reader/") + 16
