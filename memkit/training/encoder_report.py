"""Teach the encoder, and score it honestly: dense retrieval alone over "speaker: text"
(``memkit train encoder --report PART``).

    memkit train encoder --report loco|adapt|transfer|lodo|combined|settings|end-to-end|all
                         [--hard-negatives] [--threads 1]

Every model is trained by memkit.training and kept in the cache by what made it, so a
second run trains nothing and encodes nothing (vectors are cached by model too).

- ``loco``: LoCoMo-dev, supervised on four conversations' question -> evidence pairs and
  scored on the fifth, for each conversation in turn (leave one conversation out);
  recall@5/10 for categories 1-4 and per category; and adapted on the posts (no labels).
- ``adapt``: every dev set, with the packaged model adapted on that data set's own events
  (no labels), with the settings of ``ADAPT``.
- ``transfer``: the issue's table: every dev set, scored with a model trained on LoCoMo-dev's
  question -> evidence pairs (LoCoMo-dev itself with the ``loco`` folds: leave one
  conversation out).
- ``lodo``: every dev set, scored with a model trained on the *other* dev sets' qrels
  (leave one data set out: LoCoMo-dev, CAsT 2021, SciFact's train split, MADial-Bench).
- ``combined``: every dev set, with its ``lodo`` model adapted on its own events.
- ``settings``: how ``ADAPT`` was chosen: a few self-supervised settings on LoCoMo-dev.
- ``end-to-end``: the default config (memkit/config/default.toml) with the encoder swapped
  in, its learned re-ranker not retrained: supervised (leave one conversation out) and
  adapted, on LoCoMo-dev.

The pipeline is ``[representation]`` (one neighbour each side) and one dense retriever over
``{line}``; each data set is asked as ``memkit eval`` asks it (CAsT turns in order).
"""

from __future__ import annotations

import sys

import polars as pl

from memkit.config import CONFIG_DIR
from memkit.core.errors import ValidationError
from memkit.core.tables import Dataset
from memkit.datasets import data_root, load_any
from memkit.evaluation.harness import evaluate_pipeline
from memkit.evaluation.tuning import question_table
from memkit.pipeline import Pipeline
from memkit.retrieval import DenseRetriever
from memkit.retrieval.representation import Representation
from memkit.training import (
    ADAPT,
    SUPERVISED,
    model_info,
    structure_pairs,
    supervised_pairs,
    train,
)

CATS = ["single-hop", "multi-hop", "temporal", "open-domain"]
# (path under the data root, split to train on, split to score, headline (group, metric))
DEV = {
    "locomo-dev": ("locomo/locomo-dev.json", "test", "test", ("headline", "recall@10")),
    "cast2021": ("cast2021", "test", "test", ("all", "mrr@10")),
    "scifact": ("scifact", "train", "test", ("all", "ndcg@10")),
    "madial-bench-en": ("madial-bench-en", "test", "test", ("all", "ndcg@10")),
}


def dense(name: str = "minilm") -> Pipeline:
    return Pipeline(
        DenseRetriever(doc_template="{line}"), representation=Representation(before=1, after=1)
    ).use_encoder(name)


def score(name: str, ds: Dataset):
    return evaluate_pipeline(dense(name), ds, answers=False)


def subset(ds: Dataset, keep) -> Dataset:
    """The dataset with only the questions whose conversation (first floor) ``keep`` accepts."""
    q = ds.queries.filter(
        pl.col("floor_ids").list.first().map_elements(keep, return_dtype=pl.Boolean)
    )
    return Dataset(
        ds.name,
        ds.events,
        q,
        ds.qrels.filter(pl.col("query_id").is_in(q["query_id"].to_list())),
        ds.info,
    )


def row(label: str, t: pl.DataFrame, note: str = "") -> str:
    cells = [f"{t['recall@5'].mean():.4f}", f"{t['recall@10'].mean():.4f}"]
    cells += [f"{t.filter(pl.col('category') == c)['recall@10'].mean():.4f}" for c in CATS]
    return f"| {label} | " + " | ".join(cells) + f" | {note} |"


def seconds(*names: str) -> str:
    return " + ".join(f"{model_info(n)['train_seconds']:.0f} s" for n in names)


def loco_models(ds: Dataset, hard: bool, threads) -> dict[str, str]:
    """Conversation -> the model trained on the other conversations' labels."""
    convs = sorted(ds.queries["floor_ids"].list.first().unique().to_list())
    return {
        conv: train(
            supervised_pairs(subset(ds, lambda c, conv=conv: c != conv), hard_negatives=hard),
            "minilm",
            SUPERVISED,
            ["locomo-dev minus " + conv],
            threads=threads,
        )
        for conv in convs
    }


