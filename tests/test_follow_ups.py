"""Follow-up questions: the carry contextualizer, and a conversation through the API."""

from datetime import datetime, timedelta, timezone

import pytest

from memkit.core.errors import ValidationError
from memkit.pipeline import Pipeline
from memkit.question.conversation import (
    CarryContext,
    TopicContext,
    Turn,
    confirms_topic,
    leans_on_context,
)
from server import create_app
from tests.service_fixtures import user


def turns(*queries):
    return [Turn(query=q, effective_query=q) for q in queries]


def chat_items(at, posts: dict) -> dict:
    """Posts of one chat block, by id, from {id: (speaker, minutes after ``at``, text)}."""
    from datetime import timedelta

    return {
        e: {"event_id": e, "speaker": who, "block_id": "chat",
            "created_at": at + timedelta(minutes=m), "text": text}
        for e, (who, m, text) in posts.items()
    }  # fmt: skip


def topic_turns(*specs):
    """Turns from (question, topic, words the answer quoted)."""
    from memkit.question.conversation import content_words

    return [
        Turn(
            query=q,
            effective_query=q,
            words=content_words(q),
            answer_words=content_words(a),
            topic=t,
            quoted=[f"e{i}"],
        )
        for i, (q, t, a) in enumerate(specs)
    ]


def test_a_follow_up_carries_the_current_topic_not_the_first_question():
    c = TopicContext(weight=0.4)
    history = topic_turns(
        ("When did we fly to Lisbon?", 0, "Flight to Lisbon is booked for 7 March"),
        ("Who bought the Coldplay tickets?", 1, "Sam bought the Coldplay tickets for the concert"),
    )
    r = c.read("and how did they get home?", history, names=["Sam", "Mia"])
    assert r.kind == "follow-up" and r.topic == 1
    assert r.words == ["bought", "Coldplay", "tickets"]  # the topic's question, not Lisbon's
    assert r.variants == [
        ("and how did they get home?", pytest.approx(0.6)),
        ("and how did they get home? bought Coldplay tickets", 0.4),
    ]
    assert r.posts == ["e1"]  # what the last answer quoted
    # Nothing of its own: it is about what the answer quoted, so the quoted words come along.
    bare = c.read("when was that?", history, names=["Sam", "Mia"])
    assert {"concert", "Coldplay"} <= set(bare.words) and bare.kind == "follow-up"


def test_a_question_naming_its_own_subject_starts_a_topic_or_returns_to_one():
    c = TopicContext()
    history = topic_turns(
        ("When did we fly to Lisbon?", 0, "Flight to Lisbon is booked for 7 March"),
        ("Who bought the Coldplay tickets?", 1, "Sam bought the Coldplay tickets"),
    )
    new = c.read("What did Tom's sister name her puppy?", history)
    assert (new.kind, new.topic, new.words, len(new.variants)) == ("new", 2, [], 1)
    back = c.read("Which airline flew us to Lisbon?", history)
    assert (back.kind, back.topic, back.words) == ("return", 0, [])
    same = c.read("Where did Sam buy the Coldplay tickets?", history, names=["Sam"])
    assert (same.kind, same.topic) == ("alone", 1)
    assert (
        c.read("Who bought the Coldplay tickets?", []).kind == "new"
    )  # a new user: nothing to lean on


def test_what_about_a_new_thing_is_a_new_subject_unless_the_posts_tie_it_to_the_topic():
    c = TopicContext()
    history = topic_turns(("Who organised the trip to Zion?", 0, "Mia organised the trip to Zion"))
    puppy = c.read("what about the puppy?", history)
    assert puppy.kind == "follow-up" and puppy.new_subject == ["puppy"]
    assert not confirms_topic(puppy, "My sister got a new puppy last week", 0.4)
    assert confirms_topic(
        puppy, "My sister got a new puppy last week", 0.05
    )  # not sure of it: the topic's
    assert c.new_topic(puppy, history).kind == "new" and c.new_topic(puppy, history).variants == [
        ("what about the puppy?", 1.0)
    ]
    cost = c.read("and what about the cost?", history)
    assert confirms_topic(cost, "The Zion cabin cost us 400 dollars for three nights", 0.4)
    assert (
        c.read("what did it cost?", history).new_subject == []
    )  # a pronoun: about the topic, whatever it names


def test_carry_adds_the_first_and_previous_questions_words():
    c = CarryContext(weight=0.4, recent=1)
    history = turns(
        "What are the most common types of breast cancer?", "How likely is it to spread?"
    )
    assert c.carried("How deadly is it?", history) == [
        "common",
        "types",
        "breast",
        "cancer",
        "likely",
        "spread",
    ]
    assert c.read("How deadly is it?", history).variants == [
        ("How deadly is it?", pytest.approx(0.6)),
        ("How deadly is it? common types breast cancer likely spread", 0.4),
    ]
    assert c.read("How deadly is it?", []).variants == [
        ("How deadly is it?", 1.0)
    ]  # a new user: no context
    assert CarryContext(recent=0, first=False).carried("How deadly is it?", history) == []


