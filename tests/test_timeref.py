"""Relative times resolved against a post's own time; dates read back from text; the
answer metrics of the harness (LoCoMo's token F1, gold recall, date accuracy, declines)."""

from datetime import date, datetime

import pytest

from memkit.evaluation.answers import declined, f1_multi, f1_score, gold_recall, score_answer
from memkit.language.timeref import dates_in, months_ahead, question_window, read_span, resolve

THU = date(2023, 5, 25)  # a Thursday
SUN = date(2023, 5, 28)


@pytest.mark.parametrize(
    "text, ref, start, end, written",
    [
        ("I went yesterday", date(2023, 5, 8), date(2023, 5, 7), date(2023, 5, 7), "7 May 2023"),
        ("last night was fun", THU, date(2023, 5, 24), date(2023, 5, 24), "24 May 2023"),
        ("the day before yesterday", THU, date(2023, 5, 23), date(2023, 5, 23), "23 May 2023"),
        ("see you tomorrow", THU, date(2023, 5, 26), date(2023, 5, 26), "26 May 2023"),
        ("I did it today", THU, THU, THU, "25 May 2023"),
        ("three days ago", THU, date(2023, 5, 22), date(2023, 5, 22), "22 May 2023"),
        (
            "last week I gave a talk",
            date(2023, 6, 9),
            date(2023, 6, 2),
            date(2023, 6, 8),
            "the week before 9 June 2023",
        ),
        ("next week", THU, date(2023, 5, 26), date(2023, 6, 1), "the week after 25 May 2023"),
        ("two weeks ago", THU, date(2023, 5, 8), date(2023, 5, 14), "the week of 11 May 2023"),
        (
            "last Saturday",
            THU,
            date(2023, 5, 20),
            date(2023, 5, 20),
            "the Saturday before 25 May 2023",
        ),
        (
            "last Thursday",
            THU,
            date(2023, 5, 18),
            date(2023, 5, 18),
            "the Thursday before 25 May 2023",
        ),
        (
            "Last Fri I took the kids",
            date(2023, 7, 15),
            date(2023, 7, 14),
            date(2023, 7, 14),
            "the Friday before 15 July 2023",
        ),
        ("next Monday", THU, date(2023, 5, 29), date(2023, 5, 29), "the Monday after 25 May 2023"),
        (
            "last weekend",
            THU,
            date(2023, 5, 20),
            date(2023, 5, 21),
            "the weekend before 25 May 2023",
        ),
        (
            "last weekend",
            SUN,
            date(2023, 5, 20),
            date(2023, 5, 21),
            "the weekend before 28 May 2023",
        ),
        (
            "two weekends ago",
            date(2023, 7, 17),
            date(2023, 7, 8),
            date(2023, 7, 9),
            "2 weekends before 17 July 2023",
        ),
        (
            "this weekend",
            THU,
            date(2023, 5, 27),
            date(2023, 5, 28),
            "the weekend after 25 May 2023",
        ),
        ("last month", date(2023, 1, 10), date(2022, 12, 1), date(2022, 12, 31), "December 2022"),
        (
            "camping next month",
            date(2023, 12, 5),
            date(2024, 1, 1),
            date(2024, 1, 31),
            "January 2024",
        ),
        ("two months ago", date(2023, 3, 31), date(2023, 1, 1), date(2023, 1, 31), "January 2023"),
        ("last year", THU, date(2022, 1, 1), date(2022, 12, 31), "2022"),
        ("ten years ago", THU, date(2013, 1, 1), date(2013, 12, 31), "2013"),
    ],
)
def test_relative_expressions_resolve_against_the_post(text, ref, start, end, written):
    found = resolve(text, datetime.combine(ref, datetime.min.time()))
    assert len(found) == 1
    span = found[0].span
    assert (span.start, span.end, span.text) == (start, end, written)
    assert (
        read_span(span.text).start == start and read_span(span.text).end == end
    )  # written, then read back


def test_vague_or_absent_expressions_resolve_to_nothing():
    for text in ["a few days ago", "recently", "the other day", "lasting memories", "I ran a race"]:
        assert resolve(text, THU) == []
    for text in ["he buys a crime novel every Friday", "each Tuesday morning we run"]:
        assert resolve(text, THU) == []  # what happens every week happened on no one day
    assert resolve("The Wednesday group is smaller", THU) == []  # a group, not a day
    # the edinburgh-pumpkin-driving-test walk: "every Tuesday and Thursday at 5" glossed "Thursday =
    # Thursday 24 September"; days listed after "every" all come back, days of a past weekend do not
    for text in ["Lessons every Tuesday and Thursday at 5", "each Monday, Wednesday or Friday"]:
        assert resolve(text, THU) == []
    assert [m.phrase for m in resolve("We went on Saturday and Sunday", THU)] == [
        "on Saturday",
        "Sunday",
    ]
    assert [m.phrase for m in resolve("Yesterday was fine, but last week was rough", THU)] == [
        "Yesterday",
        "last week",
    ]


