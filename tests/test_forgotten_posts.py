"""What is left of a post once it is refused, deleted or rewritten: no vectors of a write
the store never took, no words of a deleted post in anyone's stored conversation turns,
and an author's right to delete their own posts in a floor that has since turned private.
SECURITY.md lists these promises."""

from __future__ import annotations

import sqlite3

import sqlalchemy as sa

from server.store.schema import conversation_turns
from tests.service_fixtures import NO_LIMITS, error_of, user
from tests.test_attacks_accounts import Q, sqlite_app
from tests.test_attacks_cost_privacy import _ask, _floor_keys, _stored


def test_a_batch_refused_inside_its_transaction_leaves_no_vectors(tmp_path, tmp_path_factory):
    """A batch is encoded into the shared cache before its transaction; one refused there
    (its last post replies to an event that does not exist) stored nothing, and now leaves
    nothing in the cache either: the floor's entries are what they were."""
    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events"
    assert c.post(feed, headers=ann, json={"text": "Bought the paint for the hall."}).status_code
    _ask(c, ann, fid, "paint?")  # the index is open: writes are encoded ahead of them
    before, file_before = _floor_keys(fid), _all_keys()
    secret = "The spare key to the flat is under the blue pot by the door."
    batch = {
        "events": [
            {"text": secret},
            {"text": "Painting the hall on Saturday with Bo."},
            {"text": "Agreed!", "reply_to": "e_doesnotexist"},
        ]
    }
    r = c.post(f"{feed}/batch", headers=ann, json=batch)
    assert r.status_code == 404 and error_of(r)["field"] == "events[2].reply_to"
    assert _floor_keys(fid) == before  # before the fix: the batch's documents and lines
    assert _all_keys() == file_before  # nothing of it in the cache file either
    listed = c.get(f"/floors/{fid}/events?limit=100", headers=ann).get_json()["events"]
    assert [e["text"] for e in listed] == ["Bought the paint for the hall."]
    # The same posts written afterwards are encoded and searchable as usual.
    batch["events"][2].pop("reply_to")
    assert c.post(f"{feed}/batch", headers=ann, json=batch).status_code == 200
    made = _floor_keys(fid) - before
    assert made and _stored(made)  # what the refused batch would have left


def _all_keys() -> set[str]:
    from memkit.models.encoders import default_cache_dir

    with sqlite3.connect(default_cache_dir() / "embeddings.sqlite") as db:
        return {k for (k,) in db.execute("SELECT key FROM emb")}


def _public_floor(tmp_path, tmp_path_factory):
    """Ann's floor, made public, and Bo and Cy signed up: (app, client, (the three's auth
    headers), the floor's id, its feed's events URL)."""
    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    cy, _, _ = user(c, app, "Cy")
    assert c.post(f"/floors/{fid}/public", headers=ann).status_code == 200
    return app, c, (ann, bo, cy), fid, f"/floors/{fid}/blocks/{blocks['feed']}/events"


def test_an_author_may_delete_their_posts_after_the_floor_turns_private(tmp_path, tmp_path_factory):
    app, c, (ann, bo, cy), fid, feed = _public_floor(tmp_path, tmp_path_factory)
    mine = c.post(feed, headers=bo, json={"text": "My new number is 0770 900 123."})
    theirs = c.post(feed, headers=cy, json={"text": "Cy was here."})
    mine, theirs = mine.get_json()["event_id"], theirs.get_json()["event_id"]
    assert c.post(f"/floors/{fid}/private", headers=ann).status_code == 200

    missing = c.delete("/events/e_neverexisted", headers=bo)
    assert missing.status_code == 404
    # Someone else's post in a floor Bo can no longer read: as for an id that never existed.
    other = c.delete(f"/events/{theirs}", headers=bo)
    assert (other.status_code, other.get_json()) == (404, missing.get_json())
    # Editing his own post there is refused the same way: he cannot read the floor.
    edit = c.patch(f"/events/{mine}", headers=bo, json={"text": "changed"})
    assert (edit.status_code, edit.get_json()) == (404, missing.get_json())
    r = c.delete(f"/events/{mine}", headers=bo)  # before: 404, his words kept in her floor
    assert r.status_code == 200 and r.get_json() == {"deleted": mine}
    listed = c.get(f"/floors/{fid}/events?limit=100", headers=ann).get_json()["events"]
    assert [e["event_id"] for e in listed] == [theirs]


