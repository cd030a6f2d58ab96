"""The eval harness: replays a dataset's queries through a pipeline built from a config.

Independent queries (no ``conversation_id``) are searched in one batch and never see each
other's context. Queries that share a ``conversation_id`` are asked in ``turn`` order by
one fresh user through ``Pipeline.query``, so the pipeline's contextualiser sees exactly
that user's earlier turns. ``query_field="rewrite"`` asks the human rewrites instead (an
oracle for comparison, where a dataset has them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memkit.core.errors import ValidationError
from memkit.core.tables import Dataset, empty_run
from memkit.evaluation.answers import score_answers, write_answers
from memkit.evaluation.conversations import has_checks, summarize_checks, turn_checks
from memkit.evaluation.metrics import METRICS, per_query, summarize, write_trec_run
from memkit.pipeline import Pipeline


@dataclass
class EvalResult:
    name: str  # config name (plus a suffix such as "+rewrite")
    dataset: str
    config: dict
    run: pl.DataFrame
    per_query: pl.DataFrame  # query_id, category, one column per metric
    summary: dict  # {"all": {...}, "headline": {...}, "category:x": {...}}
    seconds: float
    effective_queries: pl.DataFrame = field(default_factory=pl.DataFrame)
    answers: pl.DataFrame | None = (
        None  # per query: answer and its metrics (datasets with gold answers)
    )
    answer_summary: dict = field(default_factory=dict)  # {"answerable": {...}, "category:x": {...}}
    encoder: str | None = None  # the model the dense parts used (a trained one: minilm-ft-...)
    turns: pl.DataFrame | None = (
        None  # conversation suites: each turn's checks (memkit.evaluation.conversations)
    )
    turn_summary: dict = field(default_factory=dict)
    # whether the config's trained models learned from this data set (its ``trained_on``)
    in_sample: bool = False
    # what the pipeline does beyond its retriever (Pipeline.stages; empty: the retriever alone)
    stages: list[str] = field(default_factory=list)

    def stages_label(self) -> str:
        """``stages`` for a table cell or a tag: "retriever alone" when there are none."""
        return ", ".join(self.stages) or "retriever alone"

    def write_run(self, path: str | Path) -> Path:
        write_trec_run(self.run, path, tag=self.name.replace(" ", "_"))
        return Path(path)


def floor_authors(events: pl.DataFrame) -> dict[str, list[str]]:
    """Each floor's authors: who a question asked there may be about (the service passes
    the same to the pipeline: server/services/memory.py)."""
    return {
        f: sorted(set(a))
        for f, a in events.filter(pl.col("user_id").is_not_null())
        .group_by("floor_id")
        .agg(pl.col("user_id"))
        .iter_rows()
    }


def run_queries(
    pipeline: Pipeline,
    queries: pl.DataFrame,
    k: int = 100,
    query_field: str = "text",
    events: pl.DataFrame | None = None,
):
    """The run for all queries, the effective query each one was searched with, and the
    answers written to conversation turns (in their context, as the service writes them;
    ``events``: the data set's, whose authors each turn's answer may name)."""
    if query_field not in queries.columns:
        raise ValidationError(
            "query_field", f"the dataset's queries have no {query_field!r} column"
        )
    queries = queries.with_columns(pl.coalesce(pl.col(query_field), pl.col("text")).alias("_asked"))
    has_conv = "conversation_id" in queries.columns
    alone = queries.filter(pl.col("conversation_id").is_null()) if has_conv else queries
    runs = []
    effective = []
    written = {}
    if alone.height:
        frame = alone.select(
            "query_id",
            pl.col("_asked").alias("text"),
            "floor_ids",
            *(["time"] if "time" in alone.columns else []),
        )
        runs.append(pipeline.search(frame, k))
        effective += list(zip(alone["query_id"], alone["_asked"]))
    if has_conv:
        authors = floor_authors(events) if events is not None else {}
        convs = queries.filter(pl.col("conversation_id").is_not_null()).sort(
            "conversation_id", "turn"
        )
        for (conv_id,), turns in convs.group_by("conversation_id", maintain_order=True):
            user = f"eval-user/{conv_id}"
            pipeline.conversations.forget(user)
            for row in turns.iter_rows(named=True):
                names = (
                    sorted({a for f in row["floor_ids"] or () for a in authors.get(f, ())})
                    if authors
                    else None
                )
                res = pipeline.query(
                    row["_asked"],
                    user_id=user,
                    floor_ids=row["floor_ids"],
                    k=k,
                    query_id=row["query_id"],
                    now=row.get("time"),
                    authors=names,
                )
                runs.append(res.run.head(k))
                effective.append((row["query_id"], res.effective_query))
                written[row["query_id"]] = res.written
            pipeline.conversations.forget(user)
    run = pl.concat(runs) if runs else empty_run()
    eff = pl.DataFrame(
        effective, schema={"query_id": pl.Utf8, "effective_query": pl.Utf8}, orient="row"
    )
    return run, eff, written


def as_sequence(queries: pl.DataFrame) -> pl.DataFrame:
    """The queries of each conversation (first floor) asked in order by one user: the
    check that follow-up handling never hurts self-contained questions."""
    return queries.with_columns(
        pl.col("floor_ids").list.first().fill_null("-").alias("conversation_id"),
        pl.int_range(1, pl.len() + 1)
        .over(pl.col("floor_ids").list.first())
        .cast(pl.Int64)
        .alias("turn"),
    )


def in_sample(config: dict, dataset: Dataset) -> bool:
    """Whether a config's trained models saw this data set: one of its ``trained_on``
    names is the data set's name (``"locomo-dev"``), or its name and split
    (``"scifact:train"`` is not SciFact's test split, which eval scores)."""
    split = (dataset.info or {}).get("split")
    for entry in config.get("trained_on") or ():
        name, _, part = str(entry).partition(":")
        if name == dataset.name and (not part or part == split):
            return True
    return False


def has_gold_answers(dataset: Dataset) -> bool:
    return "answer" in dataset.queries.columns and dataset.queries["answer"].drop_nulls().len() > 0


def evaluate_pipeline(
    pipeline: Pipeline,
    dataset: Dataset,
    k: int = 100,
    query_field: str = "text",
    metrics=METRICS,
    name: str | None = None,
    fit: bool = True,
    sequential: bool = False,
    answers: bool | None = None,
) -> EvalResult:
    """Score a pipeline's rankings; with ``answers`` (default: when the dataset has gold
    answers or conversation checks; ``False`` never) also write every query's answer and
    score it (memkit.evaluation.answers; without gold answers only declines, evidence quoted
    and length can be scored)."""
    t = time.perf_counter()
    if fit:  # an [encoder] section never learns from the labels of the data set it is scored on
        pipeline.fit(dataset.events, hold_out=dataset.name)
    queries = as_sequence(dataset.queries) if sequential else dataset.queries
    run, eff, written = run_queries(pipeline, queries, k, query_field, events=dataset.events)
    table = per_query(run, dataset.qrels, metrics)
    table = table.join(dataset.queries.select("query_id", "category"), on="query_id", how="left")
    summary = summarize(table, dataset.queries, metrics)
    name = name or pipeline.name + ("" if query_field == "text" else f"+{query_field}") + (
        "+sequential" if sequential else ""
    )
    answer_table, answer_summary, turns, turn_summary = None, {}, None, {}
    checks = has_checks(dataset.queries)
    if answers if answers is not None else (checks or has_gold_answers(dataset)):
        written_all = write_answers(pipeline, dataset, run, written=written)
        answer_table, answer_summary = score_answers(written_all, dataset.queries, dataset.qrels)
        if checks:
            turns = turn_checks(written_all, dataset.queries, dataset.qrels, run)
            turn_summary = summarize_checks(turns)
    return EvalResult(
        name=name,
        dataset=dataset.name,
        config=pipeline.config,
        run=run,
        per_query=table,
        summary=summary,
        seconds=time.perf_counter() - t,
        effective_queries=eff,
        answers=answer_table,
        answer_summary=answer_summary,
        encoder=pipeline.encoder_name(),
        turns=turns,
        turn_summary=turn_summary,
        in_sample=in_sample(pipeline.config, dataset),
        stages=pipeline.stages(),
    )


def evaluate_config(config: "dict | str | Path", dataset: Dataset, **kw) -> EvalResult:
    """``evaluate_pipeline`` of the pipeline a config builds: a config dict
    (``memkit.config.load_config``), a TOML file or a config's name (``"bm25"``)."""
    return evaluate_pipeline(Pipeline.from_config(config), dataset, **kw)
