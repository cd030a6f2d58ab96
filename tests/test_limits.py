"""Documented bounds and hostile input, on SQLite and PostgreSQL (SECURITY.md "Limits").

Each case is one request that breaks one rule: oversize, wrongly typed, deeply nested,
non-UTF-8, text no database can store. Each must get a 4xx whose error body names what
was wrong (the field where there is one), never a stack trace, and the store must be
exactly as it was (every table compared).
"""

from __future__ import annotations

import json

import pytest

from tests.service_fixtures import all_rows, error_of, user


def j(value) -> bytes:
    return json.dumps(value).encode()


def cases(floor: str, block: str, uid: str) -> list[tuple[str, str, bytes, int, str | None]]:
    """(name, path, raw body, status, field the error must name)."""
    ev, batch, q = (
        f"/floors/{floor}/blocks/{block}/events",
        f"/floors/{floor}/blocks/{block}/events/batch",
        "/agent/memory/query",
    )

    def query(**kw) -> bytes:
        return j({"user_id": uid, "query": "what did I post", "floor_ids": [floor], **kw})

    return [
        # bounds
        ("query over 2,000 characters", q, query(query="x" * 2001), 422, "query"),
        ("k over 50", q, query(k=51), 422, "k"),
        ("k of 0", q, query(k=0), 422, "k"),
        (
            "over 50 floor_ids",
            q,
            query(floor_ids=[f"f_{i:016x}" for i in range(51)]),
            422,
            "floor_ids",
        ),
        (
            "over 50 tag filters",
            q,
            query(filters={"tags": [f"t{i}" for i in range(51)]}),
            422,
            "filters.tags",
        ),
        ("text over 20,000 characters", ev, j({"text": "x" * 20001}), 400, "text"),
        ("over 20 tags", ev, j({"text": "hi", "tags": [f"t{i}" for i in range(21)]}), 400, "tags"),
        ("a tag over 50 characters", ev, j({"text": "hi", "tags": ["t" * 51]}), 400, "tags[0]"),
        (
            "over 20 media",
            ev,
            j({"text": "hi", "media": [{"url": "https://x.example/a.png"}] * 21}),
            400,
            "media",
        ),
        (
            "a media url over 2,000",
            ev,
            j({"text": "hi", "media": [{"url": "u" * 2001}]}),
            400,
            "media[0].url",
        ),
        ("a batch over 1,000 events", batch, j({"events": [{"text": "hi"}] * 1001}), 400, "events"),
        ("a floor title over 200", "/floors", j({"title": "t" * 201}), 400, "title"),
        (
            "floor details over 5,000",
            "/floors",
            j({"title": "t", "details": "d" * 5001}),
            400,
            "details",
        ),
        ("a body over 1 MB", ev, j({"text": "x" * 1_100_000}), 413, None),
        # types
        ("k as a string", q, query(k="10"), 422, "k"),
        ("floor_ids as a string", q, query(floor_ids=floor), 422, "floor_ids"),
        ("text as a number", ev, j({"text": 5}), 400, "text"),
        ("tags as a string", ev, j({"text": "hi", "tags": "a,b"}), 400, "tags"),
        (
            "a batch event of the wrong type",
            batch,
            j({"events": [{"text": "ok"}, {"text": ["no"]}]}),
            400,
            "events[1].text",
        ),
        ("a JSON array, not an object", ev, j(["text"]), 400, None),
        # encoding and structure
        (
            "nested 100,000 deep",
            ev,
            b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            400,
            None,
        ),
        ("nested 25 deep", q, query(filters={"tags": json.loads("[" * 25 + "]" * 25)}), 400, None),
        ("not UTF-8", ev, b'{"text": "caf\xe9"}', 400, None),
        ("NaN", q, query()[:-1] + b', "k": NaN}', 400, None),
        ("not JSON at all", ev, b"text=hello", 400, None),
        ("a NUL in the text", ev, b'{"text": "a \\u0000 b"}', 400, "text"),
        (
            "an unpaired surrogate in a tag",
            ev,
            b'{"text": "ok", "tags": ["\\ud800"]}',
            400,
            "tags[0]",
        ),
        (
            "an unpaired surrogate in the query",
            q,
            query()[:-1] + b', "filter_tags": ["\\udfff"]}',
            400,
            "filter_tags[0]",
        ),
        ("a NUL in a floor title", "/floors", b'{"title": "a\\u0000"}', 400, "title"),
        (
            "a NUL in a batch event",
            batch,
            b'{"events": [{"text": "ok"}, {"text": "\\u0000"}]}',
            400,
            "events[1].text",
        ),
    ]


@pytest.fixture
def signed_in(app):
    c = app.test_client()
    h, floor, blocks = user(c, app, "Ann")
    c.post(
        f"/floors/{floor}/blocks/{blocks['feed']}/events", headers=h, json={"text": "a first post"}
    )
    uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
    return c, h, floor, blocks["feed"], uid


def test_every_bad_input_is_a_clear_4xx_and_changes_nothing(app, signed_in):
    c, h, floor, block, uid = signed_in
    before = all_rows(app)
    for name, path, raw, status, field in cases(floor, block, uid):
        r = c.post(path, data=raw, headers={**h, "Content-Type": "application/json"})
        text = r.get_data(as_text=True)
        assert r.status_code == status, (name, r.status_code, text[:300])
        err = error_of(r)
        assert err["message"] and "Traceback" not in text and 'File "' not in text, name
        if field:
            assert err["field"] == field, (name, err)
        assert all_rows(app) == before, f"{name}: the store changed"
    # The same service still takes a good request.
    assert (
        c.post(
            f"/floors/{floor}/blocks/{block}/events", headers=h, json={"text": "still fine"}
        ).status_code
        == 200
    )


@pytest.mark.parametrize(
    "url,field",
    [
        ("/floors/f%00x", None),
        ("/floors/{floor}/events?cursor=%00", "cursor"),
        ("/floors/{floor}/events?limit=%00", "limit"),
    ],
)
def test_urls_with_unstorable_text_are_refused(app, signed_in, url, field):
    c, h, floor, _, _ = signed_in
    r = c.get(url.format(floor=floor), headers=h)
    assert (
        r.status_code == 400
        and error_of(r)["field"] == field
        and error_of(r)["code"] == "invalid_text"
    )
