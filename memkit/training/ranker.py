"""The learned re-ranker of a config, trained on every dev set, reported held out, written
(``memkit train ranker``).

    memkit train ranker [--config NAME|FILE] [--data PATH/locomo-dev.json] [--write]
                        [--longmemeval] [--c C] [--calibration]

The served default is trained with ``--longmemeval --c 0.01`` (its config says so above its
model tables; eval/RESULTS.md says why: with C = 1 and four sets the rankers left out of
LoCoMo scored R@10 0.64 against their first stage's 0.78, with these 0.77).

The config's retriever must be ``type = "learned"``. The dev sets are LoCoMo-dev (``--data``)
and, found next to it under the data root, CAsT 2021, SciFact's train split and
MADial-Bench-en; with ``--longmemeval`` also ``extra/longmemeval-dev`` beside the data root
(long user-assistant histories, one floor per question). Each is indexed with the
config's representation, so every post is a chat line or stands alone
(memkit/retrieval/representation.py): chat lines train ``[retriever.model]``, posts that
stand alone a passage model (two logistic regressions on the same features;
memkit/retrieval/learned.py says why two). A ``[retriever.passage_model]`` the config sets
itself (its numbers written in the table, not in a ``model_file``) is kept: the learned one
is then only reported. (The hybrid's fixed 0.5/0.5 fusion scored higher on CAsT and
SciFact but its scores are not on the chat model's scale, so on a floor with both shapes
every passage outranked every chat line; eval/RESULTS.md.)
``--c`` is the logistic regressions' inverse regularisation strength (scikit-learn's C,
default 1): smaller keeps the models nearer the first stage's fusion. Training
questions are asked as self-contained ones: CAsT's by its human rewrite (training data only;
CAsT is scored on its raw turns in order, through the config's contextualizer, as ``memkit
eval`` asks them).

Reported, per dev set, with the set's headline metric:

- the first stage alone (no model);
- leave one group out: for each conversation (LoCoMo, CAsT, LongMemEval's questions) or
  person (MADial's two floors), models trained on every other group of every set score it;
  SciFact's test claims are scored by models trained on everything else (its train claims
  included: the split is the hold-out);
- leave one data set out: models trained on the other sets only;
- trained on all (in-sample for every set but SciFact: it flatters).

``--calibration`` fits and reports the calibration instead (memkit/ranking/calibration.py): the
top 10 of every training question scored by models that never saw its group, and of the
development conversation suite's turns (which the ranker never sees); per set, the Brier
score and expected calibration error of the ranker's own probabilities and of Platt scaling
fitted leaving that set out. With ``--write`` it writes ``[calibration]`` (Platt scaling
fitted on every set) into the file its ``[calibration]`` table's ``model_file`` names; the
served default has none: the ranker's own probabilities did as
well held out (eval/RESULTS.md).

With ``--write`` the chat model trained on all (and the passage model, if the config names
a file for it) are written into the files the config's ``[retriever.model]`` and
``[retriever.passage_model]`` name (``model_file``: memkit/models/ranker/ for the default):
a few dozen numbers each, no data. Retraining the models means refitting the calibration
(``--calibration --write``).
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from memkit.config import load_config, model_files, resolve_config
from memkit.core.linear import fit_linear, linear_score
from memkit.core.tables import Dataset
from memkit.datasets import load_any
from memkit.evaluation.harness import run_queries
from memkit.evaluation.metrics import per_query
from memkit.pipeline import Pipeline
from memkit.ranking.calibration import Calibration, brier, expected_calibration_error
from memkit.training import write_tables

SUITE = Path(__file__).resolve().parents[2] / "datasets" / "conversations" / "dev"
OTHERS = [
    ("cast2021", "cast2021", "mrr@10"),
    ("scifact", "scifact", "ndcg@10"),
    ("madial-bench-en", "madial", "recall@10"),
]
# beside the data root, not under it (cold `make eval` does not encode it): with --longmemeval
LONGMEMEVAL = ("../extra/longmemeval-dev", "longmemeval-dev", "recall@10")


@dataclass
class DevSet:
    """One dev set: the pipeline indexing it, the questions it trains on (with features and
    labels) and the data set it is scored on."""

    name: str
    metric: str
    pipeline: Pipeline
    cand: pl.DataFrame  # training candidates: query_id, event_id, group, chat, y, features
    scored: Dataset  # what the held-out figures are measured on
    groups: dict[
        str, str
    ]  # scored query_id -> its group (conversation, person; "test" for SciFact)
    in_order: bool  # scored through the contextualizer, turns in order (CAsT)


def dev_set(
    name: str, metric: str, config: dict, train: Dataset, scored: Dataset, field: str = "text"
) -> DevSet:
    pipeline = Pipeline.from_config(config)
    pipeline.fit(scored.events, hold_out=scored.name)
    q = (
        train.queries.with_columns(pl.coalesce(pl.col(field), pl.col("text")).alias("text"))
        if field in train.queries.columns
        else train.queries
    )
    cand = pipeline.retriever.features(q.select("query_id", "text", "floor_ids"))
    rel = train.qrels.filter(pl.col("relevance") > 0).select(
        "query_id", "event_id", pl.lit(1).alias("y")
    )
    cand = (
        cand.join(rel, on=["query_id", "event_id"], how="left")
        .with_columns(pl.col("y").fill_null(0))
        .join(group_of(train), on="query_id")
        .with_columns(pl.Series("chat", pipeline.retriever.is_chat(cand["event_id"].to_list())))
    )
    in_order = "conversation_id" in scored.queries.columns
    groups = (
        dict(group_of(scored).iter_rows())
        if train is scored
        else {qid: "test" for qid in scored.queries["query_id"]}
    )
    return DevSet(name, metric, pipeline, cand, scored, groups, in_order)


def group_of(ds: Dataset) -> pl.DataFrame:
    """query_id -> group: the conversation if queries have one, else the first floor."""
    conv = (
        pl.col("conversation_id")
        if "conversation_id" in ds.queries.columns
        else pl.lit(None, pl.Utf8)
    )
    return ds.queries.select(
        "query_id", pl.coalesce(conv, pl.col("floor_ids").list.first()).alias("group")
    )


# the logistic regressions' inverse regularisation strength (scikit-learn's C): --c
C = 1.0


def fit_models(
    rows: list[pl.DataFrame], names: list[str], passage_names: list[str] | None = None
) -> tuple[dict | None, dict | None]:
    """(chat model, passage model) fitted on the given candidate rows (None: no rows of that
    shape); ``passage_names``: the passage model's features, if not ``names``."""
    data = pl.concat(rows)
    out = []
    for chat, cols in ((True, names), (False, passage_names or names)):
        part = data.filter(pl.col("chat") == chat)
        out.append(
            fit_linear(part.select(cols).to_numpy(), part["y"].to_numpy(), cols, c=C)
            if part.height and part["y"].sum() > 0
            else None
        )
    return out[0], out[1]


