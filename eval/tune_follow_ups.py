"""How much weight a follow-up's carried topic gets: a grid on CAsT 2021 (raw turns in
order, MRR@10) and the development conversation suite (a relevant post first, in the top 5).

    .venv/bin/python eval/tune_follow_ups.py [--grid 0.4:0.7,0.4:0.7:0.5]

Each grid point is ``weight:bare_weight[:repeat_weight]`` of the default's
``[contextualizer]`` (type ``topic``, memkit/conversation.py): ``weight`` for a follow-up
with words of its own ("and how much did it cost?"), ``bare_weight`` for one with none
("when was that?"), ``repeat_weight`` the factor on the scores of the posts the last answer
quoted when a follow-up asks something of its own (default 1: none). Chosen on
these two sets; the held-out suite (datasets/conversations/heldout) and LoCoMo asked in
sequence are the checks (eval/RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from memkit.config import CONFIG_DIR, load_config
from memkit.datasets import data_root, load_any
from memkit.evaluation.harness import evaluate_config

SUITE = Path(__file__).resolve().parents[1] / "datasets" / "conversations" / "dev"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="0.4:0.7,0.5:0.8,0.6:0.8,0.7:0.9")
    ap.add_argument("--config", default=str(CONFIG_DIR / "default.toml"))
    args = ap.parse_args(argv)
    sets = [load_any(SUITE)] + (
        [load_any(data_root() / "cast2021")] if (data_root() / "cast2021").exists() else []
    )
    rows = []
    for point in args.grid.split(","):
        weight, bare, *rest = (float(x) for x in point.split(":"))
        repeat = rest[0] if rest else 1.0
        config = load_config(args.config)
        config["contextualizer"] = {
            **config["contextualizer"],
            "weight": weight,
            "bare_weight": bare,
            "repeat_weight": repeat,
        }
        row = {"weight": weight, "bare_weight": bare, "repeat_weight": repeat}
        for ds in sets:
            r = evaluate_config(
                config, ds, answers=ds.name.startswith("conversations")
            )  # the checks read answers
            if ds.name.startswith("conversations"):
                row["suite post first"] = r.turn_summary["all"]["post_first"]
                row["suite top 5"] = r.turn_summary["all"]["post_top5"]
                row["suite checks"] = r.turn_summary["all"]["checks"]
            else:
                row[f"{ds.name} MRR@10"] = r.summary["all"]["mrr@10"]
                row[f"{ds.name} R@10"] = r.summary["all"]["recall@10"]
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=4):
        print(pl.DataFrame(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
