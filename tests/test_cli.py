import polars as pl
import pytest

from memkit.cli import DEMO, main
from memkit.config import CONFIG_DIR, load_config, resolve_config
from memkit.datasets import load_any
from memkit.evaluation.harness import evaluate_config
from memkit.evaluation.metrics import read_trec_run


def test_eval_on_the_demo_set_prints_the_table_and_writes_a_run(tmp_path, capsys):
    run_file = tmp_path / "demo.run"
    rc = main(
        [
            "eval",
            "--dataset",
            str(DEMO),
            "--config",
            str(resolve_config("bm25")),
            "--run-out",
            str(run_file),
            "--no-mlflow",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "| bm25 | 12 |" in out and "Total:" in out
    run = read_trec_run(run_file)
    # Every question with a matching term, the follow-ups included; the unanswerable d10
    # ("Sam's favourite mountain") shares no term with any post, so BM25 returns nothing.
    assert set(run["query_id"]) == {f"d{i}" for i in range(1, 10)} | {"c1-1", "c1-2", "c1-3"}
    assert (tmp_path / "out" / "demo" / "report.md").exists()
    assert (tmp_path / "out" / "demo" / "recall_at_k.png").stat().st_size > 1000


@pytest.mark.heavy  # a whole eval of the demo set (8 s); make eval runs the real one
def test_eval_without_config_uses_the_default(tmp_path, capsys):
    assert main(["eval", "--dataset", str(DEMO), "--no-mlflow", "--out", str(tmp_path)]) == 0
    assert "| default |" in capsys.readouterr().out


def test_bad_arguments_are_reported_not_raised(tmp_path, capsys):
    assert main(["eval", "--dataset", str(tmp_path), "--no-mlflow"]) == 2
    assert "not a dataset" in capsys.readouterr().err
    assert main(["eval", "--no-mlflow"]) == 2


@pytest.mark.heavy  # an eval logged to MLflow (7 s)
def test_mlflow_run_has_params_metrics_tags_and_artifacts(tmp_path, monkeypatch):
    import mlflow

    from memkit.evaluation.tracking import log_result

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    ds = load_any(DEMO)
    res = evaluate_config(load_config(resolve_config("hybrid")), ds)
    extra = tmp_path / "note.md"
    extra.write_text("hello")
    run_id = log_result(res, artifacts=[extra], experiment="test-exp")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = mlflow.get_run(run_id)
    assert run.data.params["retriever.method"] == "convex"
    assert run.data.params["retriever.retrievers.0.type"] == "bm25"
    assert run.data.metrics["recall_at_10"] == res.summary["all"]["recall@10"]
    assert "category/single-hop/recall_at_10" in run.data.metrics
    assert run.data.tags["dataset"] == "demo" and len(run.data.tags["git_commit"]) >= 7
    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id)}
    assert {"hybrid.run", "per_query.csv", "summary.json", "note.md"} <= names
    per_query = pl.read_csv(
        mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="per_query.csv")
    )
    assert per_query.height == res.per_query.height


