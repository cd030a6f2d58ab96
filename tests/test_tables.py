import json
from datetime import datetime, timezone

import polars as pl
import pytest

from memkit.core.errors import DatasetError
from memkit.core.tables import (
    EVENTS,
    QUERIES,
    check_run,
    events_frame,
    read_dataset,
    read_events,
    read_qrels,
)

EVENT = {
    "event_id": "f/1",
    "floor_id": "f",
    "block_id": "f/b",
    "block_type": "feed",
    "user_id": "ann",
    "text": "hello",
    "created_at": "2023-05-08T13:56:00",
    "tags": ["x"],
}


def write_dataset(folder, events, queries, qrels_lines):
    folder.mkdir(exist_ok=True)
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels.tsv").write_text(
        "query_id\tevent_id\trelevance\n" + "".join(line + "\n" for line in qrels_lines)
    )
    return folder


def good(tmp_path):
    events = [EVENT, {**EVENT, "event_id": "f/2", "created_at": None, "tags": [], "mood": "sunny"}]
    queries = [{"query_id": "q1", "text": "hi?", "floor_ids": ["f"], "answer": 2022, "turn": 1}]
    return write_dataset(tmp_path / "ds", events, queries, ["q1\tf/1\t1"])


def test_reads_a_dataset_folder(tmp_path):
    ds = read_dataset(good(tmp_path))
    assert ds.events.height == 2 and ds.queries.height == 1 and ds.qrels.height == 1
    assert ds.events["created_at"][0] == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert ds.events["created_at"][1] is None
    assert json.loads(ds.events["metadata"][1]) == {"mood": "sunny"}  # extra fields kept
    assert ds.queries["answer"][0] == "2022"  # a numeric answer is kept as its text
    EVENTS.validate(ds.events)
    QUERIES.validate(ds.queries)


def test_round_trip_through_write(tmp_path):
    ds = read_dataset(good(tmp_path))
    again = read_dataset(ds.write(tmp_path / "copy"))
    assert (
        again.events.equals(ds.events)
        and again.queries.equals(ds.queries)
        and again.qrels.equals(ds.qrels)
    )


def test_offset_time_converted_to_utc():
    ev = events_frame([{**EVENT, "created_at": "2023-05-08T15:56:00+02:00"}])
    assert ev["created_at"][0] == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "bad, field, words",
    [
        ({"text": 5}, "text", "expected a string"),
        ({"event_id": None}, "event_id", "is required"),
        ({"created_at": "8 May 2023"}, "created_at", "ISO 8601"),
        ({"tags": "x"}, "tags", "list of strings"),
        ({"block_type": ""}, "block_type", "str_length"),
    ],
)
def test_bad_event_row_names_file_line_and_field(tmp_path, bad, field, words):
    path = tmp_path / "events.jsonl"
    rows = [EVENT, {**EVENT, "event_id": "f/2"}, {**EVENT, "event_id": "f/3", **bad}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DatasetError) as info:
        read_events(path)
    ((file, line, fld, message),) = info.value.problems
    assert (file, line, fld) == (str(path), 3, field)
    assert words in message
    assert f"{path}:3" in str(info.value)


def test_duplicate_ids_and_bad_json_are_located(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps(EVENT) + "\n\n" + json.dumps(EVENT) + "\n")
    with pytest.raises(DatasetError) as info:
        read_events(path)
    assert {(p[1], p[2]) for p in info.value.problems} == {(1, "event_id"), (3, "event_id")}
    path.write_text(json.dumps(EVENT) + "\n{not json\n")
    with pytest.raises(DatasetError, match=r"events.jsonl:2: not valid JSON"):
        read_events(path)


