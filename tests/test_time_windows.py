"""Time windows in questions, through the pipeline (no service): the window filters what
is returned (posted then, or saying it happened then), a question naming only a window
lists its posts, eval asks dated questions as the service does, and the window is echoed."""

from datetime import datetime, timezone

import polars as pl
import pytest

from memkit.core.tables import events_frame
from memkit.pipeline import Query
from tests.helpers import served_pipeline

pytestmark = pytest.mark.slow

ASKED = datetime(2026, 11, 20, 10, tzinfo=timezone.utc)
POSTS = [  # (id, author, text, posted)
    (
        "k1",
        "Claire",
        "We started tearing out the old kitchen on 10 February, dust everywhere",
        "2026-02-14T09:00:00",
    ),
    ("k2", "Ben", "The new kitchen units arrived today, all twelve boxes", "2026-03-20T18:00:00"),
    ("b1", "Claire", "Booked the boiler service for next spring", "2026-05-02T08:00:00"),
    ("b2", "Ben", "The boiler engineer says the pump is fine", "2026-05-12T08:00:00"),
    ("g1", "Jade", "The garden fence blew down in the storm last night", "2026-05-19T07:30:00"),
    ("g2", "Jade", "Fence is back up, cost us 300 pounds", "2026-06-03T12:00:00"),
    ("t1", "Jade", "Saving up for the Edinburgh book festival in August", "2026-06-14T10:00:00"),
    ("x1", "Ben", "Booked the train to York for Christmas with the kids", "2026-10-02T19:00:00"),
    ("x2", "Claire", "Where is everyone going this weekend?", "2026-10-03T09:00:00"),
    ("x3", "Ben", "Going to the coast with the kids on Saturday", "2026-10-03T09:10:00"),
]


@pytest.fixture(scope="module")
def pipeline():
    events = events_frame(
        [
            {
                "event_id": i,
                "floor_id": "f",
                "block_id": "f/chat",
                "block_type": "feed",
                "user_id": u,
                "text": t,
                "created_at": at,
            }
            for i, u, t, at in POSTS
        ]
    )
    return served_pipeline().fit(events)


def ask(p, q, **kw):
    return p.ask(Query(q, floor_ids=["f"], now=ASKED, authors=["Claire", "Ben", "Jade"], **kw))


def test_a_window_keeps_posts_of_those_days_and_posts_saying_something_happened_then(pipeline):
    res = ask(pipeline, "what happened to the kitchen on 10 February?")
    assert [i.event_id for i in res.items] == ["k1"]  # posted on the 14th, says the 10th
    assert res.carried.window["from"] == "2026-02-10" and res.carried.window["source"] == "question"
    may = ask(pipeline, "what did Ben say about the boiler in May?")
    assert {i.event_id for i in may.items} <= {"b1", "b2", "g1"} and may.items[0].event_id == "b2"


def test_a_question_naming_only_a_window_lists_its_posts_and_whose(pipeline):
    res = ask(pipeline, "What happened last May?")
    assert {i.event_id for i in res.items} == {"b1", "b2", "g1"} and {
        i.score for i in res.items
    } == {1.0}
    assert res.answer.startswith("3 posts from May 2026")
    two = ask(pipeline, "What happened last May?", k=2)  # shows two, counts all three
    assert len(two.items) == 2 and two.answer.startswith("3 posts from May 2026 (and 1 more)")
    jade = ask(pipeline, "what did Jade post in May?")
    assert [i.event_id for i in jade.items] == ["g1"]
    # Ben posted nothing in June: none of Jade's June posts is his (the name was read only
    # against the window's posts, so it named no one there and every post was listed)
    ben = ask(pipeline, "anything from Ben in June?")
    assert ben.items == [] and ben.written.declined, ben.answer
    nothing = ask(pipeline, "What happened last August?")
    assert nothing.items == [] and "August 2026" in nothing.answer and nothing.written.declined


def test_a_question_about_a_plan_in_a_window_with_no_posts_finds_the_plan(pipeline):
    """Nothing was posted in August, but "Where is Jade going in August?" asks for a plan,
    not for what happened then: it is searched as any question, and her June post saying
    "in August" is of the window (a month without a year: the nearest from the post on)."""
    trip = ask(pipeline, "Where is Jade going in August?")
    assert trip.items and trip.items[0].event_id == "t1" and "Edinburgh" in trip.answer
    assert ask(pipeline, "What happened last August?").items == []


def test_a_window_no_post_is_of_is_searched_as_words_too(pipeline):
    """Christmas is to come and nothing is posted of it; "for Christmas" names what Ben
    booked, so the question is searched with the phrase kept: his October post comes first,
    not the posts that share "going" and "kids" without it."""
    trip = ask(pipeline, "Where is Ben going for Christmas?")
    assert trip.items and trip.items[0].event_id == "x1" and "York" in trip.answer


