"""memkit's metrics against two independent implementations: ranx (in memory) and
trec_eval (pytrec-eval-terrier) reading the TREC run file the harness writes."""

import polars as pl
import pytest
import pytrec_eval
from ranx import Qrels, Run, evaluate

from memkit.datasets import load_any
from memkit.evaluation.harness import evaluate_config
from memkit.evaluation.metrics import METRICS, per_query, read_trec_run
from tests.conftest import shared_dataset

TREC = {
    "recall@5": "recall_5",
    "recall@10": "recall_10",
    "recall@25": "recall_25",
    "recall@50": "recall_50",
    "ndcg@10": "ndcg_cut_10",
}


def trec_eval_scores(run_path, qrels: pl.DataFrame) -> dict:
    q = {}
    for qid, e, rel in qrels.iter_rows():
        q.setdefault(qid, {})[e] = int(rel)
    full, top10 = {}, {}
    for qid, e, rank, score in (
        read_trec_run(run_path).select("query_id", "event_id", "rank", "score").iter_rows()
    ):
        full.setdefault(qid, {})[e] = score
        if rank <= 10:
            top10.setdefault(qid, {})[e] = score
    out = pytrec_eval.RelevanceEvaluator(q, set(TREC.values())).evaluate(full)
    # MRR@10 is trec_eval's recip_rank on the run cut at 10.
    rr = pytrec_eval.RelevanceEvaluator(q, {"recip_rank"}).evaluate(top10)
    return {
        qid: {
            **{m: out[qid][t] for m, t in TREC.items()},
            "mrr@10": rr.get(qid, {}).get("recip_rank", 0.0),
        }
        for qid in out
    }


@pytest.mark.heavy
@pytest.mark.parametrize(
    "dataset, config", [("cast2021", "hybrid"), ("locomo/locomo-dev.json", "bm25")]
)
def test_harness_metrics_equal_trec_eval_and_ranx(dataset, config, tmp_path):
    from memkit.config import load_config, resolve_config

    ds = load_any(shared_dataset(dataset))
    res = evaluate_config(load_config(resolve_config(config)), ds)
    path = res.write_run(tmp_path / "run.trec")
    # trec_eval reads the file: every query, every metric, to 1e-6.
    ref = trec_eval_scores(path, ds.qrels)
    mine = {row["query_id"]: row for row in res.per_query.iter_rows(named=True)}
    assert set(mine) >= {q for q in ref if q in set(ds.qrels["query_id"])}
    # trec_eval leaves out a query its run has no row for (a question naming days whose
    # posts match none of its terms): the harness scores it 0 on every metric.
    empty = set(mine) - set(ref)
    assert not empty & set(res.run["query_id"]) and all(
        mine[q][m] == 0 for q in empty for m in METRICS
    )
    for qid, scores in ref.items():
        for m in METRICS:
            assert mine[qid][m] == pytest.approx(scores[m], abs=1e-6), (qid, m)
    # ... and the means agree with ranx's.
    qrels = Qrels(
        {q: dict(zip(g["event_id"], g["relevance"])) for (q,), g in ds.qrels.group_by("query_id")}
    )
    run = Run(
        {
            q: {e: 1.0 / r for e, r in zip(g["event_id"], g["rank"])}
            for (q,), g in res.run.group_by("query_id")
        }
    )
    ranx_means = evaluate(qrels, run, METRICS, make_comparable=True)
    for m in METRICS:
        assert res.summary["all"][m] == pytest.approx(ranx_means[m], abs=1e-6), m


def test_metrics_by_hand():
    run = pl.DataFrame(
        {
            "query_id": ["a"] * 4 + ["b"],
            "event_id": ["x", "r1", "y", "r2", "z"],
            "score": [4.0, 3.0, 2.0, 1.0, 1.0],
            "rank": [1, 2, 3, 4, 1],
            "match_type": ["keyword"] * 5,
        }
    )
    qrels = pl.DataFrame(
        {
            "query_id": ["a", "a", "a", "b", "c"],
            "event_id": ["r1", "r2", "r3", "q", "w"],
            "relevance": [1, 1, 1, 1, 0],
        }
    )
    t = per_query(run, qrels, ["recall@2", "recall@5", "mrr@10", "ndcg@10"]).to_dicts()
    assert [r["query_id"] for r in t] == ["a", "b"]  # c has no relevant event: not scored
    a, b = t
    assert a["recall@2"] == pytest.approx(1 / 3) and a["recall@5"] == pytest.approx(2 / 3)
    assert a["mrr@10"] == pytest.approx(0.5)
    import math

    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert a["ndcg@10"] == pytest.approx(dcg / idcg)
    assert b == {"query_id": "b", "recall@2": 0.0, "recall@5": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}
