"""Conversation checks: did each turn of a conversation get the right post and answer?

A conversation suite is a dataset folder (datasets/conversations/) whose queries are
turns of conversations (``conversation_id``, ``turn``, ``time`` of asking) with two more
fields, kept in the query's metadata: ``expect`` (strings the answer must contain, each
with alternatives separated by " | ") and ``decline`` (true when the floors do not hold
the answer). Qrels name the posts each turn should find. Every turn is scored on:

- ``post_first``: a relevant post is ranked first (turns with qrels);
- ``post_top5``: a relevant post is in the top 5 (turns with qrels);
- ``answer_right``: the answer says what it must: every ``expect`` entry and no decline,
  or for a ``decline`` turn a decline (turns with either);
- ``false_decline``: an answerable turn declined; ``false_answer``: a decline turn answered.

``checks`` is the share of passed checks over ``post_first`` and ``answer_right``: the
post ranked first, and what the answer says. Any data set of conversations (CAsT 2021) is
scored the same way, with the post checks only where it has no expectations.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from memkit.core.errors import ValidationError
from memkit.core.tables import RUN_SCHEMA, relevant_posts
from memkit.datasets import load_any

CHECKS = ("post_first", "answer_right")
MEASURES = ("post_first", "post_top5", "answer_right", "false_decline", "false_answer")


def expectations(queries: pl.DataFrame) -> dict[str, tuple[list[str], bool]]:
    """query_id -> (expect, decline) for the turns that carry either."""
    out = {}
    if "metadata" not in queries.columns:
        return out
    for qid, meta in queries.select("query_id", "metadata").iter_rows():
        extra = json.loads(meta) if meta else {}
        if "expect" in extra or "decline" in extra:
            out[qid] = (
                [str(e) for e in extra.get("expect") or []],
                bool(extra.get("decline", False)),
            )
    return out


def has_checks(queries: pl.DataFrame) -> bool:
    """A conversation suite (turns with expectations), or any data set of conversations
    (CAsT: its turns get the post checks, from its qrels)."""
    return bool(expectations(queries)) or (
        "conversation_id" in queries.columns and queries["conversation_id"].drop_nulls().len() > 0
    )


def says(answer: str, entry: str) -> bool:
    """The answer contains one of the entry's alternatives (case and spacing ignored)."""
    text = " ".join(answer.lower().split())
    return any(" ".join(alt.lower().split()) in text for alt in entry.split(" | ") if alt.strip())


def turn_checks(
    answers: pl.DataFrame, queries: pl.DataFrame, qrels: pl.DataFrame, run: pl.DataFrame
) -> pl.DataFrame:
    """One row per turn with expectations or qrels: its checks (1.0 pass, 0.0 fail, null
    when the check does not apply)."""
    expect = expectations(queries)
    gold = relevant_posts(qrels)
    top = {
        q: ids
        for q, ids in run.sort("query_id", "rank")
        .group_by("query_id", maintain_order=True)
        .agg(pl.col("event_id").head(5))
        .iter_rows()
    }
    written = {r["query_id"]: r for r in answers.iter_rows(named=True)}
    cats = dict(queries.select("query_id", "category").iter_rows())
    rows = []
    for qid in queries["query_id"].to_list():
        if qid not in expect and qid not in gold:
            continue
        want, decline = expect.get(qid, ([], False))
        a = written.get(qid, {"answer": "", "declined": True})
        row = {
            "query_id": qid,
            "category": cats.get(qid),
            "post_first": None,
            "post_top5": None,
            "answer_right": None,
            "false_decline": None,
            "false_answer": None,
        }
        if qid in gold:
            ranked = top.get(qid, [])
            row["post_first"] = float(bool(ranked) and ranked[0] in gold[qid])
            row["post_top5"] = float(bool(set(ranked) & gold[qid]))
        if qid in expect:
            if decline:
                row["answer_right"] = float(bool(a["declined"]))
                row["false_answer"] = float(not a["declined"])
            else:
                row["answer_right"] = float(
                    not a["declined"] and all(says(a["answer"] or "", e) for e in want)
                )
                row["false_decline"] = float(bool(a["declined"]))
        rows.append(row)
    schema = {"query_id": pl.Utf8, "category": pl.Utf8, **{m: pl.Float64 for m in MEASURES}}
    return pl.DataFrame(rows, schema=schema)


