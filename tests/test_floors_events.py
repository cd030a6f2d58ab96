"""Floors, blocks and events through the API, on SQLite and PostgreSQL."""

import sqlalchemy as sa

from server.store.schema import events, floors, users
from tests.service_fixtures import PW, error_of, outbox_code, user


def count(app, table):
    with app.extensions["memkit"]["engine"].connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()


def test_private_floors_are_invisible_and_indistinguishable(app):
    c = app.test_client()
    ann, ann_floor, _ = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    assert c.get(f"/floors/{ann_floor}", headers=ann).status_code == 200
    hidden, missing = (
        c.get(f"/floors/{ann_floor}", headers=bo),
        c.get("/floors/f_0000000000000000", headers=bo),
    )
    assert hidden.status_code == missing.status_code == 404 and error_of(hidden) == error_of(
        missing
    )
    for path in (f"/floors/{ann_floor}/events", f"/floors/{ann_floor}/rename"):
        assert c.get(path, headers=bo).status_code in (404, 405)
    assert c.post(f"/floors/{ann_floor}/public", headers=bo).status_code == 404
    assert c.post(f"/floors/{ann_floor}/public", headers=ann).get_json()["is_private"] is False
    assert (
        c.get(f"/floors/{ann_floor}", headers=bo).status_code == 200
    )  # public: readable by signed-in users
    assert c.get(f"/floors/{ann_floor}").status_code == 401
    assert c.post(f"/floors/{ann_floor}/private", headers=ann).status_code == 200
    assert c.get(f"/floors/{ann_floor}", headers=bo).status_code == 404


def test_edit_rename_and_ownership(app):
    c = app.test_client()
    ann, floor, _ = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    c.post(f"/floors/{floor}/public", headers=ann)
    r = c.patch(
        f"/floors/{floor}",
        headers=ann,
        json={"details": "my notes", "avatar": "https://img.example/a.png"},
    )
    assert r.status_code == 200 and r.get_json()["details"] == "my notes"
    assert (
        c.post(f"/floors/{floor}/rename", headers=ann, json={"title": "Ann's place"}).get_json()[
            "title"
        ]
        == "Ann's place"
    )
    r = c.patch(f"/floors/{floor}", headers=bo, json={"title": "mine now"})
    assert r.status_code == 403 and error_of(r)["code"] == "not_owner"
    r = c.patch(f"/floors/{floor}", headers=ann, json={"colour": "red"})
    assert r.status_code == 400 and error_of(r)["field"] == "colour"
    r = c.post(f"/floors/{floor}/rename", headers=ann, json={"title": "   "})
    assert r.status_code == 400 and error_of(r)["field"] == "title"
    assert c.get(f"/floors/{floor}", headers=ann).get_json()["title"] == "Ann's place"


def test_floor_and_block_quotas(app):
    c = app.test_client()
    ann, floor, _ = user(c, app, "Ann")
    for i in range(4):  # the own floor counts: 5 permitted
        assert c.post("/floors", headers=ann, json={"title": f"floor {i}"}).status_code == 200
    before = count(app, floors)
    r = c.post("/floors", headers=ann, json={"title": "one too many"})
    assert r.status_code == 403 and error_of(r)["code"] == "quota_exceeded"
    assert count(app, floors) == before
    profile = c.get("/auth-service/profile", headers=ann).get_json()["profile"]
    assert profile["floor_count_info"] == {"permitted": "5", "remaining": "0"}
    assert profile["block_count_info"] == {"permitted": "20", "remaining": "16"}
    b = c.post(f"/floors/{floor}/blocks", headers=ann, json={"block_type": 3, "title": "Questions"})
    assert (
        b.status_code == 200
        and b.get_json()["block_type"] == 3
        and b.get_json()["block_type_name"] == "forum"
    )
    assert (
        c.get("/auth-service/profile", headers=ann).get_json()["profile"]["block_count_info"][
            "remaining"
        ]
        == "15"
    )
    r = c.post(f"/floors/{floor}/blocks", headers=ann, json={"block_type": 9, "title": "x"})
    assert r.status_code == 400 and error_of(r)["field"] == "block_type"


