"""The speed guard that ``make bench`` runs: a short form of the service benchmark, printed
against the figures recorded last, so a change that slows the query or ingest path is
seen in the change that made it.

    # about two minutes once the store's vectors are cached
    .venv/bin/python eval/bench/guard.py
    # make these figures the ones to compare with
    .venv/bin/python eval/bench/guard.py --record

It runs eval/bench/service.py on 3,000 generated posts (a fresh store in
``eval/out/bench-guard`` each run): an open loop of 20 queries/s and a saturated load, 15 s
each, with answers on and for items only, 500 new posts ingested, and
plain sentence-transformers on the same posts. Figures move with whatever else the cores
are doing, so besides the raw ones the guard compares two measured side by side in the
same run, which the load moves much less: ingest as a multiple of the plain encoder's
rate, and saturated queries per second per 100 texts/s of that encoder (with answers on
and for items only). A figure more than
``--tolerance`` worse than recorded is marked SLOWER (``--strict``: the exit status is 1).
The recorded figures are ``eval/bench/guard.json`` (committed, with the load they were
recorded under).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service  # noqa: E402  (the service benchmark)

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("guard.json")
ARGS = [
    "--events",
    "3000",
    "--seconds",
    "15",
    "--rate",
    "20",
    "--clients",
    "8",
    "--ingest",
    "500",
    "--catch-up",
    "100",
    "--warmup",
    "20",
]
# figure, True when more is better
FIGURES = [
    ("ingest_vs_plain", True),
    ("max_qps_per_100_plain", True),
    ("items_only_max_qps_per_100_plain", True),
    ("max_qps", True),
    ("ingest_events_per_s", True),
    ("p50_ms_at_20qps", False),
    ("p95_ms_at_20qps", False),
    ("startup_s", False),
]


def normalised(figures: dict) -> dict:
    """The figures plus saturated queries/s per 100 texts/s of the plain encoder."""
    out = dict(figures)
    plain = figures.get("plain_encoder_texts_per_s")
    for kind in ("", "items_only_"):
        if plain and figures.get(f"{kind}max_qps") is not None:
            out[f"{kind}max_qps_per_100_plain"] = round(100 * figures[f"{kind}max_qps"] / plain, 2)
    return out


def compare(recorded: dict, now: dict, tolerance: float) -> tuple[list[str], bool]:
    lines = ["| figure | recorded | now | change | |", "|---|---:|---:|---:|---|"]
    slower = False
    for name, more_is_better in FIGURES:
        was, got = recorded.get(name), now.get(name)
        if was is None or got is None:
            lines.append(f"| {name} | {was} | {got} | | |")
            continue
        ratio = got / was if was else float("inf")
        worse = ratio < 1 - tolerance if more_is_better else ratio > 1 + tolerance
        slower |= worse and name in (
            "ingest_vs_plain",
            "max_qps_per_100_plain",
            "items_only_max_qps_per_100_plain",
        )
        lines.append(f"| {name} | {was:g} | {got:g} | {ratio:.2f}x | {'SLOWER' if worse else ''} |")
    lines.append(
        f"| load average before | {recorded.get('load_before')} | {now.get('load_before')} | | |"
    )
    return lines, slower


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--record", action="store_true", help="write this run's figures as the ones to compare with"
    )
    ap.add_argument(
        "--tolerance", type=float, default=0.2, help="a figure this much worse is marked SLOWER"
    )
    ap.add_argument(
        "--strict", action="store_true", help="exit with 1 when a load-independent figure is SLOWER"
    )
    ap.add_argument("--dir", default=str(ROOT / "eval/out/bench-guard"))
    args = ap.parse_args(argv)
    # A fresh store each run (its vectors come from the embedding cache in seconds): a
    # store left by an earlier run would start up catching up on that run's ingest too.
    shutil.rmtree(args.dir, ignore_errors=True)
    now = normalised(service.main([*ARGS, "--dir", args.dir]))
    print()
    if RECORDED.exists():
        recorded = json.loads(RECORDED.read_text())
        lines, slower = compare(recorded, now, args.tolerance)
        print(
            f"Against the figures recorded {recorded.get('recorded_at', '?')} "
            f"({recorded.get('commit', '')}):"
        )
        print("\n".join(lines))
    else:
        slower = False
        print(f"no recorded figures yet ({RECORDED}); run with --record")
    if args.record:
        import subprocess

        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        RECORDED.write_text(
            json.dumps(
                {
                    **now,
                    "recorded_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "commit": commit,
                    "command": "eval/bench/guard.py --record",
                },
                indent=1,
            )
            + "\n"
        )
        print(f"recorded in {RECORDED}")
    return 1 if slower and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
