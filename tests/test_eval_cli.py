"""``memkit eval`` for a data scientist: configs that inherit whole configs, settings from
the command line, configs by name, outputs in the user's folder, plugins that register a
retriever (given the time of asking), tables per category with intervals, all-pairs
significance, in-sample marks; and the loader and time-filter messages."""

from __future__ import annotations

import json
import os
import sys
import warnings
from datetime import datetime, timezone
from importlib.metadata import EntryPoint
from pathlib import Path

import polars as pl
import pytest

from memkit.cli import DEMO, main
from memkit.config import (
    CONFIG_DIR,
    CONFIG_PATH_ENV,
    config_dirs,
    config_files,
    deep_merge,
    load_config,
    parse_override,
    resolve_config,
    shipped_configs,
)
from memkit.core.errors import ValidationError
from memkit.datasets import load_any
from memkit.evaluation.harness import evaluate_config, in_sample
from memkit.evaluation.metrics import read_trec_run

PROJECT = Path(__file__).resolve().parents[1]
EVAL_CONFIGS = PROJECT / "eval" / "configs"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- configs ---------------------------------------------------------------------------------
def test_a_whole_config_inherits_another_by_name_with_a_deep_merge(tmp_path):
    """``from = "default"`` at the top: every table of the default, the ones written here
    merged key by key, named after its own file."""
    mine = write(
        tmp_path / "mine.toml",
        'from = "default"\n[retriever]\ncandidates = 30\n[relevance]\nmin_similarity = 0.3\n',
    )
    config, default = load_config(mine), load_config("default")
    assert config["name"] == "mine" and "from" not in config
    assert config["retriever"]["candidates"] == 30
    assert config["retriever"]["first"] == default["retriever"]["first"]
    assert config["retriever"]["model"] == default["retriever"]["model"]
    assert config["relevance"] == {**default["relevance"], "min_similarity": 0.3}
    for section in ("answer", "encoder", "representation", "contextualizer"):
        assert config[section] == default[section]  # nothing forgotten falls back


def test_inheritance_by_path_chains_and_refuses_a_loop(tmp_path):
    write(tmp_path / "base.toml", 'from = "bm25"\n[retriever]\nk1 = 0.9\n')
    write(tmp_path / "child.toml", 'from = "base.toml"\n[retriever]\nb = 0.4\n')
    assert load_config(tmp_path / "child.toml")["retriever"] == {
        "type": "bm25",
        "k1": 0.9,
        "b": 0.4,
    }
    write(tmp_path / "a.toml", 'from = "b.toml"\n')
    write(tmp_path / "b.toml", 'from = "a.toml"\n')
    with pytest.raises(ValidationError, match="cannot inherit itself"):
        load_config(tmp_path / "a.toml")
    write(tmp_path / "bad.toml", "from = 3\n")
    with pytest.raises(ValidationError, match="expected a config's name or path"):
        load_config(tmp_path / "bad.toml")


def test_deep_merge_merges_tables_and_replaces_lists():
    base = {"a": {"x": 1, "y": {"p": 1, "q": 2}}, "l": [{"t": 1}, {"t": 2}]}
    over = {"a": {"y": {"q": 3}}, "l": [{"t": 9}]}
    assert deep_merge(base, over) == {"a": {"x": 1, "y": {"p": 1, "q": 3}}, "l": [{"t": 9}]}
    assert base["a"]["y"]["q"] == 2  # the base is left as it was


def test_a_config_is_found_by_its_name_in_the_package_then_the_projects_eval_configs():
    assert resolve_config("default") == CONFIG_DIR / "default.toml"  # what the service serves
    assert resolve_config("bm25.toml") == resolve_config("bm25") == EVAL_CONFIGS / "bm25.toml"
    assert load_config("bm25") == load_config(EVAL_CONFIGS / "bm25.toml")
    with pytest.raises(ValidationError, match="nor a config of that name in") as err:
        load_config("bm26")
    assert "no such file: bm26" in str(err.value)
    assert str(CONFIG_DIR) in str(err.value) and str(EVAL_CONFIGS) in str(err.value)
    assert "bm25, default" in str(err.value)  # the names it could have meant