def test_detection_keeps_self_contained_questions_as_asked():
    c = CarryContext(detect=True)
    history = turns("Where did Caroline go hiking last summer?")
    assert leans_on_context("What about her sister?", c.short) and leans_on_context(
        "And in winter?", c.short
    )
    assert not leans_on_context("When did Melanie paint the sunrise over the lake?", c.short)
    assert (
        c.contextualize("When did Melanie paint the sunrise over the lake?", history)
        == "When did Melanie paint the sunrise over the lake?"
    )
    assert "Caroline" in c.contextualize("What about her sister?", history)
    with pytest.raises(ValidationError, match="contextualizer.weight"):
        CarryContext(weight=1.5)
    with pytest.raises(ValidationError, match="contextualizer"):
        Pipeline.from_config(
            {"retriever": {"type": "bm25"}, "contextualizer": {"type": "carry", "colour": 1}}
        )


def test_idle_time_ends_a_conversation():
    p = Pipeline.from_config(
        {"retriever": {"type": "bm25"}, "contextualizer": {"type": "carry", "idle_minutes": 10}}
    )
    assert p.conversations.idle_expiry == timedelta(minutes=10)
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    from tests.helpers import make_events

    p.fit(make_events(30, seed=2))
    p.query("Tell me about the dog", user_id="u", now=t0)
    assert (
        "dog"
        in p.query("Is it friendly?", user_id="u", now=t0 + timedelta(minutes=5)).effective_query
    )
    assert (
        p.query("Is it friendly?", user_id="u", now=t0 + timedelta(minutes=30)).effective_query
        == "Is it friendly?"
    )


POSTS = [
    "Biscuit's checkup at the vet is on Friday.",
    "Rex's checkup at the vet is on Monday.",
    "Biscuit loves chasing seagulls on the beach.",
    "The lighthouse on the cape is open again for tours.",
    "Rex learned to fetch the newspaper.",
]


def test_a_conversation_through_the_api(tmp_path):
    """The third turn only makes sense with the first; a new user sees none of it; two
    users' conversations never mix."""
    config = tmp_path / "carry.toml"
    config.write_text(
        '[retriever]\ntype = "bm25"\n[contextualizer]\ntype = "carry"\nweight = 0.5\nrecent = 1\n'
    )
    app = create_app(
        {
            "database_url": f"sqlite:///{tmp_path / 'm.db'}",
            "outbox_dir": str(tmp_path / "o"),
            "secret_key": "k",
            "pipeline_config": str(config),
        }
    )
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    cy, _, _ = user(c, app, "Cy")
    c.post(f"/floors/{floor}/public", headers=ann)
    ids = [
        c.post(
            f"/floors/{floor}/blocks/{blocks['feed']}/events", headers=ann, json={"text": t}
        ).get_json()["event_id"]
        for t in POSTS
    ]
    uid = {
        h["Authorization"]: c.get("/auth-service/profile", headers=h).get_json()["profile"][
            "user_id"
        ]
        for h in (ann, bo, cy)
    }

    def ask(h, q, meta="1"):
        r = c.post(
            "/agent/memory/query",
            headers=h,
            json={
                "user_id": uid[h["Authorization"]],
                "query": q,
                "floor_ids": [floor],
                "include_metadata": meta,
            },
        )
        assert r.status_code == 200, r.get_json()
        return r.get_json()

    first = ask(ann, "How is Biscuit doing?")
    assert (
        first["metadata"]["context_turns"] == 0
        and first["metadata"]["effective_query"] == "How is Biscuit doing?"
    )
    ask(bo, "How is Rex doing?")  # another user's conversation, interleaved
    ask(ann, "Is the lighthouse open?")
    third = ask(ann, "When is the checkup?")
    assert (
        third["metadata"]["context_turns"] == 2
        and "Biscuit" in third["metadata"]["effective_query"]
    )
    assert "Rex" not in third["effective_query"]
    assert third["items"][0]["event_id"] == ids[0]  # Biscuit's checkup, not Rex's
    bos = ask(bo, "When is the checkup?")
    assert "Rex" in bos["effective_query"] and "Biscuit" not in bos["effective_query"]
    assert bos["items"][0]["event_id"] == ids[1]
    fresh = ask(cy, "When is the checkup?")  # a new user starts with no context
    assert (
        fresh["effective_query"] == "When is the checkup?"
        and fresh["metadata"]["context_turns"] == 0
    )
    assert "metadata" not in ask(cy, "When is the checkup?", meta="0")
    app.extensions["memkit"]["engine"].dispose()


TRIP = [
    "Maya organised our trip to Zion National Park.",
    "The coffee grinder broke again.",
    "The Zion trip cost us 900 dollars in total.",
    "The tomatoes are finally ripe.",
    "Tom's new bike cost 400 dollars.",
]


