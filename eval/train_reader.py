"""Train the reader (memkit/reader.py), report it on data it never saw, and (--write) ship it.

    python eval/train_reader.py            # train (cached), print the held-out report
    python eval/train_reader.py --write    # also: the shipped model and reader.toml's [reader]

Readers trained (each cached in <cache dir>/models/reader-<hash>/, so a second run trains
nothing):
- ``squad+train``: with the training suite (datasets/conversations/train), so the dev suite
  is unseen; its logits on the dev suite fit the fusion with the ranker's probability and
  the decline threshold, reported leaving conversations out (5 folds by conversation);
- ``shipped``: SQuAD 2.0 and both suites: what ships in memkit/models/reader/ with the
  fusion and threshold fitted above.

The held-out suite (datasets/conversations/heldout) is never read here: `memkit eval
--dataset datasets/conversations/heldout` scores the served pipeline on it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

import polars as pl
from sklearn.metrics import roc_auc_score

from memkit.reader import MODEL_FILE, READER_DIR
from memkit.reader_training import (
    PAIRS_SCHEMA,
    all_pairs,
    choose_threshold,
    cross_validated,
    fit_fusion,
    fused,
    post_table,
    reader_logits,
    torch_logits,
    trained_reader,
    turn_table,
)

PROJECT = Path(__file__).resolve().parents[1]
CONFIG = PROJECT / "memkit" / "configs" / "reader.toml"
MAX_FALSE_DECLINES = 0.08


def held_out(folder: Path, rows: pl.DataFrame, name: str) -> dict:
    """A reader's figures on a suite it did not see: pair AUC, and per turn the share whose
    best post (by the reader alone) is relevant."""
    logits = reader_logits(folder, rows)
    posts = post_table(rows, logits)
    by_reader = turn_table(posts, "logit")
    by_ranker = turn_table(posts.with_columns(pl.col("ranker").fill_null(0.0)), "ranker")
    ans = ~pl.col("decline")
    return {
        "suite": name,
        "pairs": rows.height,
        "auc": round(float(roc_auc_score(rows["label"], logits)), 3),
        "post_first_ranker": round(float(by_ranker.filter(ans)["first_right"].mean()), 3),
        "post_first_reader": round(float(by_reader.filter(ans)["first_right"].mean()), 3),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="ship the model and write [reader]")
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args(argv)
    started = time.time()
    pairs = all_pairs()
    train_cols = list(PAIRS_SCHEMA)
    sources = pairs.group_by("source").agg(
        pl.len().alias("pairs"), pl.col("label").sum().alias("positives")
    )
    print("pairs:", sources.sort("source").rows())
    suites = {
        s: pairs.filter(pl.col("source") == f"suite-{s}")
        for s in ("dev", "train")
        if pairs.filter(pl.col("source") == f"suite-{s}").height
    }
    squad = pairs.filter(pl.col("source") == "squad2")
    readers = {
        "squad+train": trained_reader(
            pl.concat([squad, suites.get("train", squad.clear())]).select(train_cols),
            epochs=args.epochs,
        ),
        "shipped": trained_reader(pairs.select(train_cols), epochs=args.epochs),
    }
    report = {"pairs": {s: p for s, p, _ in sources.rows()}, "held_out": []}
    for name, seen in (("squad+train", ("train",)),):
        for suite, rows in suites.items():
            if suite not in seen:
                r = {"reader": name, **held_out(readers[name], rows, suite)}
                report["held_out"].append(r)
                print(r)
    # the fusion and threshold: the dev suite's candidates read by a reader that never saw it
    dev = suites["dev"]
    posts = post_table(dev, reader_logits(readers["squad+train"], dev))
    cv = cross_validated(posts, max_false_declines=MAX_FALSE_DECLINES)
    base = turn_table(posts.with_columns(pl.col("ranker").fill_null(0.0)), "ranker")
    report["dev_cross_validated"] = {
        k: round(v, 3) if isinstance(v, float) else v for k, v in cv.items()
    }
    report["dev_ranker_alone"] = {
        "post_first": round(float(base.filter(~pl.col("decline"))["first_right"].mean()), 3)
    }
    coef, intercept = fit_fusion(posts)
    threshold = choose_threshold(
        turn_table(posts.with_columns(pl.Series("p", fused(posts, coef, intercept))), "p"),
        MAX_FALSE_DECLINES,
    )
    report["fusion"] = {
        "coef": [round(c, 4) for c in coef],
        "intercept": round(intercept, 4),
        "min_probability": round(threshold, 4),
    }
    print("dev suite, leaving conversations out:", report["dev_cross_validated"])
    print("dev suite, the ranker alone:", report["dev_ranker_alone"])
    print("fusion (all dev):", report["fusion"])
    report["minutes"] = round((time.time() - started) / 60, 1)
    if args.write:
        sample = suites["dev"].filter(pl.col("label") == 1).head(12)
        sample = pl.concat([sample, suites["dev"].filter(pl.col("label") == 0).head(12)])
        ship(readers["shipped"], report, sample)
        write_config(report["fusion"])
        print(f"wrote {READER_DIR} and [reader] in {CONFIG}")
    return 0


def ship(folder: Path, report: dict, sample: pl.DataFrame) -> None:
    """The model and its reader.json: how it was trained, the held-out report, and the
    float model's logits on a fixed sample of the project's own suite (CC0), which
    tests/test_reader.py checks the shipped int8 file against."""
    READER_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / MODEL_FILE, READER_DIR / MODEL_FILE)
    info = json.loads((folder / "reader.json").read_text())
    info["report"] = report
    logits = torch_logits(
        folder / "float", sample["question"].to_list(), sample["passage"].to_list()
    )
    info["sample"] = [
        {"question": q, "passage": p, "float_logit": round(float(z), 4)}
        for q, p, z in zip(sample["question"], sample["passage"], logits)
    ]
    info["size_bytes"] = (READER_DIR / MODEL_FILE).stat().st_size
    (READER_DIR / "reader.json").write_text(json.dumps(info, indent=1) + "\n")


def write_config(fusion: dict) -> None:
    """Write the fitted fusion and threshold into reader.toml's [reader] (its other settings
    stay as written)."""
    text = CONFIG.read_text()
    values = {
        "coef": f"[{fusion['coef'][0]}, {fusion['coef'][1]}]",
        "intercept": str(fusion["intercept"]),
        "min_probability": str(fusion["min_probability"]),
    }
    head, sep, rest = text.partition("[reader]\n")
    if not sep:
        raise SystemExit(f"{CONFIG} has no [reader] section to write into")
    section, blank, tail = rest.partition("\n\n")
    for key, value in values.items():
        section, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", section, flags=re.M)
        if not n:
            section += f"\n{key} = {value}"
    CONFIG.write_text(head + sep + section + blank + tail)


if __name__ == "__main__":
    sys.exit(main())