@pytest.mark.parametrize(
    "text, start, end",
    [
        ("7 May 2023", date(2023, 5, 7), date(2023, 5, 7)),
        ("19 January, 2023", date(2023, 1, 19), date(2023, 1, 19)),
        ("On May 7, 2023 we met", date(2023, 5, 7), date(2023, 5, 7)),
        ("The sunday before 25 May 2023", date(2023, 5, 21), date(2023, 5, 21)),
        ("The week of 23 August 2023", date(2023, 8, 20), date(2023, 8, 26)),
        ("February, 2023", date(2023, 2, 1), date(2023, 2, 28)),
        ("Since 2016", date(2016, 1, 1), date(2016, 12, 31)),
    ],
)
def test_read_span_reads_written_dates(text, start, end):
    span = read_span(text)
    assert (span.start, span.end) == (start, end)


def test_read_span_none_and_yearless_days():
    assert (
        read_span("4 years") is None
        and read_span("her mother") is None
        and read_span("31 February 2023") is None
    )
    birthday = read_span("13 August")
    assert not birthday.year_known
    assert read_span("On 13 August 2021 they celebrated").matches(birthday)
    assert not read_span("On 14 August 2021").matches(birthday)


def test_a_date_matches_only_at_least_as_precisely():
    week = read_span("The week before 9 June 2023")
    assert read_span("the week before 9 June 2023").matches(week)
    assert read_span("5 June 2023").matches(week)  # a day inside the week
    assert not read_span("June 2023").matches(week)  # vaguer than the gold
    assert not read_span("9 June 2023").matches(week)  # the post's own day, outside the week
    assert read_span("8 May 2022").matches(read_span("2022"))


def test_locomo_token_f1_and_gold_recall():
    assert (
        f1_score("The self-care is important", "self-care is important") == 1.0
    )  # articles, case, punctuation
    assert f1_score("running races", "she runs a race") == pytest.approx(
        2 * 1.0 * (2 / 3) / (1 + 2 / 3)
    )  # stems
    assert f1_score("nothing shared", "self-care") == 0.0
    assert f1_multi("pottery, camping", "camping, painting") == pytest.approx(
        0.5
    )  # each gold part, best answer part
    assert gold_recall("On 7 May 2023 Caroline went to the group", "7 May 2023") == 1.0
    assert gold_recall("On 7 May 2023", "7 June 2023") == pytest.approx(2 / 3)


def test_score_answer_by_category():
    temporal = score_answer(
        "On 7 May 2023 — “yesterday” in what Caroline wrote", "7 May 2023", "temporal"
    )
    assert temporal["date_ok"] == 1.0 and temporal["gold_recall"] == 1.0
    assert score_answer("On 8 May 2023 Caroline wrote", "7 May 2023", "temporal")["date_ok"] == 0.0
    adversarial = score_answer("I have no information available on that: ...", None, "adversarial")
    assert (
        adversarial["declined"] == 1.0 and adversarial["f1"] != adversarial["f1"]
    )  # NaN: not scored
    assert declined("That is not mentioned anywhere") and not declined(
        "On 7 May 2023 Caroline wrote"
    )
    assert (
        score_answer("x", "Likely yes; she said so", "open-domain")["gold_recall"] == 0.0
    )  # gold cut at ';'


# -- time in questions -----------------------------------------------------------------------
ASKED = datetime(2026, 11, 20, 10, 0)  # a Friday in November