def test_the_served_default_carries_a_follow_up(app):
    """The served default (both stores): the second turn ("and how much did it cost?") finds
    the Zion post only with the first turn's words; a new user asking it gets what the bare
    question finds; the third turn, self-contained, gets its own answer."""
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    cy, _, _ = user(c, app, "Cy")
    c.post(f"/floors/{floor}/public", headers=ann)
    ids = [
        c.post(
            f"/floors/{floor}/blocks/{blocks['feed']}/events", headers=ann, json={"text": t}
        ).get_json()["event_id"]
        for t in TRIP
    ]

    def ask(h, q):
        uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
        r = c.post(
            "/agent/memory/query",
            headers=h,
            json={"user_id": uid, "query": q, "floor_ids": [floor], "include_metadata": "1"},
        )
        assert r.status_code == 200, r.get_json()
        return r.get_json()

    assert ask(ann, "Who organised the trip to Zion?")["items"][0]["event_id"] == ids[0]
    follow = ask(ann, "and how much did it cost?")
    assert (
        follow["metadata"]["pipeline"] == "default"
        and follow["metadata"]["contextualizer"]["type"] == "topic"
    )
    assert "Zion" in follow["metadata"]["effective_query"]
    assert follow["items"][0]["event_id"] == ids[2]
    fresh = ask(
        cy, "and how much did it cost?"
    )  # a new user: no context, the bare question's best match
    assert (
        fresh["metadata"]["context_turns"] == 0
        and fresh["effective_query"] == "and how much did it cost?"
    )
    assert not fresh["items"] or fresh["items"][0]["event_id"] != ids[2]
    assert ask(ann, "What bike did Tom buy?")["items"][0]["event_id"] == ids[4]


def test_a_bare_follow_up_refers_to_all_the_answer_showed_of_its_post():
    """ "how much were they?" after "Who got the Glastonbury tickets?": the answer quoted the
    sentence "Got two tickets!!" and showed the chat line whole, "£355 each" with it; the
    turn keeps the words of everything shown, the quoted sentence's first."""
    from memkit.core.tables import events_frame
    from tests.helpers import served_pipeline

    posts = [
        ("nina", "2026-07-02T20:00:00", "I'll have three browsers open for the resale"),
        ("nina", "2026-07-03T10:05:00", "Got two tickets!! £355 each, Ravi you owe me"),
        ("ravi", "2026-07-03T10:20:00", "Legend. Sending the money tonight"),
        ("sam", "2026-07-04T09:00:00", "Booked the train to Whitby, £96 return"),
    ]
    rows = [
        {
            "event_id": f"e{i}",
            "floor_id": "f",
            "block_id": "f/chat",
            "block_type": "feed",
            "user_id": who,
            "text": text,
            "created_at": at,
        }
        for i, (who, at, text) in enumerate(posts)
    ]
    p = served_pipeline().fit(events_frame(rows))
    now = datetime(2026, 7, 10, tzinfo=timezone.utc)
    first = p.query("Who got the Glastonbury tickets?", user_id="u", floor_ids=["f"], now=now)
    assert first.items[0]["event_id"] == "e1"
    turn = p.conversations.history("u", now)[-1]
    assert "355" in turn.answer_words
    follow = p.query("how much were they?", user_id="u", floor_ids=["f"], now=now)
    assert follow.items[0]["event_id"] == "e1"


@pytest.mark.parametrize(
    "first_question,follow_up,answer",
    [
        # the follow-up asks something new (its own word, "cost"), and the last answer's
        # post holds the amount it asks for
        ("What bike did Jonas buy?", "How much did it cost?", "e4"),
        # its own word ("commute") is in the last answer's chat line
        ("Where does Priya work?", "How long is her commute?", "e0"),
    ],
)
def test_a_follow_up_the_last_answers_post_still_answers_keeps_it(
    first_question, follow_up, answer
):
    """A newcomer's walk: a follow-up asking something new of its topic takes
    the last answer's posts down (``repeat_weight``), which lost "How much did it cost?"
    to another post with a price when the bike's own post said "350 euros"."""
    from memkit.core.tables import events_frame
    from tests.helpers import served_pipeline

    posts = [
        ("Priya", "chat", "2026-09-03T08:15:00",
         "Morning all! Started my new job at the Leeds library today, the commute "
         "on the 19 bus is 40 minutes"),
        ("Jonas", "chat", "2026-09-03T09:02:00",
         "Congrats Priya! I'm still looking for a second-hand road bike, budget is"
         " about 400 euros"),
        ("Bram", "chat", "2026-09-06T10:00:00",
         "Anyone fancy climbing on Saturday? I booked the wall at Depot for 10am"),
        ("Priya", "chat", "2026-09-06T10:05:00",
         "Count me in for climbing, I need new shoes though, mine split last week"),
        ("Jonas", "chat", "2026-09-10T20:45:00",
         "Found a bike! A blue Cannondale CAAD10 for 350 euros from a guy in "
         "Utrecht"),
        ("Priya", "chat", "2026-09-20T16:20:00",
         "Adopted a cat from the shelter! She's called Pickle and she is three "
         "years old"),
        ("Jonas", "blog", "2026-09-25T19:00:00",
         "First long ride on the new bike: 85 km from Utrecht to Amersfoort and "
         "back along the river. My legs were dead after 60 km and I stopped for "
         "apple pie in Soest."),
        ("Priya", "chat", "2026-10-04T11:00:00",
         "Bought La Sportiva Tarantulace shoes for 85 pounds, much better than my "
         "old ones"),
        ("Priya", "chat", "2026-10-27T12:10:00",
         "Got a refurbished ThinkPad X1 for 520 pounds, works great"),
        ("Jonas", "chat", "2026-11-12T18:25:00",
         "Bike got a flat on the A12 cycle path, fixed it with a tyre lever "
         "borrowed from a stranger"),
    ]  # fmt: skip
    rows = [
        {"event_id": f"e{i}", "floor_id": "f", "block_id": f"f/{kind}",
         "block_type": "feed" if kind == "chat" else "blog", "user_id": who, "text": text,
         "created_at": at}
        for i, (who, kind, at, text) in enumerate(posts)
    ]  # fmt: skip
    p = served_pipeline().fit(events_frame(rows))
    now = datetime(2026, 11, 27, tzinfo=timezone.utc)
    first = p.query(first_question, user_id="u", floor_ids=["f"], now=now)
    assert answer in first.written.quoted
    follow = p.query(follow_up, user_id="u", floor_ids=["f"], now=now)
    assert follow.items[0]["event_id"] == answer, [i["text"] for i in follow.items]


