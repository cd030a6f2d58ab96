import json

import polars as pl
import pytest

from memkit.cli import main
from memkit.core.tables import read_dataset
from memkit.datasets.locomo import normalize_evidence, parse_session_time, read_locomo
from tests.conftest import shared_dataset


def test_locomo_dev_conversion_counts():
    ds = read_locomo(shared_dataset("locomo/locomo-dev.json"), "locomo-dev")
    assert ds.events.height == 2760
    assert ds.events["floor_id"].n_unique() == 5 and ds.events["block_id"].n_unique() == 128
    assert ds.queries.height == 999
    assert dict(ds.queries["category"].value_counts().iter_rows()) == {
        "single-hop": 418,
        "adversarial": 237,
        "temporal": 156,
        "multi-hop": 142,
        "open-domain": 46,
    }
    assert ds.qrels.height == 1349
    # Two evidence ids name no turn (conv-42: "D10:19" and a bare "D"); two questions list none.
    assert ds.info["evidence_unresolved"] == 2 and ds.info["questions_without_evidence"] == 2
    assert ds.queries.height - ds.qrels["query_id"].n_unique() == 2  # asked, not scored
    first = ds.events.row(2, named=True)
    assert first["event_id"] == "conv-26/D1:3" and first["user_id"] == "Caroline"
    assert first["created_at"].isoformat() == "2023-05-08T13:56:00+00:00"
    assert ds.events["text"].str.contains(r" \[image: ").sum() == 602
    q0 = ds.queries.row(0, named=True)
    assert (q0["answer"], q0["category"], q0["floor_ids"]) == (
        "7 May 2023",
        "temporal",
        ["conv-26"],
    )
    adv = ds.queries.filter(pl.col("category") == "adversarial").row(0, named=True)
    assert adv["answer"] is None and "adversarial_answer" in json.loads(adv["metadata"])


def test_malformed_evidence_is_normalised():
    assert normalize_evidence(["D8:6; D9:17"]) == (["D8:6", "D9:17"], [])
    assert normalize_evidence(["D:11:26"]) == (["D11:26"], [])
    assert normalize_evidence(["D30:05", "D30:5"]) == (["D30:5"], [])
    assert normalize_evidence(["D", "turn 4"]) == ([], ["D", "turn 4"])
    assert normalize_evidence(None) == ([], [])
    assert parse_session_time("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00"
    assert parse_session_time("10:04 am on 19 January,  2023").isoformat() == "2023-01-19T10:04:00"


def test_malformed_evidence_in_a_file(tmp_path):
    sample = {
        "sample_id": "c1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:00 pm on 1 June, 2023",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "hi"},
                {
                    "speaker": "B",
                    "dia_id": "D1:2",
                    "text": "look",
                    "blip_caption": "a cat on a mat",
                },
            ],
        },
        "qa": [
            {
                "question": "q?",
                "answer": 5,
                "evidence": ["D1:1; D1:02", "D:1:2", "D9:9", "D"],
                "category": 1,
            }
        ],
    }
    path = tmp_path / "mini.json"
    path.write_text(json.dumps([sample]))
    ds = read_locomo(path)
    assert ds.qrels["event_id"].to_list() == ["c1/D1:1", "c1/D1:2"]
    assert ds.info["evidence_unresolved"] == 2
    assert ds.events["text"][1] == "look [image: a cat on a mat]"
    assert ds.queries["answer"][0] == "5"


def test_convert_command_writes_a_readable_folder(tmp_path, capsys):
    out = tmp_path / "locomo-dev"
    assert main(["convert", "locomo", str(shared_dataset("locomo/locomo-dev.json")), str(out)]) == 0
    back = read_dataset(out)
    assert (back.events.height, back.queries.height, back.qrels.height) == (2760, 999, 1349)
    assert "evidence ids naming no turn: 2" in capsys.readouterr().out
    beir = tmp_path / "scifact"
    assert (
        main(["convert", "beir", str(shared_dataset("scifact")), str(beir), "--split", "test"]) == 0
    )
    assert read_dataset(beir).queries.height == 300


def test_bad_session_time_names_the_field(tmp_path):
    sample = {
        "sample_id": "c1",
        "conversation": {
            "session_1_date_time": "someday",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        },
        "qa": [],
    }
    (tmp_path / "x.json").write_text(json.dumps([sample]))
    with pytest.raises(Exception, match="session_1_date_time"):
        read_locomo(tmp_path / "x.json")
