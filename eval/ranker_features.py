"""Which of the learned rankers' features hold on a data set they never saw?

    .venv/bin/python eval/ranker_features.py [--data PATH/locomo-dev.json] [--longmemeval] [--c C]

Trains the default's two rankers (eval/train_ranker.py) on feature subsets and prints, per
dev set, the headline metric left out one group at a time (LOGO), left out as a whole data
set (LODO) and trained on all. ``--longmemeval`` adds extra/longmemeval-dev beside the data
root as a fifth training set; ``--c`` sets the regressions' regularisation (as
eval/train_ranker.py's). Features are computed once and shared by every subset (about 7
minutes for the eight subsets on two cores, warm). Results: eval/RESULTS.md, "Which features
hold on a shape the rankers never saw".
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_ranker as tr  # noqa: E402

from memkit.evaluation.tuning import training_args  # noqa: E402
from memkit.retrievers.learned import POST_FEATURES  # noqa: E402


def subsets(names: list[str], first: int) -> dict[str, list[str]]:
    """The feature subsets tried; ``first``: how many parts the first stage has (part0 ...;
    the parts after them are the retrievers that only give features)."""
    extra = [n for n in names if n.startswith("part") and int(n[4:].split("_")[0]) >= first]
    lean = [n for n in names if n not in extra]
    return {
        "all": names,
        "without log_length": [n for n in names if n != "log_length"],
        "without speaker_in_query": [n for n in names if n != "speaker_in_query"],
        "without the post's features": [n for n in names if n not in POST_FEATURES],
        "without the extra retrievers (default-lean)": lean,
        "lean + BM25 over the line": lean + ["part3", "part3_r"],
        "lean + MiniLM over previous and this line": lean + ["part6", "part6_r"],
        "fused score and rank + the post's features": ["fused", "fused_r"] + POST_FEATURES,
    }


def main(argv=None) -> int:
    args = training_args(
        __doc__,
        argv,
        "nothing",
        extra=[
            ("--longmemeval", "also train on extra/longmemeval-dev beside the data root"),
            ("--c", "the regressions' inverse regularisation strength (smaller: stronger)", tr.C),
        ],
    )
    tr.C = args.c
    config = tr.unmodelled(args.config)
    config["retriever"].pop("passage_model", None)
    devs = tr.dev_sets(config, args.data, args.longmemeval)
    names = devs[0].pipeline.retriever.feature_names()
    heads = [f"{d.name} {d.metric} LODO / LOGO / all" for d in devs]
    print("| features | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(devs))
    first = len(devs[0].pipeline.retriever.first.retrievers)
    for label, cols in subsets(names, first).items():
        res = tr.cross_validated(devs, cols)
        models = tr.fit_models([d.cand for d in devs], cols)
        cells = []
        for dev in devs:
            logo, lodo = res[dev.name]
            every = tr.held_out(dev, models, dev.scored.queries["query_id"].to_list())
            cells.append(" / ".join(f"{_metric(dev, t):.4f}" for t in (lodo, logo, every)))
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    first = [
        f"{_metric(d, tr.held_out(d, (None, None), d.scored.queries['query_id'].to_list())):.4f}"
        for d in devs
    ]
    print("| first stage alone | " + " | ".join(first) + " |")
    return 0


def _metric(dev: tr.DevSet, table: pl.DataFrame) -> float:
    """The set's headline metric over its answerable questions."""
    return float(tr.answerable(table)[dev.metric].mean())


if __name__ == "__main__":
    sys.exit(main())
