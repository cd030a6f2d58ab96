"""POST /agent/memory/query through the API, on SQLite and PostgreSQL (with the in-memory
index, and with the index in PostgreSQL: pgvector and full-text search): every request
rule and error, the response shape, filters on stored events, read-your-writes across app
processes, privacy changes, and conversation state kept in the store."""

import os
import re
import stat
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from memkit.question.conversation import CONTEXTUALIZERS, NoContext, Reading
from server import create_app
from server.search import StoredConversations
from server.services.floors import BLOCK_TYPES
from server.store.schema import conversation_turns, event_log, events
from tests.service_fixtures import error_of, make_app, same_store, user

Q = "/agent/memory/query"
ITEM_FIELDS = {
    "block_type",
    "block_id",
    "block_title",
    "block_details",
    "event_id",
    "floor_uid",
    "from_floor_uid",
    "user_id",
    "text",
    "score",
    "match_type",
}
POSTS = [  # (block type, text, tags, created_at)
    (
        "feed",
        "I adopted a puppy named Biscuit; she loves running on the beach.",
        ["pets"],
        "2024-03-02T10:00:00Z",
    ),
    (
        "feed",
        "Baked sourdough bread this morning and the crust came out great.",
        ["food"],
        "2024-03-05T08:00:00Z",
    ),
    (
        "forum",
        "Does anyone know a good vet for a puppy near the harbour?",
        ["pets", "help"],
        "2024-03-09T18:30:00Z",
    ),
    (
        "blog",
        "Notes from my trip along the coast road: cliffs, lighthouses and fog.",
        ["travel"],
        "2024-04-01T12:00:00Z",
    ),
    (
        "quiz",
        "Chemistry quiz: which gas do plants take in for photosynthesis?",
        [],
        "2024-04-10T09:00:00Z",
    ),
]


@pytest.fixture(params=["sqlite", "postgresql", "postgresql+pgvector"])
def app(request, tmp_path, tmp_path_factory):
    application = make_app(request.param, tmp_path, tmp_path_factory)
    yield application
    application.extensions["memkit"]["engine"].dispose()


def stateless(app) -> bool:
    return app.extensions["memkit"]["settings"].search_backend == "postgres"


def uid_of(c, h):
    return c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]


@pytest.fixture
def world(app):
    return posted_world(app)


def posted_world(app):
    """Ann owns a floor with one post per block type; Bo is another signed-in user."""
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    bo, bo_floor, bo_blocks = user(c, app, "Bo")
    ids = []
    for btype, text, tags, at in POSTS:
        r = c.post(
            f"/floors/{floor}/blocks/{blocks[btype]}/events",
            headers=ann,
            json={"text": text, "tags": tags, "created_at": at},
        )
        assert r.status_code == 200, r.get_json()
        ids.append(r.get_json()["event_id"])
    return {
        "c": c,
        "app": app,
        "ann": ann,
        "bo": bo,
        "floor": floor,
        "blocks": blocks,
        "bo_floor": bo_floor,
        "bo_blocks": bo_blocks,
        "ids": ids,
        "ann_id": uid_of(c, ann),
        "bo_id": uid_of(c, bo),
    }


def ask(w, who="ann", **body):
    uid = w[f"{who}_id"]
    body = {"user_id": uid, "floor_ids": [w["floor"]], **body}
    return w["c"].post(Q, headers=w[who], json=body)


def stored(app):
    """Everything a failed query must leave alone."""
    with app.extensions["memkit"]["engine"].connect() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in (conversation_turns, event_log, events)
        }


BAD = [  # (body changes, field named)
    ({"user_id": None}, "user_id"),
    ({"user_id": 7}, "user_id"),
    ({"user_id": "u_nobody"}, "user_id"),
    ({"query": None}, "query"),
    ({"query": "   "}, "query"),
    ({"query": 5}, "query"),
    ({"query": "x" * 2001}, "query"),
    ({"floor_ids": None}, "floor_ids"),
    ({"floor_ids": "FLOOR"}, "floor_ids"),
    ({"floor_ids": []}, "floor_ids"),
    ({"floor_ids": [3]}, "floor_ids[0]"),
    ({"floor_ids": ["f_0000000000000000"]}, "floor_ids[0]"),
    ({"filters": "pets"}, "filters"),
    ({"filters": {"colour": "red"}}, "filters.colour"),
    ({"filters": {"time_from": "yesterday"}}, "filters.time_from"),
    ({"filters": {"time_to": 1710000000}}, "filters.time_to"),
    ({"filters": {"time_from": "2024-05-01", "time_to": "2024-04-01"}}, "filters.time_from"),
    ({"filters": {"types": ["wiki"]}}, "filters.types[0]"),
    ({"filters": {"types": "feed"}}, "filters.types"),
    ({"filters": {"tags": "pets"}}, "filters.tags"),
    ({"filters": {"tags": ["pets", ""]}}, "filters.tags[1]"),
    ({"filter_types": ["feed"], "filters": {"types": ["blog"]}}, "filter_types"),
    ({"filter_tags": [1]}, "filter_tags[0]"),
    ({"k": "5"}, "k"),
    ({"k": 0}, "k"),
    ({"k": 51}, "k"),
    ({"k": True}, "k"),
    ({"k": 2.5}, "k"),
    ({"include_metadata": 1}, "include_metadata"),
    ({"include_metadata": "yes"}, "include_metadata"),
    ({"summary_needed": True}, "summary_needed"),
    ({"summary_needed": "2"}, "summary_needed"),
    ({"app_id": 12}, "app_id"),
    ({"app_id": "app_unknown"}, "app_id"),
    ({"conversation_id": "c1"}, "conversation_id"),
]


