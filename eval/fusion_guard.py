"""Should the learned rankers lean on the first stage's fusion on a shape they never saw?

    .venv/bin/python eval/fusion_guard.py [--data PATH/locomo-dev.json] [--extra FOLDER ...]

The default's rankers are logistic regressions over the first stage's features; on a data
set they were not trained on they can rank below the fusion they re-rank. This
adds ``beta`` times the fused first-stage score (min-max, 0 to 1) to both models' log-odds,
for beta in BETAS, which is the same as raising the ``fused`` coefficient (so it is a model
table like any other, and could ship as one).

Every figure is held out. For each of the four dev sets (LoCoMo-dev, CAsT 2021, SciFact,
MADial-Bench-en) the models are trained on the *other three* (eval/train_ranker.py's
machinery), shifted by beta and scored on the set left out; the beta applied to a set is
the one with the best mean gain over beta = 0 on the *other* dev sets (left out in turn).
Sets the rankers never see (``--extra``: the conversation suites, longmemeval-dev) are
scored by the served default's own models, shifted by every beta.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np
import polars as pl
import train_ranker as tr

from memkit.config import CONFIG_DIR, load_config
from memkit.datasets import data_root, load_any
from memkit.pipeline import Pipeline

BETAS = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]
ROOT = Path(__file__).resolve().parents[1]
EXTRA = [
    str(ROOT / "datasets" / "conversations" / "dev"),
    str(ROOT / "datasets" / "conversations" / "heldout"),
    str(ROOT / "datasets" / "conversations" / "train"),
]


def shifted(model: dict | None, beta: float) -> dict | None:
    """The model plus ``beta`` times the raw ``fused`` feature, in its own table's terms."""
    if model is None or not beta:
        return model
    out = copy.deepcopy(model)
    i = out["features"].index("fused")
    out["coef"][i] += beta * out["scale"][i]
    out["intercept"] += beta * out["mean"][i]
    return out


def scored_only(path: str, config: dict) -> tr.DevSet:
    """A data set the rankers never train on, indexed as ``memkit eval`` indexes it."""
    ds = load_any(path)
    pipeline = Pipeline.from_config(config)
    pipeline.fit(ds.events, hold_out=ds.name)
    in_order = "conversation_id" in ds.queries.columns
    return tr.DevSet(ds.name, "ndcg@10", pipeline, pl.DataFrame(), ds, {}, in_order)


def metrics(dev: tr.DevSet, models, names=None) -> list[float]:
    """The set's headline (or ``names``), LoCoMo's adversarial questions left out."""
    table = tr.held_out(dev, models, dev.scored.queries["query_id"].to_list())
    table = table.filter(pl.col("category").is_null() | (pl.col("category") != "adversarial"))
    return [float(table[m].mean()) for m in (names or [dev.metric])]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(data_root() / "locomo" / "locomo-dev.json"))
    p.add_argument("--extra", nargs="*", default=EXTRA)
    args = p.parse_args(argv)
    config = tr.unmodelled(str(CONFIG_DIR / "default.toml"))
    config["retriever"].pop("passage_model", None)
    devs = tr.dev_sets(config, args.data)
    names = devs[0].pipeline.retriever.feature_names()
    lodo = {}  # (set, beta) -> headline with models trained on the other sets
    for dev in devs:
        models = tr.fit_models([d.cand for d in devs if d is not dev], names)
        for beta in BETAS:
            lodo[dev.name, beta] = metrics(dev, tuple(shifted(m, beta) for m in models))[0]
        print(dev.name, " ".join(f"{b}: {lodo[dev.name, b]:.4f}" for b in BETAS), flush=True)

    print(
        "\n| data set (left out) | metric | beta = 0 | beta chosen on the others | figure"
        " | change |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for dev in devs:
        others = [d.name for d in devs if d is not dev]
        gain = {b: np.mean([lodo[o, b] - lodo[o, 0.0] for o in others]) for b in BETAS}
        best = max(BETAS, key=lambda b: (gain[b], -b))
        base, got = lodo[dev.name, 0.0], lodo[dev.name, best]
        print(
            f"| {dev.name} | {dev.metric} | {base:.4f} | {best} | {got:.4f} | {got - base:+.4f} |"
        )
    every = {b: np.mean([lodo[d.name, b] - lodo[d.name, 0.0] for d in devs]) for b in BETAS}
    chosen = max(BETAS, key=lambda b: (every[b], -b))
    print(f"\nbeta chosen on all four dev sets: {chosen}")

    served = load_config(str(CONFIG_DIR / "default.toml"))["retriever"]
    models = (served["model"], served.get("passage_model"))  # the models the service ships
    shown = ["ndcg@10", "mrr@10", "recall@5", "recall@10"]
    print(
        "\n| never trained on: nDCG@10 / MRR@10 / R@5 / R@10 | "
        + " | ".join(f"beta {b}" for b in BETAS)
        + " |"
    )
    print("|---|" + "---:|" * len(BETAS))
    for path in args.extra:
        dev = scored_only(path, config)
        cells = [metrics(dev, tuple(shifted(m, b) for m in models), shown) for b in BETAS]
        row = " | ".join(" / ".join(f"{v:.4f}" for v in c) for c in cells)
        print(f"| {dev.name} | {row} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
