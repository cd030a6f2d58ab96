"""Context fields for the indexed text (memkit/retrieval/representation.py)."""

from datetime import datetime, timezone

import polars as pl
import pytest

from memkit.core.errors import ValidationError
from memkit.pipeline import Pipeline
from memkit.retrieval.representation import add_context
from server import create_app
from tests.service_fixtures import postgres_url, user

T = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def chat():
    rows = [
        ("s1", "Ann", "Guess what, I got a new job!"),
        ("s1", "Bo", "Congrats! Where?"),
        ("s1", "Ann", "At the zoo."),
        ("s2", "Bo", "My sister visited."),
    ]
    return pl.DataFrame(
        {
            "event_id": [f"e{i}" for i in range(4)],
            "floor_id": ["f"] * 4,
            "block_id": [r[0] for r in rows],
            "block_type": ["feed"] * 4,
            "user_id": [r[1] for r in rows],
            "text": [r[2] for r in rows],
            "created_at": [T] * 4,
            "tags": [[]] * 4,
        },
        schema_overrides={"created_at": pl.Datetime("us", "UTC")},
    )


def test_neighbours_stay_inside_their_block_and_keep_order():
    ctx = add_context(chat(), before=1, after=1)
    assert ctx["prev_lines"].to_list() == [
        "",
        "Ann: Guess what, I got a new job!",
        "Bo: Congrats! Where?",
        "",
    ]
    assert ctx["next_lines"].to_list() == ["Bo: Congrats! Where?", "Ann: At the zoo.", "", ""]
    assert ctx["date"][0] == "8 May 2023" and ctx["line"][3] == "Bo: My sister visited."
    assert (
        ctx["session_text"][0]
        == "Ann: Guess what, I got a new job!\nBo: Congrats! Where?\nAnn: At the zoo."
    )
    assert ctx["session_text"][3] == "Bo: My sister visited."
    two = add_context(chat(), before=2, after=0)
    assert (
        two["prev_lines"][2] == "Ann: Guess what, I got a new job!\nBo: Congrats! Where?"
        and two["next_lines"][0] == ""
    )
    # Order within a block is by time, then by row; a "speaker" column names people.
    shuffled = chat().reverse().with_columns(pl.Series("speaker", ["B", "A", "B", "A"]))
    later = shuffled.with_columns(
        pl.when(pl.col("event_id") == "e0")
        .then(pl.lit(T.replace(hour=15)))
        .otherwise(pl.col("created_at"))
        .alias("created_at")
    )
    got = add_context(later, before=1, after=1)
    assert got["event_id"].to_list() == ["e3", "e2", "e1", "e0"]  # rows keep their order
    assert (
        got.filter(pl.col("event_id") == "e0")["prev_lines"][0] == "B: Congrats! Where?"
    )  # e0 is now last
    assert got.filter(pl.col("event_id") == "e2")["line"][0] == "A: At the zoo."
    # A session is a block's posts of one day: the next day starts a new one.
    days = chat().with_columns(
        pl.Series("created_at", [T, T, T.replace(day=9), T], pl.Datetime("us", "UTC"))
    )
    split = add_context(days, before=1, after=1)
    assert split["next_lines"][1] == "" and split["prev_lines"][2] == ""
    assert split["session_text"][2] == "Ann: At the zoo."
    nobody = add_context(chat().with_columns(pl.lit(None, pl.Utf8).alias("user_id")))
    assert nobody["line"][0] == "Guess what, I got a new job!"
    with pytest.raises(ValidationError, match="representation.before"):
        add_context(chat(), before=-1)