def test_every_bad_request_is_a_422_naming_the_field_and_changes_nothing(world):
    app, c = world["app"], world["c"]
    ask(world, query="puppy")  # the index exists, so failures are not just "not started"
    before = stored(app)
    for change, field in BAD:
        body = {"user_id": world["ann_id"], "query": "puppy", "floor_ids": [world["floor"]]}
        body.update(change)
        body = {k: v for k, v in body.items() if v is not None}
        r = c.post(Q, headers=world["ann"], json=body)
        assert r.status_code == 422, (change, r.get_json())
        err = error_of(r)
        assert err["field"] == field and field in err["message"], (change, err)
        assert not PYTHON_WORDS.search(err["message"]), (change, err)
    assert stored(app) == before


# Python's names for JSON's values and types, and its quoted strings: none belong in a message.
PYTHON_WORDS = re.compile(r"\b(True|False|None|list|dict|dictionary|int|str|bool)\b|'[^']*'")
MESSAGES = [  # (body changes, the error message: JSON's types and values)
    ({"user_id": True}, "user_id: expected a string, got true"),
    ({"user_id": False}, "user_id: expected a string, got false"),
    ({"query": None}, "query: expected a string, got null"),
    ({"user_id": ["u1"]}, "user_id: expected a string, got an array"),
    ({"user_id": {"id": "u1"}}, "user_id: expected a string, got an object"),
    ({"floor_ids": "FLOOR"}, 'floor_ids: expected an array, got "FLOOR"'),
    ({"floor_ids": {"0": "FLOOR"}}, "floor_ids: expected an array, got an object"),
    ({"floor_ids": [None]}, "floor_ids[0]: expected a string, got null"),
    ({"floor_ids": []}, "floor_ids: expected at least 1 item, got 0"),
    ({"filters": "pets"}, 'filters: expected an object, got "pets"'),
    ({"filters": []}, "filters: expected an object, got an array"),
    ({"filters": None}, "filters: expected an object, got null"),
    ({"filters": {"tags": {"pets": 1}}}, "filters.tags: expected an array, got an object"),
    (
        {"filters": {"types": ["wiki"]}},
        'filters.types[0]: expected "feed", "blog", "forum", "quiz" or "post", got "wiki"',
    ),
    (
        {"filters": {"time_to": False}},
        "filters.time_to: expected an ISO 8601 time such as 2024-05-01T12:00:00Z (got false)",
    ),
    ({"k": True}, "k: expected an integer, got true"),
    ({"k": "5"}, 'k: expected an integer, got "5"'),
    ({"k": 2.5}, "k: expected an integer, got 2.5"),
    ({"k": None}, "k: expected an integer, got null"),
    ({"min_score": "0.5"}, 'min_score: expected a number, got "0.5"'),
    ({"include_metadata": True}, 'include_metadata: expected "0" or "1", got true'),
    ({"summary_needed": 1}, 'summary_needed: expected "0" or "1", got 1'),
    (
        {"query": "x" * 2001},
        f'query: string should have at most 2000 characters (got "{"x" * 76}...)',
    ),
    (
        {"floor_ids": ["f_0000000000000000"]},
        'floor_ids[0]: no floor "f_0000000000000000" that you can read',
    ),
]


def test_error_messages_name_json_types_and_values(world):
    for change, message in MESSAGES:  # one world for all: a 422 changes nothing
        body = {"user_id": world["ann_id"], "query": "puppy", "floor_ids": [world["floor"]]}
        r = world["c"].post(Q, headers=world["ann"], json={**body, **change})
        assert r.status_code == 422 and error_of(r)["message"] == message, (change, r.get_json())


def test_error_messages_of_other_operations_name_json_types(world):
    c, ann, floor, feed = world["c"], world["ann"], world["floor"], world["blocks"]["feed"]
    r = c.post("/floors", headers=ann, json={"title": "Trips", "is_private": "yes"})
    assert error_of(r)["message"] == 'is_private: expected true or false, got "yes"'
    r = c.post(f"/floors/{floor}/blocks", headers=ann, json={"block_type": "feed", "title": "x"})
    assert error_of(r)["message"] == 'block_type: expected 1, 2, 3 or 4, got "feed"'
    r = c.post(
        f"/floors/{floor}/blocks/{feed}/events", headers=ann, json={"text": "hi", "tags": None}
    )
    assert error_of(r)["message"] == "tags: expected an array, got null"
    r = c.post(f"/floors/{floor}/blocks/{feed}/events/batch", headers=ann, json={"events": {}})
    assert error_of(r)["message"] == "events: expected an array, got an object"
    r = c.get(f"/floors/{floor}/events?limit=many", headers=ann)
    assert error_of(r)["message"] == 'limit: expected an integer, got "many"'
    r = c.post(
        "/floors", headers=ann, data='{"title": "a", "title": "b"}', content_type="application/json"
    )
    assert error_of(r)["message"] == 'the key "title" appears more than once in an object'


