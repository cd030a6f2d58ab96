"""The tables memkit passes around, their pandera schemas, and the dataset-folder reader.

Four tables, matching the interchange format of a dataset folder:

- events:  one post a row (``event_id, floor_id, block_id, block_type, user_id, text,
  created_at, tags, metadata``); ``created_at`` is a UTC datetime or null, ``metadata``
  holds any extra fields of the source row as a JSON string.
- queries: ``query_id, text, floor_ids, user_id, category, answer, time,
  conversation_id, turn, rewrite, metadata``.
- qrels:   ``query_id, event_id, relevance`` (relevance > 0 is relevant).
- runs:    ``query_id, event_id, score, rank, match_type``.

Rows are checked in two steps, both of which name the file, the line and the field: a
per-row type check (so a wrong type is reported where it is, not as a failed cast of a
whole column), then the pandera schema for values and uniqueness. Reading is all or
nothing: a file with one bad row raises :class:`~memkit.core.errors.DatasetError` and returns
nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any, Iterable

import pandera.polars as pa
import polars as pl

from memkit.core.errors import DatasetError, ValidationError

UTC_US = pl.Datetime("us", "UTC")
MATCH_TYPES = ("keyword", "semantic", "hybrid")

_nonempty = pa.Check.str_length(min_value=1)

EVENTS = pa.DataFrameSchema(
    {
        "event_id": pa.Column(pl.Utf8, _nonempty, unique=True),
        "floor_id": pa.Column(pl.Utf8, _nonempty),
        "block_id": pa.Column(pl.Utf8, _nonempty),
        "block_type": pa.Column(pl.Utf8, _nonempty),
        "user_id": pa.Column(pl.Utf8, nullable=True),
        "text": pa.Column(pl.Utf8),
        "created_at": pa.Column(UTC_US, nullable=True),
        "tags": pa.Column(pl.List(pl.Utf8)),
        "metadata": pa.Column(pl.Utf8, nullable=True),
    },
    strict=True,
    ordered=True,
    name="events",
)

QUERIES = pa.DataFrameSchema(
    {
        "query_id": pa.Column(pl.Utf8, _nonempty, unique=True),
        "text": pa.Column(pl.Utf8, _nonempty),
        "floor_ids": pa.Column(pl.List(pl.Utf8), nullable=True),
        "user_id": pa.Column(pl.Utf8, nullable=True),
        "category": pa.Column(pl.Utf8, nullable=True),
        "answer": pa.Column(pl.Utf8, nullable=True),
        "time": pa.Column(UTC_US, nullable=True),
        "conversation_id": pa.Column(pl.Utf8, nullable=True),
        "turn": pa.Column(pl.Int64, pa.Check.ge(1), nullable=True),
        "rewrite": pa.Column(pl.Utf8, nullable=True),
        "metadata": pa.Column(pl.Utf8, nullable=True),
    },
    strict=True,
    ordered=True,
    name="queries",
)

QRELS = pa.DataFrameSchema(
    {
        "query_id": pa.Column(pl.Utf8, _nonempty),
        "event_id": pa.Column(pl.Utf8, _nonempty),
        "relevance": pa.Column(pl.Int64),
    },
    strict=True,
    ordered=True,
    unique=["query_id", "event_id"],
    name="qrels",
)

RUNS = pa.DataFrameSchema(
    {
        "query_id": pa.Column(pl.Utf8),
        "event_id": pa.Column(pl.Utf8),
        "score": pa.Column(pl.Float64),
        "rank": pa.Column(pl.Int64, pa.Check.ge(1)),
        "match_type": pa.Column(pl.Utf8, pa.Check.isin(MATCH_TYPES)),
    },
    strict=True,
    ordered=True,
    unique=["query_id", "event_id"],
    name="runs",
)

RUN_SCHEMA = {
    "query_id": pl.Utf8,
    "event_id": pl.Utf8,
    "score": pl.Float64,
    "rank": pl.Int64,
    "match_type": pl.Utf8,
}

# Per-row field specs: (name, kind, required). kinds: str, text (any str), strlist,
# time, int, answer (str, or a number kept as its text).
_Spec = list[tuple[str, str, bool]]
_EVENT_SPEC: _Spec = [
    ("event_id", "str", True),
    ("floor_id", "str", True),
    ("block_id", "str", True),
    ("block_type", "str", True),
    ("user_id", "str", False),
    ("text", "str", True),
    ("created_at", "time", False),
    ("tags", "strlist", False),
]
_QUERY_SPEC: _Spec = [
    ("query_id", "str", True),
    ("text", "str", True),
    ("floor_ids", "strlist", False),
    ("user_id", "str", False),
    ("category", "str", False),
    ("answer", "answer", False),
    ("time", "time", False),
    ("conversation_id", "str", False),
    ("turn", "int", False),
    ("rewrite", "str", False),
]


def parse_time(value: Any, end_of_day: bool = False) -> datetime | None:
    """ISO 8601 text (or a datetime) to an aware UTC datetime; a naive time is UTC. A date
    alone ("2026-02-28") is the start of that day, or with ``end_of_day`` its last instant
    (what an inclusive upper bound such as ``time_to`` means by a day: all of it)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        if end_of_day:
            try:
                return datetime.combine(date.fromisoformat(value.strip()), time.max, timezone.utc)
            except ValueError:
                pass  # not a date alone
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    else:
        raise TypeError(f"expected an ISO 8601 string, got {type(value).__name__}")
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone(timezone.utc)
    except (
        OverflowError
    ):  # e.g. 0001-01-01T00:00:00+05:00 is before the first UTC time Python can hold
        raise ValueError(
            f"{value!s} is out of range: in UTC it must fall in the years 1 to 9999"
        ) from None


