"""Search-side attacks (SECURITY.md lists them by finding): a stranger's batch into
someone's public floor froze the owner's queries, and the embedding cache, shared by
every user, told one user by timing what another had posted or asked. Both failed before
their fixes; the account-side findings are in tests/test_attacks_accounts.py."""

from __future__ import annotations

import threading
import uuid

from memkit.pipeline import Pipeline
from tests.test_attacks import post, query, two_users


def hold_encoding(monkeypatch, marker: str):
    """Make the first encoding of posts holding ``marker`` wait until released (the batch
    takes as long as we say). Returns (entered, release)."""
    entered, release, real, calls = threading.Event(), threading.Event(), Pipeline.precompute, []

    def held(self, events, only=None, documents=None):
        if any(marker in t for t in events["text"].to_list()) and not calls:
            calls.append(1)
            entered.set()
            release.wait(120)
        return real(self, events, only, documents)

    monkeypatch.setattr(Pipeline, "precompute", held)
    return entered, release


def in_thread(call) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.append(call()))
    t.start()
    return t, out


# -- 2. a stranger's batch into my public floor froze my queries -----------------------------------
def test_a_strangers_batch_into_my_floor_holds_neither_my_queries_nor_my_writes(app, monkeypatch):
    c, u = two_users(app)
    ann_h, floor, blocks, _ = u["ann"]
    assert c.post(f"/floors/{floor}/public", headers=ann_h).status_code == 200
    assert post(c, u["ann"], "Ann's sailing diary").status_code == 200
    assert query(c, u["ann"], "sailing").status_code == 200  # the index is built
    entered, release = hold_encoding(monkeypatch, "STRANGER")
    bo_h = u["bo"][0]
    batch = {"events": [{"text": f"STRANGER post {i} about sailing"} for i in range(20)]}
    writer, written = in_thread(
        lambda: app.test_client().post(
            f"/floors/{floor}/blocks/{blocks['feed']}/events/batch", headers=bo_h, json=batch
        )
    )
    try:
        assert entered.wait(60), "the batch never started encoding"
        # While Bo's batch is being encoded, Ann asks and writes on her own floor.
        reader, asked = in_thread(lambda: query(app.test_client(), u["ann"], "sailing"))
        reader.join(30)  # held by the batch, it would wait for the release below
        query_held = reader.is_alive()
        poster, posted = in_thread(
            lambda: post(app.test_client(), u["ann"], "Ann's kayak log", block="blog")
        )
        poster.join(30)
        post_held = poster.is_alive()
        if not (query_held or post_held):  # read your own writes, still during the batch
            found = [
                i["text"] for i in query(app.test_client(), u["ann"], "kayak").get_json()["items"]
            ]
    finally:
        release.set()
        writer.join(120)
    assert not query_held, "Ann's query on her own floor waited for Bo's batch"
    assert not post_held, "Ann's post to her own floor waited for Bo's batch"
    assert (
        asked[0].status_code == 200
        and asked[0].get_json()["items"][0]["text"] == "Ann's sailing diary"
    )
    assert posted[0].status_code == 200 and "Ann's kayak log" in found
    assert written[0].status_code == 200
    # Once indexed (Bo's own request waits for that), the batch is searchable by everyone.
    texts = {i["text"] for i in query(c, u["ann"], "STRANGER post", k=50).get_json()["items"]}
    assert texts >= {f"STRANGER post {i} about sailing" for i in range(20)}


# -- 3. the embedding cache, shared by everyone, was a timing oracle -------------------------------
def model_work(app, call) -> int:
    """How many texts the encoding model ran on during ``call()``: a cache hit is what made
    a text quick (52-75 ms against 107-125 ms in the report), so equal counts are equal
    timings as far as the cache goes."""
    retriever = app.extensions["memkit"]["memory"].index.pipeline.retriever
    encoder = retriever.first.retrievers[1].text_encoder
    before = encoder.encoded
    call()
    return encoder.encoded - before


def ann_and_bo_with_secrets(app, template: str, numbers: range):
    """Ann and Bo, the index loaded, Bo's first post's sentences encoded; candidate texts
    ``template`` of each number (unique to this run, so no earlier test left them in the
    cache), and the one Ann posts on her own private floor (a blog post: its document is
    the text alone; its sentences are encoded for answers)."""
    c, u = two_users(app)
    run = uuid.uuid4().hex[:6]
    candidates = [template.format(n=n, run=run) for n in numbers]
    secret = candidates[len(candidates) // 2]
    assert post(c, u["bo"], "Bo's notes on the lake").status_code == 200
    for _ in range(2):
        assert query(c, u["bo"], "lake", summary_needed="1").status_code == 200
    assert post(c, u["ann"], secret, block="blog").status_code == 200
    return c, u, candidates, secret


def test_another_users_posts_and_questions_make_no_query_of_mine_quicker(app):
    c, u, candidates, secret = ann_and_bo_with_secrets(
        app, "my garage code is {n} ({run})", range(4800, 4825)
    )
    assert query(c, u["ann"], secret, summary_needed="1").status_code == 200  # and Ann asks it
    work = {
        t: model_work(app, lambda t=t: query(c, u["bo"], t, summary_needed="1")) for t in candidates
    }
    assert work[secret] > 0 and len(set(work.values())) == 1, (
        work
    )  # Ann's text is no cheaper for Bo


def test_another_users_posts_make_no_write_of_mine_quicker(app):
    c, u, candidates, secret = ann_and_bo_with_secrets(
        app, "the alarm code is {n} ({run})", range(1200, 1210)
    )
    work = {t: model_work(app, lambda t=t: post(c, u["bo"], t, block="blog")) for t in candidates}
    assert work[secret] > 0 and len(set(work.values())) == 1, work