def test_the_package_ships_what_is_served_and_the_experiments_stay_in_eval():
    """The served configs travel in the wheel; the experiments are the checkout's. No name
    is in both (``--all`` scores one file per name: one of the two would be left out)."""
    assert shipped_configs() == ["default", "postgres", "reader"]
    experiments = sorted(p.stem for p in EVAL_CONFIGS.glob("*.toml"))
    assert {"bm25", "dense", "hybrid", "default-fresh", "default-lean"} <= set(experiments)
    assert not set(experiments) & set(shipped_configs())
    assert [p.stem for p in config_files()] == sorted(
        shipped_configs() + experiments, key=lambda n: n + ".toml"
    )


def test_a_name_is_found_from_a_folder_below_the_project_and_not_outside_it(tmp_path, monkeypatch):
    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    project = tmp_path / "project"
    (project / "eval" / "configs").mkdir(parents=True)
    (project / "notebooks").mkdir()
    mine = write(project / "eval" / "configs" / "mine.toml", 'from = "bm25"\n')
    write(project / "eval" / "configs" / "bm25.toml", '[retriever]\ntype = "bm25"\nk1 = 0.5\n')
    write(project / "eval" / "configs" / "default.toml", '[retriever]\ntype = "tfidf"\n')
    monkeypatch.chdir(project / "notebooks")  # a notebook runs in its own folder
    assert resolve_config("mine") == mine
    assert load_config("mine")["retriever"] == {"type": "bm25", "k1": 0.5}  # its own bm25
    assert resolve_config("default") == CONFIG_DIR / "default.toml"  # the package's first
    assert config_dirs() == [CONFIG_DIR, project / "eval" / "configs"]
    monkeypatch.chdir(tmp_path)
    assert config_dirs() == [CONFIG_DIR]
    with pytest.raises(ValidationError, match="nor a config of that name") as err:
        resolve_config("mine")
    assert CONFIG_PATH_ENV in str(err.value)  # says how to name more folders


def test_memkit_config_path_names_more_folders_in_order(tmp_path, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    write(one / "a.toml", '[retriever]\ntype = "bm25"\n')
    write(two / "a.toml", '[retriever]\ntype = "tfidf"\n')
    write(two / "b.toml", '[retriever]\ntype = "tfidf"\n')
    monkeypatch.chdir(tmp_path)  # no eval/configs here or above
    monkeypatch.setenv(CONFIG_PATH_ENV, os.pathsep.join([str(one), str(two)]))
    assert resolve_config("a") == one / "a.toml" and resolve_config("b") == two / "b.toml"
    assert config_files() == [one / "a.toml", two / "b.toml", *sorted(CONFIG_DIR.glob("*.toml"))]
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValidationError, match="no such folder") as err:
        resolve_config("a")
    assert err.value.field == CONFIG_PATH_ENV


def test_set_overrides_one_setting_as_a_toml_literal():
    assert parse_override("retriever.candidates=30") == ("retriever.candidates", 30)
    assert parse_override('contextualizer.type="carry"') == ("contextualizer.type", "carry")
    assert parse_override("retriever.weights=[0.5, 0.5]")[1] == [0.5, 0.5]
    config = load_config("default", {"retriever.candidates": 30})
    assert config["retriever"]["candidates"] == 30
    hybrid = load_config("hybrid", {"retriever.retrievers.0.k1": 0.9})
    assert hybrid["retriever"]["retrievers"][0]["k1"] == 0.9
    with pytest.raises(ValidationError, match="expected a TOML value"):
        parse_override("retriever.type=bm25")  # a string needs its quotes
    with pytest.raises(ValidationError, match="expected KEY=VALUE"):
        parse_override("retriever.candidates")
    with pytest.raises(ValidationError, match="index below 2"):
        load_config("hybrid", {"retriever.retrievers.5.k1": 0.9})