def _coerce(row: Any, spec: _Spec, where: tuple[str, int], problems: list) -> dict | None:
    file, line = where
    if not isinstance(row, dict):
        problems.append((file, line, None, f"expected a JSON object, got {type(row).__name__}"))
        return None
    out: dict[str, Any] = {}
    ok = True
    for name, kind, required in spec:
        value = row.get(name)
        if value is None:
            if required:
                problems.append((file, line, name, "is required"))
                ok = False
            out[name] = [] if (kind == "strlist" and spec is _EVENT_SPEC) else None
            continue
        try:
            out[name] = _convert(value, kind)
        except (TypeError, ValueError) as exc:
            problems.append((file, line, name, str(exc)))
            ok = False
    extra = {k: v for k, v in row.items() if k not in {s[0] for s in spec}}
    out["metadata"] = json.dumps(extra, ensure_ascii=False, sort_keys=True) if extra else None
    return out if ok else None


def _convert(value: Any, kind: str) -> Any:
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__} {value!r}")
        return value
    if kind == "answer":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return str(value)
    if kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"expected a list of strings, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {type(value).__name__} {value!r}")
        return value
    if kind == "time":
        try:
            return parse_time(value)
        except ValueError:
            raise ValueError(f"expected an ISO 8601 time, got {value!r}") from None
    raise AssertionError(kind)


# The checks ``_passes`` can run itself: pandera's name -> (column, statistics) -> an expression
# that is true on the rows that pass (nulls pass, as pandera ignores them in checks).
# None: a form of the check it does not know.
_CHECKS = {
    "str_length": lambda c, s: (
        c.str.len_chars() >= s["min_value"]
        if s["max_value"] is None and s.get("exact_value") is None and s["min_value"] is not None
        else None
    ),
    "greater_than_or_equal_to": lambda c, s: c >= s["min_value"],
    "isin": lambda c, s: c.is_in(list(s["allowed_values"])),
}


def _passes(frame: pl.DataFrame, schema: pa.DataFrameSchema) -> bool:
    """Whether ``frame`` meets ``schema`` (columns, their order and types, nulls, unique
    values and the checks in ``_CHECKS``), found in one polars pass. False when it does not,
    or when the schema asks something this does not know: pandera then decides, and writes
    the report. pandera's own run costs about 14 ms a call whatever the table's size, and
    the service reads its store's posts through ``events_frame`` at every write."""
    cols = schema.columns
    if list(frame.columns) != list(cols) or not (schema.strict and schema.ordered):
        return False
    tests = []
    for name, col in cols.items():
        c = pl.col(name)
        if frame.schema[name] != col.dtype.type or (col.unique and col.nullable):
            return False
        if not col.nullable:
            tests.append(c.null_count() == 0)
        if col.unique:
            tests.append(c.is_unique().all())
        for check in col.checks:
            make = _CHECKS.get(check.name)
            cond = make(c, check.statistics) if make and check.ignore_na else None
            if cond is None:
                return False
            tests.append((cond | c.is_null()).all())
    if schema.unique:
        tests.append(~pl.struct(list(schema.unique)).is_duplicated().any())
    return frame.height == 0 or not tests or bool(frame.select(pl.all_horizontal(tests)).item())