def test_bad_qrels(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("query_id\tevent_id\trelevance\nq1\te1\t1\nq1\te2\thigh\n")
    with pytest.raises(DatasetError) as info:
        read_qrels(path)
    assert info.value.problems == [(str(path), 3, "relevance", "expected an integer, got 'high'")]
    path.write_text("qid\tdoc\trel\n")
    with pytest.raises(DatasetError, match="header"):
        read_qrels(path)


def test_dangling_qrels_reference_is_an_error(tmp_path):
    folder = good(tmp_path)
    (folder / "qrels.tsv").write_text("query_id\tevent_id\trelevance\nq1\tf/1\t1\nq1\tnope\t1\n")
    with pytest.raises(DatasetError) as info:
        read_dataset(folder)
    assert info.value.problems[0][1:3] == (3, "event_id")


def test_nothing_half_loaded(tmp_path):
    folder = good(tmp_path)
    with open(folder / "queries.jsonl", "a") as fh:
        fh.write(json.dumps({"query_id": "q2", "text": "", "turn": 0}) + "\n")
    result = None
    with pytest.raises(DatasetError) as info:
        result = read_dataset(folder)
    assert result is None
    assert {p[2] for p in info.value.problems} == {"text", "turn"}
    assert all(p[1] == 2 for p in info.value.problems)


def test_run_schema_rejects_bad_match_type():
    run = pl.DataFrame(
        {"query_id": ["q"], "event_id": ["e"], "score": [1.0], "rank": [1], "match_type": ["magic"]}
    )
    with pytest.raises(DatasetError, match="match_type"):
        check_run(run)


def _frames_and_breakages():
    """Well-formed tables of each schema and, for each, frames broken one way each."""
    from memkit.core.tables import QRELS, RUNS

    events = events_frame([EVENT, {**EVENT, "event_id": "f/2", "user_id": None}])
    queries = pl.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "text": ["why?", "when?"],
            "floor_ids": [["f"], None],
            "user_id": [None, "ann"],
            "category": [None, None],
            "answer": [None, "May"],
            "time": [None, datetime(2023, 5, 8, tzinfo=timezone.utc)],
            "conversation_id": ["c", "c"],
            "turn": [1, None],
            "rewrite": [None, None],
            "metadata": [None, None],
        },
        schema={n: c.dtype.type for n, c in QUERIES.columns.items()},
    )
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q1"], "event_id": ["f/1", "f/2"], "relevance": [1, 0]},
        schema={n: c.dtype.type for n, c in QRELS.columns.items()},
    )
    runs = pl.DataFrame(
        {
            "query_id": ["q1", "q1"],
            "event_id": ["f/1", "f/2"],
            "score": [0.9, 0.1],
            "rank": [1, 2],
            "match_type": ["hybrid", "keyword"],
        },
        schema={n: c.dtype.type for n, c in RUNS.columns.items()},
    )

    def put(frame, name, values):
        return frame.with_columns(pl.Series(name, values, frame.schema[name]))

    return [
        (
            EVENTS,
            events,
            [
                put(events, "event_id", ["f/1", "f/1"]),
                put(events, "event_id", ["f/1", ""]),
                put(events, "block_type", ["", "feed"]),
                put(events, "text", [None, "x"]),
                put(events, "tags", [["x"], None]),
                events.drop("metadata"),
                events.select(list(reversed(events.columns))),
                events.with_columns(pl.lit(1).alias("extra")),
                events.with_columns(pl.col("created_at").dt.replace_time_zone(None)),
            ],
        ),
        (
            QUERIES,
            queries,
            [put(queries, "turn", [0, None]), put(queries, "query_id", ["q1", "q1"])],
        ),
        (
            QRELS,
            qrels,
            [put(qrels, "event_id", ["f/1", "f/1"]), put(qrels, "query_id", ["", "q1"])],
        ),
        (
            RUNS,
            runs,
            [put(runs, "match_type", ["hybrid", "fuzzy"]), put(runs, "rank", [1, 0])],
        ),
    ]


def test_the_fast_check_agrees_with_pandera_on_good_and_broken_tables():
    """``_passes`` (one polars pass) lets a table skip pandera only where pandera passes it
    too; every broken table goes to pandera, which reports it."""
    import pandera.errors

    from memkit.core.tables import _passes

    for schema, good_frame, broken in _frames_and_breakages():
        assert _passes(good_frame, schema), schema.name
        schema.validate(good_frame, lazy=True)
        assert _passes(good_frame.clear(), schema)
        for frame in broken:
            with pytest.raises((pandera.errors.SchemaErrors, pandera.errors.SchemaError)):
                schema.validate(frame, lazy=True)
            assert not _passes(frame, schema), (schema.name, frame)


def test_a_broken_events_table_is_still_reported_by_field():
    with pytest.raises(DatasetError) as exc:
        events_frame([EVENT, {**EVENT}])  # the same id twice
    assert "event_id" in str(exc.value)
