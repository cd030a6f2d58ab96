"""The ledger as data (memkit.evaluation.ledger, ``memkit eval --write-ledger/--check``):
float rows exact to the printed digits, int8 rows within their tolerance, a cell on one
side only is a failure, every drifting cell named; the TOML file read back as written;
and the check end to end on two tiny data sets."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from memkit import cli
from memkit.cli import DEMO, _configs, main
from memkit.evaluation import ledger as lg
from memkit.evaluation.ledger import Row, compare


def rows(**kw) -> dict[str, Row]:
    base = {
        "bm25": Row("float", 0.0, {"locomo-dev": {"R@5 1-4": 0.5231, "R@5 adv.": 0.6435}}),
        "default": Row(
            "int8",
            0.015,
            {"locomo-dev": {"R@5 1-4": 0.7410, "R@5 adv.": 0.8038}, "scifact": {"nDCG@10": 0.73}},
            ["locomo-dev"],
        ),
    }
    base.update(kw)
    return base


def copy(r: dict[str, Row]) -> dict[str, Row]:
    return {n: Row(**json.loads(json.dumps(vars(x)))) for n, x in r.items()}


# -- the comparison -------------------------------------------------------------------------
def test_the_same_cells_pass_and_unprinted_digits_do_not_count():
    got = copy(rows())
    got["bm25"].cells["locomo-dev"]["R@5 1-4"] = 0.52314  # prints as 0.5231
    assert compare(rows(), got) == []


def test_a_float_row_is_exact_to_the_printed_digits():
    got = copy(rows())
    got["bm25"].cells["locomo-dev"]["R@5 adv."] = 0.6436  # one in the last digit
    (problem,) = compare(rows(), got)
    assert problem.startswith("bm25 / locomo-dev / R@5 adv.: expected 0.6435, got 0.6436")
    assert "tolerance 0" in problem and "float" in problem


def test_an_int8_row_passes_within_its_tolerance_and_fails_past_it():
    got = copy(rows())
    got["default"].cells["locomo-dev"]["R@5 adv."] = 0.7911  # the AVX2 EPYC's: 0.0127 off
    assert compare(rows(), got) == []
    got["default"].cells["locomo-dev"]["R@5 adv."] = 0.7880  # 0.0158 off
    (problem,) = compare(rows(), got)
    assert "default / locomo-dev / R@5 adv.: expected 0.8038, got 0.7880" in problem
    assert "tolerance 0.015" in problem and "int8" in problem
    # exactly the tolerance is within it (the rounding's error is no drift)
    got["default"].cells["locomo-dev"]["R@5 adv."] = 0.8038 - 0.015
    assert compare(rows(), got) == []


def test_the_ledgers_tolerance_is_the_one_that_applies():
    strict = copy(rows())
    strict["default"].tolerance = 0.001
    got = copy(rows())
    got["default"].cells["scifact"]["nDCG@10"] = 0.7320
    assert len(compare(strict, got)) == 1 and compare(rows(), got) == []


def test_every_drifting_cell_is_listed():
    got = copy(rows())
    got["bm25"].cells["locomo-dev"]["R@5 1-4"] = 0.6
    got["default"].cells["scifact"]["nDCG@10"] = 0.5
    problems = compare(rows(), got)
    assert len(problems) == 2
    assert any(p.startswith("bm25 / locomo-dev / R@5 1-4") for p in problems)
    assert any(p.startswith("default / scifact / nDCG@10") for p in problems)


def test_cells_and_rows_on_one_side_only_fail():
    got = copy(rows())
    del got["default"].cells["scifact"]
    got["bm25"].cells["locomo-dev"]["R@10 temporal"] = 0.7
    got["tfidf"] = Row("float", 0.0, {"scifact": {"nDCG@10": 0.65}})
    problems = compare(rows(), got)
    assert "default / scifact / nDCG@10: in the ledger (0.7300), not in the run" in problems
    assert "bm25 / locomo-dev / R@10 temporal: in the run (0.7000), not in the ledger" in problems
    assert "tfidf: row in the run, not in the ledger" in problems
    del got["bm25"]
    assert "bm25: row in the ledger, not in the run" in compare(rows(), got)


def test_a_changed_encoder_or_in_sample_mark_fails():
    got = copy(rows())
    got["bm25"].encoder = "int8"
    got["default"].in_sample = []
    got["default"].stages = "time windows"
    problems = compare(rows(), got)
    assert any("default: stages '' in the ledger, 'time windows' now" in p for p in problems)
    assert any("bm25: encoder float in the ledger, int8 now" in p for p in problems)
    assert any("default: in-sample on ['locomo-dev']" in p for p in problems)


# -- the file -------------------------------------------------------------------------------
def test_the_toml_file_reads_back_as_written(tmp_path):
    meta = lg.stamp("memkit eval --all --write-ledger eval/ledger.toml", 71.93, tmp_path)
    path = lg.write_ledger(tmp_path / "ledger.toml", rows(), meta)
    back, made = lg.read_ledger(path)
    assert back == rows()
    assert made["command"] == meta["command"] and made["seconds"] == 71.9
    assert made["cpu_class"] in {"avx512-vnni", "avx512", "avx2-vnni", "avx2", "other"}
    data = tomllib.loads(path.read_text())
    assert data["tolerance"]["int8"] == 0.015 and "0.0129" in data["tolerance"]["why"]
    assert data["rows"]["default"]["cells"]["locomo-dev"]["R@5 adv."] == 0.8038
    assert '"R@5 adv." = 0.8038' in path.read_text()  # as the table prints it


def test_written_values_are_the_printed_ones(tmp_path):
    got = rows(dense=Row("float", 0.0, {"cast2021": {"MRR@10 raw": 0.63944999}}))
    back, _ = lg.read_ledger(lg.write_ledger(tmp_path / "l.toml", got, {"command": "x"}))
    assert back["dense"].cells["cast2021"]["MRR@10 raw"] == 0.6394
    assert compare(back, got) == []


def test_the_int8_rows_are_the_configs_whose_encoder_is_int8():
    kinds = {c["name"]: lg.encoder_kind(c) for c in _configs(["ALL"])}
    assert {n for n, k in kinds.items() if k == "int8"} == {
        "default",
        "default-fresh",
        "default-lean",
        "postgres",
        "reader",
    }
    assert kinds["bm25"] == kinds["dense"] == kinds["dense-adapted"] == "float"


# -- end to end -----------------------------------------------------------------------------
@pytest.fixture
def two_sets(tmp_path, monkeypatch):
    """Two copies of the demo set as the whole data root and no conversation suites, so
    ``--all`` scores two tiny data sets and prints a ledger."""
    root = tmp_path / "data"
    for name in ("alpha", "beta"):
        shutil.copytree(DEMO, root / name)
        info = json.loads((root / name / "dataset.json").read_text())
        (root / name / "dataset.json").write_text(json.dumps({**info, "name": name}))
    monkeypatch.setenv("MEMKIT_DATA", str(root))
    monkeypatch.setattr(cli, "CONVERSATIONS", tmp_path / "no-suites")
    return tmp_path


def test_check_end_to_end_passes_then_names_a_drifting_cell(two_sets, capsys):
    out, ledger = two_sets / "out", two_sets / "ledger.toml"
    argv = ["eval", "--all", "--jobs", "1", "--config", "bm25", "--config", "tfidf"]
    argv += ["--no-mlflow", "--no-answers", "--out", str(out)]
    assert main([*argv, "--write-ledger", str(ledger)]) == 0
    written, meta = lg.read_ledger(ledger)
    assert set(written) == {"bm25", "tfidf"} and set(written["bm25"].cells) == {"alpha", "beta"}
    assert meta["command"].startswith("memkit eval --all") and "--write-ledger" in meta["command"]
    assert (out / lg.RUN_FILE).is_file()
    capsys.readouterr()

    assert main([*argv, "--check", str(ledger)]) == 0
    assert "OK: every cell" in capsys.readouterr().out

    # one cell changed in the file: the run no longer matches, and that cell is named
    text = ledger.read_text()
    value = written["tfidf"].cells["beta"]["MRR@10 raw"]
    moved = f"{value - 0.001:.4f}"
    changed = text.replace(
        f'[rows.tfidf.cells.beta]\n"MRR@10 raw" = {value:.4f}',
        f'[rows.tfidf.cells.beta]\n"MRR@10 raw" = {moved}',
    )
    assert changed != text
    ledger.write_text(changed)
    assert main([*argv, "--check", str(ledger)]) == 1
    report = capsys.readouterr().out
    assert "DRIFT: 1 difference(s)" in report
    assert f"tfidf / beta / MRR@10 raw: expected {moved}, got {value:.4f}" in report

    # the same outputs checked again without scoring, and a cell the run lacks
    ledger.write_text(text + '\n[rows.bm25.cells.gamma]\n"nDCG@10" = 0.5\n')
    assert main(["eval", "--from-out", str(out), "--check", str(ledger)]) == 1
    assert (
        "bm25 / gamma / nDCG@10: in the ledger (0.5000), not in the run" in capsys.readouterr().out
    )
    ledger.write_text(text)
    assert main(["eval", "--from-out", str(out), "--check", str(ledger)]) == 0

    # written again from the outputs: the same cells, the run that made them, who copied
    again = two_sets / "again.toml"
    assert main(["eval", "--from-out", str(out), "--write-ledger", str(again)]) == 0
    cells, made = lg.read_ledger(again)
    assert cells == written  # [run] is the last run's, the --check one, which wrote out/
    assert made["command"].startswith("memkit eval --all") and "--check" in made["command"]
    assert made["written_from"].startswith("memkit eval --from-out")


def test_from_out_needs_a_runs_cells_and_something_to_do(tmp_path, capsys):
    assert main(["eval", "--from-out", str(tmp_path), "--check"]) == 2
    assert "no ledger.json in" in capsys.readouterr().err
    assert main(["eval", "--from-out", str(tmp_path)]) == 2
    assert "give --check and/or --write-ledger" in capsys.readouterr().err


def test_the_printed_ledger_and_the_files_cells_are_the_same_columns(two_sets, capsys):
    out = two_sets / "out"
    argv = ["eval", "--all", "--jobs", "1", "--config", "bm25", "--no-mlflow", "--no-answers"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split("## Ledger", 1)[1]
    header, _, row = [line for line in printed.splitlines() if line.startswith("|")][:3]
    got, _ = lg.read_run(Path(out) / lg.RUN_FILE)
    cells = [f"{d} {m}" for d, c in got["bm25"].cells.items() for m in c]
    assert header.strip("| ").split(" | ")[1:] == [*cells, "stages"]
    assert row.strip("| ").split(" | ")[1:] == [
        *(f"{v:.4f}" for c in got["bm25"].cells.values() for v in c.values()),
        got["bm25"].stages,
    ]
    assert got["bm25"].stages == "retriever alone"


def test_all_scores_the_ledgers_rows_in_its_order():
    """``memkit eval --all`` in the checkout: the package's configs and eval/configs, one
    row each, in the order eval/ledger.toml has them (``make check-ledger`` fails on a row
    on one side only; the order is the printed table's)."""
    root = Path(__file__).resolve().parents[1]
    rows, _ = lg.read_ledger(root / "eval/ledger.toml")
    assert [c["name"] for c in _configs(["ALL"])] == list(rows)


def test_results_shows_the_ledger_files_table():
    """eval/RESULTS.md's retrieval table is eval/ledger.toml's, rendered (make ledger writes
    both): a figure changed in one and not the other fails here."""
    root = Path(__file__).resolve().parents[1]
    rows, _ = lg.read_ledger(root / "eval/ledger.toml")
    text = (root / "eval/RESULTS.md").read_text()
    assert lg.with_table(text, rows) == text
    some = next(iter(rows.values()))
    ds, cells = next(iter(some.cells.items()))
    metric = next(iter(cells))
    cells[metric] = cells[metric] + 0.1
    assert lg.with_table(text, rows) != text


def test_the_results_table_goes_between_its_markers_and_nowhere_else(tmp_path):
    rows = {
        "a": lg.Row("float", 0.0, {"d": {"nDCG@10": 0.5}}, [], "retriever alone"),
        "b": lg.Row("int8", 0.015, {"d": {"nDCG@10": 0.61234}}, ["d"], "reader"),
    }
    text = f"# R\n\nbefore\n{lg.BEGIN}\nold\n{lg.END}\nafter\n"
    new = lg.with_table(text, rows)
    assert new.startswith("# R\n\nbefore\n") and new.endswith(f"{lg.END}\nafter\n")
    assert "| a | 0.5000 | retriever alone |" in new and "| b | 0.6123* | reader |" in new
    assert lg.IN_SAMPLE_NOTE in new and "old" not in new
    results = tmp_path / "RESULTS.md"
    results.write_text(text)
    ledger = lg.write_ledger(tmp_path / "ledger.toml", rows, {"command": "x"})
    args = ["--ledger", str(ledger), "--results", str(results)]
    assert lg.main([*args, "--check"]) == 1
    assert lg.main(args) == 0 and lg.main([*args, "--check"]) == 0
    with pytest.raises(ValueError, match="ledger:begin"):
        lg.with_table("no markers", rows)
