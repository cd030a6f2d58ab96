"""Answer metrics for datasets with gold answers (LoCoMo).

For every query the harness writes the answer the service would give (the top ``k`` items
of the run, the relevance gate, the pipeline's answer writer) and scores it:

- ``f1``: token F1 exactly as the LoCoMo paper's ``task_eval/evaluation.py`` computes it
  (commas, articles and "and" dropped, punctuation stripped, lower case, Porter stems;
  multi-hop answers split on commas, each gold part scored by its best answer part;
  open-domain gold cut at the first ";");
- ``gold_recall``: the share of the gold answer's (normalised, stemmed) tokens that the
  answer contains;
- ``date_ok`` (temporal questions whose gold answer names a date): the first date the
  answer writes (memkit.language.timeref.read_span) matches the gold date at least as precisely;
- ``declined``: the writer said memory holds nothing on it (its own flag; for answers read
  from elsewhere, LoCoMo's test: "no information available" or "not mentioned" in it, or
  memkit's fallback "couldn't find anything"). For adversarial questions that is the
  right answer; for the others it should be rare;
- ``evidence_quoted`` (questions with evidence): the answer quotes one of the question's
  evidence posts (``quoted``, the event ids the writer quotes, in order);
- ``words``: the answer's length in words (reported as the median).

``--answers-out`` writes one JSON line per query: ``query_id``, ``answer``, ``quoted``,
``declined``.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from functools import lru_cache
from pathlib import Path

import polars as pl

from memkit.answer.base import Asked, Evidence
from memkit.core.tables import relevant_posts
from memkit.language.timeref import read_span

# Categories whose right answer is a decline: LoCoMo's adversarial questions,
# memkit.training.answers' unknown facts, and the conversation suites' unknown facts and bare
# follow-ups of a new user.
UNANSWERABLE = {"adversarial", "unknown fact", "unknown", "fresh"}
_PUNCT = set(string.punctuation)


def normalize_answer(s) -> str:
    s = str(s).replace(",", "").lower()
    s = re.sub(r"\b(a|an|the|and)\b", " ", s)
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(s.split())


def tokens(s) -> list[str]:
    return [_stem(w) for w in normalize_answer(s).split()]


@lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    """NLTK's Porter stem of a word, remembered (answers repeat their words; the stemmer is
    pure Python and was a twentieth of `make eval`)."""
    return _porter().stem(word)


@lru_cache(maxsize=1)
def _porter():
    """NLTK's Porter stemmer (LoCoMo's F1 stems with it; PyStemmer's "porter" differs on
    words like "died"), imported when a gold answer is first scored: importing nltk takes
    half a second and more (it pulls in scipy.stats), which every eval process paid."""
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def f1_score(prediction, gold) -> float:
    pred, ref = tokens(prediction), tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred), common / len(ref)
    return 2 * p * r / (p + r)


def f1_multi(prediction, gold) -> float:
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(f1_score(p, g) for p in preds) for g in golds) / len(golds)


def gold_recall(prediction, gold) -> float:
    ref = tokens(gold)
    if not ref:
        return float("nan")
    have = set(tokens(prediction))
    return sum(t in have for t in ref) / len(ref)


def declined(prediction) -> bool:
    p = str(prediction).lower()
    return "no information available" in p or "not mentioned" in p or "couldn't find anything" in p


def score_answer(answer: str, gold: str | None, category: str | None) -> dict:
    """One answer's metrics that need only its text (NaN where they do not apply)."""
    nan = float("nan")
    out = {
        "f1": nan,
        "gold_recall": nan,
        "date_ok": nan,
        "declined": float(declined(answer)),
        "words": float(len(str(answer).split())),
    }
    if category in UNANSWERABLE or gold is None:
        return out
    gold = str(gold)
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    out["f1"] = f1_multi(answer, gold) if category == "multi-hop" else f1_score(answer, gold)
    out["gold_recall"] = gold_recall(answer, gold)
    if category == "temporal":
        want = read_span(gold)
        if want is not None:
            got = read_span(answer)
            out["date_ok"] = float(got is not None and got.matches(want))
    return out


def items_from_events(events: pl.DataFrame) -> dict[str, dict]:
    """A dataset's events as the items an answer writer reads (the speaker is the author)."""
    cols = [
        c
        for c in ("event_id", "text", "user_id", "created_at", "block_id", "block_type")
        if c in events.columns
    ]
    out = {}
    for r in events.select(cols).iter_rows(named=True):
        block = r.get("block_id") or ""
        out[r["event_id"]] = {
            "event_id": r["event_id"],
            "text": r["text"],
            "speaker": r.get("user_id"),
            "created_at": r.get("created_at"),
            "block_title": block.rsplit("/", 1)[-1].replace("_", " ").capitalize() or None,
            "block_type_name": r.get("block_type"),
        }
    return out


ANSWER_SCHEMA = {
    "query_id": pl.Utf8,
    "answer": pl.Utf8,
    "quoted": pl.List(pl.Utf8),
    "declined": pl.Boolean,
    "evidence@10": pl.Boolean,
}