def test_user_id_must_be_the_callers(world):
    r = ask(world, user_id=world["bo_id"], query="puppy")  # Ann's token, Bo's id
    assert r.status_code == 422 and error_of(r)["field"] == "user_id"


def test_tokens_and_body_kinds(world):
    c, body = (
        world["c"],
        {"user_id": world["ann_id"], "query": "puppy", "floor_ids": [world["floor"]]},
    )
    before = stored(world["app"])
    r = c.post(Q, json=body)
    assert r.status_code == 401 and error_of(r)["code"] == "missing_token"
    r = c.post(Q, json=body, headers={"Authorization": "Bearer not-a-token"})
    assert r.status_code == 401 and error_of(r)["code"] == "invalid_token"
    r = c.post(
        Q,
        headers=world["ann"],
        data={"user_id": world["ann_id"], "query": "puppy"},
        content_type="multipart/form-data",
    )
    assert r.status_code == 415 and "JSON" in error_of(r)["message"]
    r = c.post(Q, headers=world["ann"], data="{not json", content_type="application/json")
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
    assert stored(world["app"]) == before


def test_private_floors_get_the_same_422_as_missing_ones(world):
    c = world["c"]
    assert c.post(f"/floors/{world['floor']}/public", headers=world["ann"]).status_code == 200
    assert c.post(f"/floors/{world['floor']}/private", headers=world["ann"]).status_code == 200
    hidden = ask(world, "bo", query="puppy", floor_ids=[world["bo_floor"], world["floor"]])
    missing = ask(world, "bo", query="puppy", floor_ids=[world["bo_floor"], "f_0000000000000000"])
    assert hidden.status_code == missing.status_code == 422
    h, m = error_of(hidden), error_of(missing)
    assert h["field"] == m["field"] == "floor_ids[1]" and h["code"] == m["code"]
    assert h["message"].replace(world["floor"], "ID") == m["message"].replace(
        "f_0000000000000000", "ID"
    )


def test_response_shape(world):
    for include_metadata in ("0", "1"):  # one world for the four: a question writes no post
        for summary_needed in ("0", "1"):
            check_response_shape(world, include_metadata, summary_needed)


def check_response_shape(world, include_metadata, summary_needed):
    r = ask(
        world,
        query="how is my puppy Biscuit?",
        include_metadata=include_metadata,
        summary_needed=summary_needed,
        k=3,
    )
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert isinstance(body["answer"], str) and body["answer"]
    items = body["items"]
    assert 1 <= len(items) <= 3 and items[0]["event_id"] == world["ids"][0]
    types = {eid: btype for eid, (btype, *_rest) in zip(world["ids"], POSTS)}
    for item in items:
        assert set(item) == ITEM_FIELDS | ({"metadata"} if include_metadata == "1" else set())
        assert item["block_type"] == BLOCK_TYPES[types[item["event_id"]]]
        assert item["block_id"] == world["blocks"][types[item["event_id"]]]
        assert (
            item["floor_uid"] == item["from_floor_uid"] == world["floor"]
            and item["user_id"] == world["ann_id"]
        )
        assert item["match_type"] in ("keyword", "semantic", "hybrid") and isinstance(
            item["score"], float
        )
        assert isinstance(item["block_title"], str) and isinstance(item["block_details"], str)
    assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
    if include_metadata == "1":
        meta = items[0]["metadata"]
        assert meta["created_at"].startswith("2024-03-02T10:00:00") and meta["tags"] == ["pets"]
        assert meta["source"]["block_type_name"] == "feed" and meta["source"]["floor_title"]
    if summary_needed == "1":
        assert "Biscuit" in body["answer"] and "2 March 2024" in body["answer"]
    else:
        assert body["answer"].startswith(f"Found {len(items)} item") and "\n" not in body["answer"]


def test_nothing_relevant_gives_no_items_and_a_fallback(world):
    for summary in ("0", "1"):
        r = ask(world, query="quantum entanglement telescope", summary_needed=summary)
        assert r.status_code == 200
        assert r.get_json()["items"] == [] and "couldn't find" in r.get_json()["answer"]