def test_an_unknown_key_set_on_the_command_line_is_refused_naming_it(capsys):
    rc = main(
        [
            "eval",
            "--dataset",
            str(DEMO),
            "--config",
            "bm25",
            "--set",
            "retriever.candidatez=30",
            "--no-mlflow",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "retriever.candidatez: unknown setting" in err and "--set" in err


def test_eval_takes_a_config_by_name_and_a_setting(tmp_path, capsys):
    rc = main(
        [
            "eval",
            "--dataset",
            str(DEMO),
            "--config",
            "bm25",
            "--set",
            "retriever.k1=0.5",
            "--no-mlflow",
            "--no-answers",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0 and "| bm25 | 12 |" in capsys.readouterr().out


# -- outputs ---------------------------------------------------------------------------------
def test_outputs_go_to_the_current_folder_by_default(tmp_path, monkeypatch, capsys):
    """Run from another folder, eval writes its reports there (eval/out), never into the
    checkout memkit is installed from."""
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "--dataset", str(DEMO), "--config", "bm25", "--no-mlflow", "--no-answers"]
    assert main(argv) == 0
    assert (tmp_path / "eval" / "out" / "demo" / "report.md").exists()
    assert f"Reports and plots: {tmp_path / 'eval' / 'out'}" in capsys.readouterr().out


def test_run_out_writes_the_file_named_or_says_what_it_writes(tmp_path, capsys):
    one = tmp_path / "one.run"
    base = ["eval", "--dataset", str(DEMO), "--no-mlflow", "--no-answers"]
    out = ["--out", str(tmp_path / "out")]
    assert main([*base, "--config", "bm25", "--run-out", str(one), *out]) == 0
    assert one.exists() and read_trec_run(one).height > 0
    two = tmp_path / "two.run"
    configs = ["--config", "bm25", "--config", "tfidf"]
    assert main([*base, *configs, "--run-out", str(two), *out]) == 0
    assert not two.exists()
    assert (tmp_path / "two.demo.bm25.run").exists() and (tmp_path / "two.demo.tfidf.run").exists()
    assert f"run: {tmp_path / 'two.demo.bm25.run'}" in capsys.readouterr().err


@pytest.mark.heavy  # every data set found (the demo set and the suites), one config
def test_run_out_with_several_data_sets_writes_one_file_each(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMKIT_DATA", str(tmp_path / "nowhere"))
    run = tmp_path / "all.run"
    argv = ["eval", "--all", "--jobs", "1", "--config", "bm25", "--no-mlflow", "--no-answers"]
    assert main([*argv, "--run-out", str(run), "--out", str(tmp_path / "out")]) == 0
    assert not run.exists()  # each data set's run used to overwrite the one before
    assert (tmp_path / "all.demo.bm25.run").exists()
    assert (tmp_path / "all.conversations-dev.bm25.run").exists()


@pytest.mark.heavy  # MLflow: its store made and migrated, runs logged (a few seconds)
def test_mlflow_store_artifacts_experiment_params_and_in_sample_tag(tmp_path, monkeypatch):
    """--tracking-uri puts the runs there and the artifacts beside it, --experiment names
    the experiment, params are the effective settings (defaults filled in) and a config
    trained on the data set is tagged in_sample=true."""
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "tracking" / "runs.db"
    store.parent.mkdir()
    seen = write(tmp_path / "seen.toml", 'from = "bm25"\ntrained_on = ["demo"]\n')
    argv = ["eval", "--dataset", str(DEMO), "--config", "bm25", "--config", str(seen)]
    argv += ["--no-answers", "--tracking-uri", f"sqlite:///{store}", "--experiment", "mine"]
    assert main(argv) == 0
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlartifacts").exists()
    client = mlflow.MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("mine")
    assert experiment.artifact_location == (store.parent / "mlartifacts").as_uri()
    runs = {r.data.tags["config"]: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"bm25", "seen"}
    params = runs["bm25"].data.params
    assert params["retriever.k1"] == "1.2"  # written in bm25.toml
    assert params["retriever.stemmer"] == "english"  # not written: its default
    assert params["retriever.doc_template"] == "{text}"
    assert runs["seen"].data.tags["in_sample"] == "true"
    assert runs["bm25"].data.tags["in_sample"] == "false"
    artifacts = {a.path for a in client.list_artifacts(runs["bm25"].info.run_id)}
    assert "report.md" in artifacts and any((store.parent / "mlartifacts").iterdir())


def test_the_default_store_is_the_current_folders():
    from memkit.evaluation.tracking import artifact_root, tracking_uri

    if "MLFLOW_TRACKING_URI" not in os.environ:
        assert tracking_uri() == f"sqlite:///{Path.cwd() / 'mlflow.db'}"
    assert tracking_uri("sqlite:////x/y.db") == "sqlite:////x/y.db"
    assert artifact_root("sqlite:////x/y.db") == Path("/x/mlartifacts").as_uri()
    assert artifact_root("http://mlflow.internal:5000") is None  # the server decides
    assert artifact_root("file:///x/mlruns") is None  # a folder store holds its own


# -- plugins and the time of asking ---------------------------------------------------------
def demo_with_times(folder: Path, when: datetime) -> Path:
    """The demo set with a time of asking on every query."""
    folder.mkdir()
    for name in ("events.jsonl", "qrels.tsv", "dataset.json"):
        (folder / name).write_text((DEMO / name).read_text())
    lines = []
    for line in (DEMO / "queries.jsonl").read_text().splitlines():
        if line.strip():
            lines.append(json.dumps({**json.loads(line), "time": when.isoformat()}))
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def fresh_registry(monkeypatch):
    """A copy of the retriever registry, without the plugin's kind, and the plugin module
    unimported: what a new ``memkit`` process starts from."""
    from memkit.retrieval import registry

    kinds = {k: v for k, v in registry.REGISTRY.items() if k != "recency-test"}
    monkeypatch.setattr(registry, "REGISTRY", kinds)
    monkeypatch.delitem(sys.modules, "tests.recency_plugin", raising=False)
    return kinds


def test_a_plugin_registers_a_retriever_that_is_given_the_time_of_asking(
    tmp_path, capsys, fresh_registry
):
    when = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)
    data = demo_with_times(tmp_path / "demo", when)
    # time windows and changed facts off: the retriever's own ranking is what is checked
    config = write(
        tmp_path / "recency.toml",
        'time_windows = false\nchanged_facts = false\n[retriever]\ntype = "recency-test"\n',
    )
    run = tmp_path / "recency.run"
    argv = ["eval", "--dataset", str(data), "--config", str(config), "--no-mlflow"]
    argv += ["--no-answers", "--run-out", str(run), "--out", str(tmp_path / "out")]
    assert main(argv) == 2  # without the plugin the kind is unknown
    assert "recency-test" in capsys.readouterr().err
    assert main([*argv, "--plugin", "tests.recency_plugin"]) == 0
    from tests import recency_plugin

    assert recency_plugin.ASKED_AT and set(recency_plugin.ASKED_AT) == {when}
    ranked = read_trec_run(run).filter(pl.col("rank") == 1)
    events = load_any(data).events
    queries = load_any(data).queries
    for qid, eid in ranked.select("query_id", "event_id").iter_rows():
        floors = queries.filter(pl.col("query_id") == qid)["floor_ids"][0].to_list()
        before = events.filter(
            pl.col("floor_id").is_in(floors) & (pl.col("created_at") <= when)
        ).sort("created_at")
        assert eid == before["event_id"][-1]  # the newest post before the question was asked


def test_plugins_come_from_the_entry_point_group_too(monkeypatch, fresh_registry):
    import memkit.cli as cli

    point = EntryPoint("recency", "tests.recency_plugin", "memkit.plugins")
    monkeypatch.setattr(
        cli, "entry_points", lambda group: [point] if group == "memkit.plugins" else []
    )
    assert cli.load_plugins() == ["tests.recency_plugin"]
    assert "recency-test" in fresh_registry
    with pytest.raises(ValidationError, match="--plugin: 'no_such_plugin_module'"):
        cli.load_plugins(["no_such_plugin_module"])


def test_built_in_retrievers_rank_the_same_given_a_time_of_asking():
    from memkit.retrieval import build

    ds = load_any(DEMO)
    when = datetime(2024, 6, 1, tzinfo=timezone.utc)
    for spec in (
        {"type": "bm25"},
        {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "tfidf"}]},
    ):
        r = build(spec).fit(ds.events)
        plain = r.search(ds.queries.select("query_id", "text"), 10)
        dated = r.search(ds.queries.select("query_id", "text"), 10, now=when)
        assert plain.equals(dated)


# -- tables ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def three_results():
    ds = load_any(DEMO)
    configs = [load_config("bm25"), load_config("tfidf"), load_config("bm25")]
    configs[2] = {**configs[2], "name": "bm25-flat", "retriever": {"type": "bm25", "b": 0.0}}
    return ds, [evaluate_config(c, ds, answers=False) for c in configs]


def test_category_table_has_every_metric_n_and_a_seeded_interval(three_results):
    from memkit.evaluation.compare import category_markdown, category_table
    from memkit.evaluation.metrics import METRICS

    ds, results = three_results
    table = category_table(results)
    assert set(table["metric"]) == set(METRICS)
    counts = results[0].per_query.drop_nulls("category").group_by("category").len()
    assert table.filter((pl.col("config") == "bm25") & (pl.col("category") == "all"))[
        "n"
    ].to_list() == [results[0].per_query.height] * len(METRICS)
    for cat, n in counts.iter_rows():
        rows = table.filter((pl.col("config") == "bm25") & (pl.col("category") == cat))
        assert rows.height == len(METRICS) and set(rows["n"]) == {n}
    assert (table["low"] <= table["mean"] + 1e-12).all()
    assert (table["mean"] <= table["high"] + 1e-12).all()
    assert category_table(results).equals(table)  # seeded: a rerun prints the same
    text = category_markdown(table, in_sample={"tfidf"})
    assert "| tfidf* | all |" in text and "ndcg@10" in text and "mrr@10" in text


def test_holm_bonferroni():
    from memkit.evaluation.compare import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # at most 1
    assert holm([0.02, 0.01]) == pytest.approx([0.02, 0.02])  # kept monotone


@pytest.mark.parametrize("stat_test", ["student", "wilcoxon", "fisher", "tukey"])
def test_all_pairs_are_tested_and_corrected(three_results, stat_test):
    from memkit.evaluation.compare import pairwise_markdown, pairwise_table

    _, results = three_results
    table = pairwise_table(results, metrics=("recall@10", "mrr@10"), stat_test=stat_test)
    assert table.height == 3 * 2  # three pairs, two metrics
    assert (table["p_adjusted"] >= table["p"] - 1e-12).all()
    assert table["p"].is_between(0, 1).all()
    text = pairwise_markdown(results, metrics=("recall@10",), stat_test=stat_test)
    assert "| a | bm25 |" in text and "| c | bm25-flat |" in text


def test_eval_stat_test_flag_prints_the_all_pairs_table(tmp_path, capsys):
    flat = write(tmp_path / "bm25-flat.toml", 'from = "bm25"\n[retriever]\nb = 0.0\n')
    argv = ["eval", "--dataset", str(DEMO), "--config", "bm25", "--config", "tfidf"]
    argv += ["--config", str(flat), "--no-mlflow", "--no-answers", "--stat-test", "wilcoxon"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "p-values: Wilcoxon signed-rank test against `bm25`" in out
    assert "All pairs (Wilcoxon signed-rank test, Holm-Bonferroni-corrected over the 3 pairs" in out
    assert "By category, every metric" in out and "| tfidf | single-hop |" in out


# -- in-sample ---------------------------------------------------------------------------------
def test_in_sample_follows_the_configs_trained_on():
    from memkit.core.tables import Dataset

    ds = load_any(DEMO)

    def named(name, split=None):
        return Dataset(name, ds.events, ds.queries, ds.qrels, {"split": split} if split else {})

    default = load_config("default")
    assert in_sample(default, named("locomo-dev"))
    assert not in_sample(default, named("scifact", "test"))  # its rankers saw the train split
    assert in_sample(default, named("scifact", "train"))
    assert not in_sample(default, named("conversations-heldout"))
    assert in_sample(load_config("reader"), named("conversations-dev"))
    assert not in_sample(load_config("bm25"), named("locomo-dev"))


def test_a_row_scored_on_data_its_models_saw_is_marked(tmp_path, capsys):
    seen = write(tmp_path / "seen.toml", 'from = "bm25"\ntrained_on = ["demo"]\n')
    argv = ["eval", "--dataset", str(DEMO), "--config", "bm25", "--config", str(seen)]
    assert main([*argv, "--no-mlflow", "--no-answers", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "| seen* |" in out and "| bm25 |" in out and "| bm25* |" not in out
    assert "in-sample: its models were trained on this data set" in out


# -- the loader and time filters ------------------------------------------------------------
LOCOMO_SAMPLE = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy called Pepper."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely, what breed is Pepper?"},
            ],
        },
        "qa": [
            {
                "question": "What is Ana's puppy called?",
                "answer": "Pepper",
                "evidence": ["D1:1"],
                "category": 4,
            }
        ],
    }
]