def ranked_with(pipeline: Pipeline, models: tuple[dict | None, dict | None]) -> Pipeline:
    """A copy of a fitted pipeline whose learned retriever ranks with these models (chat
    lines by the chat model, posts that stand alone by the passage model), its index shared
    and not refitted; the pipeline given is left as it was."""
    chat, passage = models
    out = copy.copy(pipeline)
    out.retriever = pipeline.retriever.with_models(
        chat or passage, passage if chat is not None else None
    )
    return out


def logits(cand: pl.DataFrame, models, names: list[str]) -> np.ndarray:
    """The models' scores (log-odds) of candidate rows: chat lines by the chat model, posts
    that stand alone by the passage model."""
    chat, passage = models
    x = cand.select(names).to_numpy()
    out = np.zeros(cand.height)
    is_chat = cand["chat"].to_numpy()
    for model, rows in ((chat or passage, is_chat), (passage or chat, ~is_chat)):
        if rows.any():
            out[rows] = linear_score(model, x[rows][:, [names.index(n) for n in model["features"]]])
    return out


def top_scored(cand: pl.DataFrame, scores: np.ndarray, k: int = 10) -> pl.DataFrame:
    """Each question's ``k`` best candidates by score: score, label, rank."""
    return (
        cand.select("query_id", "y")
        .with_columns(pl.Series("score", scores))
        .sort(["query_id", "score"], descending=[False, True])
        .with_columns(pl.int_range(1, pl.len() + 1).over("query_id").alias("rank"))
        .filter(pl.col("rank") <= k)
    )


