"""A conversation through the service with the served default: a follow-up
is read against what the previous answer quoted, a new subject starts a new topic, time
words in a question become a window echoed in the response, a question naming only a
window (or only a time filter) lists the posts in it, scores are probabilities, a new
user's bare follow-up is not guessed at; and the interface's spellings ("post" in
filters.types, editing a floor by POST)."""

from datetime import datetime, timedelta, timezone

import pytest

from tests.service_fixtures import user

pytestmark = pytest.mark.slow

NOW = datetime.now(timezone.utc)
# Posts of the month before this one (the window "last month" names), and older ones.
LAST_MONTH = (NOW.replace(day=1) - timedelta(days=1)).replace(
    day=10, hour=12, minute=0, second=0, microsecond=0
)
OLDER = LAST_MONTH - timedelta(days=75)


def posts() -> list[tuple[str, str, datetime]]:
    """(author, text, posted) of a small chat floor of three people."""
    return [
        ("Mia", "I've organised the whole Zion trip, cabin and permits are booked", OLDER),
        (
            "Ann",
            "We got back from Zion last night, the canyon was stunning",
            OLDER + timedelta(days=9),
        ),
        ("Tom", "My sister adopted a beagle puppy called Biscuit", LAST_MONTH),
        (
            "Tom",
            "Biscuit chewed my running shoes to pieces this morning",
            LAST_MONTH + timedelta(days=2),
        ),
        (
            "Ann",
            "The boiler broke again, the engineer comes on Thursday",
            LAST_MONTH + timedelta(days=4),
        ),
        ("Mia", "Booked the Coldplay tickets for the two of us", OLDER + timedelta(days=20)),
    ]


@pytest.fixture
def floor(app):
    c = app.test_client()
    heads = {name: user(c, app, name) for name in ("Ann", "Mia", "Tom")}
    ann, fid, blocks = heads["Ann"]
    c.post(f"/floors/{fid}/public", headers=ann)
    ids = []
    for name, text, at in posts():
        r = c.post(
            f"/floors/{fid}/blocks/{blocks['feed']}/events",
            headers=heads[name][0],
            json={"text": text, "created_at": at.isoformat()},
        )
        assert r.status_code == 200, r.get_json()
        ids.append(r.get_json()["event_id"])
    return c, heads, fid, ids


def asker(c, h, fid):
    uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]

    def ask(q, **extra):
        r = c.post(
            "/agent/memory/query",
            headers=h,
            json={
                "user_id": uid,
                "query": q,
                "floor_ids": [fid],
                "include_metadata": "1",
                "summary_needed": "1",
                **extra,
            },
        )
        assert r.status_code == 200, r.get_json()
        return r.get_json()

    return ask


def test_a_conversation_follows_the_answer_switches_topic_and_reads_time(floor):
    c, heads, fid, ids = floor
    ask = asker(c, heads["Ann"][0], fid)
    first = ask("Who organised the Zion trip?")
    assert first["items"][0]["event_id"] == ids[0] and "Mia" in first["answer"]
    assert all(0.0 <= i["score"] <= 1.0 for i in first["items"])  # probabilities
    when = ask("when did they get back?")
    meta = when["metadata"]["carried"]
    assert meta["kind"] == "follow-up" and ids[0] in meta["posts"] and "Zion" in meta["words"]
    assert when["items"][0]["event_id"] == ids[1]
    back = (OLDER + timedelta(days=8)).date()  # "last night" in the post of OLDER + 9 days
    assert f"{back.day} {back:%B %Y}" in when["answer"]
    puppy = ask("what about the puppy?")
    assert puppy["metadata"]["carried"]["kind"] == "new" and "Zion" not in puppy["effective_query"]
    assert puppy["items"][0]["event_id"] == ids[2]
    month = ask("What happened last month?")
    window = month["metadata"]["carried"]["window"]
    assert (
        window["source"] == "question"
        and window["from"] == LAST_MONTH.replace(day=1).date().isoformat()
    )
    assert {i["event_id"] for i in month["items"]} == {ids[2], ids[3], ids[4]}
    assert {i["match_type"] for i in month["items"]} == {"time"} and month["answer"].startswith(
        "3 posts"
    )


def test_a_time_filter_alone_lists_its_posts_and_a_new_users_bare_follow_up_is_not_guessed(floor):
    c, heads, fid, ids = floor
    ask = asker(c, heads["Tom"][0], fid)
    start = LAST_MONTH.replace(day=1, hour=0)
    found = ask(
        "What happened?",
        filters={
            "time_from": start.isoformat(),
            "time_to": (start + timedelta(days=27)).isoformat(),
        },
    )
    assert {i["event_id"] for i in found["items"]} == {ids[2], ids[3], ids[4]}
    typed = ask(
        "Who adopted a puppy?", filters={"types": ["post"]}
    )  # the interface's example value: feed posts
    assert typed["items"][0]["event_id"] == ids[2]
    fresh = asker(c, heads["Mia"][0], fid)("and when was that?")
    assert fresh["items"] == [] and fresh["metadata"]["declined"]
    assert fresh["metadata"]["carried"]["kind"] == "unresolved"


def test_a_floor_is_edited_by_post_as_the_interface_names_it(floor):
    c, heads, fid, _ = floor
    r = c.post(f"/floors/{fid}/edit", headers=heads["Ann"][0], json={"details": "trips and pets"})
    assert r.status_code == 200 and r.get_json()["details"] == "trips and pets"
    assert c.post(
        f"/floors/{fid}/edit", headers=heads["Tom"][0], json={"details": "x"}
    ).status_code in (403, 404)