def loco(ds: Dataset, hard: bool, threads) -> None:
    """Leave one conversation out, supervised."""
    print(
        "\n| LoCoMo-dev, dense over speaker: text | R@5 1-4 | R@10 1-4 | "
        + " | ".join(f"R@10 {c}" for c in CATS)
        + " | training |"
    )
    print("|---|" + "---:|" * (2 + len(CATS)) + "---|")
    base = question_table(score("minilm", ds).run, ds, ["recall@5", "recall@10"])
    print(row("none (packaged MiniLM)", base), flush=True)
    held = []
    models = loco_models(ds, hard, threads)
    for conv, name in models.items():
        test = subset(ds, lambda c, conv=conv: c == conv)
        held.append(question_table(score(name, test).run, test, ["recall@5", "recall@10"]))
        print(
            f"  {conv}: {name} R@10 {held[-1]['recall@10'].mean():.4f}", file=sys.stderr, flush=True
        )
    label = "supervised, hard negatives" if hard else "supervised"
    print(
        row(
            f"{label}, leave one conversation out",
            pl.concat(held),
            f"{len(models)} folds, "
            + ", ".join(f"{model_info(n)['train_seconds']:.0f}" for n in models.values())
            + " s",
        )
    )
    adapted = train(
        structure_pairs(ds.events), "minilm", ADAPT, ["locomo-dev events"], threads=threads
    )
    print(
        row(
            "adapted on the conversations' own posts (no labels)",
            question_table(score(adapted, ds).run, ds, ["recall@5", "recall@10"]),
            seconds(adapted),
        )
    )


def end_to_end(ds: Dataset, hard: bool, threads) -> None:
    """The default config with the encoder swapped in (its learned ranker not retrained):
    each conversation scored with the model that never saw its labels."""

    def default(name: str, test: Dataset) -> pl.DataFrame:
        pipe = Pipeline.from_config(CONFIG_DIR / "default.toml").use_encoder(name)
        return question_table(
            evaluate_pipeline(pipe, test, answers=False).run, test, ["recall@5", "recall@10"]
        )

    print(
        "\n| LoCoMo-dev, the default config | R@5 1-4 | R@10 1-4 | "
        + " | ".join(f"R@10 {c}" for c in CATS)
        + " | |"
    )
    print("|---|" + "---:|" * (2 + len(CATS)) + "---|")
    print(row("packaged MiniLM (the default as it is)", default("minilm", ds)), flush=True)
    held = []
    for conv, name in loco_models(ds, hard, threads).items():
        held.append(default(name, subset(ds, lambda c, conv=conv: c == conv)))
    print(row("supervised encoder, leave one conversation out", pl.concat(held)), flush=True)
    adapted = train(
        structure_pairs(ds.events), "minilm", ADAPT, ["locomo-dev events"], threads=threads
    )
    print(row("adapted encoder (no labels)", default(adapted, ds)), flush=True)