@pytest.mark.slow
def test_a_short_blog_post_may_answer_the_next_question_too():
    """The lanterns-gig-bakery-book-club walk, replayed: "What book are they reading?" quoted Omar's
    blog post, and "What did Dana think of Stevens?" then took that post down as the last
    answer's (``repeat_weight``), though it says "Dana found him infuriating", and declined:
    a blog post as short as a chat line holds a few facts, and one holding the question's
    own words still answers. A document's passage (longer than a chat line may be) is still
    taken down: a follow-up on it asks another."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("lanterns-gig-bakery-book-club")}
    turn = turns["What did Dana think of Stevens?"]
    assert turn["read"] == "follow-up" and "infuriating" in turn["answer"], turn["answer"]


def test_a_word_of_the_question_is_met_in_its_other_forms():
    """Another newcomer's walk: "When is the housewarming?" quoted "Housewarming moved to 28
    November, my brother can't make the 21st", and "Why did it move?" was answered with the
    boiler's move: "move" and "moved" had different stems."""
    from memkit.pipeline import _still_answers
    from memkit.question import Question

    post = "Housewarming moved to 28 November, my brother can't make the 21st"
    why, who = Question.of("Why did it move?"), Question.of("Who is coming?")
    assert _still_answers(why, ["move"], post, chat=True)
    assert not _still_answers(why, ["move"], post, chat=False)  # a document
    assert not _still_answers(who, ["coming"], post, chat=True)
    # an irregular past is its verb ("How many did they sell?" and "we sold 60")
    gig = "The gig last night was packed, we sold 60 tickets and all our T-shirts."
    assert _still_answers(Question.of("How many did they sell?"), ["sell"], gig, chat=True)


def test_a_question_about_someone_else_is_not_a_follow_up():
    """The greyhound-half-marathon-supper-club walk: after questions about Priya's greyhound ("Where
    did he race?"), "When is Tom's race?" was read as a follow-up (its "race" was the topic's), and
    Priya's dog was carried into Tom's questions for six turns. A question naming someone the topic
    never named, with words of its own and no pronoun, starts a topic (or returns to his)."""
    c = TopicContext()
    people = ["Priya", "Tom", "Lena"]
    history = topic_turns(
        ("What is Priya's dog called?", 0, "Adopted a rescue greyhound called Biscuit"),
        ("Where did he race?", 0, "Biscuit raced at Romford for two years"),
    )
    tom = c.read("When is Tom's race?", history, names=people)
    assert (tom.kind, tom.topic, tom.words) == ("new", 1, [])
    # The oaxaca-choir-allotment walk: nothing of its own but the name, and nothing pointing back
    # either ("Where is Dev going?" was searched with Rosa's dog's toy and declined)
    going = c.read("Where is Tom going?", history, names=people)
    assert (going.kind, going.topic, going.words) == ("new", 1, [])
    # still follow-ups: nothing of its own but the name, or a pronoun for the topic's thing
    assert c.read("What about Tom?", history, names=people).kind == "follow-up"
    assert c.read("Did Tom see him race?", history, names=people).kind == "follow-up"
    # the person the topic is about, named again: the same topic
    assert c.read("When did Priya adopt him?", history, names=people).topic == 0
    # back to someone an earlier topic named
    later = history + topic_turns(("When is Tom's race?", 1, "moved to 22 November"))[:1]
    later[-1] = Turn(query="When is Tom's race?", effective_query="When is Tom's race?",
                     words=["Tom's", "race"], topic=1)  # fmt: skip
    back = c.read("What was Priya's dog afraid of?", later, names=people)
    assert (back.kind, back.topic) == ("return", 0)


