"""Changed facts (memkit/ranking/changes.py): a later post that says a plan moved answers for it."""

from __future__ import annotations

from datetime import datetime

import pytest

from memkit.core.items import Item
from memkit.core.tables import events_frame
from memkit.language import examples_of
from memkit.language.en.changes import CHANGES
from memkit.pipeline import Pipeline
from memkit.ranking.changes import changed_fact, newest_first
from tests.helpers import ranking


def at(day):
    return datetime(2026, 3, day, 12)


POSTS = {
    "old": Item(
        "old", "Dinner for Mum is on Thursday 19 March at the Grill", "Ann", created_at=at(1)
    ),
    "new": Item(
        "new", "Mum's dinner moved to Thursday 26 March, same place", "Ann", created_at=at(5)
    ),
    "other": Item("other", "We moved the sofa into the hall", "Bo", created_at=at(9)),
    "far": Item("far", "Booked the Grill for Mum, dinner on 19 March", "Cy", created_at=at(2)),
}


def items_of(ids):
    return [POSTS[i] for i in ids if i in POSTS]


def test_a_later_post_saying_the_plan_moved_replaces_the_first():
    run = ranking(["old", "other", "far", "new"], [0.8, 0.5, 0.4, 0.2])
    # "new" shares "dinner" and "mum" with the first post, says "moved" and is later; the
    # sofa post says "moved" too but shares nothing; "far" is later but says no change
    assert changed_fact(run, items_of) == ("new", "old")
    out = newest_first(run, ("new", "old"))
    assert out["event_id"].to_list() == ["new", "old", "other", "far"]
    assert out["score"].to_list() == [0.8, 0.8, 0.5, 0.4]
    assert out["rank"].to_list() == [1, 2, 3, 4]


def test_pushing_a_plan_back_is_a_change_and_numbers_are_not_compared():
    """ "Pushing November back" says the plan moved (the train suite's book club); a change
    names a new day or time, so the two posts' numbers differ by nature and only their
    words are compared."""
    from memkit.ranking.changes import _words

    assert _words("Quiz at 7pm, £120 for the table in 2026, round 3") == {"quiz", "table", "round"}
    plan = Item(
        "plan",
        "November pick: Nine Winters in Kestrel Bay. meeting Thursday 20 Nov, same place",
        "Harriet",
        created_at=datetime(2025, 10, 12, 12),
    )
    moved = Item(
        "moved",
        "Pushing November back a week so Yusuf can come, now Thursday 27 Nov, Tipsy Quill",
        "Harriet",
        created_at=datetime(2025, 11, 1, 12),
    )
    posts = {"plan": plan, "moved": moved}
    run = ranking(["plan", "moved"], [0.7, 0.3])
    assert changed_fact(run, lambda ids: [posts[i] for i in ids]) == ("moved", "plan")


def test_words_shared_by_chance_are_not_the_same_thing():
    long = (
        "The amusement park trip Lisa was looking forward to was cancelled because of a "
        "storm, and she spent the whole day indoors feeling very disappointed and bored"
    )
    posts = {
        "first": Item("first", "Lisa felt happy when her teacher praised her drawing of the park",
                      "Ann", created_at=at(1)),
        "later": Item("later", long, "Ann", created_at=at(6)),
        "short": Item("short", "Grill night moved to Friday", "Bo", created_at=at(6)),
    }  # fmt: skip
    # two shared words ("Lisa", "park") of the shorter post's eight: chance
    assert (
        changed_fact(ranking(["first", "later"], [0.8, 0.7]), lambda ids: [posts[i] for i in ids])
        is None
    )
    posts["first"] = POSTS["old"]  # one shared word ("grill") is never enough
    assert (
        changed_fact(
            ranking(["old", "short"], [0.8, 0.7]),
            lambda ids: [posts.get(i, POSTS.get(i)) for i in ids],
        )
        is None
    )


