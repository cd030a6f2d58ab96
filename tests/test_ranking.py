"""The ranking steps (memkit/ranking): a config lists them, ``ask`` and ``search`` run them
in that order through the same code, a step of one's own plugs in by name."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from memkit.config import load_config
from memkit.config.model import validate_config
from memkit.core.errors import ValidationError
from memkit.core.tables import events_frame
from memkit.pipeline import Pipeline, Query
from memkit.ranking import Ranked, Step, register_step
from memkit.ranking.changes import to_top

POSTS = [
    "The allotment shed lock was broken again last night",
    "Carrots at the allotment were eaten by something overnight",
    "The allotment committee meets on Tuesday about the shed",
    "Bought new seed potatoes for the allotment beds",
]
BM25 = {"name": "bm25-steps", "retriever": {"type": "bm25"}}

SEEN: list[str] = []  # the steps that ran, in order (the steps below record themselves)


class Mark:
    """A step that only records that it ran."""

    def __init__(self, name: str):
        self.name = name

    def apply(self, ranked, question, posts):
        SEEN.append(self.name)
        return ranked


class LastFirst:
    """A step that puts the last post of the ranking first."""

    name = "tests-last-first"

    def apply(self, ranked, question, posts):
        run = ranked.run
        if run.height < 2:
            return ranked
        return replace(ranked, run=to_top(run, [run["event_id"][-1]]))


register_step("tests-mark-a")(lambda pipeline: Mark("tests-mark-a"))
register_step("tests-mark-b")(lambda pipeline: Mark("tests-mark-b"))
register_step("tests-last-first")(lambda pipeline: LastFirst())


def events():
    return events_frame(
        {"event_id": f"e{i}", "floor_id": "f", "block_id": "f/chat", "block_type": "feed",
         "user_id": "ann", "text": text, "created_at": f"2026-03-0{i + 1}T12:00:00+00:00",
         "tags": []}
        for i, text in enumerate(POSTS)
    )  # fmt: skip


def pipeline(steps=None) -> Pipeline:
    config = {**BM25, **({"ranking": {"steps": steps}} if steps is not None else {})}
    return Pipeline.from_config(config).fit(events())


def first_asked(p: Pipeline, text: str) -> str:
    return p.ask(Query(text, summary=False)).run["event_id"][0]


def first_searched(p: Pipeline, text: str) -> str:
    run = p.search(pl.DataFrame({"query_id": ["q"], "text": [text]}))
    return run.sort("rank")["event_id"][0]


def test_the_steps_a_config_leaves_unnamed_follow_from_its_sections():
    assert pipeline().step_names() == ["relevance", "replies"]
    assert Pipeline.from_config().step_names() == ["relevance", "changed_facts", "replies"]
    reader = Pipeline.from_config(load_config("reader"))
    assert reader.step_names() == ["reader", "relevance", "changed_facts", "replies"]
    # the reader's training asks for the candidates before the reader: no reader step
    assert Pipeline.from_config(load_config("reader"), reader=False).step_names()[0] == "relevance"


def test_the_steps_a_config_lists_run_in_that_order():
    p = pipeline(["tests-mark-b", "relevance", "tests-mark-a", "replies"])
    assert p.step_names() == ["tests-mark-b", "relevance", "tests-mark-a", "replies"]
    SEEN.clear()
    p.ask(Query("What ate the carrots?"))
    assert SEEN == ["tests-mark-b", "tests-mark-a"]
    SEEN.clear()
    p.search(pl.DataFrame({"query_id": ["q"], "text": ["What ate the carrots?"]}))
    assert SEEN == ["tests-mark-b", "tests-mark-a"]


def test_a_step_of_ones_own_changes_the_ranking_on_both_paths_alike():
    question = "Who broke the shed lock at the allotment?"
    plain = pipeline()
    assert first_asked(plain, question) == first_searched(plain, question) == "e0"
    mine = pipeline(["relevance", "tests-last-first", "replies"])
    last = plain.ask(Query(question, summary=False)).run["event_id"][-1]
    assert last != "e0"
    assert first_asked(mine, question) == first_searched(mine, question) == last
    assert "tests-last-first" in mine.stages()  # eval's tables name it


def test_a_step_object_can_be_given_to_the_pipeline():
    p = Pipeline.from_config(BM25)
    p.ranking = ["relevance", LastFirst()]
    p.fit(events())
    assert isinstance(p.steps[1], Step)
    assert first_asked(p, "Who broke the shed lock at the allotment?") != "e0"


def test_the_default_written_out_answers_as_the_default():
    """``[ranking] steps`` with the served default's own steps is the served default."""
    listed = load_config("default")
    listed["ranking"] = {"steps": ["relevance", "changed_facts", "replies"]}
    served, written = Pipeline.from_config(), Pipeline.from_config(listed)
    assert written.stages() == served.stages()
    for p in (served, written):
        p.fit(events())
    for text in ("What ate the carrots?", "When does the committee meet?"):
        a, b = served.ask(Query(text)), written.ask(Query(text))
        assert a.run.equals(b.run) and a.answer == b.answer