def test_a_topic_is_about_who_wrote_what_its_answers_quoted():
    """The allotment-paper-boats-girona walk: "What happened on the descent?" (answered from Diego's
    post), then questions with "he", then "Back to Aisha: what does she do for work?" was read as a
    follow-up of Diego's topic ("descent cycling" carried) and declined, and Diego's topic was
    carried into three more turns. A topic is also about the people whose posts its answers quoted;
    a personal pronoun may stand for the person a question names."""
    from dataclasses import replace

    c = TopicContext()
    people = ["Aisha", "Ben", "Diego"]
    history = [
        replace(t, people=["Diego"])
        for t in topic_turns(
            ("What happened on the descent?", 0, "Crashed on a wet descent, scraped elbow"),
            ("What did he do before cycling?", 0, "Joined a cycling club"),
        )
    ]
    back = c.read("Back to Aisha: what does she do for work?", history, names=people)
    assert (back.kind, back.words) == ("new", [])
    # a possessive name: "him" may be Diego
    aisha = [*history, Turn(query="Where does Aisha work?", words=["Aisha", "work"],
                            topic=1, people=["Aisha"])]  # fmt: skip
    coach = c.read("What does Diego's coach tell him?", aisha, names=people)
    assert (coach.kind, coach.topic, coach.words) == ("new", 2, [])
    # back to the topic about him where it shares a word
    descent = c.read("What did Diego's coach say about the descent?", aisha, names=people)
    assert (descent.kind, descent.topic) == ("return", 0)
    # still follow-ups: a pronoun for the topic's thing, an object pronoun after a plain
    # name, nothing of its own
    for question in ["What did Ben think of it?", "Did Ben see him fall?", "What about Ben?",
                     "Did Ben buy her for Christmas?"]:  # fmt: skip
        assert c.read(question, history, names=people).kind == "follow-up", question
    # "her" before a noun is possessive: "with her sister" may be Aisha's
    assert c.read("Is Aisha going with her sister?", history, names=people).kind == "new"
    assert c.read("And Aisha, what does she do for work?", history, names=people).kind == "new"
    # the same turns without their authors (a turn stored before revision 0004): a topic
    # whose questions named nobody is about nobody, and the question follows up as before
    bare = [replace(t, people=[]) for t in history]
    assert c.read("And Aisha, what does she do for work?", bare, names=people).kind == ("follow-up")
    # a topic whose questions named someone is about them, whoever wrote what it quoted:
    # Diego is someone else there
    ben = [Turn(query="Where did Ben's band play?", words=["Ben's", "band", "play"],
                people=["Diego"])]  # fmt: skip
    assert c.read("And Diego, what does he do for work?", ben, names=people).kind == "new"
    # people read from what the answers quoted only: a question sharing the topic's words
    # stays in it (the lanterns-gig-bakery-book-club walk: "What did Dana think of Stevens?" after
    # questions on the book club's book, answered from Omar's post)
    book = topic_turns(("What book are they reading?", 0, "we talked about Stevens"))
    book[0].people = ["Omar"]
    dana = c.read("What did Dana think of Stevens?", book, names=["Dana", "Omar"])
    assert (dana.kind, dana.topic) == ("follow-up", 0)


def test_back_to_leaves_the_current_topic():
    """ "back to the hen weekend, which airport did they fly from?" (the dev suite) followed
    up the topic of Aisha's dog, carrying "dog chew": "back to" leaves the current topic, for
    the one whose words it shares."""
    c = TopicContext()
    history = topic_turns(
        ("Where did they go for Jess's hen do?", 0, "Hen weekend in Porto booked"),
        ("What did Aisha's dog chew up?", 1, "The dog chewed Leo's trainers"),
    )
    back = c.read("back to the hen weekend, which airport did they fly from?", history)
    assert (back.kind, back.topic, back.words) == ("return", 0, [])
    assert c.read("which airport did they fly from?", history).kind == "follow-up"


def test_words_that_change_the_subject_start_a_topic_and_are_not_carried():
    """The hen-do-quiz-night-kingsdown walk: "Let's talk about the quiz night. When is it?" followed
    up the topic of Olek's house, so the next six turns carried "survey find" and two quoted his
    survey; "Back to Bram: where does he swim?" carried "Back" into every follow-up."""
    c = TopicContext()
    history = topic_turns(
        ("Now Olek: where is the house?", 0, "Offer accepted on the house in Kingsdown"),
        ("What did the survey find?", 1, "survey found damp in the back bedroom"),
    )
    quiz = c.read("Let's talk about the quiz night. When is it?", history, names=("Olek",))
    assert quiz.kind == "new" and quiz.own_words == ["quiz", "night"]
    back = c.read("Back to Bram: where does he swim?", history, names=("Bram", "Olek"))
    assert back.kind == "new" and back.own_words == ["Bram", "swim"]
    assert c.read("When is it?", history).kind == "follow-up"


@pytest.mark.slow
def test_a_walk_replayed_in_process_reads_back_to_as_a_new_topic():
    # eval/walks.py's replay of the allotment-paper-boats-girona walk: every question asked in order
    # by one user; "Back to Aisha: what does she do for work?" after questions about Diego's riding
    # no longer carries "descent cycling" (it did before Turn.people)
    from memkit.evaluation.walks import replay

    turns = replay("allotment-paper-boats-girona")
    assert len(turns) == 37 and all(t["answer"] for t in turns)
    back = next(t for t in turns if t["question"].startswith("Back to Aisha"))
    assert (back["read"], back["searched"]) == ("new", back["question"])


@pytest.mark.slow
def test_a_question_about_the_change_just_quoted_is_answered_by_its_post():
    """The greyhound-half-marathon-supper-club walk, replayed: "When is Marcus's supper club?"
    quoted "The supper club is moving to 14 November, my oven broke...", then "Why was it moved?"
    was answered with Tom's race, "moved ... because of the bridge works", which shares "moved". A
    follow-up that asks about a change by no other words than the change's is answered by the change
    the last answer quoted."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("greyhound-half-marathon-supper-club")}
    turn = turns["Why was it moved?"]
    assert turn["read"] == "follow-up" and "oven broke" in turn["answer"], turn["answer"]


@pytest.mark.slow
def test_a_change_asked_about_in_other_words_is_the_one_quoted():
    """The mull-ferry-library-kiln walk, replayed: "When is Ines taking the ferry to Mull?" quoted
    "Ferry moved! CalMac cancelled the 18th sailing...", then "Why did it change?" quoted
    Ruben's "Change of plan, Olivo is closed...", whose "change" was the only word of the
    question a post held. To the answer writer, a post that states a change holds the
    question's change words ("changed", "moved", "postponed") in its own."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("mull-ferry-library-kiln")}
    assert "CalMac cancelled" in turns["Why did it change?"]["answer"]