def calibration_rows(devs: list[DevSet], names: list[str]) -> pl.DataFrame:
    """Every dev set's training questions' top 10, each scored by models trained without
    its group (its conversation, person; SciFact: the whole set), with labels and n; and
    the development conversation suite's turns, asked on their own by models trained on
    every dev set (the ranker never sees the suite)."""
    rows = []
    for dev in devs:
        for g in sorted(dev.cand["group"].unique().to_list()):
            models = fit_models(
                [d.cand.filter(pl.col("group") != g) if d is dev else d.cand for d in devs], names
            )
            mine = dev.cand.filter(pl.col("group") == g)
            rows.append(
                top_scored(mine, logits(mine, models, names)).with_columns(
                    pl.lit(dev.name).alias("set")
                )
            )
    if SUITE.exists():
        suite = load_any(SUITE)
        pipeline = ranked_with(
            Pipeline.from_config(devs[0].pipeline.config), fit_models([d.cand for d in devs], names)
        ).fit(suite.events)
        run = pipeline.retriever.search(
            suite.queries.select("query_id", "text", "floor_ids"), 10
        )  # log-odds
        rel = suite.qrels.filter(pl.col("relevance") > 0).select(
            "query_id", "event_id", pl.lit(1).alias("y")
        )
        judged = run.filter(pl.col("query_id").is_in(rel["query_id"].unique().to_list()))
        rows.append(
            judged.join(rel, on=["query_id", "event_id"], how="left").select(
                "query_id",
                pl.col("y").fill_null(0),
                "score",
                "rank",
                pl.lit(suite.name).alias("set"),
            )
        )
    return pl.concat(rows)


