"""Isolation between users, on SQLite and PostgreSQL.

Bo calls every operation of the OpenAPI document that takes an id, once with the ids of
Ann's private floor, block, event and account and once with ids that never existed. Each
pair of answers must be the same (status and body: a private id is indistinguishable from
a missing one), and no call may change a row of the store. Operations without ids act on
the caller or on credentials only; the test lists them so that a new operation cannot be
added without being classified here. Then Ann deletes or privatises her data, and no row
of Bo's changes.
"""

from __future__ import annotations

import json

from server.api.openapi import spec
from tests.service_fixtures import PW, all_rows, user

NEVER = {
    "floor": "f_0123456789abcdef",
    "block": "b_0123456789abcdef",
    "event": "e_0123456789abcdef",
    "user": "u_0123456789abcdef",
}

# operation -> requests that name someone else's ids: (path, query string, body), with
# {floor}, {block}, {event}, {user} filled from Ann's ids or from NEVER, and {own_floor},
# {own_block}, {own_user} from Bo's.
PROBES = {
    ("/floors/{floor_id}", "get"): [("/floors/{floor}", "", None)],
    ("/floors/{floor_id}", "patch"): [("/floors/{floor}", "", {"title": "taken"})],
    ("/floors/{floor_id}/edit", "post"): [("/floors/{floor}/edit", "", {"title": "taken"})],
    ("/floors/{floor_id}/rename", "post"): [("/floors/{floor}/rename", "", {"title": "taken"})],
    ("/floors/{floor_id}/private", "post"): [("/floors/{floor}/private", "", None)],
    ("/floors/{floor_id}/public", "post"): [("/floors/{floor}/public", "", None)],
    ("/floors/{floor_id}/blocks", "post"): [
        ("/floors/{floor}/blocks", "", {"block_type": 4, "title": "Q"})
    ],
    ("/floors/{floor_id}/blocks/{block_id}/events", "post"): [
        ("/floors/{floor}/blocks/{block}/events", "", {"text": "probe"}),
        ("/floors/{own_floor}/blocks/{block}/events", "", {"text": "probe"}),
        (
            "/floors/{own_floor}/blocks/{own_block}/events",
            "",
            {"text": "probe", "reply_to": "{event}"},
        ),
        (
            "/floors/{own_floor}/blocks/{own_block}/events",
            "",
            {"text": "probe", "repost_of": "{event}"},
        ),
    ],
    ("/floors/{floor_id}/blocks/{block_id}/events/batch", "post"): [
        ("/floors/{floor}/blocks/{block}/events/batch", "", {"events": [{"text": "probe"}]}),
        (
            "/floors/{own_floor}/blocks/{own_block}/events/batch",
            "",
            {"events": [{"text": "p", "repost_of": "{event}"}]},
        ),
    ],
    ("/floors/{floor_id}/events", "get"): [
        ("/floors/{floor}/events", "", None),
        ("/floors/{own_floor}/events", "?block_id={block}", None),
    ],
    ("/events/{event_id}", "patch"): [("/events/{event}", "", {"text": "taken"})],
    ("/events/{event_id}", "delete"): [("/events/{event}", "", None)],
    ("/agent/memory/query", "post"): [
        (
            "/agent/memory/query",
            "",
            {"user_id": "{own_user}", "query": "ann's secret", "floor_ids": ["{floor}"]},
        ),
        (
            "/agent/memory/query",
            "",
            {"user_id": "{user}", "query": "ann's secret", "floor_ids": ["{own_floor}"]},
        ),
    ],
    ("/auth-service/send/validation/code", "post"): [
        (
            "/auth-service/send/validation/code",
            "",
            {"mode": "change_email", "user_id": "{user}", "new_email_id": "new@example.com"},
        )
    ],
}
NO_IDS = {  # operations that name no one else's resource: they act on the caller or on credentials
    ("/auth-service/signup", "post"),
    ("/auth-service/validate", "post"),
    ("/auth-service/signin/email", "post"),
    ("/auth-service/signin/mobile", "post"),
    ("/auth-service/change/password", "post"),
    ("/auth-service/reset/password", "post"),
    ("/auth-service/change/email", "post"),
    ("/auth-service/change/mobile", "post"),
    ("/auth-service/account", "delete"),
    ("/auth-service/profile", "get"),
    (
        "/auth-service/external/register",
        "post",
    ),  # external ids are per application, looked up within it
    ("/floors", "post"),
}


def fill(value, ids: dict):
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    return value