def test_the_names_a_question_is_asked_of():
    from memkit.ranking.replies import addressees

    assert addressees("Ines, can Pepper come to the gig? Dogs are allowed.") == ["Ines"]
    assert addressees("Are you coming on Friday, Tom?") == ["Tom"]
    assert addressees("Ines, the gig was great.") == []  # no question
    assert addressees("Can anyone lend me a tent?") == []  # nobody named
    # the name asked on its own after the question (the bouldering-sourdough-thesis walk)
    assert addressees("Anyone want to come to the social on Friday? Marek?") == ["Marek"]
    assert addressees("Who wants to come? Or not.") == []
    # two people asked (the sailing-bathroom-jlpt walk)
    assert addressees("Kemi, are you free for a sail on Saturday? Ravi?") == ["Kemi", "Ravi"]
    # a question opened by a name after a sentence of news (the edinburgh-pumpkin-driving-test walk)
    invitation = "My birthday dinner is at Lalibela at 7.30. Noor, can you still come? Mateo?"
    assert addressees(invitation) == ["Noor", "Mateo"]
    assert addressees("Dinner is at 7.30. Noor, it was great.") == []
    # names listed ("Sadie, Olek, you in?": the hen-do-quiz-night-kingsdown walk)
    assert addressees("Quiz night on 12 November. Sadie, Olek, you in?") == ["Sadie", "Olek"]
    assert addressees("Sadie and Olek, are you coming?") == ["Sadie", "Olek"]
    assert addressees("Ines, Pepper can come to the gig?") == ["Ines"]


def test_a_name_asked_alone_is_answered_by_their_reply_to_a_question_among_the_first():
    """The edinburgh-pumpkin-driving-test walk: "Is Noor coming?" quoted Noor's "Sorry Felix, I'll
    be in Edinburgh by then", her reply to Felix's "... Noor, can you still come? Mateo?"; "And
    Mateo?" then carried her refusal's words and quoted Mateo's podcast, where his reply "Wouldn't
    miss it" came 30 minutes after the question, which no longer ranked first."""
    from datetime import datetime

    import polars as pl

    from memkit.ranking.replies import _OPENS_A_REPLY, reply_first

    assert _OPENS_A_REPLY.match("Wouldn't miss it. I'll bring Luis if that's ok.")
    at = datetime(2026, 10, 30, 19)
    posts = {
        "ask": ("Felix", 0, "My birthday dinner is at Lalibela. Noor, can you still come? Mateo?"),
        "yes": ("Mateo", 30, "Wouldn't miss it. I'll bring Luis if that's ok."),
        "no": ("Noor", 65, "Sorry Felix, I'll be in Edinburgh by then."),
        "pod": ("Mateo", 900, "Episode one is out. We'll release a new one every Friday."),
    }
    items = chat_items(at, posts)
    run = pl.DataFrame(
        {"query_id": "q", "event_id": ["pod", "no", "ask", "yes"], "score": [0.9, 0.8, 0.7, 0.6]}
    )

    def first_of(query):
        ranked = reply_first(run, lambda ids: [items[e] for e in ids], query=query)
        return ranked["event_id"].to_list()[:2]

    assert first_of("And Mateo?") == ["yes", "ask"]
    assert first_of("What about Noor?") == ["no", "ask"]
    # a question that asks more than a name keeps its ranking
    assert first_of("What does Mateo release?") == ["pod", "no"]


def test_a_reply_answers_a_question_that_asks_what_the_post_asked_of_them():
    """The brighton-ride-black-belt-iceland walk: "What did Wen recommend?" quoted her first shift,
    where Dara had asked "Wen, can you recommend a restaurant in Reykjavik?" and Wen answered "Yes!
    Dill, it has a Michelin star". Her reply to a post that asks her by name and holds the
    question's other words goes first, unless the first post holds them (the sailing-bathroom-jlpt
    walk's "Did Kemi go sailing with Ines?" keeps "Sailing with Ines was wonderful")."""
    from datetime import datetime

    import polars as pl

    from memkit.ranking.replies import reply_first

    at = datetime(2026, 11, 3, 18)
    posts = {
        "shift": ("Wen", -30000, "First shift done. Head chef Sophie is terrifying."),
        "ask": ("Dara", 0, "Wen, can you recommend a restaurant in Reykjavik? Hamid, tips?"),
        "dill": ("Wen", 40, "Yes! Dill, it has a Michelin star. Book early."),
        "seal": ("Wen", 9000, "Recommend the Dill tasting menu to anyone, it was wonderful."),
    }
    items = chat_items(at, posts)

    def first_of(query, order):
        run = pl.DataFrame({"query_id": "q", "event_id": order, "score": [0.9, 0.8, 0.7]})
        return reply_first(run, lambda ids: [items[e] for e in ids], query=query)["event_id"][0]

    assert first_of("What did Wen recommend?", ["shift", "ask", "dill"]) == "dill"
    assert first_of("What did Wen recommend?", ["seal", "ask", "dill"]) == "seal"
    assert first_of("What did Wen cook?", ["shift", "ask", "dill"]) == "shift"