def test_events_create_reply_repost_and_permissions(app):
    c = app.test_client()
    ann, ann_floor, ann_blocks = user(c, app, "Ann")
    bo, bo_floor, bo_blocks = user(c, app, "Bo")
    r = c.post(
        f"/floors/{ann_floor}/blocks/{ann_blocks['feed']}/events",
        headers=ann,
        json={
            "text": "Booked the lake cabin",
            "tags": ["travel"],
            "media": [{"url": "https://img/x.jpg", "caption": "cabin"}],
        },
    )
    assert r.status_code == 200
    ev = r.get_json()
    assert ev["block_type"] == 1 and ev["from_floor_uid"] == ann_floor and ev["tags"] == ["travel"]
    # Bo cannot post into Ann's private floor (404, as if it did not exist) ...
    r = c.post(
        f"/floors/{ann_floor}/blocks/{ann_blocks['feed']}/events", headers=bo, json={"text": "hi"}
    )
    assert r.status_code == 404
    # ... nor re-post from it; once public he can do both.
    r = c.post(
        f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events",
        headers=bo,
        json={"text": "look", "repost_of": ev["event_id"]},
    )
    assert (
        r.status_code == 404 and error_of(r)["field"] == "repost_of"
    )  # as for an event that never existed
    c.post(f"/floors/{ann_floor}/public", headers=ann)
    r = c.post(
        f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events",
        headers=bo,
        json={"text": "look", "repost_of": ev["event_id"]},
    )
    assert (
        r.status_code == 200
        and r.get_json()["from_floor_uid"] == ann_floor
        and r.get_json()["floor_uid"] == bo_floor
    )
    reply = c.post(
        f"/floors/{ann_floor}/blocks/{ann_blocks['forum']}/events",
        headers=bo,
        json={"text": "nice!", "reply_to": ev["event_id"]},
    )
    assert reply.status_code == 200 and reply.get_json()["reply_to"] == ev["event_id"]
    r = c.post(
        f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events",
        headers=bo,
        json={"text": "x", "reply_to": ev["event_id"]},
    )
    assert (
        r.status_code == 404 and error_of(r)["field"] == "reply_to"
    )  # replies stay in their floor
    before = count(app, events)
    for payload, field in [
        ({"text": ""}, "text"),
        ({"text": "x", "tags": "travel"}, "tags"),
        ({"text": "x", "mood": 1}, "mood"),
        ({"text": "x", "media": [{"caption": "no url"}]}, "media[0].url"),
        ({"text": "x", "created_at": "soon"}, "created_at"),
    ]:
        r = c.post(
            f"/floors/{ann_floor}/blocks/{ann_blocks['feed']}/events", headers=ann, json=payload
        )
        assert r.status_code == 400 and error_of(r)["field"] == field, payload
    assert (
        c.post(
            f"/floors/{ann_floor}/blocks/b_nope/events", headers=ann, json={"text": "x"}
        ).status_code
        == 404
    )
    assert count(app, events) == before


def test_recent_events_newest_first_paginated_and_filtered(app):
    c = app.test_client()
    ann, floor, blocks_ = user(c, app, "Ann")
    for i in range(5):
        block = blocks_["feed"] if i % 2 == 0 else blocks_["blog"]
        c.post(
            f"/floors/{floor}/blocks/{block}/events",
            headers=ann,
            json={"text": f"post {i}", "created_at": f"2024-01-0{i + 1}T10:00:00"},
        )
    page = c.get(f"/floors/{floor}/events?limit=2", headers=ann).get_json()
    assert [e["text"] for e in page["events"]] == ["post 4", "post 3"]
    seen = [e["text"] for e in page["events"]]
    while page["next_cursor"]:
        page = c.get(
            f"/floors/{floor}/events?limit=2&cursor={page['next_cursor']}", headers=ann
        ).get_json()
        seen += [e["text"] for e in page["events"]]
    assert seen == [f"post {i}" for i in range(4, -1, -1)]
    blog = c.get(f"/floors/{floor}/events?type=blog", headers=ann).get_json()["events"]
    assert [e["text"] for e in blog] == ["post 3", "post 1"]
    feed = c.get(f"/floors/{floor}/events?block_id={blocks_['feed']}", headers=ann).get_json()[
        "events"
    ]
    assert len(feed) == 3
    for query, field in [
        ("limit=0", "limit"),
        ("limit=x", "limit"),
        ("cursor=zzz", "cursor"),
        ("type=wiki", "type"),
        ("colour=red", "colour"),
    ]:
        r = c.get(f"/floors/{floor}/events?{query}", headers=ann)
        assert r.status_code == 400 and error_of(r)["field"] == field, query