def test_filters_on_stored_events(world):
    ids = world["ids"]
    everything = {"query": "puppy bread coast chemistry quiz vet beach", "k": 50}
    got = lambda **f: [i["event_id"] for i in ask(world, **everything, **f).get_json()["items"]]  # noqa: E731
    assert set(got()) == set(ids)
    assert set(
        got(filters={"time_from": "2024-03-05T08:00:00Z", "time_to": "2024-04-01T12:00:00Z"})
    ) == set(ids[1:4])
    assert set(got(filters={"time_from": "2024-03-05T09:00:00+01:00"})) == set(
        ids[1:]
    )  # 08:00Z, inclusive
    assert set(got(filters={"types": ["forum", "quiz"]})) == {ids[2], ids[4]}
    assert set(got(filters={"tags": ["pets"]})) == {ids[0], ids[2]}
    assert set(got(filter_types=["blog"], filter_tags=["travel", "food"])) == {ids[3]}
    assert set(got(filters={"tags": ["pets"], "time_to": "2024-03-03"})) == {ids[0]}
    assert got(filters={"tags": ["nothing-has-this"]}) == []


def test_a_date_alone_as_time_to_includes_that_whole_day(world):
    c, ann, floor, feed = world["c"], world["ann"], world["floor"], world["blocks"]["feed"]
    times = [  # the first three on 20 May 2024, from its first instant to its last
        "2024-05-20T00:00:00Z",
        "2024-05-20T12:30:00Z",
        "2024-05-20T23:59:59.999999Z",
        "2024-05-21T00:00:00Z",
    ]
    ids = []
    for i, at in enumerate(times):
        r = c.post(
            f"/floors/{floor}/blocks/{feed}/events",
            headers=ann,
            json={
                "text": f"Paddled the red kayak across the lake, trip {i + 1}.",
                "tags": ["kayak"],
                "created_at": at,
            },
        )
        assert r.status_code == 200, r.get_json()
        ids.append(r.get_json()["event_id"])

    def got(**filters):
        r = ask(world, query="red kayak lake", k=50, filters={"tags": ["kayak"], **filters})
        assert r.status_code == 200, r.get_json()
        return {i["event_id"] for i in r.get_json()["items"]}

    assert got() == set(ids)
    assert got(time_to="2024-05-20") == set(ids[:3])  # the whole day, not its first instant
    assert got(time_from="2024-05-20", time_to="2024-05-20") == set(ids[:3])
    assert got(time_from="2024-05-21") == {ids[3]}
    # a full time keeps its exact meaning (inclusive)
    assert got(time_to="2024-05-20T00:00:00Z") == {ids[0]}
    assert got(time_to="2024-05-20T12:30:00+00:00") == set(ids[:2])


def test_read_your_writes_edit_and_delete(world):
    c, ann, floor, feed = world["c"], world["ann"], world["floor"], world["blocks"]["feed"]
    assert ask(world, query="kayak").get_json()["items"] == []
    e = c.post(
        f"/floors/{floor}/blocks/{feed}/events",
        headers=ann,
        json={"text": "Bought a red kayak today."},
    ).get_json()
    assert [i["event_id"] for i in ask(world, query="kayak").get_json()["items"]][:1] == [
        e["event_id"]
    ]
    c.patch(f"/events/{e['event_id']}", headers=ann, json={"text": "Bought a green canoe today."})
    items = ask(world, query="kayak").get_json()[
        "items"
    ]  # a canoe is still close in meaning, not in words
    assert not any("kayak" in i["text"] for i in items) and all(
        i["match_type"] == "semantic" for i in items
    )
    top = ask(world, query="canoe").get_json()["items"][0]
    assert top["event_id"] == e["event_id"] and top["text"] == "Bought a green canoe today."
    c.delete(f"/events/{e['event_id']}", headers=ann)
    assert e["event_id"] not in [
        i["event_id"] for i in ask(world, query="canoe").get_json()["items"]
    ]


def test_writes_through_one_process_are_found_by_another(world):
    """Two app instances over one store (as two worker processes would be)."""
    app = world["app"]
    settings = app.extensions["memkit"]["settings"]
    other = create_app(same_store(settings))
    try:
        c2 = other.test_client()
        ask2 = lambda q: c2.post(  # noqa: E731
            Q,
            headers=world["ann"],
            json={
                "user_id": world["ann_id"],
                "query": q,
                "floor_ids": [world["floor"]],
            },
        ).get_json()["items"]
        assert ask2("Biscuit")[0]["event_id"] == world["ids"][0]  # built from the store on start
        e = (
            world["c"]
            .post(
                f"/floors/{world['floor']}/blocks/{world['blocks']['feed']}/events",
                headers=world["ann"],
                json={"text": "The tomatoes in the greenhouse are finally ripe."},
            )
            .get_json()
        )
        assert ask2("greenhouse tomatoes")[0]["event_id"] == e["event_id"]
        world["c"].delete(f"/events/{e['event_id']}", headers=world["ann"])
        assert e["event_id"] not in [i["event_id"] for i in ask2("greenhouse tomatoes")]
    finally:
        other.extensions["memkit"]["engine"].dispose()