@pytest.mark.parametrize(
    "question, start, end, rest",
    [
        ("What happened last May?", date(2026, 5, 1), date(2026, 5, 31), "What happened?"),
        ("anything in March?", date(2026, 3, 1), date(2026, 3, 31), "anything?"),
        ("What did Ann do in November?", date(2026, 11, 1), date(2026, 11, 30), "What did Ann do?"),
        (
            "what happened last November?",
            date(2025, 11, 1),
            date(2025, 11, 30),
            "what happened?",
        ),  # the one before this
        (
            "what did Sam post two weeks ago?",
            date(2026, 11, 3),
            date(2026, 11, 9),
            "what did Sam post?",
        ),
        ("what did we do last weekend?", date(2026, 11, 14), date(2026, 11, 15), "what did we do?"),
        ("What happened this year?", date(2026, 1, 1), date(2026, 12, 31), "What happened?"),
        (
            "what did Ann say yesterday?",
            date(2026, 11, 19),
            date(2026, 11, 19),
            "what did Ann say?",
        ),
        (
            "Who bought tickets on Saturday?",
            date(2026, 11, 14),
            date(2026, 11, 14),
            "Who bought tickets?",
        ),
        ("what happened on 10 February?", date(2026, 2, 10), date(2026, 2, 10), "what happened?"),
        (
            "what happened on 24 December?",
            date(2025, 12, 24),
            date(2025, 12, 24),
            "what happened?",
        ),  # not yet this year
        ("What did we do in May 2025?", date(2025, 5, 1), date(2025, 5, 31), "What did we do?"),
        ("what happened on 7 May 2023?", date(2023, 5, 7), date(2023, 5, 7), "what happened?"),
        ("what happened last summer?", date(2026, 6, 1), date(2026, 8, 31), "what happened?"),
        ("in 2025 what did Tom do?", date(2025, 1, 1), date(2025, 12, 31), "what did Tom do?"),
    ],
)
def test_a_question_names_a_window_counted_back_from_the_time_of_asking(question, start, end, rest):
    w = question_window(question, ASKED)
    assert (w.span.start, w.span.end) == (start, end)
    assert w.rest(question) == rest


def test_questions_without_a_window_and_windows_that_need_the_time_of_asking():
    for q in [
        "When did we fly to Lisbon?",
        "May I ask who came?",
        "How did the march go?",
        "What's the plan?",
    ]:
        assert question_window(q, ASKED) is None
    assert (
        question_window("What happened last May?") is None
    )  # no time of asking: nothing to count back from
    dated = question_window("What did Caroline do in May 2023?")
    assert (dated.span.start, dated.span.end) == (date(2023, 5, 1), date(2023, 5, 31))


def test_a_day_without_a_year_belongs_to_the_year_around_the_post():
    posted = datetime(2026, 2, 14)
    assert read_span(
        "we started tearing out the old kitchen on 10 February", ref=posted
    ).start == date(2026, 2, 10)
    assert read_span("booked for 28 December", ref=datetime(2026, 1, 3)).start == date(2025, 12, 28)
    assert read_span("see you on 3 January", ref=datetime(2025, 12, 20)).start == date(2026, 1, 3)
    spans = dates_in(
        "We got back last night; the builders start on 10 March.", datetime(2026, 2, 22)
    )
    assert [(s.start, s.end) for s in spans] == [
        (date(2026, 2, 21), date(2026, 2, 21)),
        (date(2026, 3, 10), date(2026, 3, 10)),
    ]


@pytest.mark.parametrize(
    "text, posted, want",
    [
        (
            "So... I broke my wrist at 5-a-side on Saturday. Cast for 6 weeks",
            date(2026, 7, 13),
            date(2026, 7, 11),
        ),
        (
            "Back from Porto, never been so tired. The boat trip on Saturday!!!",
            date(2026, 5, 18),
            date(2026, 5, 16),
        ),
        (
            "Little girl, Rosie, born Sunday morning, both doing well",
            date(2026, 9, 8),
            date(2026, 9, 6),
        ),
        (
            "First rehearsal with him Thursday at Berkeley Studios",
            date(2026, 7, 28),
            date(2026, 7, 30),
        ),
        ("Heads up I'm off from Monday for two weeks", date(2026, 10, 20), date(2026, 10, 26)),
        (
            "Got the keys!! Flat in Chorlton, moving in on the 1st",
            date(2026, 7, 19),
            date(2026, 8, 1),
        ),
        ("I got the job! Start on the 20th", date(2026, 4, 2), date(2026, 4, 20)),
        ("The parcel came on the 3rd, finally", date(2026, 4, 2), date(2026, 3, 3)),
        (  # the choir-couch-to-5k-damp walk: a plan in the present, posted on a Thursday
            "My landlord finally agreed to fix the damp, the plumber comes on Thursday",
            date(2026, 5, 7),
            date(2026, 5, 14),
        ),
        ("Not yet, he didn't turn up Thursday", date(2026, 5, 16), date(2026, 5, 14)),
        (  # the camping-clutch-beagle walk: read as 22 September ("moved", elsewhere, is past)
            "Since the trip moved I can come after all! My brother flies home on the 22nd.",
            date(2026, 10, 9),
            date(2026, 10, 22),
        ),
        (  # the chess-wooden-boat-japanese walk: 10 November ("Glazed", elsewhere, is past)
            "Glazed twenty mugs in a blue called Tenmoku Sky, they come out of the kiln on "
            "Tuesday.",
            date(2026, 11, 14),
            date(2026, 11, 17),
        ),
        ("The twins land at Heathrow on Friday", date(2026, 11, 24), date(2026, 11, 27)),
        (  # the brighton-ride-black-belt-iceland walk: read as 21 October ("rebooked" is past)
            "Northern lights tour cancelled, too cloudy. They rebooked us for the 21st.",
            date(2026, 11, 19),
            date(2026, 11, 21),
        ),
        ("The landlord moved it to Friday.", date(2026, 11, 18), date(2026, 11, 20)),
        ("We saw them on the 21st!", date(2026, 11, 22), date(2026, 11, 21)),
        ("I booked it on Friday.", date(2026, 11, 18), date(2026, 11, 13)),  # booked then
    ],
)
def test_a_bare_weekday_or_day_points_back_in_the_past_tense_and_forward_otherwise(
    text, posted, want
):
    found = resolve(text, posted)
    assert [(m.span.start, m.span.end) for m in found] == [(want, want)]