def summarize_checks(table: pl.DataFrame) -> dict:
    """Per group ("all" and "category:<behaviour>"): the mean of every measure with its
    count, and ``checks``, the share of post_first and answer_right checks passed."""

    def group(frame: pl.DataFrame) -> dict:
        out = {}
        for m in MEASURES:
            col = frame[m].drop_nulls()
            if col.len():
                out[m] = float(col.mean())
                out[f"{m}_n"] = int(col.len())
        passed = sum(float(frame[m].drop_nulls().sum()) for m in CHECKS)
        n = sum(frame[m].drop_nulls().len() for m in CHECKS)
        if n:
            out["checks"], out["checks_n"] = passed / n, n
        return out

    summary = {"all": group(table)}
    for (cat,), part in table.group_by("category", maintain_order=True):
        if cat is not None:
            summary[f"category:{cat}"] = group(part)
    return summary


# -- memkit score: another system's answers and run against a suite ------------------------
CHECK_COLUMNS = [
    "checks",
    "post_first",
    "post_top5",
    "answer_right",
    "false_decline",
    "false_answer",
]


def _lines(path: str | Path):
    """(line number, line) of each line of a text file that is not blank."""
    with open(path, encoding="utf-8") as fh:
        yield from ((n, line) for n, line in enumerate(fh, 1) if line.strip())


def read_run(path: str | Path) -> pl.DataFrame:
    """A TREC run file (``qid Q0 docid rank score tag``, what ``memkit eval --run-out``
    writes, the tag optional: other systems' files are read too) as a run table; a line
    with fewer than five fields is a ValidationError naming the file and line."""
    rows = []
    for n, line in _lines(path):
        try:
            qid, _, eid, rank, score, *_ = line.split()
            rows.append(
                {
                    "query_id": qid,
                    "event_id": eid,
                    "score": float(score),
                    "rank": int(rank),
                    "match_type": "",
                }
            )
        except ValueError:
            raise ValidationError(
                "--run", f"{path}:{n}: expected 'qid Q0 docid rank score tag', got {line!r}"
            ) from None
    return pl.DataFrame(rows, schema=RUN_SCHEMA)


def read_answers(path: str | Path) -> pl.DataFrame:
    """Answers as JSON lines ``{"query_id", "answer", "declined"}`` (what ``memkit eval
    --answers-out`` writes); a line that is not a JSON object is a ValidationError naming
    the file and line."""
    rows = []
    for n, line in _lines(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError("--answers", f"{path}:{n}: {exc}") from None
        if not isinstance(row, dict) or "query_id" not in row:
            raise ValidationError("--answers", f"{path}:{n}: expected an object with query_id")
        rows.append({k: row.get(k) for k in ("query_id", "answer", "declined")})
    return pl.DataFrame(
        rows, schema={"query_id": pl.Utf8, "answer": pl.Utf8, "declined": pl.Boolean}
    )


def score_files(dataset: str | Path, answers: str | Path, run: str | Path) -> str:
    """``memkit score``: the checks per behaviour of answers and a run written by any
    system on a conversation suite, as a Markdown table (as ``memkit eval`` reports them
    for memkit's own pipelines)."""

    ds = load_any(dataset)
    table = turn_checks(read_answers(answers), ds.queries, ds.qrels, read_run(run))
    cols = CHECK_COLUMNS
    lines = ["| group | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for group, values in summarize_checks(table).items():
        cells = [f"{values[c]:.3f} ({values[c + '_n']})" if c in values else "" for c in cols]
        lines.append(f"| {group.replace('category:', '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