def test_the_documented_loader_reads_a_locomo_file(tmp_path):
    from memkit.core.tables import read_dataset as read_folder
    from memkit.datasets import read_dataset

    path = write(tmp_path / "mini.json", json.dumps(LOCOMO_SAMPLE))
    ds = read_dataset(path)
    assert (ds.name, ds.events.height, ds.queries.height) == ("mini", 2, 1)
    assert read_dataset(DEMO).name == "demo"
    with pytest.raises(ValidationError, match="memkit.datasets.load_any"):
        read_folder(path)  # the folder reader names the loader to use


def test_a_time_filter_that_drops_undated_events_warns_once_naming_how_many():
    from memkit.core.tables import events_frame
    from memkit.retrieval import BM25Retriever, Filters, HybridRetriever, TfidfRetriever
    from memkit.retrieval.base import UndatedEventsWarning, undated_quiet

    events = events_frame(
        {
            "event_id": f"e{i}",
            "floor_id": "f",
            "block_id": "b",
            "block_type": "blog",
            "text": f"breast cancer types {i}",
            "created_at": "2021-03-01T00:00:00" if i < 2 else None,
        }
        for i in range(5)
    )
    hybrid = HybridRetriever([BM25Retriever(), TfidfRetriever()]).fit(events)
    since = Filters(time_from="2020-01-01")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        run = hybrid.search("breast cancer", k=10, filters=since)
        hybrid.search("breast cancer types", k=10, filters=since)
    undated = [w for w in caught if issubclass(w.category, UndatedEventsWarning)]
    assert len(undated) == 1 and "left out 3 event(s) that have no time" in str(undated[0].message)
    assert set(run["event_id"]) == {"e0", "e1"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndatedEventsWarning)
        with undated_quiet():  # a window a question names leaves undated posts out by design
            BM25Retriever().fit(events).search("cancer", k=3, filters=Filters(time_to="2022-01-01"))