def test_the_previous_turn_finds_an_answer_that_does_not_repeat_the_question():
    config = {
        "retriever": {"type": "bm25", "doc_template": "{prev_lines}\n{line}"},
        "representation": {"before": 1, "after": 0},
    }
    with_context = Pipeline.from_config(config).fit(chat())
    assert "e2" in with_context.search("Where is Ann's new job?", k=3)["event_id"].to_list()
    plain = Pipeline.from_config({"retriever": {"type": "bm25"}}).fit(chat())
    assert (
        "e2" not in plain.search("Where is Ann's new job?", k=3)["event_id"].to_list()
    )  # "At the zoo." alone


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_service_keeps_neighbours_in_step_with_the_store(tmp_path, tmp_path_factory, backend):
    """With a [representation], a post's indexed text depends on its block: the service
    re-indexes the block when a post arrives or goes, and names speakers by name."""
    config = tmp_path / "ctx.toml"
    config.write_text(
        "[representation]\nbefore = 1\nafter = 0\n"
        '[retriever]\ntype = "bm25"\ndoc_template = "{prev_lines}\\n{line}"\n'
    )
    url = (
        f"sqlite:///{tmp_path / 'm.db'}" if backend == "sqlite" else postgres_url(tmp_path_factory)
    )
    app = create_app(
        {
            "database_url": url,
            "outbox_dir": str(tmp_path / "o"),
            "secret_key": "k",
            "pipeline_config": str(config),
        }
    )
    c = app.test_client()
    ann, floor, blocks = user(c, app, "Ann")
    bo, _, _ = user(c, app, "Bo")
    c.post(f"/floors/{floor}/public", headers=ann)
    ann_id = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]
    post = lambda h, text, at: c.post(  # noqa: E731
        f"/floors/{floor}/blocks/{blocks['forum']}/events",
        headers=h,
        json={"text": text, "created_at": at},
    ).get_json()["event_id"]
    ask = lambda q: [  # noqa: E731
        i["text"]
        for i in c.post(
            "/agent/memory/query",
            headers=ann,
            json={
                "user_id": ann_id,
                "query": q,
                "floor_ids": [floor],
                "k": 5,
            },
        ).get_json()["items"]
    ]
    post(ann, "Guess what, I got a new job!", "2024-01-01T10:00:00Z")
    assert ask("new job") == ["Guess what, I got a new job!"]  # the index starts here
    where = post(bo, "Congrats! Where?", "2024-01-01T10:01:00Z")
    post(ann, "At the zoo.", "2024-01-01T10:02:00Z")
    assert "At the zoo." not in ask("new job")  # its neighbour is Bo's question
    assert set(ask("Bo")) == {
        "Congrats! Where?",
        "At the zoo.",
    }  # speakers are names (Bo's line, its follower)
    post(
        bo, "Tomorrow I start a new job too.", "2024-01-02T09:00:00Z"
    )  # the next day: another session
    assert "At the zoo." not in ask("new job")
    c.delete(f"/events/{where}", headers=bo)
    assert "At the zoo." in ask("new job")  # now it follows the job line directly
    app.extensions["memkit"]["engine"].dispose()


def busy_day(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "event_id": [f"e{i:03d}" for i in range(n)],
            "floor_id": ["f"] * n,
            "block_id": ["b"] * n,
            "block_type": ["feed"] * n,
            "user_id": ["Ann"] * n,
            "text": [f"post {i}" for i in range(n)],
            "created_at": [T.replace(minute=0, second=0, microsecond=i) for i in range(n)],
            "tags": [[]] * n,
        },
        schema_overrides={"created_at": pl.Datetime("us", "UTC")},
    )


def test_a_busy_block_day_is_cut_into_runs_in_posting_order():
    ctx = add_context(
        busy_day(150).reverse(), max_session=64
    )  # row order does not matter, posting order does
    by_id = dict(zip(ctx["event_id"], ctx["session_text"]))
    assert by_id["e000"].split("\n") == [f"Ann: post {i}" for i in range(64)]
    assert by_id["e063"] == by_id["e000"] and by_id["e064"].split("\n")[0] == "Ann: post 64"
    assert by_id["e149"].split("\n") == [f"Ann: post {i}" for i in range(128, 150)]
    # A LoCoMo-sized session (43 turns) is one run, as before the cap.
    assert set(add_context(busy_day(43))["session_text"]) == {
        "\n".join(f"Ann: post {i}" for i in range(43))
    }
    with pytest.raises(ValidationError, match="max_session"):
        add_context(busy_day(3), max_session=0)


def test_a_new_post_re_indexes_its_run_not_its_whole_day(tmp_path):
    """A post arriving at the end of a busy block-day changes the documents of its run
    only (session text, the previous post's next line): only those are re-indexed."""
    config = tmp_path / "ctx.toml"
    config.write_text(
        "[representation]\nbefore = 1\nafter = 1\nmax_session = 16\n"
        '[retriever]\ntype = "bm25"\ndoc_template = "{session_text}"\n'
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
    uid = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]
    path = f"/floors/{floor}/blocks/{blocks['feed']}/events"
    body = {
        "events": [
            {"text": f"post number {i}", "created_at": f"2024-01-01T10:{i // 60:02d}:{i % 60:02d}Z"}
            for i in range(100)
        ]
    }
    assert c.post(path + "/batch", headers=ann, json=body).status_code == 200
    index = app.extensions["memkit"]["memory"].warm()
    before = index.reindexed
    r = c.post(
        path,
        headers=ann,
        json={"text": "the flamingo arrived", "created_at": "2024-01-01T11:00:00Z"},
    )
    assert r.status_code == 200
    assert index.reindexed - before == 5  # the last run: posts 96-99 and the new one, not all 101
    items = c.post(
        "/agent/memory/query",
        headers=ann,
        json={"user_id": uid, "query": "flamingo", "floor_ids": [floor], "k": 10},
    ).get_json()["items"]
    # Its run's posts share its session text; posts of earlier runs do not.
    assert {i["text"] for i in items} == {"the flamingo arrived"} | {
        f"post number {i}" for i in range(96, 100)
    }
    app.extensions["memkit"]["engine"].dispose()