def test_coming_with_nothing_after_it_follows_the_topic_up():
    """ "Is Noor coming?" after "Where is his birthday dinner?" asks whether she comes to the
    dinner: someone else asked about with no word pointing back is otherwise a new subject
    ("Where is Dev going?" asks where)."""
    c = TopicContext()
    history = topic_turns(
        ("Where is his birthday dinner?", 0, "My birthday dinner is at Lalibela, 20 November"),
    )
    history[0].people = ["Felix"]  # who wrote what the answer quoted
    assert c.read("Is Noor coming?", history, names=("Noor", "Felix")).kind == "follow-up"
    assert c.read("Will Noor come too?", history, names=("Noor", "Felix")).kind == "follow-up"
    assert c.read("Where is Noor going?", history, names=("Noor", "Felix")).kind == "new"
    assert c.read("Is Noor coming to the gig?", history, names=("Noor", "Felix")).kind == "new"


def test_of_two_people_asked_the_reply_of_the_one_a_question_names_comes_first():
    """The sailing-bathroom-jlpt walk: Ines asked "Kemi, are you free for a sail on the Thames on
    Saturday? Ravi?"; Kemi said "Count me in!", Ravi "Can't, Ines, I'm in Leeds". "And Ravi?" quoted
    Kemi's yes: only the first name asked was read."""
    from datetime import datetime

    import polars as pl

    from memkit.ranking.replies import reply_first

    at = datetime(2026, 11, 1, 11, 15)
    posts = {
        "ask": ("Ines", 0, "Kemi, are you free for a sail on the Thames on Saturday? Ravi?"),
        "no": ("Ravi", 25, "Can't, Ines, I'm in Leeds for my cousin's wedding."),
        "yes": ("Kemi", 50, "Count me in! I've never been on a boat."),
        "seal": ("Kemi", 600, "Sailing with Ines was wonderful, we saw a seal."),
    }
    items = chat_items(at, posts)
    run = pl.DataFrame(
        {
            "query_id": ["q"] * 4,
            "event_id": ["ask", "yes", "seal", "no"],
            "score": [0.9, 0.8, 0.7, 0.6],
        }
    )

    def first_of(query):
        ranked = reply_first(run, lambda ids: [items[e] for e in ids], query=query)
        return ranked["event_id"].to_list()[:2]

    assert first_of("And Ravi?") == ["no", "ask"]
    assert first_of("Is Kemi coming sailing?") == ["yes", "ask"]
    assert first_of("Who is coming sailing?") == ["yes", "ask"]  # nobody named: any reply


@pytest.mark.slow
def test_a_question_asked_of_someone_is_answered_by_their_reply():
    """The food-bank-bianchi-night-ferry walk: "Is Pepper going to the gig?" quoted Raj's "Ines, can
    Pepper come to the gig? Dogs are allowed at the Lexington.", which shares its words, not Ines's
    reply twenty minutes later, "No Raj, she hates loud music..." (the chess-wooden-boat-japanese
    walk's "Can Ivy learn at the club?" quoted Marco's question, not Kwame's "Yes, the junior
    session is...")."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("food-bank-bianchi-night-ferry")}
    assert "hates loud music" in turns["Is Pepper going to the gig?"]["answer"]
    turns = {t["question"]: t for t in replay("chess-wooden-boat-japanese")}
    assert "junior session" in turns["Can Ivy learn at the club?"]["answer"]


def test_a_refusal_opens_a_reply():
    from memkit.ranking.replies import _OPENS_A_REPLY

    assert _OPENS_A_REPLY.match("Can't Hana, I'll be baking all night")
    assert _OPENS_A_REPLY.match("Can’t make it, sorry")  # a typographic apostrophe
    assert _OPENS_A_REPLY.match("I'm in!")
    assert not _OPENS_A_REPLY.match("Canterbury was lovely")
    assert not _OPENS_A_REPLY.match("Imogen picked the music")


@pytest.mark.slow
def test_a_reply_that_declines_answers_the_question_asked_by_name_after_it():
    """The bouldering-sourdough-thesis walk: Hana asked "Anyone want to come to the climbing social
    at The Arch on Friday? Marek?" and Marek answered "Can't Hana, I'll be baking all night for the
    market"; "Is Marek coming to the climbing social?" was declined ("nothing Marek posted says
    so"), the name after the question and a reply opening with "Can't" both unread."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("bouldering-sourdough-thesis")}
    assert "baking all night" in turns["Is Marek coming to the climbing social?"]["answer"]
    # the length of a thing is a measure ("212 pages"), not the printing's cost
    assert "212 pages" in turns["How long is the thesis?"]["answer"]