def calibration_report(rows: pl.DataFrame) -> tuple[Calibration, str]:
    """Platt scaling fitted on every set's held-out top 10, and per set the Brier score and
    expected calibration error of the ranker's own probabilities (a = 1, b = 0) and of a
    Platt scaling fitted leaving that set out. Returns the one fitted on all sets."""
    fitted = Calibration.fit(rows["score"].to_numpy(), rows["y"].to_numpy())
    lines = [
        f"Platt scaling on every set's held-out top 10 ({rows.height} items): a = {fitted.a}, b = "
        f"{fitted.b}",
        "| set | items | relevant | Brier: ranker's own | Brier: Platt, this set left out "
        "| ECE: own | ECE: Platt, left out |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in rows["set"].unique(maintain_order=True).to_list():
        mine, rest = rows.filter(pl.col("set") == name), rows.filter(pl.col("set") != name)
        s, y = mine["score"].to_numpy(), mine["y"].to_numpy()
        ps = [Calibration()(s), Calibration.fit(rest["score"].to_numpy(), rest["y"].to_numpy())(s)]
        lines.append(
            f"| {name} | {len(y)} | {y.mean():.3f} | "
            + " | ".join(f"{brier(p, y):.4f}" for p in ps)
            + " | "
            + " | ".join(f"{expected_calibration_error(p, y):.4f}" for p in ps)
            + " |"
        )
    return fitted, "\n".join(lines)


def held_out(dev: DevSet, models, query_ids: list[str]) -> pl.DataFrame:
    """Per-query metrics of these scored queries, ranked with these models, asked as
    ``memkit eval`` asks them."""
    queries = dev.scored.queries.filter(pl.col("query_id").is_in(query_ids))
    if not dev.in_order:
        queries = queries.drop("conversation_id", strict=False)
    run, _, _ = run_queries(ranked_with(dev.pipeline, models), queries, 10)
    table = per_query(run, dev.scored.qrels.filter(pl.col("query_id").is_in(query_ids)))
    return table.join(
        dev.scored.queries.select("query_id", "category")
        if "category" in dev.scored.queries.columns
        else dev.scored.queries.select("query_id", pl.lit(None, pl.Utf8).alias("category")),
        on="query_id",
    )


def answerable(table: pl.DataFrame) -> pl.DataFrame:
    """Per-query metrics of the questions that have an answer (LoCoMo: categories 1-4)."""
    return table.filter(pl.col("category").is_null() | (pl.col("category") != "adversarial"))


def headline(dev: DevSet, table: pl.DataFrame) -> str:
    """The set's metric, R@5 and R@10 (LoCoMo: categories 1-4), and R@10 per category."""
    table = answerable(table)
    extra = f" R@5 {table['recall@5'].mean():.4f} R@10 {table['recall@10'].mean():.4f}"
    cats = sorted(c for c in table["category"].unique().to_list() if c is not None)
    per = "".join(
        f"; {c} {table.filter(pl.col('category') == c)['recall@10'].mean():.4f}" for c in cats
    )
    return f"{dev.metric} {table[dev.metric].mean():.4f}{extra} ({table.height} q{per})"


def dev_sets(config: dict, data: str, longmemeval: bool = False) -> list[DevSet]:
    """LoCoMo-dev (``data``) and the other dev sets found next to it (``longmemeval``: and
    longmemeval-dev beside the data root), indexed with ``config`` (its learned retriever's
    models removed by the caller)."""
    root = Path(data).resolve().parents[1]
    locomo = load_any(data)
    devs = [dev_set("locomo-dev", "recall@10", config, locomo, locomo)]
    for folder, name, metric in OTHERS + ([LONGMEMEVAL] if longmemeval else []):
        if not (root / folder).exists():
            print(f"{root / folder}: not found, left out")
            continue
        if name == "scifact":
            devs.append(
                dev_set(
                    name,
                    metric,
                    config,
                    load_any(root / folder, "train"),
                    load_any(root / folder, "test"),
                )
            )
        else:
            ds = load_any(root / folder)
            devs.append(dev_set(name, metric, config, ds, ds, field="rewrite"))
        print(f"{name}: {devs[-1].cand.height} training candidates", flush=True)
    return devs


def cross_validated(
    devs: list[DevSet], names: list[str], passage_names: list[str] | None = None
) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    """Per dev set: (leave one group out, leave this data set out) per-query tables, the
    models trained on ``names`` only (the passage model on ``passage_names`` if given)."""
    out = {}
    for dev in devs:
        every = dev.scored.queries["query_id"].to_list()
        tables = []
        for g in sorted(set(dev.groups.values())):
            rows = [d.cand.filter(pl.col("group") != g) if d is dev else d.cand for d in devs]
            tables.append(
                held_out(
                    dev,
                    fit_models(rows, names, passage_names),
                    [q for q, gg in dev.groups.items() if gg == g],
                )
            )
        models = fit_models([d.cand for d in devs if d is not dev], names, passage_names)
        out[dev.name] = (pl.concat(tables), held_out(dev, models, every))
    return out


def unmodelled(path: str) -> dict:
    """A learned config with its models (and calibration) taken out, for training them again."""
    config = load_config(path)
    config["retriever"].pop("model", None)
    config.pop("calibration", None)  # the first stage's scores are not the models' log-odds
    return config


def run(args) -> int:
    """``memkit train ranker``: ``args`` as memkit/cli.py parses them (config, data,
    longmemeval, c, calibration, write)."""

    global C
    C = args.c
    path = resolve_config(args.config)
    files = model_files(path)
    config = unmodelled(path)
    kept = config["retriever"].pop("passage_model", None)
    if "retriever.passage_model" in files:
        kept = None  # its numbers are in a model file: trained again and written there
    if config["retriever"].get("type") != "learned":
        print(f'{path}: the retriever is not type = "learned"', file=sys.stderr)
        return 2
    devs = dev_sets(config, args.data, args.longmemeval)
    names = devs[0].pipeline.retriever.feature_names()

    if args.calibration:
        calibration, report = calibration_report(calibration_rows(devs, names))
        print(report)
        if args.write:
            fitted = {"a": calibration.a, "b": calibration.b}
            for file in write_tables(path, {"calibration": fitted}):
                print(f"calibration written to {file}")
        return 0
    for dev, (logo, lodo) in zip(devs, cross_validated(devs, names).values()):
        print(f"\n{dev.name}")
        print(
            "  first stage alone:       ",
            headline(dev, held_out(dev, (None, None), dev.scored.queries["query_id"].to_list())),
        )
        print("  leave one group out:     ", headline(dev, logo))
        print("  leave this data set out: ", headline(dev, lodo), flush=True)
    models = fit_models([d.cand for d in devs], names)
    for dev in devs:
        print(
            f"{dev.name} trained on all (in-sample but SciFact):",
            headline(dev, held_out(dev, models, dev.scored.queries["query_id"].to_list())),
        )

    if args.write:
        chat, passage = models
        tables = {"retriever.model": chat}
        if passage is not None and "retriever.passage_model" in files:
            tables["retriever.passage_model"] = passage
        for file in write_tables(path, tables):
            print(f"model written to {file}")
        if kept is not None:
            print(f"(the passage model {path} sets itself is kept)")
        elif passage is not None and "retriever.passage_model" not in files:
            print(f"(the passage model is not written: {path} names no file for it)")
    return 0