@pytest.mark.parametrize(
    "text, posted, want",
    [
        (  # a newcomer's walk: read as 14 October ("was" is past tense)
            "Dinner for Dev moved to Friday 20 November, Lardo was fully booked on the 14th",
            date(2026, 11, 6),
            date(2026, 11, 14),
        ),
        ("October 12 we arrive, we left on the 20th", date(2026, 11, 6), date(2026, 10, 20)),
        ("Party on 3 December, drinks after on the 4th", date(2026, 11, 6), date(2026, 12, 4)),
    ],
)
def test_a_bare_day_takes_the_month_named_nearest_it_in_the_post(text, posted, want):
    found = [m.span.start for m in resolve(text, posted) if m.phrase.startswith("on the")]
    assert found == [want]


def test_a_when_answer_takes_the_time_next_to_what_was_asked():
    from memkit.answer import build_answerer

    post = {
        "event_id": "x",
        "text": "Last week at the Leeds office, start the London job on the 30th",
        "speaker": "Leo",
        "created_at": datetime(2026, 3, 16),
    }
    span, how = build_answerer(None).date_of(post["text"], post, "when did he start the new job?")
    assert span.start == date(2026, 3, 30) and how == "“on the 30th”"


@pytest.mark.parametrize(
    "question, want, how",
    [
        ("when does her new role start?", date(2026, 10, 1), "as written"),
        ("When was Nina promoted?", date(2026, 9, 5), "“today”"),
    ],
)
def test_a_written_date_competes_with_a_relative_one(question, want, how):
    """A second newcomer's walk: "when does her new role start?" was answered
    with the day of "today"; the written date follows the words asked about."""
    from memkit.answer import build_answerer

    post = {
        "event_id": "x",
        "text": "Promoted to senior designer today, starting the new role on 1 October",
        "speaker": "Nina",
        "created_at": datetime(2026, 9, 5, 12),
    }
    span, found = build_answerer(None).date_of(post["text"], post, question)
    assert (span.start, found) == (want, how)


def test_a_month_without_a_year_is_a_plan_only_when_it_is_ahead_of_the_post():
    posted = datetime(2026, 6, 14)
    plan = "Saving for the book festival in August"
    assert resolve(plan, posted) == []  # only a window question's posts read bare months
    [m] = months_ahead(plan, posted)
    assert (m.start, m.end) == (date(2026, 8, 1), date(2026, 8, 31))
    assert months_ahead("We will fly to Rome in March", posted)[0].start == date(2027, 3, 1)
    assert months_ahead("We went to Rome in September", posted) == ()  # past tense
    assert months_ahead("Holiday booked for June 2027", posted) == ()  # a written date
    for text, start in [
        ("last May was great", date(2026, 5, 1)),
        ("see you next January", date(2027, 1, 1)),
        ("this August we fly", date(2026, 8, 1)),
    ]:
        assert [m.span.start for m in resolve(text, posted)] == [start]


def test_a_weekday_with_a_plural_time_of_day_recurs_and_names_no_day():
    """The camping-clutch-beagle walk: "a pottery class on Tuesday evenings" was read as the Tuesday
    before the post; "on Tuesday evening" is still one day."""
    assert resolve("Started a pottery class on Tuesday evenings", date(2026, 10, 4)) == []
    [one] = resolve("Started a pottery class on Tuesday evening", date(2026, 10, 4))
    assert one.span.start == date(2026, 9, 29)
