"""The ``memkit`` command."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def data_root() -> Path:
    return Path(os.environ.get("MEMKIT_DATA", DEFAULT_DATA))


def cmd_compare_retrievers(args) -> int:
    """Score retriever configs on SciFact (BEIR layout) with ranx; print one table."""
    from memkit.config import CONFIG_DIR, build_retriever, load_config
    from memkit.datasets import read_beir
    from memkit.evaluation.metrics import score_run

    folder = Path(args.beir) if args.beir else data_root() / "scifact"
    if not (folder / "corpus.jsonl").exists():
        print(f"no BEIR dataset at {folder}: set MEMKIT_DATA or pass --beir DIR", file=sys.stderr)
        return 2
    configs = [load_config(p) for p in (args.config or sorted(CONFIG_DIR.glob("*.toml")))]
    ds = read_beir(folder, args.split)
    print(f"{ds.name} ({args.split}): {ds.events.height:,} documents, {ds.queries.height} queries\n")
    metrics = ["ndcg@10", "mrr@10", "recall@10", "recall@100"]
    print("| config | " + " | ".join(metrics) + " | seconds |")
    print("|---|" + "---:|" * (len(metrics) + 1))
    for config in configs:
        t = time.perf_counter()
        run = build_retriever(config).fit(ds.events).search(ds.queries, k=100)
        scores = score_run(run, ds.qrels, metrics)
        cells = " | ".join(f"{scores[m]:.4f}" for m in metrics)
        print(f"| {config['name']} | {cells} | {time.perf_counter() - t:.1f} |", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="memkit", description="offline-first conversational memory")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compare-retrievers", help="score retriever configs on a BEIR dataset (SciFact by default)")
    p.add_argument("--beir", help="BEIR folder (default: $MEMKIT_DATA/scifact)")
    p.add_argument("--split", default="test")
    p.add_argument("--config", action="append", help="TOML config (repeatable; default: eval/configs/*.toml)")
    p.set_defaults(func=cmd_compare_retrievers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
