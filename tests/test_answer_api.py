"""Answers through POST /agent/memory/query, on SQLite and on PostgreSQL with the
index in the store: the clause that answers is kept, one post is quoted (no padding), a
fact never posted is declined with no quote, and ``summary_needed`` "1" gives the written
answer while "0" gives the one-line account. ``summary_needed`` is always sent."""

import pytest

from memkit.answer import DECLINE
from tests.service_fixtures import make_app, user

Q = "/agent/memory/query"
POSTS = [  # (block type, text, created_at)
    (
        "feed",
        "Someone left a blue Patagonia jacket on the chair in meeting room 4 after the Tuesday "
        "stand-up. Is it yours?",
        "2024-05-07T10:00:00Z",
    ),
    (
        "feed",
        "Maya organised the trip to Zion for the hiking club, and she booked the campsite too.",
        "2024-05-02T09:00:00Z",
    ),
    (
        "forum",
        "The Angels Landing permits for Zion are handed out by lottery in March.",
        "2024-04-20T09:00:00Z",
    ),
    (
        "feed",
        "We ordered pizza for the team lunch on Friday and it was gone in ten minutes.",
        "2024-05-10T12:30:00Z",
    ),
    ("blog", "Packed snacks and water bottles for the long drive south.", "2024-05-03T18:00:00Z"),
    (
        "feed",
        "I adopted a puppy named Biscuit; she loves running on the beach.",
        "2024-03-02T10:00:00Z",
    ),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql+pgvector"])
def floor(request, tmp_path_factory):
    """Ann's floor with the posts above; the client, her headers, her id and the post ids."""
    app = make_app(request.param, tmp_path_factory.mktemp("app"), tmp_path_factory)
    c = app.test_client()
    ann, floor_id, blocks = user(c, app, "Ann")
    ids = []
    for btype, text, at in POSTS:
        r = c.post(
            f"/floors/{floor_id}/blocks/{blocks[btype]}/events",
            headers=ann,
            json={"text": text, "created_at": at},
        )
        assert r.status_code == 200, r.get_json()
        ids.append(r.get_json()["event_id"])
    uid = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]
    yield {"c": c, "ann": ann, "floor": floor_id, "uid": uid, "ids": ids}
    app.extensions["memkit"]["engine"].dispose()


def ask(f, query: str, summary: str) -> dict:
    r = f["c"].post(
        Q,
        headers=f["ann"],
        json={
            "user_id": f["uid"],
            "floor_ids": [f["floor"]],
            "query": query,
            "summary_needed": summary,
            "k": 5,
        },
    )
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def quotes(answer: str) -> int:
    return answer.count("wrote")


def test_the_sentence_that_answers_is_kept_not_the_question_beside_it(floor):
    body = ask(floor, "What colour is the jacket?", "1")
    assert "blue Patagonia jacket" in body["answer"] and "Is it yours" not in body["answer"]
    assert quotes(body["answer"]) == 1 and body["items"][0]["event_id"] == floor["ids"][0]


def test_one_post_answers_without_padding(floor):
    body = ask(floor, "Who organised the trip to Zion?", "1")
    assert "Maya organised the trip to Zion" in body["answer"]
    assert (
        quotes(body["answer"]) == 1
        and "Angels Landing" not in body["answer"]
        and "pizza" not in body["answer"]
    )
    assert len(body["items"]) > 1  # the other posts are still listed as items


def test_a_fact_never_posted_is_declined_and_nothing_is_quoted(floor):
    body = ask(floor, "What is Ann's favourite pizza topping?", "1")
    assert body["answer"].startswith(DECLINE) and "“" not in body["answer"]
    # the pizza post was found, but it does not say: nothing relevant, so no items
    # (INTERFACE.md), unless the answer names the closest post, which is then the one item
    named = "closest post is" in body["answer"]
    assert len(body["items"]) == (1 if named else 0), body
    known = ask(floor, "What did we order for the team lunch?", "1")
    assert "pizza" in known["answer"] and not known["answer"].startswith(DECLINE)


def test_a_decline_that_names_the_closest_post_shows_that_post_alone(floor):
    body = ask(floor, "How much did the pizza for the team lunch cost?", "1")
    assert body["answer"].startswith(DECLINE) and "closest post is Ann's" in body["answer"]
    assert [i["event_id"] for i in body["items"]] == [floor["ids"][3]]  # the pizza post


@pytest.mark.parametrize("summary", ["0", "1"])
def test_summary_needed_as_documented(floor, summary):
    body = ask(floor, "Who organised the trip to Zion?", summary)
    assert isinstance(body["answer"], str) and body["items"]
    if summary == "1":  # a written answer: the quote, who and when
        assert body["answer"].startswith("On 2 May 2024 Ann wrote") and "Maya" in body["answer"]
    else:  # a one-line account of what was found, no quote
        assert body["answer"].startswith(
            f"Found {len(body['items'])} items for “Who organised the trip to Zion?”"
        )
        assert "Maya" not in body["answer"] and "\n" not in body["answer"]