def test_a_change_posted_after_the_planned_day_is_about_another_time():
    """ "Book club is off this month" (10 May) does not change "Book club moved to Tuesday 10
    February" (29 January): a plan for a day is changed before that day."""
    posts = {
        "feb": Item("feb", "Book club moved to Tuesday 10 February, Carys can't do the Thursday",
                    "Bea", created_at=datetime(2026, 1, 29, 12)),
        "may": Item("may", "Book club is off this month, my landlord is doing the boiler. "
                    "Let's do June", "Carys", created_at=datetime(2026, 5, 10, 10)),
        "soon": Item("soon", "Book club is off, sorry, Carys is ill", "Bea",
                     created_at=datetime(2026, 2, 9, 10)),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    assert changed_fact(ranking(["feb", "may"], [0.8, 0.7]), of) is None
    assert changed_fact(ranking(["feb", "may", "soon"], [0.8, 0.7, 0.6]), of) == ("soon", "feb")


def test_a_later_day_booked_again_after_the_planned_one_is_a_change():
    """The edinburgh-pumpkin-driving-test walk: "when is her driving test?" was answered with the
    failed test of 3 November, where "Rebooked the test for 1 December" came two days after it. A
    change posted after the planned day counts when it names a later day, and "rebooked" redoes the
    first post's "booked"."""
    posts = {
        "test": Item("test", "Booked my driving test for 3 November. Lessons with Bernie "
                     "every Tuesday and Thursday at 5.", "Grace",
                     created_at=datetime(2026, 9, 30, 17)),
        "again": Item("again", "Rebooked the test for 1 December. Bernie says I'm ready, it "
                      "was nerves.", "Grace", created_at=datetime(2026, 11, 5, 10)),
        "after": Item("after", "Rebooked the test, sadly it was nerves.", "Grace",
                      created_at=datetime(2026, 11, 5, 10)),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    run = ranking(["test", "again"], [0.8, 0.4])
    assert changed_fact(run, of, query="when is her driving test?") == ("again", "test")
    # no later day named: a post after the planned day is about another time
    run = ranking(["test", "after"], [0.8, 0.4])
    assert changed_fact(run, of, query="when is her driving test?") is None


def test_a_change_to_another_sentence_of_the_post_does_not_answer():
    """ "When are her lessons?" asks of the first post's second sentence; the rebooked test
    changes its first. A change naming none of the question's words that shares more with
    the sentences the question does not ask of is not its answer; one naming the thing
    asked, or sharing more with its sentence, is ("Cardiff half" for "marathon")."""
    posts = {
        "test": Item("test", "Booked my driving test for 3 November. Lessons with Bernie "
                     "every Tuesday and Thursday at 5.", "Grace",
                     created_at=datetime(2026, 9, 30, 17)),
        "again": Item("again", "Rebooked the test for 1 December. Bernie says I'm ready.",
                      "Grace", created_at=datetime(2026, 10, 5, 10)),
        "half": Item("half", "Signed up for the Cardiff half marathon on 15 November. "
                     "Training starts Monday.", "Tom", created_at=datetime(2026, 10, 5, 9)),
        "moved": Item("moved", "The race organisers moved the Cardiff half to 22 November "
                      "because of the bridge works.", "Tom",
                      created_at=datetime(2026, 10, 26, 9)),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    lessons = ranking(["test", "again"], [0.8, 0.4])
    assert changed_fact(lessons, of, query="When are her lessons?") is None
    assert changed_fact(lessons, of, query="When is the test?") == ("again", "test")
    race = ranking(["half", "moved"], [0.8, 0.4])
    assert changed_fact(race, of, query="When is Tom's marathon?") == ("moved", "half")


def test_a_when_question_whose_first_post_names_no_day_reads_the_first_that_does():
    """The hen-do-quiz-night-kingsdown walk: "When is it?" (the hen do) ranked Sadie's account "The
    hen do. Fourteen of us went to Bath in the end" first, posted after the plan "hen do booked:
    Bath, 7 November" and its change "Jess moved the hen do to 14 November": a change is looked for
    after the first post that names a day and is about the same thing (the choir-couch-to-5k-damp
    walk's "When is the parkrun?" keeps its blog, which shares nothing with a concert)."""
    posts = {
        "blog": Item("blog", "The hen do. Fourteen of us went to Bath in the end, a week later "
                     "than planned.", "Sadie", created_at=datetime(2026, 11, 16, 12)),
        "plan": Item("plan", "hen do booked: Bath, 7 November, spa day then cocktails. my "
                     "sister Jess is organising", "Sadie", created_at=datetime(2026, 10, 2, 19)),
        "moved": Item("moved", "Jess moved the hen do to 14 November, the spa double booked us",
                      "Sadie", created_at=datetime(2026, 10, 25, 10)),
        "concert": Item("concert", "Choir concert on Saturday 23 May at St Giles", "Nina",
                        created_at=datetime(2026, 5, 1, 10)),
        "moves": Item("moves", "Bad news: the choir concert moves to Sunday 31 May", "Nina",
                      created_at=datetime(2026, 5, 12, 10)),
        "parkrun": Item("parkrun", "My goal is the Meadows parkrun in the summer.", "Priya",
                        created_at=datetime(2026, 5, 22, 10)),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    hen = ranking(["blog", "plan", "moved"], [0.5, 0.1, 0.07])
    assert changed_fact(hen, of, query="When is it?") == ("moved", "plan")
    assert changed_fact(hen, of, kind="who", query="Who organised it?") is None
    run = ranking(["parkrun", "concert", "moves"], [0.5, 0.2, 0.1])
    assert changed_fact(run, of, query="When is the parkrun?") is None


def test_an_earlier_change_or_an_undated_first_post_changes_nothing():
    posts = {
        "a": Item("a", "Mum's dinner moved to Thursday 26 March", "Ann", created_at=at(1)),
        "b": Item("b", "Dinner for Mum moved, postponed again", "Ann", created_at=at(5)),
    }

    def of(ids):
        return [posts[i] for i in ids]

    assert changed_fact(ranking(["b", "a"], [0.9, 0.8]), of) is None
    posts["a"] = Item("a", "Dinner for Mum on 19 March", "Ann")
    assert changed_fact(ranking(["a", "b"], [0.9, 0.8]), of) is None


@pytest.fixture(scope="module")
def floor():
    rows = [
        ("Kim", "2026-11-02T09:30",
         "Planning Dev's birthday dinner for Saturday 14 November at Lardo"),
        ("Kim", "2026-11-06T14:10",
         "Dinner for Dev moved to Friday 20 November, Lardo was fully booked on the 14th"),
        ("Dev", "2026-11-07T10:00", "Aww thanks Kim, Friday the 20th is perfect"),
        ("Dev", "2026-10-06T19:30",
         "Cello teacher says I'm ready for my first recital in December"),
        ("Dev", "2026-11-18T20:40", "Recital is on 12 December at St Mary's hall, 7pm"),
        ("Lou", "2026-10-26T20:15", "We climbed Catbells this morning, misty but amazing"),
    ]  # fmt: skip
    return served(rows)


def served(rows) -> Pipeline:
    """The served default over one chat feed of (who, when, text) posts, ids e0, e1, ..."""
    events = events_frame(
        {"event_id": f"e{i}", "floor_id": "f", "block_id": "f/chat", "block_type": "feed",
         "user_id": who, "text": text, "created_at": when, "tags": []}
        for i, (who, when, text) in enumerate(rows)
    )  # fmt: skip
    return Pipeline.from_config().fit(events)


@pytest.mark.parametrize("changed_facts", [True, False])
def test_the_served_default_answers_with_the_new_date(floor, changed_facts):
    """A newcomer's walk: the old date won, and then Kim's post was declined
    as "nothing Dev posted says so" (the decline model's two-person rule)."""
    floor.changed_facts = changed_facts
    try:
        res = floor.query(
            "When is Dev's birthday dinner?",
            user_id=f"u-{changed_facts}",
            floor_ids=["f"],
            authors=["Kim", "Dev", "Lou"],
            now=datetime(2026, 11, 26),
        )
    finally:
        floor.changed_facts = True
    shown = [it.event_id for it in res.items]
    if changed_facts:
        assert shown[0] == "e1" and "e0" not in shown
        assert res.answer.startswith("On 20 November 2026")
    else:  # without the rule the first post states the old plan
        assert shown[0] == "e0" and "20 November" not in res.answer.split("—")[0]


@pytest.mark.parametrize("row, text", examples_of(CHANGES))
def test_the_change_rows_read_their_examples(row, text):
    assert next(r for r in CHANGES if r.name == row).search(text)


@pytest.mark.parametrize("row, text", [(r.name, t) for r in CHANGES for t in r.counterexamples])
def test_the_change_rows_leave_their_near_misses_alone(row, text):
    assert not next(r for r in CHANGES if r.name == row).search(text)


def test_a_where_question_takes_only_a_change_that_names_a_new_place():
    """ "Where did Lucy go for half term?" (a walk): the cottage in Whitby was cancelled and
    she went to Bamburgh instead, so the newer post answers it. A change of day ("Let's do
    Friday instead") leaves the place in the first post: a where-question keeps it."""
    posts = {
        "plan": Item(
            "plan", "Booked the cottage in Whitby for half term, 26 to 30 October", "Lucy",
            created_at=at(1),
        ),
        "place": Item(
            "place", "Whitby cottage cancelled, the owner had a flood. Going to Bamburgh "
            "instead, same dates", "Lucy", created_at=at(6),
        ),
        "day": Item(
            "day", "The Whitby cottage is booked from Friday instead", "Lucy", created_at=at(4)
        ),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    assert changed_fact(ranking(["plan", "place"], [0.8, 0.3]), of, kind="where") == (
        "place",
        "plan",
    )
    assert changed_fact(ranking(["plan", "day"], [0.8, 0.3]), of, kind="where") is None
    assert changed_fact(ranking(["plan", "day"], [0.8, 0.3]), of) == ("day", "plan")


@pytest.mark.parametrize(
    "plan, change, decoy",
    [
        # The lanterns-gig-bakery-book-club walk: "Where is the book club meeting?" quoted Lucy's
        # flat, though Lucy had posted that it moves to Omar's place.
        (
            ("Book club next: The Remains of the Day. Meeting at Lucy's flat on 9 April", "Dana"),
            ("My boiler broke, so book club moves to Omar's place, same date", "Lucy"),
            ("We move to Leeds in spring, book club will miss me", "Theo"),
        ),
        # The oaxaca-choir-allotment walk: "Where is it now?" (Olu's concert) quoted the first
        # venue; a change naming the new place outright needs to share only the plan's thing
        # ("concert")
        (
            ("Choir concert is on 21 November at St Mary's church, I'm singing the solo", "Olu"),
            ("New venue for the concert is the Union Chapel in Islington, same date", "Olu"),
            ("The new place is smaller, the concert hall is round the corner", "Dev"),
        ),
    ],
)
def test_a_plan_moved_to_a_new_place_settles_where_but_not_when(plan, change, decoy):
    """A later post that moves the plan to someone's place or names its new venue settles
    a where-question; a when-question keeps the first post, which holds the date ("same
    date"); a post that only mentions a move or a new place of someone's own does not."""
    posts = {
        name: Item(name, text, who, created_at=at(day))
        for name, (text, who), day in zip(
            ("plan", "change", "decoy"), (plan, change, decoy), (1, 4, 5)
        )
    }
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    assert changed_fact(ranking(["plan", "change"], [0.8, 0.3]), of, kind="where") == (
        "change",
        "plan",
    )
    assert changed_fact(ranking(["plan", "change"], [0.8, 0.3]), of, kind="when") is None
    assert changed_fact(ranking(["plan", "decoy"], [0.8, 0.3]), of, kind="where") is None


def test_the_served_default_answers_where_with_the_new_place():
    """A newcomer's walk: "Where did Lucy go for half term?" quoted the cottage in
    Whitby, cancelled a month before; the post saying she went to Bamburgh instead ranked
    second. Now it is quoted, and the replaced post is not shown."""
    rows = [
        ("Lucy", "2026-10-01T21:10",
         "Booked the cottage in Whitby for the half term week, 26 to 30 October"),
        ("Maya", "2026-10-03T10:30", "First dig at the allotment today, found a rhubarb crown"),
        ("Lucy", "2026-10-14T08:40", "Cello exam is on 12 December, grade one"),
        ("Lucy", "2026-10-22T19:05",
         "Whitby cottage cancelled, the owner had a flood. Going to Bamburgh instead, same dates"),
        ("Raj", "2026-10-27T18:00", "Climbing wall moved to Fridays from next week"),
    ]  # fmt: skip
    res = served(rows).query(
        "Where did Lucy go for half term?",
        user_id="u",
        floor_ids=["f"],
        authors=["Lucy", "Maya", "Raj"],
        now=datetime(2026, 11, 26),
    )
    shown = [it.event_id for it in res.items]
    assert shown[0] == "e3" and "e0" not in shown
    assert "Bamburgh" in res.answer


def test_a_possessive_names_the_same_person_or_thing():
    """A newcomer's walk: "Sam and I are going to Lisbon" and "Lisbon trip is off, Sam's work
    moved a deadline. We're going to Porto in February instead" share Lisbon and Sam;
    "My mum arrives on 3 December" and "Mum's flight changed, she now lands on 5
    December" share mum and December. Without reading "Sam's" as Sam each shared one."""
    posts = {
        "lisbon": Item("lisbon", "Sam and I are going to Lisbon from 14 to 18 November", "Jo",
                       created_at=datetime(2026, 10, 20, 8)),
        "porto": Item("porto", "Lisbon trip is off, Sam's work moved a deadline. We're going "
                      "to Porto in February instead", "Jo", created_at=datetime(2026, 11, 2, 10)),
        "osaka": Item("osaka", "My mum arrives from Osaka on 3 December and stays for three "
                      "weeks", "Aiko", created_at=datetime(2026, 10, 12, 20)),
        "lands": Item("lands", "Mum's flight changed, she now lands on 5 December at "
                      "Manchester", "Aiko", created_at=datetime(2026, 11, 25, 19)),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    where = changed_fact(ranking(["lisbon", "porto"], [0.8, 0.5]), of, kind="where")
    assert where == ("porto", "lisbon")
    assert changed_fact(ranking(["osaka", "lands"], [0.8, 0.4]), of) == ("lands", "osaka")


def test_a_question_about_a_change_finds_the_post_that_states_it():
    """A newcomer's walk: "Why did they cancel Lisbon?" quoted the plan ("Sam and I are going
    to Lisbon"), which shares more of its words, not the post saying the trip is off and
    why. A post stating a change, posted after the first and sharing a word of the
    question besides the change's, goes first; an undated first post (a document) or a
    question about no change keeps the order."""
    from memkit.ranking.changes import stated_change_first

    posts = {
        "plan": Item("plan", "Sam and I are going to Lisbon from 14 to 18 November", "Jo",
                     created_at=datetime(2026, 10, 20, 8)),
        "bike": Item("bike", "Moved the bike into the shed", "Jo",
                     created_at=datetime(2026, 10, 25, 8)),
        "off": Item("off", "Lisbon trip is off, Sam's work moved a deadline. We're going to "
                    "Porto in February instead", "Jo", created_at=datetime(2026, 11, 2, 10)),
        "doc": Item("doc", "Lisbon is the capital of Portugal", "", created_at=None),
    }  # fmt: skip
    of = lambda ids: [posts[i] for i in ids]  # noqa: E731
    run = ranking(["plan", "bike", "off"], [0.8, 0.6, 0.3])
    first = stated_change_first(run, of, "Why did they cancel Lisbon?")
    assert first["event_id"].to_list() == ["off", "plan", "bike"]
    assert stated_change_first(run, of, "Where are they going?")["event_id"].to_list() == [
        "plan", "bike", "off"]  # fmt: skip
    undated = ranking(["doc", "off"], [0.8, 0.3])
    assert stated_change_first(undated, of, "Why was Lisbon cancelled?")["event_id"][0] == "doc"


# The greyhound-half-marathon-supper-club walk: Lena's booking, then a change of who goes, then
# (made up) a change of day
LAKES = {
    "plan": Item(
        "plan", "Booked a cottage in the Lake District for 21 November, three nights, "
        "with my sister Eva", "Lena", created_at=datetime(2026, 10, 12, 13),
    ),
    "who": Item(
        "who", "Eva cannot come to the Lake District any more, so I am taking my friend "
        "Jo instead", "Lena", created_at=datetime(2026, 10, 27, 11),
    ),
    "day": Item(
        "day", "The Lake District cottage is now from Friday instead", "Lena",
        created_at=datetime(2026, 10, 28, 9),
    ),
}  # fmt: skip


def lakes(ids):
    return [LAKES[i] for i in ids]


def test_instead_without_a_day_does_not_settle_when():
    """The greyhound-half-marathon-supper-club walk: "When is Lena going to the Lake District?" was
    answered "On 27 October" from "Eva cannot come to the Lake District any more, so I am taking my
    friend Jo instead" (a change of who goes, posted on 27 October), not from the booking "for 21
    November". A change with "instead" settles a when-question only where it names a day."""
    assert changed_fact(ranking(["plan", "who"], [0.8, 0.8]), lakes) is None
    assert changed_fact(ranking(["plan", "day"], [0.8, 0.3]), lakes) == ("day", "plan")


def test_a_change_naming_someone_new_instead_settles_who():
    """The greyhound-half-marathon-supper-club walk: "Who is she going with?" quoted the booking
    "with my sister Eva", though Lena had posted that Eva cannot come and she is taking Jo
    instead."""
    assert changed_fact(ranking(["plan", "who"], [0.8, 0.6]), lakes, kind="who") == (
        "who",
        "plan",
    )
    assert changed_fact(ranking(["plan", "day"], [0.8, 0.6]), lakes, kind="who") is None