def write_answers(
    pipeline, dataset, run: pl.DataFrame, k: int = 10, answerer=None, written: dict | None = None
) -> pl.DataFrame:
    """The answer to every query from its top ``k`` items, as ``Pipeline.query`` writes it
    (the relevance gate first): query_id, answer, quoted, declined, evidence@10.
    ``answerer``: another writer than the pipeline's (memkit.training.answers); ``written``:
    answers already written in context (conversation turns, by query id)."""
    writer = answerer or pipeline.answerer
    written = written or {}
    items = answer_items(pipeline, dataset, run, k, writer)
    gold = relevant_posts(dataset.qrels)
    rows = []
    replaced = getattr(pipeline, "replaced", {})  # changed facts ``search`` found
    for q in dataset.queries.iter_rows(named=True):
        shown = items.get(q["query_id"], [])
        change = replaced.get(q["query_id"])
        if change:  # as ``ask`` shows them: the replaced date hidden, the newer one quoted
            shown = [i for i in shown if i["event_id"] != change[1]]
        settled = bool(change) and bool(shown) and shown[0]["event_id"] == change[0]
        written_here = written.get(q["query_id"]) if answerer is None else None
        # the pipeline's reader found a post likely to answer: the writer quotes it
        reader = pipeline.reader
        decided = (
            bool(shown)
            and reader is not None
            and reader.overrule_writer
            and reader.applies(q["text"])
        )
        written_here = written_here or writer.write(
            Asked(q["text"]), Evidence(shown, decided=decided, settled=settled)
        )
        rows.append(
            {
                "query_id": q["query_id"],
                "answer": written_here.text,
                "quoted": written_here.quoted,
                "declined": written_here.declined,
                "evidence@10": bool(
                    gold.get(q["query_id"], set()) & {i["event_id"] for i in shown[:10]}
                ),
            }
        )
    return pl.DataFrame(rows, schema=ANSWER_SCHEMA)


def answer_items(
    pipeline, dataset, run: pl.DataFrame, k: int = 10, answerer=None
) -> dict[str, list[dict]]:
    """Each query's top ``k`` items as the writer reads them (none when the relevance gate
    finds nothing). The writer learns the authors' names, as the service does, and the
    sentences of these items are encoded in one batch."""
    writer = answerer or pipeline.answerer
    events = items_from_events(dataset.events)
    writer.prepare(list(events.values()), encode=False)
    top = run.filter(pl.col("rank") <= k).sort("query_id", "rank")
    texts = dict(dataset.queries.select("query_id", "text").iter_rows())
    out = {}
    for (qid,), part in top.group_by("query_id", maintain_order=True):
        if qid in texts and pipeline.relevant(part, texts[qid]):
            out[qid] = [
                {**events[i], "score": s}
                for i, s in zip(part["event_id"], part["score"])
                if i in events
            ]
    if hasattr(writer, "encode_sentences"):
        writer.encode_sentences([i for shown in out.values() for i in shown])
    return out


MEASURES = ("evidence_quoted", "declined", "words", "date_ok", "f1", "gold_recall")


def score_answers(
    answers: pl.DataFrame, queries: pl.DataFrame, qrels: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, dict]:
    """Per-query answer metrics and their summaries: for answerable questions (all
    categories but adversarial), per category, and for the answerable ones whose evidence
    was in the top 10. Each group has the mean of every measure (``words``: the median)
    and how many questions it counts (``<measure>_n``)."""
    q = queries.select(
        "query_id",
        *(
            pl.col(c) if c in queries.columns else pl.lit(None, pl.Utf8).alias(c)
            for c in ("category", "answer")
        ),
    ).rename({"answer": "gold"})
    table = answers.join(q, on="query_id", how="left")
    scored = [
        score_answer(a, g, c) for a, g, c in table.select("answer", "gold", "category").iter_rows()
    ]
    scored = pl.DataFrame(
        scored,
        schema={k: pl.Float64 for k in ("f1", "gold_recall", "date_ok", "declined", "words")},
    )
    if "declined" in table.columns:  # the writer's own word beats reading its text
        scored = scored.drop("declined")
    table = pl.concat([table, scored], how="horizontal").with_columns(
        pl.col("declined").cast(pl.Float64)
    )
    evidence = {} if qrels is None else relevant_posts(qrels)
    quoted = table["quoted"].to_list() if "quoted" in table.columns else [None] * table.height
    table = table.with_columns(
        pl.Series(
            "evidence_quoted",
            [
                float(bool(set(qs or []) & evidence[qid]))
                if qid in evidence and cat not in UNANSWERABLE
                else float("nan")
                for qid, qs, cat in zip(table["query_id"], quoted, table["category"])
            ],
            dtype=pl.Float64,
        )
    )

    def means(frame: pl.DataFrame) -> dict:
        out = {}
        for m in MEASURES:
            col = frame[m].drop_nans().drop_nulls()
            if col.len():
                out[m] = float(col.median() if m == "words" else col.mean())
                out[f"{m}_n"] = int(col.len())
        return out

    answerable = table.filter(~pl.col("category").fill_null("").is_in(list(UNANSWERABLE)))
    summary = {"answerable": means(answerable)}
    if "evidence@10" in table.columns:
        summary["answerable with evidence in top 10"] = means(
            answerable.filter(pl.col("evidence@10"))
        )
    for (cat,), part in table.group_by("category", maintain_order=True):
        if cat is not None:
            summary[f"category:{cat}"] = means(part)
    return table, summary


def write_answers_jsonl(answers: pl.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in answers.select(
            "query_id", "answer", "quoted", pl.col("declined").cast(pl.Boolean)
        ).iter_rows(named=True):
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path
