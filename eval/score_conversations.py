"""Score answers and a run written by any system against a conversation suite.

    .venv/bin/python eval/score_conversations.py --dataset datasets/conversations/dev \\
        --answers answers.jsonl --run run.trec

``answers.jsonl``: one JSON line per turn, ``{"query_id", "answer", "declined"}`` (what
``memkit eval --answers-out`` writes); ``run.trec``: a TREC run file (``qid Q0 docid rank
score tag``, what ``--run-out`` writes). Prints the checks per behaviour, as ``memkit
eval`` does for memkit's own pipelines (memkit/evaluation/conversations.py). eval/RESULTS.md
scores main before the conversation turns kept their context this way.
"""

from __future__ import annotations

import argparse
import json
import sys

import polars as pl

from memkit.datasets import load_any
from memkit.evaluation.conversations import summarize_checks, turn_checks
from memkit.tables import RUN_SCHEMA


def read_trec_run(path: str) -> pl.DataFrame:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            qid, _, eid, rank, score, *_ = line.split()
            rows.append(
                {
                    "query_id": qid,
                    "event_id": eid,
                    "score": float(score),
                    "rank": int(rank),
                    "match_type": "",
                }
            )
    return pl.DataFrame(rows, schema=RUN_SCHEMA)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--answers", required=True)
    ap.add_argument("--run", required=True)
    args = ap.parse_args(argv)
    ds = load_any(args.dataset)
    with open(args.answers, encoding="utf-8") as fh:
        answers = pl.DataFrame(
            [
                {k: r.get(k) for k in ("query_id", "answer", "declined")}
                for r in map(json.loads, fh)
            ],
            schema={"query_id": pl.Utf8, "answer": pl.Utf8, "declined": pl.Boolean},
        )
    table = turn_checks(answers, ds.queries, ds.qrels, read_trec_run(args.run))
    cols = ["checks", "post_first", "post_top5", "answer_right", "false_decline", "false_answer"]
    print("| group | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols))
    for group, values in summarize_checks(table).items():
        cells = [f"{values[c]:.3f} ({values[c + '_n']})" if c in values else "" for c in cols]
        print(f"| {group.replace('category:', '')} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