def test_privacy_and_account_deletion_take_events_out_at_once(world):
    c = world["c"]
    c.post(f"/floors/{world['floor']}/public", headers=world["ann"])
    r = ask(world, "bo", query="Biscuit")
    assert r.status_code == 200 and r.get_json()["items"][0]["event_id"] == world["ids"][0]
    c.post(f"/floors/{world['floor']}/private", headers=world["ann"])
    assert ask(world, "bo", query="Biscuit").status_code == 422
    assert ask(world, query="Biscuit").status_code == 200  # the owner still reads it
    # Bo re-posts from Ann's floor while it is public; deleting Ann's account removes her
    # floor, but Bo's copy stays in Bo's floor with its source.
    c.post(f"/floors/{world['floor']}/public", headers=world["ann"])
    repost = c.post(
        f"/floors/{world['bo_floor']}/blocks/{world['bo_blocks']['feed']}/events",
        headers=world["bo"],
        json={"text": POSTS[0][1], "repost_of": world["ids"][0]},
    ).get_json()
    both = [world["bo_floor"], world["floor"]]
    found = {
        i["event_id"]: i
        for i in ask(world, "bo", query="Biscuit", floor_ids=both).get_json()["items"]
    }
    assert {world["ids"][0], repost["event_id"]} <= set(found)
    assert found[repost["event_id"]]["from_floor_uid"] == world["floor"]
    assert (
        c.delete(
            "/auth-service/account",
            headers=world["ann"],
            json={"password": "correct horse battery"},
        ).status_code
        == 200
    )
    assert ask(world, "bo", query="Biscuit", floor_ids=both).status_code == 422
    items = ask(world, "bo", query="Biscuit", floor_ids=[world["bo_floor"]]).get_json()["items"]
    assert [i["event_id"] for i in items] == [repost["event_id"]]
    index = world["app"].extensions["memkit"]["memory"].index
    if stateless(
        world["app"]
    ):  # the search rows went with the events (foreign keys, ON DELETE CASCADE)
        assert all(not set(world["ids"]) & part.event_ids() for part in index.parts)
        assert all(repost["event_id"] in part.event_ids() for part in index.parts)
    else:  # gone from the index too, once every floor is caught up (the background catch-up's step)
        index.sync()
        assert not set(world["ids"]) & set(index.pipeline.retriever.catalog.position)


class EchoPrevious(NoContext):
    """A test contextualizer: the previous query, then this one."""

    type_name = "echo-previous"

    def read(self, query, history, window=None, names=()):
        return Reading(query, [(f"{history[-1].query} {query}" if history else query, 1.0)])


def test_conversation_state_is_kept_in_the_store(world, tmp_path, monkeypatch):
    monkeypatch.setitem(CONTEXTUALIZERS, "echo-previous", EchoPrevious)
    config = tmp_path / "echo.toml"
    config.write_text('[retriever]\ntype = "bm25"\n[contextualizer]\ntype = "echo-previous"\n')
    app = world["app"]
    settings = app.extensions["memkit"]["settings"]
    make = lambda: create_app(  # noqa: E731
        {
            "database_url": settings.database_url,
            "outbox_dir": settings.outbox_dir,
            "secret_key": settings.secret_key,
            "pipeline_config": str(config),
        }
    )
    first = make()
    body = {"user_id": world["ann_id"], "floor_ids": [world["floor"]]}
    r = (
        first.test_client()
        .post(Q, headers=world["ann"], json={**body, "query": "puppy"})
        .get_json()
    )
    assert r["effective_query"] == "puppy"  # a new user starts with no context
    first.extensions["memkit"]["engine"].dispose()
    second = make()  # a restart: the state comes from the store
    r = (
        second.test_client()
        .post(Q, headers=world["ann"], json={**body, "query": "bread"})
        .get_json()
    )
    assert r["effective_query"] == "puppy bread"
    turns = StoredConversations(second.extensions["memkit"]["engine"]).history(world["ann_id"])
    assert [t.query for t in turns] == ["puppy", "bread"]
    assert (
        turns[0].event_ids == [world["ids"][0], world["ids"][2]][: len(turns[0].event_ids)]
        and turns[0].answer
    )
    # who wrote what the answer quoted: the next question's topic is about them too
    assert turns[0].quoted and turns[0].people == ["Ann"]
    assert StoredConversations(second.extensions["memkit"]["engine"]).history(world["bo_id"]) == []
    later = datetime.now(timezone.utc) + timedelta(hours=2)  # idle too long: a new conversation
    assert (
        StoredConversations(second.extensions["memkit"]["engine"]).history(world["ann_id"], later)
        == []
    )
    second.extensions["memkit"]["engine"].dispose()