def test_only_posts_shaped_like_chat_lines_get_context():
    """With chat_types, a post of another block type, or a long one, stands alone: its
    text, no neighbours, no session; the chat lines around it keep theirs, without it."""
    events = chat().with_columns(pl.Series("block_type", ["feed", "blog", "feed", "feed"]))
    long = "Ann's essay. " + "word " * 120
    events = events.with_columns(
        pl.when(pl.col("event_id") == "e2")
        .then(pl.lit(long))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    ctx = add_context(events, before=1, after=1, chat_types=["feed", "forum"], chat_max_chars=500)
    assert ctx["chat"].to_list() == [True, False, False, True]
    assert ctx["chat_block"].to_list() == [True, False, True, True]  # the long post is a feed's
    assert add_context(events, before=1, after=1)["chat_block"].to_list() == [True] * 4
    assert (
        ctx["line"][1] == "Congrats! Where?"
        and ctx["prev_lines"][1] == ""
        and ctx["next_lines"][1] == ""
    )
    assert ctx["session_text"][1] == "" and ctx["line"][2] == long and ctx["session_text"][2] == ""
    # a chat line's context is the chat lines around it: a post that stands alone lends
    # none (a user's short turn between an assistant's long answers is not read as them)
    assert ctx["next_lines"][0] == ""
    plain = add_context(events, before=1, after=1)  # without chat_types every post is a chat line
    assert plain["next_lines"][0] == "Bo: Congrats! Where?" and plain["prev_lines"][2] == (
        "Bo: Congrats! Where?"
    )
    assert (
        ctx["line"][0] == "Ann: Guess what, I got a new job!"
        and ctx["session_text"][3] == "Bo: My sister visited."
    )
    # without chat_types every post is a chat line
    assert add_context(events, before=1, after=1)["chat"].all()
    # a feed of a user and an assistant: the user's short turns around the long answer
    answer = "Here are some ideas for your trip. " + "Visit the old town. " * 40
    feed = chat().with_columns(
        pl.when(pl.col("event_id") == "e1")
        .then(pl.lit(answer))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    ctx = add_context(feed, before=1, after=1, chat_types=["feed"], chat_max_chars=500)
    assert ctx["next_lines"][0] == "" and ctx["prev_lines"][2] == ""
    assert ctx["chat"].to_list() == [True, False, True, True]
    with pytest.raises(ValidationError, match="representation.chat_max_chars"):
        add_context(events, chat_types=["feed"], chat_max_chars=0)


def test_one_posts_line_is_the_line_add_context_writes():
    """Representation.line (a post without its frame: the answer writer's) follows the
    same rule as add_context's ``line`` column: chat types only, up to chat_max_chars,
    only with a speaker."""
    from memkit.retrieval.representation import Representation

    rep = Representation(chat_types=["feed", "forum"], chat_max_chars=20)
    t = datetime(2024, 3, 1, tzinfo=timezone.utc)
    rows = [
        ("a", "feed", "Mia", "short chat line"),
        ("b", "forum", "Tom", "a forum post far longer than twenty"),
        ("c", "blog", "Ann", "a blog post"),
        ("d", "feed", "", "nobody named"),
        ("e", "quiz", "Bo", "quiz?"),
    ]
    events = pl.DataFrame(
        {
            "event_id": [r[0] for r in rows],
            "block_type": [r[1] for r in rows],
            "speaker": [r[2] for r in rows],
            "text": [r[3] for r in rows],
            "block_id": ["b1"] * 5,
            "floor_id": ["f1"] * 5,
            "created_at": [t] * 5,
        }
    )
    framed = rep(events)["line"].to_list()
    assert framed == [rep.line(r) for r in events.to_dicts()]
    assert framed[0] == "Mia: short chat line" and framed[1:] == [r[3] for r in rows[1:]]
