"""What eval measured is what the service serves: one LoCoMo-dev conversation posted
through the API, the encoder adapted to it by `memkit adapt`, and asked its questions gives
the rankings `memkit eval` gives with the same (default) configuration on that conversation."""

import numpy as np
import polars as pl
import pytest

from memkit.cli import main
from memkit.core.tables import Dataset
from memkit.datasets.locomo import read_locomo
from memkit.evaluation.metrics import read_trec_run
from memkit.pipeline import DEFAULT_CONFIG
from server import create_app
from server.search.adapt import adapt
from tests.conftest import shared_dataset
from tests.service_fixtures import user

CONVERSATION = "conv-30"
K = 10


@pytest.mark.heavy
def test_api_rankings_equal_eval_rankings(tmp_path):
    ds = read_locomo(shared_dataset("locomo/locomo-dev.json"), "locomo-dev")
    # The turns of a session share one time; a microsecond apiece keeps their order in the
    # store (which orders posts by time, then id) the same as in the dataset.
    events = (
        ds.events.filter(pl.col("floor_id") == CONVERSATION)
        .with_row_index("i")
        .with_columns(pl.col("created_at") + pl.duration(microseconds=pl.col("i")))
        .drop("i")
    )
    queries = ds.queries.filter(pl.col("floor_ids").list.first() == CONVERSATION)
    qrels = ds.qrels.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
    one = Dataset(f"locomo-{CONVERSATION}", events, queries, qrels)
    one.write(tmp_path / "data")
    # One user asks every question in order, as below: eval --sequential asks them so.
    assert (
        main(
            [
                "eval",
                "--dataset",
                str(tmp_path / "data"),
                "--config",
                str(DEFAULT_CONFIG),
                "--k",
                str(K),
                "--sequential",
                "--no-mlflow",
                "--run-out",
                str(tmp_path / "run.trec"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    eval_run = read_trec_run(tmp_path / "run.trec")

    app = create_app(
        {
            "database_url": f"sqlite:///{tmp_path / 'memkit.db'}",
            "outbox_dir": str(tmp_path / "outbox"),
            "secret_key": "test",
            "pipeline_config": str(DEFAULT_CONFIG),
            "block_quota": 100,
            "rate_limit_query": "1000000000 per minute",  # every question of the conversation
        }
    )
    c = app.test_client()
    speakers = events["user_id"].unique(maintain_order=True).to_list()
    assert len(speakers) == 2
    accounts = {name: user(c, app, name) for name in speakers}  # each speaker posts as themself
    h, floor, _ = accounts[speakers[0]]
    assert c.post(f"/floors/{floor}/public", headers=h).status_code == 200  # so the other may post
    uid = c.get("/auth-service/profile", headers=h).get_json()["profile"]["user_id"]
    sessions = {}  # a block per session, as in the dataset (posts' neighbours stay within it)
    for b in events["block_id"].unique(maintain_order=True).to_list():
        # One title for all: the dataset's sessions have none, and a title of one block alone
        # would teach the adapted encoder title -> post pairs that eval's model never saw.
        r = c.post(f"/floors/{floor}/blocks", headers=h, json={"block_type": 1, "title": "chat"})
        assert r.status_code == 200, r.get_json()
        sessions[b] = r.get_json()["block_id"]
    original = {}  # API event id -> dataset event id
    for e in events.iter_rows(named=True):  # in dataset order, so ties break the same way
        r = c.post(
            f"/floors/{floor}/blocks/{sessions[e['block_id']]}/events",
            headers=accounts[e["user_id"]][0],
            json={"text": e["text"], "created_at": e["created_at"].isoformat()},
        )
        assert r.status_code == 200, r.get_json()
        original[r.get_json()["event_id"]] = e["event_id"]

    # The default adapts its encoder to the posts it indexes: eval to the conversation's, the
    # service to the store's when `memkit adapt` runs. The same posts teach the same model.
    report = adapt(app.extensions["memkit"]["memory"])
    assert report.encoder.startswith("minilm-ft-") and report.version == 1

    compared = 0
    for q in queries.iter_rows(named=True):
        r = c.post(
            "/agent/memory/query",
            headers=h,
            json={
                "user_id": uid,
                "query": q["text"],
                "floor_ids": [floor],
                "k": K,
                "summary_needed": "0",
            },
        )
        assert r.status_code == 200, r.get_json()
        items = r.get_json()["items"]
        want = eval_run.filter(pl.col("query_id") == q["query_id"]).sort("rank")
        assert items or want.is_empty(), (
            f"{q['query_id']}: the service found nothing relevant for {q['text']!r}"
        )
        assert [original[i["event_id"]] for i in items] == want["event_id"].to_list(), q["query_id"]
        assert np.allclose([i["score"] for i in items], want["score"].to_numpy(), atol=1e-5)
        compared += bool(items)
    assert compared > 50 and compared >= queries.height - 5  # a few name days nothing was posted on
    app.extensions["memkit"]["engine"].dispose()