@pytest.mark.parametrize(
    "ranking, field, says",
    [
        ({"steps": ["relevance", "rerank"]}, "ranking.steps.1", "got 'rerank'"),
        ({"steps": ["replies", "replies"]}, "ranking.steps.1", "listed twice"),
        ({"steps": [3]}, "ranking.steps.0", "expected a string"),
        ({}, "ranking.steps", "required"),
        ({"steps": ["relevance"], "order": 1}, "ranking.order", "unknown setting"),
    ],
)
def test_a_step_list_it_cannot_run_is_an_error_naming_the_field(ranking, field, says):
    with pytest.raises(ValidationError) as err:
        validate_config({**BM25, "ranking": ranking})
    assert err.value.field == field and says in err.value.message


def test_a_step_list_must_agree_with_the_sections_that_turn_steps_on():
    default = load_config("default")  # changed_facts = true
    with pytest.raises(ValidationError, match="leaves out 'changed_facts'") as err:
        validate_config({**default, "ranking": {"steps": ["relevance", "replies"]}})
    assert err.value.field == "ranking.steps"
    with pytest.raises(ValidationError, match="lists 'reader', which needs a \\[reader\\]"):
        validate_config({**BM25, "ranking": {"steps": ["reader", "relevance"]}})
    with pytest.raises(ValidationError) as err:  # a pipeline given a name it does not know
        Pipeline(Pipeline.from_config(BM25).retriever, steps=["relevance", "nope"])
    assert err.value.field == "ranking.steps.1"


def test_a_ranked_question_says_what_settles_it():
    run = pl.DataFrame(schema={"event_id": pl.Utf8})
    assert Ranked(run).settled_by is None
    assert Ranked(run, change=("new", "old"), reply="r").settled_by == "new"
    assert Ranked(run, reply="r").settled_by == "r"
    assert not Ranked(run, relevant=False).open and Ranked(run, relevant=False, batch=True).open
    assert not Ranked(run, listing=True, batch=True).open


def test_the_steps_see_the_question_as_it_was_searched():
    """A follow-up whose first posts do not tie it to its topic is searched as a new topic;
    the question is read again then, so the steps (and the result) see what was searched:
    "When is the first honey?", after questions about Aisha's bees, was searched alone, and
    the question the pipeline returned still leaned on "Aisha's allotment bees"."""
    from memkit.evaluation.walks import ASKED, WALKS, served_pipeline, walk_events

    stem = "allotment-paper-boats-girona"
    events = walk_events(WALKS / f"{stem}-posts.txt")
    people = list(dict.fromkeys(events["user_id"].to_list()))
    p = served_pipeline().fit(events)
    for line in (WALKS / f"{stem}-questions.txt").read_text().splitlines()[:7]:
        text = line.split("|", 1)[0]
        res = p.query(text, user_id="w", floor_ids=["f"], now=ASKED, k=3, authors=people)
        assert res.question.read_as == res.effective_query
        assert res.question.reading.effective_query == res.effective_query
    assert text == "When is the first honey?" and res.carried.kind == "new"