def test_an_application_asks_for_its_own_external_user(world):
    app, c = world["app"], world["c"]
    accounts = app.extensions["memkit"]["accounts"]
    app_id, secret = accounts.register_app("notes-app")
    creds = {"X-App-Id": app_id, "X-App-Secret": secret}
    ext = c.post(
        "/auth-service/external/register", headers=creds, json={"external_id": "n-1"}
    ).get_json()
    own = ext["pod_info"]
    e = c.post(
        f"/floors/{own['floor_uid']}/blocks/{own['blocks'][0]['block_id']}/events",
        headers={"Authorization": f"Bearer {ext['token']}"},
        json={"text": "Meeting notes: budget approved."},
    ).get_json()
    body = {
        "user_id": ext["user_id"],
        "query": "budget",
        "floor_ids": [own["floor_uid"]],
        "app_id": app_id,
    }
    r = c.post(Q, headers=creds, json=body)
    assert r.status_code == 200 and r.get_json()["items"][0]["event_id"] == e["event_id"]
    r = c.post(
        Q, headers=creds, json={**body, "user_id": world["ann_id"], "floor_ids": [world["floor"]]}
    )
    assert r.status_code == 422 and error_of(r)["field"] == "user_id"  # not this application's user
    other_id, _ = accounts.register_app("other-app")
    assert (
        error_of(c.post(Q, headers=creds, json={**body, "app_id": other_id}))["field"] == "app_id"
    )
    assert c.post(Q, headers={**creds, "X-App-Secret": "wrong"}, json=body).status_code == 401


def test_index_waits_for_a_commit_that_lands_out_of_order(app):
    """PostgreSQL numbers log rows at insert but shows them at commit: a row numbered
    lower can appear after a higher one. The index must apply it when it lands."""
    if app.extensions["memkit"]["engine"].dialect.name != "postgresql":
        pytest.skip("SQLite serialises writers: rows always land in order")
    if stateless(app):
        pytest.skip(
            "the in-memory index's log catch-up: the PostgreSQL search backend reads no log"
        )
    from server.services.common import new_id, now
    from server.store.changes import log_event_changes

    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    uid = uid_of(c, ann)
    memory = app.extensions["memkit"]["memory"]
    index = memory.index
    engine = app.extensions["memkit"]["engine"]
    slow = engine.connect()
    tx = slow.begin()  # a writer that takes its number first and commits last
    slow_id = new_id("e")
    slow.execute(
        events.insert().values(
            id=slow_id,
            floor_id=floor,
            block_id=blocks["feed"],
            user_id=uid,
            text="The violin lesson moved to Thursday.",
            tags=[],
            media=[],
            created_at=now(),
            updated_at=now(),
        )
    )
    log_event_changes(slow, [slow_id])
    fast = c.post(
        f"/floors/{floor}/blocks/{blocks['feed']}/events",
        headers=ann,
        json={"text": "The cello lesson moved to Friday."},
    ).get_json()
    body = {"user_id": uid, "floor_ids": [floor], "query": "lesson moved", "k": 5}
    found = [i["event_id"] for i in c.post(Q, headers=ann, json=body).get_json()["items"]]
    assert found == [fast["event_id"]] and index.watermark < max(
        index._applied | {0}
    )  # waiting on the gap
    tx.commit()
    slow.close()
    found = {i["event_id"] for i in c.post(Q, headers=ann, json=body).get_json()["items"]}
    assert found == {fast["event_id"], slow_id}


def test_answers_say_who_and_when_and_resolve_relative_times(world):
    c, ann, floor, feed = world["c"], world["ann"], world["floor"], world["blocks"]["feed"]
    r = c.post(
        f"/floors/{floor}/blocks/{feed}/events",
        headers=ann,
        json={
            "text": "Took Biscuit to the vet yesterday for her shots.",
            "created_at": "2024-03-12T09:00:00Z",
        },
    )
    assert r.status_code == 200
    body = ask(world, query="When did Biscuit go to the vet?", k=5, summary_needed="1").get_json()
    assert body["answer"].startswith(
        "On 11 March 2024 — “yesterday” in what Ann wrote on 12 March 2024 in “"
    ), body["answer"]
    assert "“Took Biscuit to the vet yesterday for her shots.”" in body["answer"]
    assert r.get_json()["event_id"] in [
        i["event_id"] for i in body["items"]
    ]  # the quote is among the items
    assert all("speaker" not in i for i in body["items"])