def test_eval_asks_a_dated_question_as_the_service_does(pipeline):
    frame = pl.DataFrame(
        {
            "query_id": ["dated", "plain"],
            "text": ["what happened in June 2026?", "garden fence"],
            "floor_ids": [["f"], ["f"]],
        }
    )
    run = pipeline.search(frame, 5)
    assert set(run.filter(pl.col("query_id") == "dated")["event_id"]) == {"g2", "t1"}
    assert run.filter(pl.col("query_id") == "plain")["event_id"][0] in {"g1", "g2"}


def test_a_carried_window_yields_to_a_question_about_another_time(pipeline):
    """After "What happened last May?", a follow-up about something of May stays in May;
    one about something that is not there ("the kitchen", torn out in February) is not
    held to May's posts."""
    pipeline.conversations.forget("w")
    ask_as = dict(user_id="w", floor_ids=["f"], now=ASKED, authors=["Claire", "Ben", "Jade"])
    pipeline.query("What happened last May?", **ask_as)
    fence = pipeline.query("what blew down in the storm?", **ask_as)
    assert fence.carried.window["source"] == "previous turn" and fence.items[0].event_id == "g1"
    pipeline.conversations.forget("w")
    pipeline.query("What happened last May?", **ask_as)
    kitchen = pipeline.query("when did Claire and Ben tear out the kitchen?", **ask_as)
    assert (
        kitchen.carried.window["source"] == "previous turn"
    )  # read as a follow-up: May carried ...
    assert kitchen.items[0].event_id == "k1"  # ... but nothing of May is about it


def test_a_window_outside_the_requests_time_filter_is_no_error(pipeline):
    """ "what did Ben say about the boiler in May?" asked with a filter from June on: the
    question's days and the filter's do not meet; the answer is the filter's posts, not a 400."""
    from memkit.retrieval import Filters

    june = Filters(time_from=datetime(2026, 6, 1, tzinfo=timezone.utc))
    res = ask(pipeline, "what did Ben say about the boiler in May?", filters=june)
    assert all(i.created_at >= june.time_from for i in res.items)


def test_a_month_named_without_a_year_is_of_a_window_only_as_a_plan():
    from datetime import date

    from memkit.core.items import Item
    from memkit.pipeline import _in_days

    aug = (date(2026, 8, 1), date(2026, 8, 31))
    plan = Item(
        "p", "Saving for the book festival in August", "Jade", created_at=datetime(2026, 6, 14)
    )
    past = Item("q", "We rode rollercoasters in August", "Jade", created_at=datetime(2026, 10, 2))
    assert _in_days(plan, *aug) and not _in_days(past, *aug)


@pytest.mark.parametrize(
    "question,month",
    [
        ("What is Priya doing in January?", "January 2027"),  # ahead: a present -ing
        ("Where will we be in May?", "May 2027"),
        ("What is happening next March?", "March 2027"),
        ("What is Aiko doing in November?", "November 2026"),  # this month
        ("What was Priya doing in January?", "January 2026"),  # a past tense looks back
        ("What happened in January?", "January 2026"),
        ("Is there anything in January?", "January 2026"),  # "anything" is no -ing verb
    ],
)
def test_a_question_that_looks_ahead_reads_a_bare_month_as_the_next(question, month):
    from memkit.language.timeref import question_window

    assert question_window(question, datetime(2026, 11, 27)).span.text == month


def test_what_someone_is_doing_next_month_is_their_plan():
    """A newcomer's walk, asked on 27 November 2026: "What is Priya doing in January?" was read
    as January 2026 and found nothing; her post of 8 November says she runs the coding club
    from January."""
    events = events_frame(
        [
            {"event_id": i, "floor_id": "f", "block_id": "f/chat", "block_type": "feed",
             "user_id": u, "text": t, "created_at": at}
            for i, u, t, at in [
                ("p1", "Priya", "Started my new job at the Leeds library today",
                 "2026-09-03T08:15:00"),
                ("p2", "Priya", "The library is starting a Saturday coding club for kids, I'll be "
                 "running it from January", "2026-11-08T09:00:00"),
                ("p3", "Jonas", "Skiing in January was brilliant, Tignes had fresh snow",
                 "2026-02-02T18:00:00"),
            ]
        ]
    )  # fmt: skip
    p = served_pipeline().fit(events)
    res = p.ask(
        Query(
            "What is Priya doing in January?",
            floor_ids=["f"],
            now=datetime(2026, 11, 27, 9, tzinfo=timezone.utc),
            authors=["Priya", "Jonas"],
        )
    )
    assert res.items and res.items[0].event_id == "p2" and "coding club" in res.answer