# -- the notebook runner ---------------------------------------------------------------------
def notebook_runner():
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebook_runner", PROJECT / "notebooks/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebook_runner_gives_kernels_the_same_settings_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMKIT_DATA", "data")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    env = notebook_runner().kernel_env()
    assert env["MEMKIT_DATA"] == str(tmp_path / "data")  # not the notebook's folder's
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{PROJECT / 'mlflow.db'}"
    assert env["HF_HUB_OFFLINE"] and env["MLFLOW_DISABLE_TELEMETRY"]


@pytest.mark.heavy  # a kernel started (a few seconds)
def test_the_notebook_runner_runs_a_notebook_from_another_folder(tmp_path):
    import subprocess

    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    book = tmp_path / "books" / "check.ipynb"
    book.parent.mkdir()
    code = "import os\nprint(os.getcwd())\nprint(os.environ['MLFLOW_TRACKING_URI'])"
    nbformat.write(new_notebook(cells=[new_code_cell(code)]), book)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run(
        [sys.executable, str(PROJECT / "notebooks" / "run.py"), str(book)],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = nbformat.read(book, as_version=4).cells[0].outputs[0]["text"].splitlines()
    assert printed == [str(book.parent), f"sqlite:///{PROJECT / 'mlflow.db'}"]