def test_batch_ingest_is_all_or_nothing_and_searchable_when_it_returns(world):
    c, ann, floor, blocks = world["c"], world["ann"], world["floor"], world["blocks"]
    url = f"/floors/{floor}/blocks/{blocks['forum']}/events/batch"
    ask(world, query="anything about kayaks?")  # the index is built before the batch
    index = world["app"].extensions["memkit"]["memory"]._index
    before = stored(world["app"])
    good = [
        {
            "text": f"Kayak trip number {i} on the fjord",
            "tags": ["travel"],
            "created_at": f"2024-05-0{i + 1}T10:00:00Z",
        }
        for i in range(3)
    ]
    for body, field in [
        ({"events": good + [{"text": ""}]}, "events[3].text"),
        ({"events": good + [{"text": "ok", "colour": "red"}]}, "events[3].colour"),
        ({"events": [{"text": "ok", "reply_to": "e_missing"}]}, "events[0].reply_to"),
        ({"events": []}, "events"),
        ({"events": "kayak"}, "events"),
        ({"posts": good}, "posts"),
    ]:
        r = c.post(url, headers=ann, json=body)
        assert r.status_code in (400, 404) and error_of(r)["field"] == field, (body, r.get_json())
        assert stored(world["app"]) == before  # nothing of a refused batch is kept
    r = c.post(url, headers=ann, json={"events": good})
    assert r.status_code == 200, r.get_json()
    made = r.get_json()["events"]
    assert [e["text"] for e in made] == [g["text"] for g in good] and {
        e["block_type_name"] for e in made
    } == {"forum"}
    applied = index.applied_rows
    if not stateless(
        world["app"]
    ):  # (the PostgreSQL backend indexed them in the batch's own transaction)
        assert (
            applied >= 3
        )  # the batch's request caught the index up: the query has nothing left to apply
    found = ask(world, query="kayak trip on the fjord").get_json()["items"]
    assert {e["event_id"] for e in made} <= {i["event_id"] for i in found}
    assert index.applied_rows == applied
    r = world["c"].post(
        url, headers=world["bo"], json={"events": good}
    )  # Ann's floor is private to Bo
    assert r.status_code == 404


def test_a_saved_index_is_loaded_and_caught_up_from_the_store(world, tmp_path, monkeypatch):
    """A second process with the same index folder loads the first one's saved index
    instead of re-encoding, catches up on what was written since, and drops a saved
    index made with other settings, by other weights under the same model name, or with
    another table of base forms."""
    app, c = world["app"], world["c"]
    if stateless(app):
        pytest.skip(
            "the in-memory index's saved copy: the PostgreSQL search backend keeps nothing per "
            "process"
        )
    settings = app.extensions["memkit"]["settings"]
    folder = tmp_path / "index"
    base = {
        "database_url": settings.database_url,
        "outbox_dir": settings.outbox_dir,
        "secret_key": settings.secret_key,
    }
    old_umask = os.umask(0o022)
    try:
        first = create_app({**base, "index_dir": str(folder), "warm_index": True})
    finally:
        os.umask(old_umask)
    assert (
        first.extensions["memkit"]["memory"]._index.started_from == "store"
        and (folder / "state.json").exists()
    )
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # posts' text: private whatever the umask
    r = c.post(
        f"/floors/{world['floor']}/blocks/{world['blocks']['blog']}/events",
        headers=world["ann"],
        json={
            "text": "Bought a second-hand kayak from the harbour shop.",
            "created_at": "2024-05-01T09:00:00Z",
        },
    )
    new_id = r.get_json()["event_id"]
    second = create_app({**base, "index_dir": str(folder)})
    index = second.extensions["memkit"]["memory"].index
    assert (
        index.started_from == "saved" and index.applied_rows >= 1
    )  # the kayak post came from the log
    body = {
        "user_id": world["ann_id"],
        "floor_ids": [world["floor"]],
        "query": "kayak from the harbour shop",
    }
    found = second.test_client().post(Q, headers=world["ann"], json=body).get_json()["items"]
    assert found[0]["event_id"] == new_id
    body["query"] = "puppy Biscuit on the beach"
    assert (
        second.test_client()
        .post(Q, headers=world["ann"], json=body)
        .get_json()["items"][0]["event_id"]
        == world["ids"][0]
    )
    from memkit.models.encoders import get_encoder

    model = get_encoder(index.pipeline.encoder_name())  # as when 8-bit weights became 7-bit
    monkeypatch.setattr(model, "name", model.name + "/other-weights")
    reweighted = create_app({**base, "index_dir": str(folder), "warm_index": True})
    assert reweighted.extensions["memkit"]["memory"]._index.started_from == "store"
    monkeypatch.undo()
    from memkit.core import text

    again = create_app({**base, "index_dir": str(folder), "warm_index": True})  # saved anew
    assert again.extensions["memkit"]["memory"]._index.started_from == "store"
    # the analyzer's reading changed (irregular past forms read as their base): terms saved
    # before would not match
    monkeypatch.setitem(text.IRREGULAR, "swum", "swim")
    reread = create_app({**base, "index_dir": str(folder), "warm_index": True})
    assert reread.extensions["memkit"]["memory"]._index.started_from == "store"
    monkeypatch.undo()
    other = tmp_path / "other.toml"
    other.write_text('name = "bm25"\n[retriever]\ntype = "bm25"\n')
    third = create_app(
        {**base, "index_dir": str(folder), "pipeline_config": str(other), "warm_index": True}
    )
    assert (
        third.extensions["memkit"]["memory"]._index.started_from == "store"
    )  # other settings: rebuilt
    for a in (first, second, reweighted, again, reread, third):
        a.extensions["memkit"]["engine"].dispose()