def test_edit_and_delete_by_author_or_owner_only(app):
    c = app.test_client()
    ann, floor, blocks_ = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    cy, _, _ = user(c, app, "Cy")
    c.post(f"/floors/{floor}/public", headers=ann)
    post = c.post(
        f"/floors/{floor}/blocks/{blocks_['forum']}/events",
        headers=bo,
        json={"text": "Bo's question"},
    ).get_json()
    r = c.patch(f"/events/{post['event_id']}", headers=cy, json={"text": "vandalised"})
    assert r.status_code == 403
    assert (
        c.patch(
            f"/events/{post['event_id']}",
            headers=bo,
            json={"text": "Bo's better question", "tags": ["q"]},
        ).get_json()["text"]
        == "Bo's better question"
    )
    c.post(f"/floors/{floor}/private", headers=ann)
    assert (
        c.delete(f"/events/{post['event_id']}", headers=cy).status_code == 404
    )  # private again: invisible to Cy
    assert (
        c.delete(f"/events/{post['event_id']}", headers=ann).status_code == 200
    )  # the floor's owner may
    assert c.delete(f"/events/{post['event_id']}", headers=ann).status_code == 404


def test_delete_account_removes_what_it_owns_and_nothing_else(app):
    c = app.test_client()
    ann, ann_floor, ann_blocks = user(c, app, "Ann")
    bo, bo_floor, bo_blocks = user(c, app, "Bo")
    c.post(
        f"/floors/{ann_floor}/blocks/{ann_blocks['feed']}/events",
        headers=ann,
        json={"text": "ann's post"},
    )
    c.post(
        f"/floors/{bo_floor}/blocks/{bo_blocks['feed']}/events",
        headers=bo,
        json={"text": "bo's post"},
    )
    before = count(app, events)
    r = c.delete("/auth-service/account", headers=ann, json={"password": "not it at all"})
    assert r.status_code == 400 and count(app, events) == before
    r = c.delete("/auth-service/account", headers=ann, json={"password": PW})
    assert r.status_code == 200 and r.get_json()["events_deleted"] == 1
    assert count(app, events) == 1 and count(app, users) == 1
    assert (
        c.get(f"/floors/{bo_floor}/events", headers=bo).get_json()["events"][0]["text"]
        == "bo's post"
    )
    assert c.get("/auth-service/profile", headers=ann).status_code == 401


def test_external_registration_is_idempotent(app):
    c = app.test_client()
    app_id, secret = app.extensions["memkit"]["accounts"].register_app("chat-widget")
    h = {"X-App-Id": app_id, "X-App-Secret": secret}
    first = c.post(
        "/auth-service/external/register", headers=h, json={"external_id": "cust-42", "name": "Dee"}
    ).get_json()
    again = c.post(
        "/auth-service/external/register", headers=h, json={"external_id": "cust-42"}
    ).get_json()
    assert (
        first["created"] is True
        and again["created"] is False
        and first["user_id"] == again["user_id"]
    )
    assert first["profile"]["external_id"] == "cust-42" and first["pod_info"]["floor_uid"]
    assert (
        c.get(
            "/auth-service/profile", headers={"Authorization": f"Bearer {again['token']}"}
        ).status_code
        == 200
    )
    bad = c.post(
        "/auth-service/external/register",
        headers={**h, "X-App-Secret": "wrong"},
        json={"external_id": "cust-42"},
    )
    assert bad.status_code == 401 and count(app, users) == 1
    assert c.post("/auth-service/external/register", json={"external_id": "x"}).status_code == 401


def test_change_mobile_by_code(app):
    c = app.test_client()
    ann, _, _ = user(c, app, "Ann")
    assert (
        c.post(
            "/auth-service/send/validation/code",
            headers=ann,
            json={"mode": "change_mobile", "new_mobile": "+44 7911 123456", "password": PW},
        ).status_code
        == 200
    )
    code = outbox_code(app, "+447911123456")
    r = c.post(
        "/auth-service/change/mobile",
        headers=ann,
        json={"new_mobile": "+447911123456", "code": "999999" if code != "999999" else "000000"},
    )
    assert r.status_code == 400
    r = c.post(
        "/auth-service/change/mobile",
        headers=ann,
        json={"new_mobile": "+447911123456", "code": code},
    )
    assert r.status_code == 200 and r.get_json()["profile"]["mobile_number"] == "+447911123456"