def snapshot(app) -> dict[str, set]:
    """Every row of every table, as sets of tuples of strings (to look ids up in)."""
    return {name: {tuple(map(str, row)) for row in rows} for name, rows in all_rows(app).items()}


def world(app):
    c = app.test_client()
    ann, ann_floor, ann_blocks = user(c, app, "Ann")
    bo, bo_floor, bo_blocks = user(c, app, "Bo")
    ev = c.post(
        f"/floors/{ann_floor}/blocks/{ann_blocks['feed']}/events",
        headers=ann,
        json={"text": "ann's secret: the safe code is 4711"},
    ).get_json()
    c.post(
        f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events",
        headers=bo,
        json={"text": "bo likes sailing"},
    )
    uid = {
        name: c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
        for name, h in (("ann", ann), ("bo", bo))
    }
    ids = {
        "floor": ann_floor,
        "block": ann_blocks["feed"],
        "event": ev["event_id"],
        "user": uid["ann"],
    }
    own = {"own_floor": bo_floor, "own_block": bo_blocks["feed"], "own_user": uid["bo"]}
    return c, ann, bo, ids, own


def test_every_operation_leaks_nothing_and_changes_nothing(app):
    documented = {(p, m) for p, ops in spec(app)["paths"].items() for m in ops}
    assert set(PROBES) | NO_IDS == documented and not set(PROBES) & NO_IDS, (
        "classify every operation"
    )
    c, ann, bo, ids, own = world(app)
    before = snapshot(app)
    probed = 0
    for (_, method), requests in PROBES.items():
        for path, query, body in requests:
            answers = []
            for target in (ids, NEVER):
                url = fill(path + query, {**target, **own})
                resp = getattr(c, method)(
                    url, headers=bo, json=fill(body, {**target, **own}) if body else None
                )
                echoed = json.dumps(resp.get_json())  # an error may quote the id the caller sent
                for name, value in target.items():
                    echoed = echoed.replace(value, f"<{name}>")
                answers.append((resp.status_code, json.loads(echoed)))
            private, missing = answers
            assert private == missing, (method, path, query, private, missing)
            # refused, or (a filter on one's own floor) answered with nothing of Ann's
            assert (
                private[0] in (400, 404, 422) or method == "get" and private[1]["events"] == []
            ), (method, path)
            assert "4711" not in str(private)
            probed += 1
    assert snapshot(app) == before, "a refused request changed the store"
    assert probed >= 18
    # Ann still sees all of it.
    r = c.post(
        "/agent/memory/query",
        headers=ann,
        json={"user_id": ids["user"], "query": "safe code", "floor_ids": [ids["floor"]]},
    ).get_json()
    assert [it["event_id"] for it in r["items"]][:1] == [ids["event"]]


def rows_of(snap: dict[str, set], marks: set[str]) -> dict[str, set]:
    """The rows that mention any of ``marks`` (ids of one user and what they own)."""
    return {t: {row for row in rows if marks & set(row)} for t, rows in snap.items()}


def test_deleting_or_privatising_one_users_data_touches_no_one_elses(app):
    c, ann, bo, ids, own = world(app)
    c.post(f"/floors/{ids['floor']}/public", headers=ann)
    bo_rows = rows_of(snapshot(app), set(own.values()))
    bo_query = {"user_id": own["own_user"], "query": "sailing", "floor_ids": [own["own_floor"]]}
    bo_items = c.post("/agent/memory/query", headers=bo, json=bo_query).get_json()["items"]
    assert bo_items

    def bo_untouched():
        now = rows_of(snapshot(app), set(own.values()))
        assert {t: rows for t, rows in now.items() if t != "conversation_turns"} == {
            t: rows for t, rows in bo_rows.items() if t != "conversation_turns"
        }
        # conversation turns: Bo's own queries add his; none of his may go
        assert bo_rows["conversation_turns"] <= now["conversation_turns"]
        again = c.post("/agent/memory/query", headers=bo, json=bo_query).get_json()["items"]
        assert [i["event_id"] for i in again] == [i["event_id"] for i in bo_items]

    assert c.post(f"/floors/{ids['floor']}/private", headers=ann).status_code == 200
    bo_untouched()
    assert c.delete(f"/events/{ids['event']}", headers=ann).status_code == 200
    bo_untouched()
    assert c.delete("/auth-service/account", headers=ann, json={"password": PW}).status_code == 200
    bo_untouched()
    assert not any(ids["user"] in row for rows in snapshot(app).values() for row in rows), (
        "Ann's id is still stored"
    )