@pytest.mark.heavy  # 1,000 posts encoded on each backend: about 25 s each
def test_a_catch_up_of_many_sessions_at_once(world):
    """A batch spread over 1,000 days touches 1,000 sessions: the index asks the store for
    them in pieces (one query of 1,000 alternatives is too deep for SQLite) and finds them."""
    c, ann, floor, blocks = world["c"], world["ann"], world["floor"], world["blocks"]
    ask(world, query="warm up the index")
    posts = [
        {
            "text": f"Day {i} of the long walk along the river",
            "created_at": f"{2020 + i // 360}-{i % 12 + 1:02d}-"
            f"{i % 28 + 1:02d}T{i % 24:02d}:00:00Z",
        }
        for i in range(1000)
    ]
    r = c.post(
        f"/floors/{floor}/blocks/{blocks['feed']}/events/batch", headers=ann, json={"events": posts}
    )
    assert r.status_code == 200, r.get_json()
    made = {e["event_id"] for e in r.get_json()["events"]}
    found = ask(world, query="Day 417 of the long walk along the river", k=50).get_json()["items"]
    assert found and found[0]["event_id"] in made and "417" in found[0]["text"]


def test_the_served_config_is_checked_once_when_the_service_starts(
    tmp_path, tmp_path_factory, monkeypatch
):
    """The service reads and checks its config when it starts; the pipelines it opens (for
    the questions, for a delete's cache entries) are built from that typed Config, so no
    question or write checks the file again."""
    import memkit.config as config_module
    import memkit.config.model as model
    import memkit.pipeline as pipeline_module

    checks = []

    def counted(where, original):
        def check(value):
            checks.append(where)
            return original(value)

        return check

    monkeypatch.setattr(config_module, "validate_config", counted("load", model.validate_config))
    monkeypatch.setattr(
        pipeline_module, "validate_config", counted("pipeline", model.validate_config)
    )
    adapter = model._adapter  # what ``typed`` checks a section's dict with
    monkeypatch.setattr(
        model, "_adapter", lambda section: checks.append(section) or adapter(section)
    )
    w = posted_world(make_app("sqlite", tmp_path, tmp_path_factory))
    assert checks == ["load"]  # at start
    # a delete before any question opens a pipeline to name the post's cache entries
    assert w["c"].delete(f"/events/{w['ids'][1]}", headers=w["ann"]).status_code == 200
    for text in ("What is the puppy called?", "And where does she run?"):
        assert ask(w, query=text, summary_needed="1").status_code == 200
    assert ask(w, query="Who baked bread?").status_code == 200
    assert checks == ["load"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_question_takes_two_connections_from_the_pool_and_holds_one_at_a_time(
    kind, tmp_path, tmp_path_factory
):
    """With the in-memory index, a question's first reads (the token, the history, the
    floors, the version, the index's log) share one connection; the posts it reads
    (ranked, then the plans that changed) and storing its turn share a second, taken after
    the first went back. A request never holds one connection while it waits for another,
    so 64 questions at once on a pool of 15 all get answers (holding one across the whole
    question, index and model waits included, deadlocked the pool)."""
    from tests.test_attacks import at_once

    w = posted_world(make_app(kind, tmp_path, tmp_path_factory))
    assert ask(w, query="What is the puppy called?").status_code == 200  # opens the index
    taken = []
    engine = w["app"].extensions["memkit"]["engine"]
    held = []
    sa.event.listen(engine, "checkout", lambda *a: (taken.append(1), held.append(1)))
    sa.event.listen(engine, "checkin", lambda *a: held.pop())
    most = []
    sa.event.listen(engine, "checkout", lambda *a: most.append(len(held)))
    for body in (
        {"query": "What is the puppy called?", "summary_needed": "1"},
        {"query": "And where does she run?", "summary_needed": "0"},
        {"query": "bread", "filters": {"types": ["feed"], "time_to": "2024-03-31"}},
    ):
        before = len(taken)
        assert ask(w, **body).status_code == 200
        assert len(taken) - before == 2, body
    assert max(most) == 1  # one at a time
    statuses = at_once(
        64,
        lambda i: (
            w["app"]
            .test_client()
            .post(
                Q,
                headers=w["ann"],
                json={"user_id": w["ann_id"], "query": f"puppy {i}?", "floor_ids": [w["floor"]]},
            )
            .status_code
        ),
    )
    assert statuses == [200] * 64


def test_a_served_process_settles_its_heap_once_its_index_is_open(tmp_path, tmp_path_factory):
    """With ``warm_index`` (each gunicorn worker; ``memkit serve`` does the same) the app
    collects once and freezes what is alive after opening its index, so the collector's
    full passes stop walking the models and the index (they held requests up ~200 ms);
    an app without it leaves the collector alone."""
    import gc

    from tests.service_fixtures import make_app

    gc.unfreeze()
    make_app("sqlite", tmp_path / "a", tmp_path_factory)
    assert gc.get_freeze_count() == 0
    served = make_app("sqlite", tmp_path / "b", tmp_path_factory, warm_index=True)
    assert gc.get_freeze_count() > 0
    memory = served.extensions["memkit"]["memory"]
    assert memory.settle and memory.version is not None  # opened, then settled