def _validate(frame: pl.DataFrame, schema: pa.DataFrameSchema, file: str, lines: list[int]):
    """Run pandera (unless ``_passes`` finds the frame well-formed); translate its failure
    cases into (file, line, field, message)."""
    if _passes(frame, schema):
        return frame
    try:
        return schema.validate(frame, lazy=True)
    except pa.errors.SchemaErrors as exc:
        problems = []
        for case in exc.failure_cases.iter_rows(named=True):
            idx = case.get("index")
            line = lines[idx] if idx is not None and idx < len(lines) else None
            check = case.get("check")
            problems.append(
                (file, line, case.get("column"), f"failed {check}: {case.get('failure_case')!r}")
            )
        raise DatasetError(problems) from None


def _frame(rows: list[dict], schema: pa.DataFrameSchema) -> pl.DataFrame:
    dtypes = {name: col.dtype.type for name, col in schema.columns.items()}
    return pl.DataFrame(rows, schema=dtypes)


def _table(rows: Iterable[Any], spec: _Spec, schema, file: str, lines: list[int] | None = None):
    rows = list(rows)
    lines = lines or list(range(1, len(rows) + 1))
    problems: list = []
    coerced = [_coerce(r, spec, (file, ln), problems) for r, ln in zip(rows, lines)]
    if problems:
        raise DatasetError(problems)
    return _validate(_frame(coerced, schema), schema, file, lines)


def events_frame(rows: Iterable[dict], source: str = "<events>") -> pl.DataFrame:
    """Build a checked events table from dicts in the interchange format."""
    return _table(rows, _EVENT_SPEC, EVENTS, source)


def queries_frame(rows: Iterable[dict], source: str = "<queries>") -> pl.DataFrame:
    """Build a checked queries table from dicts in the interchange format."""
    return _table(rows, _QUERY_SPEC, QUERIES, source)


def qrels_frame(rows: Iterable[dict], source: str = "<qrels>") -> pl.DataFrame:
    """Build a checked qrels table from ``{query_id, event_id, relevance}`` dicts."""
    frame = pl.DataFrame(
        list(rows), schema={"query_id": pl.Utf8, "event_id": pl.Utf8, "relevance": pl.Int64}
    )
    return _validate(frame, QRELS, source, list(range(1, frame.height + 1)))


def relevant_posts(qrels: pl.DataFrame) -> dict[str, set[str]]:
    """Each query's relevant events (relevance above 0), by query id."""
    return {
        q: set(ids)
        for q, ids in qrels.filter(pl.col("relevance") > 0)
        .group_by("query_id")
        .agg(pl.col("event_id"))
        .iter_rows()
    }


def empty_run() -> pl.DataFrame:
    return pl.DataFrame(schema=RUN_SCHEMA)


def check_run(run: pl.DataFrame) -> pl.DataFrame:
    """Validate a run table (raises DatasetError naming the row and field)."""
    return _validate(run, RUNS, "<run>", list(range(1, run.height + 1)))