@pytest.mark.heavy
def test_all_falls_back_to_the_demo_set_without_shared_data(tmp_path, monkeypatch, capsys):
    from memkit.cli import CONVERSATIONS, found_datasets

    suites = [  # train/ is the reader's training data: never scored
        (p, ["text"])
        for p in sorted(CONVERSATIONS.iterdir())
        if (p / "events.jsonl").exists() and p.name != "train"
    ]
    assert len(suites) >= 2  # the project's own conversation suites come with every run
    monkeypatch.setenv("MEMKIT_DATA", str(tmp_path / "nowhere"))
    assert found_datasets() == [(DEMO, ["text"])] + suites
    monkeypatch.setenv("MEMKIT_DATA", str(tmp_path))
    (tmp_path / "cast").mkdir()
    for name in ("events.jsonl", "queries.jsonl", "qrels.tsv"):
        (tmp_path / "cast" / name).write_text((DEMO / name).read_text())
    assert (
        found_datasets() == [(tmp_path / "cast", ["text", "rewrite"])] + suites
    )  # it has rewrites
    monkeypatch.setenv("MEMKIT_DATA", str(tmp_path / "nowhere"))
    assert (
        main(
            [
                "eval",
                "--all",
                "--config",
                str(resolve_config("bm25")),
                "--no-mlflow",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    assert "## demo:" in capsys.readouterr().out


@pytest.mark.heavy
def test_datasets_scored_in_parallel_give_the_figures_of_one_after_another(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(
        "MEMKIT_DATA", str(tmp_path / "nowhere")
    )  # the demo set and the conversation suites
    ledgers = []
    for jobs in ("1", "2"):
        assert (
            main(
                [
                    "eval",
                    "--all",
                    "--jobs",
                    jobs,
                    "--config",
                    str(resolve_config("bm25")),
                    "--config",
                    str(resolve_config("dense")),
                    "--no-mlflow",
                    "--out",
                    str(tmp_path / jobs),
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert out.index("## demo:") < out.index(
            "## conversations-dev:"
        )  # reported in the datasets' order
        ledgers.append(out[out.index("## Ledger") : out.index("Total:")])
    assert ledgers[0] == ledgers[1] and "| bm25 |" in ledgers[0] and "| dense |" in ledgers[0]


@pytest.mark.heavy
def test_postgres_configs_score_datasets_side_by_side_on_a_fresh_database(
    tmp_path, tmp_path_factory, monkeypatch, capsys
):
    """A database without pgvector yet: the type is made where every dataset's schema sees
    it (two datasets scored at once, each in its own schema), and a second run, which finds
    its tables filled, gives the same figures."""
    from tests.service_fixtures import postgres_url

    monkeypatch.setenv("MEMKIT_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("MEMKIT_DATABASE_URL", postgres_url(tmp_path_factory))
    ledgers = []
    for run in ("first", "again"):
        assert (
            main(
                [
                    "eval",
                    "--all",
                    "--jobs",
                    "2",
                    "--config",
                    str(CONFIG_DIR / "postgres.toml"),
                    "--no-mlflow",
                    "--no-answers",
                    "--out",
                    str(tmp_path / run),
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        ledgers.append(out[out.index("## Ledger") : out.index("Total:")])
    assert "| postgres |" in ledgers[0] and ledgers[0] == ledgers[1]


def test_eval_scores_answers_and_writes_them_as_json_lines(tmp_path, capsys):
    import json

    out_file = tmp_path / "answers.jsonl"
    assert (
        main(
            [
                "eval",
                "--dataset",
                str(DEMO),
                "--no-mlflow",
                "--out",
                str(tmp_path),
                "--answers-out",
                str(out_file),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| default | answerable |" in printed and "| default | temporal |" in printed
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    queries = load_any(DEMO).queries
    assert [x["query_id"] for x in lines] == queries["query_id"].to_list()
    assert all(isinstance(x["answer"], str) and x["answer"] for x in lines)
    assert all(
        set(x) == {"query_id", "answer", "quoted", "declined"}
        and isinstance(x["declined"], bool)
        and isinstance(x["quoted"], list)
        for x in lines
    )
    assert all(x["quoted"] == [] for x in lines if x["declined"])  # a decline quotes nothing
    assert all(x["quoted"] for x in lines if not x["declined"])
    res = evaluate_config(load_config(CONFIG_DIR / "default.toml"), load_any(DEMO))
    assert res.answer_summary["answerable"]["gold_recall_n"] == queries["answer"].drop_nulls().len()
    # evidence quoted: the quoted ids checked against the qrels by hand
    gold = {}
    for qid, eid in load_any(DEMO).qrels.select("query_id", "event_id").iter_rows():
        gold.setdefault(qid, set()).add(eid)
    table = res.answers.filter(pl.col("evidence_quoted").is_not_nan())
    assert table.height and all(
        v == float(bool(set(q) & gold[qid]))
        for qid, q, v in table.select("query_id", "quoted", "evidence_quoted").iter_rows()
    )
    assert "| default | answerable | " in printed and "median words" in printed
    assert (
        evaluate_config(load_config(resolve_config("bm25")), load_any(DEMO), answers=False).answers
        is None
    )
