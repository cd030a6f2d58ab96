"""How much weight a follow-up's carried topic gets: a grid on CAsT 2021 (raw turns in
order, MRR@10) and the development conversation suite (a relevant post first, in the top 5)
(``memkit tune``).

    memkit tune [--grid 0.4:0.7,0.4:0.7:0.5] [--config NAME|FILE]

Each grid point is ``weight:bare_weight[:repeat_weight]`` of the default's
``[contextualizer]`` (type ``topic``, memkit/question/conversation.py): ``weight`` for a follow-up
with words of its own ("and how much did it cost?"), ``bare_weight`` for one with none
("when was that?"), ``repeat_weight`` the factor on the scores of the posts the last answer
quoted when a follow-up asks something of its own (default 1: none). Chosen on
these two sets; the held-out suite (datasets/conversations/heldout) and LoCoMo asked in
sequence are the checks (eval/RESULTS.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from memkit.config import load_config
from memkit.core.errors import ValidationError
from memkit.datasets import data_root, load_any
from memkit.evaluation.harness import evaluate_config

SUITE = Path(__file__).resolve().parents[2] / "datasets" / "conversations" / "dev"
GRID = "0.4:0.7,0.5:0.8,0.6:0.8,0.7:0.9"


def grid_points(text: str) -> list[tuple[float, float, float]]:
    """``"0.4:0.7,0.4:0.7:0.5"`` as (weight, bare_weight, repeat_weight) points (repeat 1
    when not given); a point that is not two or three numbers is a ValidationError."""

    points = []
    for point in text.split(","):
        try:
            values = [float(x) for x in point.split(":")]
        except ValueError:
            values = []
        if len(values) not in (2, 3):
            raise ValidationError(
                "--grid", f"expected WEIGHT:BARE_WEIGHT[:REPEAT_WEIGHT] numbers, got {point!r}"
            )
        points.append((values[0], values[1], values[2] if len(values) == 3 else 1.0))
    return points


def run(args) -> int:
    """``memkit tune``: ``args`` as memkit/cli.py parses them (grid, config)."""
    import polars as pl

    points = grid_points(args.grid)
    sets = [load_any(SUITE)] + (
        [load_any(data_root() / "cast2021")] if (data_root() / "cast2021").exists() else []
    )
    rows = []
    for weight, bare, repeat in points:
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