def _read_jsonl(path: Path) -> tuple[list[Any], list[int]]:
    rows, lines, problems = [], [], []
    with open(path, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                rows.append(json.loads(raw))
                lines.append(n)
            except json.JSONDecodeError as exc:
                problems.append((str(path), n, None, f"not valid JSON: {exc.msg}"))
    if problems:
        raise DatasetError(problems)
    return rows, lines


def read_events(path: str | Path) -> pl.DataFrame:
    rows, lines = _read_jsonl(Path(path))
    return _table(rows, _EVENT_SPEC, EVENTS, str(path), lines)


def read_queries(path: str | Path) -> pl.DataFrame:
    rows, lines = _read_jsonl(Path(path))
    return _table(rows, _QUERY_SPEC, QUERIES, str(path), lines)


def read_qrels(path: str | Path) -> pl.DataFrame:
    path = Path(path)
    problems: list = []
    rows: list[dict] = []
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        if header != ["query_id", "event_id", "relevance"]:
            raise DatasetError(
                [
                    (
                        str(path),
                        1,
                        None,
                        f"header must be query_id, event_id, relevance; got {header}",
                    )
                ]
            )
        for n, raw in enumerate(fh, start=2):
            if not raw.strip():
                continue
            parts = raw.rstrip("\n").split("\t")
            if len(parts) != 3:
                problems.append(
                    (str(path), n, None, f"expected 3 tab-separated fields, got {len(parts)}")
                )
                continue
            try:
                rel = int(parts[2])
            except ValueError:
                problems.append(
                    (str(path), n, "relevance", f"expected an integer, got {parts[2]!r}")
                )
                continue
            rows.append({"query_id": parts[0], "event_id": parts[1], "relevance": rel, "_line": n})
    if problems:
        raise DatasetError(problems)
    lines = [r.pop("_line") for r in rows]
    frame = pl.DataFrame(
        rows, schema={"query_id": pl.Utf8, "event_id": pl.Utf8, "relevance": pl.Int64}
    )
    return _validate(frame, QRELS, str(path), lines)


@dataclass
class Dataset:
    """A dataset folder in memory: three checked tables and the optional card."""

    name: str
    events: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    info: dict = field(default_factory=dict)

    def write(self, folder: str | Path) -> Path:
        """Write the interchange format (events.jsonl, queries.jsonl, qrels.tsv, dataset.json)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        _write_jsonl(folder / "events.jsonl", self.events)
        _write_jsonl(folder / "queries.jsonl", self.queries)
        self.qrels.write_csv(folder / "qrels.tsv", separator="\t")
        (folder / "dataset.json").write_text(
            json.dumps({"name": self.name, **self.info}, indent=2) + "\n"
        )
        return folder


def _write_jsonl(path: Path, frame: pl.DataFrame) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in frame.iter_rows(named=True):
            extra = json.loads(row.pop("metadata") or "{}")
            out = {
                k: (v.isoformat() if isinstance(v, datetime) else v)
                for k, v in row.items()
                if v is not None
            }
            fh.write(json.dumps({**out, **extra}, ensure_ascii=False) + "\n")


def read_dataset(folder: str | Path) -> Dataset:
    """Read a dataset folder; all three files are checked, including cross-references.
    A LoCoMo ``.json`` file or a BEIR folder is refused, naming the loader that reads it:
    ``memkit.datasets.load_any`` (or ``memkit.datasets.read_dataset``) takes any layout."""
    folder = Path(folder)
    other = (
        "a LoCoMo .json file"
        if folder.is_file() and folder.suffix == ".json"
        else "a BEIR folder"
        if (folder / "corpus.jsonl").exists()
        else None
    )
    if other is not None:
        raise ValidationError(
            "folder",
            f"{folder} is {other}, not a memkit dataset folder (events.jsonl, queries.jsonl, "
            "qrels.tsv): read it with memkit.datasets.load_any (memkit.datasets.read_dataset "
            "takes any layout too)",
        )
    missing = [
        f for f in ("events.jsonl", "queries.jsonl", "qrels.tsv") if not (folder / f).exists()
    ]
    if missing:
        raise DatasetError([(str(folder / f), None, None, "file not found") for f in missing])
    events = read_events(folder / "events.jsonl")
    queries = read_queries(folder / "queries.jsonl")
    qrels = read_qrels(folder / "qrels.tsv")
    problems = []
    known_q, known_e = set(queries["query_id"]), set(events["event_id"])
    for line, row in enumerate(qrels.iter_rows(named=True), start=2):
        if row["query_id"] not in known_q:
            problems.append(
                (str(folder / "qrels.tsv"), line, "query_id", f"unknown query {row['query_id']!r}")
            )
        if row["event_id"] not in known_e:
            problems.append(
                (str(folder / "qrels.tsv"), line, "event_id", f"unknown event {row['event_id']!r}")
            )
    if problems:
        raise DatasetError(problems)
    info = {}
    if (folder / "dataset.json").exists():
        info = json.loads((folder / "dataset.json").read_text())
    name = info.pop("name", folder.name)
    return Dataset(name=name, events=events, queries=queries, qrels=qrels, info=info)
