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
  answer writes (memkit.timeref.read_span) matches the gold date at least as precisely;
- ``declined``: the answer says memory holds nothing (LoCoMo's test: "no information
  available" or "not mentioned" in it; also memkit's fallback when nothing was found,
  "couldn't find anything"). For adversarial questions that is the right
  answer; for the others it should be rare when the evidence is in the top 10
  (``evidence@10``).
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path

import polars as pl
from nltk.stem import PorterStemmer

from memkit.timeref import read_span

_STEM = PorterStemmer()
_PUNCT = set(string.punctuation)


def normalize_answer(s) -> str:
    s = str(s).replace(",", "").lower()
    s = re.sub(r"\b(a|an|the|and)\b", " ", s)
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(s.split())


def tokens(s) -> list[str]:
    return [_STEM.stem(w) for w in normalize_answer(s).split()]


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
    """One answer's metrics (NaN where they do not apply)."""
    nan = float("nan")
    out = {"f1": nan, "gold_recall": nan, "date_ok": nan, "declined": float(declined(answer))}
    if category == "adversarial" or gold is None:
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
    cols = [c for c in ("event_id", "text", "user_id", "created_at", "block_id", "block_type") if c in events.columns]
    out = {}
    for r in events.select(cols).iter_rows(named=True):
        block = r.get("block_id") or ""
        out[r["event_id"]] = {"event_id": r["event_id"], "text": r["text"], "speaker": r.get("user_id"),
                              "created_at": r.get("created_at"), "block_title": block.rsplit("/", 1)[-1].replace("_", " ").capitalize() or None,
                              "block_type_name": r.get("block_type")}
    return out


def write_answers(pipeline, dataset, run: pl.DataFrame, k: int = 10) -> pl.DataFrame:
    """The answer to every query from its top ``k`` items, as ``Pipeline.query`` writes it
    (the relevance gate first): query_id, answer, declined, evidence@10."""
    items = items_from_events(dataset.events)
    pipeline.answerer.prepare(list(items.values()))  # with the authors' names, as the service does
    top = run.filter(pl.col("rank") <= k).sort("query_id", "rank")
    ranked = {q: ids for q, ids in top.group_by("query_id").agg(pl.col("event_id")).iter_rows()}
    gold = {q: set(ids) for q, ids in dataset.qrels.filter(pl.col("relevance") > 0)
            .group_by("query_id").agg(pl.col("event_id")).iter_rows()}
    rows = []
    for q in dataset.queries.iter_rows(named=True):
        ids = ranked.get(q["query_id"], [])
        if ids and not pipeline.relevant(top.filter(pl.col("query_id") == q["query_id"]), q["text"]):
            ids = []
        written = pipeline.answerer.write(q["text"], [items[i] for i in ids if i in items], True)
        rows.append({"query_id": q["query_id"], "answer": written.text, "strength": written.strength, "rival": written.rival,
                     "evidence@10": bool(gold.get(q["query_id"], set()) & set(ids[:10]))})
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "answer": pl.Utf8, "strength": pl.Float64, "rival": pl.Float64,
                                      "evidence@10": pl.Boolean})


def score_answers(answers: pl.DataFrame, queries: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """Per-query answer metrics and their means: overall (categories but adversarial), per
    category, and the decline rates the answer goal names."""
    q = queries.select("query_id", "category", "answer").rename({"answer": "gold"})
    table = answers.join(q, on="query_id", how="left")
    scored = [score_answer(a, g, c) for a, g, c in table.select("answer", "gold", "category").iter_rows()]
    table = pl.concat([table, pl.DataFrame(scored, schema={k: pl.Float64 for k in
                                                           ("f1", "gold_recall", "date_ok", "declined")})], how="horizontal")

    def means(frame: pl.DataFrame) -> dict:
        out = {}
        for m in ("f1", "gold_recall", "date_ok", "declined"):
            col = frame[m].drop_nans().drop_nulls()
            if col.len():
                out[m] = float(col.mean())
                out[f"{m}_n"] = int(col.len())
        return out

    answerable = table.filter(pl.col("category") != "adversarial")
    summary = {"answerable": means(answerable)}
    with_evidence = answerable.filter(pl.col("evidence@10"))
    if with_evidence.height:
        summary["answerable"]["declined_with_evidence@10"] = float(with_evidence["declined"].mean())
    for (cat,), part in table.group_by("category", maintain_order=True):
        summary[f"category:{cat}"] = means(part)
    return table, summary


def write_answers_jsonl(answers: pl.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in answers.select("query_id", "answer").iter_rows(named=True):
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path
