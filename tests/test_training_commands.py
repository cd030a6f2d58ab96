"""The toolkit's commands (``memkit train MODEL``, ``memkit score``, ``memkit tune``) and the
trained coefficients' files (``model_file``, memkit/models/): a config reads a table's
numbers from the file it names exactly as if they were written in the table, ``--write``
writes only into files a config names, and each command refuses bad input naming the flag.
Nothing here trains a model (``tests/test_training.py`` trains a small encoder)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from memkit.cli import main
from memkit.config import (
    CONFIG_DIR,
    MODELS_DIR,
    load_config,
    model_files,
    write_model_file,
)
from memkit.core.errors import ValidationError
from memkit.training import write_tables

PROJECT = Path(__file__).resolve().parents[1]
SUITE = PROJECT / "datasets" / "conversations" / "dev"
FUSION = {"coef": [0.25, 0.5], "intercept": 0.125, "min_probability": 0.0625}


def reader_config(folder: Path, table: str) -> Path:
    path = folder / "mine.toml"
    path.write_text(f'from = "default"\n\n[reader]\n{table}\n')
    return path


def test_a_table_reads_the_numbers_of_its_model_file_in_its_place(tmp_path):
    (tmp_path / "fusion.json").write_text(json.dumps(FUSION))
    path = reader_config(
        tmp_path, 'candidates = 4\nmodel_file = "fusion.json"\nquestions_only = false'
    )
    reader = load_config(path)["reader"]
    assert reader == {"candidates": 4, **FUSION, "questions_only": False}
    assert list(reader) == ["candidates", "coef", "intercept", "min_probability", "questions_only"]
    (tmp_path / "inline").mkdir()  # the same numbers written in the table
    inline = reader_config(
        tmp_path / "inline",
        "candidates = 4\ncoef = [0.25, 0.5]\nintercept = 0.125\nmin_probability = 0.0625\n"
        "questions_only = false",
    )
    assert load_config(inline) == load_config(path)
    # --set changes a number read from the file, as one written in the table
    assert load_config(path, {"reader.intercept": 1.5})["reader"]["intercept"] == 1.5


@pytest.mark.parametrize(
    ("table", "field", "message"),
    [
        ('model_file = "nowhere.json"', "reader.model_file", "no such file: nowhere.json"),
        ("model_file = 3", "reader.model_file", "expected the name of a JSON file"),
        ('model_file = "fusion.toml"', "reader.model_file", "expected the name of a JSON file"),
        ('model_file = "fusion.json"\nintercept = 0.5', "reader", "intercept both in the table"),
        ('model_file = "list.json"', "reader.model_file", "expected a JSON object"),
        ('model_file = "broken.json"', "reader.model_file", "broken.json"),
    ],
)
def test_a_bad_model_file_is_refused_naming_the_table(tmp_path, table, field, message):
    (tmp_path / "fusion.json").write_text(json.dumps(FUSION))
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "broken.json").write_text('{"coef": [1,')
    with pytest.raises(ValidationError, match=message) as caught:
        load_config(reader_config(tmp_path, table))
    assert caught.value.field == field


def test_the_shipped_coefficients_are_in_memkit_models_beside_their_cards():
    default = load_config("default")
    files = model_files("default")
    assert {k: v.relative_to(MODELS_DIR).as_posix() for k, v in files.items()} == {
        "answer.select": "answers/select.json",
        "answer.decline": "answers/decline.json",
        "answer.within": "within/within.json",
        "retriever.model": "ranker/chat.json",
        "retriever.passage_model": "ranker/passage.json",
    }
    assert default["retriever"]["model"] == json.loads(files["retriever.model"].read_text())
    assert default["answer"]["decline"]["threshold"] == pytest.approx(0.408631, abs=0)
    assert model_files("reader") == {"reader": MODELS_DIR / "reader" / "fusion.json"}
    assert set(model_files("default-lean")) == {"retriever.model", "retriever.passage_model"}
    for path in sorted(CONFIG_DIR.glob("*.toml")):  # no config writes trained numbers itself
        raw = tomllib.loads(path.read_text())
        for section in ("retriever", "answer"):
            for name, table in raw.get(section, {}).items():
                if isinstance(table, dict) and "coef" in table:
                    pytest.fail(f"{path.name}: [{section}.{name}] writes its coefficients")
    for folder in sorted(p for p in MODELS_DIR.iterdir() if p.is_dir()):
        card = (folder / "README.md").read_text()
        assert "Trained on" in card and "Licence" in card and "memkit train" in card, folder


def test_a_model_file_is_written_as_a_toml_table_kept_its_numbers(tmp_path):
    path = write_model_file(
        tmp_path / "m" / "model.json",
        {"features": ["a", "b"], "coef": [0.1234567891, 0.0], "intercept": -2.0, "threshold": 1e-7},
    )
    assert json.loads(path.read_text()) == {
        "features": ["a", "b"],
        "coef": [0.123457, 0],
        "intercept": -2,
        "threshold": 1e-07,
    }


def test_write_tables_writes_only_into_the_files_a_config_names(tmp_path):
    (tmp_path / "fusion.json").write_text(json.dumps(FUSION))
    path = reader_config(tmp_path, 'model_file = "fusion.json"')
    fitted = {"coef": [0.5, 0.5], "intercept": 0.0, "min_probability": 0.1}
    assert write_tables(path, {"reader": fitted}) == [tmp_path / "fusion.json"]
    assert load_config(path)["reader"] == {**fitted, "intercept": 0}
    with pytest.raises(ValidationError, match=r"\[calibration\] of .* names no model file"):
        write_tables(path, {"calibration": {"a": 1.0, "b": 0.0}})


def test_each_train_command_says_what_it_reads_and_writes(capsys):
    for model, words in (
        ("reader", ["SQuAD 2.0", "fusion.json", "--epochs"]),
        ("ranker", ["--longmemeval", "--c", "memkit/models/ranker/", "--calibration"]),
        ("answers", ["LoCoMo-dev", "memkit/models/answers/"]),
        ("within", ["--squad", "memkit/models/within/"]),
        ("encoder", ["--dataset", "--events", "--report", "non-commercial"]),
    ):
        with pytest.raises(SystemExit) as done:
            main(["train", model, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert done.value.code == 0 and all(w in out for w in words), (model, out)


def test_the_commands_refuse_bad_input_naming_the_flag(tmp_path, capsys):
    assert main(["train", "within", "--squad", str(tmp_path / "none.json")]) == 2
    assert "--squad: no such file" in capsys.readouterr().err
    assert main(["train", "ranker", "--config", "bm25"]) == 2  # not a learned retriever
    assert 'not type = "learned"' in capsys.readouterr().err
    assert main(["tune", "--grid", "0.4:0.7,0.5"]) == 2
    assert "--grid: expected WEIGHT:BARE_WEIGHT[:REPEAT_WEIGHT] numbers, got '0.5'" in (
        capsys.readouterr().err
    )
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"query_id": "x", "answer": "a", "declined": false}\n')
    assert main(["score", "--dataset", str(SUITE), "--answers", str(answers), "--run", "no"]) == 2
    assert "--run: no such file: no" in capsys.readouterr().err
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 e1 1\n")
    assert (
        main(["score", "--dataset", str(SUITE), "--answers", str(answers), "--run", str(run)]) == 2
    )
    assert f"--run: {run}:1: expected 'qid Q0 docid rank score tag'" in capsys.readouterr().err


def test_score_reads_another_systems_files(tmp_path, capsys):
    """A system that answers one turn right and ranks its post first, declines the rest."""
    queries = [json.loads(line) for line in (SUITE / "queries.jsonl").read_text().splitlines()]
    qrels = [line.split() for line in (SUITE / "qrels.tsv").read_text().splitlines()[1:]]
    first, post = qrels[0][0], qrels[0][1]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"query_id": q["query_id"], "answer": "", "declined": True}) + "\n"
            for q in queries
        )
    )
    run = tmp_path / "run.trec"
    run.write_text(f"{first} Q0 {post} 1 1.0\n")  # no tag: another system's file
    assert (
        main(["score", "--dataset", str(SUITE), "--answers", str(answers), "--run", str(run)]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("| group | checks | post_first | post_top5 | answer_right |")
    all_row = next(line for line in out.splitlines() if line.startswith("| all |"))
    turns = sum(1 for q in queries if q["query_id"] in {r[0] for r in qrels})
    assert f"{1 / turns:.3f} ({turns})" in all_row  # post_first: the one turn of the run