def per_dataset(rows_wanted: set[str], hard: bool, threads) -> None:
    """Each dev set with the packaged model and the models of ``rows_wanted``: ``adapted``
    (on the set's own events), ``transfer`` (on LoCoMo-dev's qrels; LoCoMo-dev itself leaving
    one conversation out), ``supervised`` (on the other dev sets' qrels: leave one data set
    out), ``combined`` (supervised on the others, then adapted on the set's events)."""
    sets = {
        n: (load_any(data_root() / p, split_test), load_any(data_root() / p, split_train), metric)
        for n, (p, split_train, split_test, metric) in DEV.items()
        if (data_root() / p).exists()
    }
    pairs = {
        n: supervised_pairs(train_ds, hard_negatives=hard) for n, (_, train_ds, _) in sets.items()
    }
    rows = {}
    for n, (test, _, (group, metric)) in sets.items():
        others = [o for o in sets if o != n]
        ev = structure_pairs(test.events)
        models = {"none (packaged MiniLM)": "minilm"}
        if (
            "adapted" in rows_wanted
        ):  # (a corpus whose structure gives no pair keeps the packaged model)
            models["self-supervised on its own posts (no labels)"] = (
                train(ev, "minilm", ADAPT, [n + " events"], threads=threads)
                if ev.height
                else "minilm"
            )
        if rows_wanted & {"supervised", "combined"}:
            sup = train(
                pl.concat([pairs[o] for o in others]), "minilm", SUPERVISED, others, threads=threads
            )
            if "supervised" in rows_wanted:
                models["supervised on the other dev sets (leave this one out)"] = sup
            if "combined" in rows_wanted:
                models["supervised on the others, then self-supervised on its posts"] = (
                    train(ev, sup, ADAPT, [n + " events"], threads=threads) if ev.height else sup
                )
        if "transfer" in rows_wanted and n != "locomo-dev" and "locomo-dev" in pairs:
            models["supervised on LoCoMo-dev's qrels"] = train(
                pairs["locomo-dev"], "minilm", SUPERVISED, ["locomo-dev"], threads=threads
            )
        for label, name in models.items():
            res = score(name, test)
            rows.setdefault(label, {})[n] = (res.summary[group][metric], name)
            print(
                f"  {n}: {label} ({name}): {metric} {res.summary[group][metric]:.4f}",
                file=sys.stderr,
                flush=True,
            )
        if (
            "transfer" in rows_wanted and n == "locomo-dev"
        ):  # its own labels: only other conversations'
            held = []
            for conv, name in loco_models(test, hard, threads).items():
                fold = subset(test, lambda c, conv=conv: c == conv)
                held.append(question_table(score(name, fold).run, fold, [metric]))
            rows.setdefault("supervised on LoCoMo-dev's qrels", {})[n] = (
                pl.concat(held)[metric].mean(),
                "5 models, leave one conversation out",
            )
    names = list(sets)
    heads = [f"{n} {DEV[n][3][1]}{' 1-4' if DEV[n][3][0] == 'headline' else ''}" for n in names]
    print("\n| dense over speaker: text | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(names))
    base = rows["none (packaged MiniLM)"]
    for label, cells in rows.items():
        out = []
        for n in names:
            if n not in cells:
                out.append("-")
                continue
            value = cells[n][0]
            delta = "" if label.startswith("none") else f" ({value - base[n][0]:+.4f})"
            out.append(f"{value:.4f}{delta}")
        print(f"| {label} | " + " | ".join(out) + " |")
    print("\nTraining (pairs, seconds):")
    for label, cells in rows.items():
        for n in names:
            name = cells.get(n, ("", "minilm"))[1]
            if name.startswith("5 models"):
                print(f"- {label}, scoring {n}: {name} (the loco part's folds)")
            elif name != "minilm":
                info = model_info(name)
                print(
                    f"- {label}, scoring {n}: {name}: {info['pairs_used']} pairs "
                    f"({info['kinds']}), {info['train_seconds']:.0f} s"
                )


def settings_grid(ds: Dataset, threads) -> None:
    """Self-supervised settings tried on LoCoMo-dev (no labels are used to train; the
    labels only pick the settings, which are then applied as is to every corpus)."""
    grid = {
        "1 epoch, up to 3,000 pairs, one direction": ADAPT.changed(symmetric=False),
        "1 epoch, 1,000 pairs, one direction": ADAPT.changed(symmetric=False, max_pairs=1000),
        "**1 epoch, up to 3,000 pairs, both directions (ADAPT)**": ADAPT,
    }
    print(
        "\n| LoCoMo-dev, adapted on its events | R@5 1-4 | R@10 1-4 | "
        + " | ".join(f"R@10 {c}" for c in CATS)
        + " | training |"
    )
    print("|---|" + "---:|" * (2 + len(CATS)) + "---|")
    pairs = structure_pairs(ds.events)
    for label, s in grid.items():
        name = train(pairs, "minilm", s, ["locomo-dev events"], threads=threads)
        print(
            row(
                label,
                question_table(score(name, ds).run, ds, ["recall@5", "recall@10"]),
                seconds(name),
            ),
            flush=True,
        )


PARTS = ["settings", "loco", "adapt", "transfer", "lodo", "combined", "end-to-end", "all"]


def run(args) -> int:
    """``memkit train encoder --report PART``: ``args`` as memkit/cli.py parses them
    (report, hard_negatives, threads)."""

    if args.report not in PARTS:
        raise ValidationError(
            "--report", f"expected one of {', '.join(PARTS)}, got {args.report!r}"
        )
    args.part = args.report
    if (
        args.threads
    ):  # for encoding too: on cores other processes share, extra threads only wait for each other
        import torch

        torch.set_num_threads(args.threads)
    locomo = load_any(data_root() / DEV["locomo-dev"][0])
    if args.part in ("settings", "all"):
        settings_grid(locomo, args.threads)
    if args.part in ("loco", "all"):
        loco(locomo, args.hard_negatives, args.threads)
    wanted = {
        "adapt": {"adapted"},
        "transfer": {"transfer"},
        "lodo": {"supervised"},
        "combined": {"combined"},
        "all": {"adapted", "transfer", "supervised", "combined"},
    }.get(args.part)
    if wanted:
        per_dataset(wanted, args.hard_negatives, args.threads)
    if args.part in ("end-to-end", "all"):
        end_to_end(locomo, args.hard_negatives, args.threads)
    return 0