def _turn_rows(app) -> list[dict]:
    with app.extensions["memkit"]["engine"].connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(conversation_turns)).mappings()]


def test_a_deleted_or_rewritten_post_leaves_no_words_in_anyones_stored_turns(
    tmp_path, tmp_path_factory
):
    """Cy asked about Bo's post in Ann's public floor; her stored turn held the answer that
    quoted it and the words it quoted. Once Bo deletes the post (or rewrites it), no stored
    row of anyone's holds its id or its words."""
    app, c, (ann, bo, cy), fid, feed = _public_floor(tmp_path, tmp_path_factory)
    posts = {
        "safe": "The code for the bike shed is 7391, please keep it to yourselves.",
        "boat": "The rowing boat is moored at the Quayside pontoon until Friday.",
    }
    ids = {
        k: c.post(feed, headers=bo, json={"text": t}).get_json()["event_id"]
        for k, t in posts.items()
    }
    cy_id = c.get("/auth-service/profile", headers=cy).get_json()["profile"]["user_id"]

    def ask(query: str) -> dict:
        r = c.post(Q, headers=cy, json={"user_id": cy_id, "query": query, "floor_ids": [fid]})
        assert r.status_code == 200, r.get_json()
        return r.get_json()

    ask("What is the code for the bike shed?")
    ask("Who said that?")  # a follow-up: its effective query carries the post's words
    ask("Where is the rowing boat moored?")
    rows = _turn_rows(app)
    assert any(ids["safe"] in (r["quoted"] or []) for r in rows)  # the turn quoted it
    assert "7391" in str(rows) and "Quayside" in str(rows)
    follow_up = next(r for r in rows if r["query"] == "Who said that?")
    assert follow_up["effective_query"] != "Who said that?"

    assert c.delete(f"/events/{ids['safe']}", headers=bo).status_code == 200
    rows = _turn_rows(app)
    assert "7391" not in str(rows)  # before the fix: the answer and its quoted words stayed
    assert ids["safe"] not in str(rows)
    assert "Quayside" in str(rows)  # the other turn is untouched

    r = c.patch(f"/events/{ids['boat']}", headers=bo, json={"text": "Boat sold."})
    assert r.status_code == 200
    rows = _turn_rows(app)
    assert "Quayside" not in str(rows) and ids["boat"] not in str(rows)
    assert len(rows) == 3  # the turns stay, with their questions: only the post's part went
    assert {r["query"] for r in rows} == {
        "What is the code for the bike shed?",
        "Who said that?",
        "Where is the rowing boat moored?",
    }


def test_a_deleted_account_leaves_no_words_in_other_users_stored_turns(tmp_path, tmp_path_factory):
    from tests.service_fixtures import PW

    app = sqlite_app(tmp_path, tmp_path_factory, **NO_LIMITS)
    c = app.test_client()
    ann, fid, blocks = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    assert c.post(f"/floors/{fid}/public", headers=ann).status_code == 200
    feed = f"/floors/{fid}/blocks/{blocks['feed']}/events"
    text = "The ferry to Skye leaves from Mallaig pier at 06:40 on Sunday."
    assert c.post(feed, headers=ann, json={"text": text}).status_code == 200
    _ask(c, bo, fid, "When does the ferry to Skye leave?")
    assert "Mallaig" in str(_turn_rows(app))
    r = c.delete("/auth-service/account", headers=ann, json={"password": PW})
    assert r.status_code == 200, r.get_json()
    rows = _turn_rows(app)
    assert len(rows) == 1 and "Mallaig" not in str(rows)  # Bo's turn, without her words