@pytest.mark.slow
def test_a_reply_does_not_answer_how_many():
    """The royal-parks-kitchen-wedding walk: "How many cups did Mei sell at the craft fair?" quoted
    Tomas's "Yes Mei, I'll pick you up at nine", the reply to her "Tomas, could you give me a lift
    to the craft fair?"; a reply still answers who gives the lift."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("royal-parks-kitchen-wedding")}
    assert "pick you up" not in turns["How many cups did Mei sell at the craft fair?"]["answer"]
    assert "pick you up" in turns["Who is giving her a lift to the craft fair?"]["answer"]


@pytest.mark.slow
def test_a_post_a_decline_named_is_looked_past_by_a_new_question():
    """The oaxaca-choir-allotment walk: "What does the allotment cost?" declined, naming the shed's
    break-in as the closest post; "What ate her carrots?" then carried the topic's words and found
    the shed again, where a quoted post would have been looked past. The post a decline names is
    carried as a quoted one is; "Where is Dev going?", after questions about Rosa's dog, is searched
    on its own."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("oaxaca-choir-allotment")}
    assert "does not say how much" in turns["What does the allotment cost?"]["answer"]
    assert "slugs" in turns["What ate her carrots?"]["answer"]
    assert turns["Where is Dev going?"]["read"] == "new"


@pytest.mark.slow
def test_a_turn_carries_the_same_posts_with_or_without_a_summary():
    """On the oaxaca-choir-allotment walk the post a decline names was carried only when a
    summary was asked for, so a conversation asked for items only (``summary_needed`` "0") read its
    next follow-up differently (tests/test_query_locomo.py compares the two)."""
    from memkit.evaluation.walks import ASKED, WALKS, served_pipeline, walk_events
    from memkit.pipeline import Query

    events = walk_events(WALKS / "oaxaca-choir-allotment-posts.txt")
    people = list(dict.fromkeys(events["user_id"].to_list()))
    p = served_pipeline().fit(events)
    asked = [
        p.ask(Query("What did the teeth clean cost?", now=ASKED, authors=people, summary=s))
        for s in (True, False)
    ]
    assert asked[0].written.declined and not asked[1].written.declined
    assert asked[0].turn.quoted == asked[1].turn.quoted != []


@pytest.mark.slow
def test_sailing_walk_a_named_reply_a_named_fee_a_date_a_name_and_a_charge_not_posted():
    """The sailing-bathroom-jlpt walk, replayed: "And Ravi?" after Kemi's yes to Ines's invitation
    quoted Kemi again; "How much does Ms Sato charge?" was declined though Ravi's blog says "35
    pounds an hour"; "When is Ravi's exam?" gave the day of his mock exam; "Who was the skipper?"
    quoted "Same boat, same skipper"; "When do they rehearse?" quoted "First rehearsal tonight", not
    "we rehearse on Wednesday evenings"; "What did the plumber charge?" (never posted) quoted the
    plumber's leak."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("sailing-bathroom-jlpt")}
    assert "Leeds" in turns["And Ravi?"]["answer"]
    assert "35 pounds an hour" in turns["How much does Ms Sato charge?"]["answer"]
    assert turns["When is Ravi's exam?"]["answer"].startswith("On 6 December 2026")
    assert "does not say how much" in turns["What did the plumber charge?"]["answer"]
    assert "Gareth" in turns["Who was the skipper?"]["answer"]
    assert "Wednesday evenings" in turns["When do they rehearse?"]["answer"]


@pytest.mark.slow
def test_driving_test_walk_a_rebooked_test_an_invitation_and_a_weight():
    """The edinburgh-pumpkin-driving-test walk, replayed: the test rebooked after the day it was
    failed, the replies of the two people an invitation named, and a weight in the author's next
    post."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("edinburgh-pumpkin-driving-test")}
    assert "1 December" in turns["Switching to Grace: when is her driving test?"]["answer"]
    assert "Rebooked" not in turns["When are her lessons?"]["answer"]
    assert "Edinburgh by then" in turns["Is Noor coming?"]["answer"]
    assert "Wouldn't miss it" in turns["And Mateo?"]["answer"]
    assert "62 kilos" in turns["Now Felix: how heavy was his pumpkin?"]["answer"]


@pytest.mark.slow
def test_hen_do_walk_a_subject_changed_a_listed_invitation_and_a_plan_told_after():
    """The hen-do-quiz-night-kingsdown walk, replayed: the quiz night asked about after "Let's talk
    about", the reply of the second person an invitation listed, and the hen do's new day though an
    account of it ranked first."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("hen-do-quiz-night-kingsdown")}
    assert "19 November" in turns["Let's talk about the quiz night. When is it?"]["answer"]
    assert "3 entry" in turns["How much is entry?"]["answer"]
    assert "Can't promise" in turns["And Olek?"]["answer"]
    assert "240" in turns["How much did it raise?"]["answer"]
    assert "14 November" in turns["When is it?"]["answer"]


@pytest.mark.slow
def test_iceland_walk_a_day_rebooked_and_a_recommendation_asked_by_name():
    """The brighton-ride-black-belt-iceland walk, replayed: "rebooked us for the 21st" is 21
    November, and Wen's and Hamid's replies to Dara's questions answer what they recommended."""
    from memkit.evaluation.walks import replay

    turns = {t["question"]: t for t in replay("brighton-ride-black-belt-iceland")}
    assert turns["When was the northern lights tour?"]["answer"].startswith("On 21 November")
    assert "Dill" in turns["What did Wen recommend?"]["answer"]
    assert "thermal leggings" in turns["And Hamid?"]["answer"]
