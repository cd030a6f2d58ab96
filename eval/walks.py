"""Every newcomer's walk (memkit/data/walks) replayed in this process, one line a turn, so two
versions of the code can be compared on all of them in a minute:

    .venv/bin/python eval/walks.py > after.txt
    (cd WORKTREE && PYTHONPATH=WORKTREE /work/main/.venv/bin/python eval/walks.py) > before.txt
    diff before.txt after.txt

Each turn prints as ``[NAME N] question (want: ...) [reading] searched text`` and then the
answer; whether it is right is the reader's call (memkit/evaluation/walks.py)."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from memkit.evaluation.walks import replay, walk_names  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "stems", nargs="*", help="walks to replay (default: all), e.g. allotment-paper-boats-girona"
    )
    ap.add_argument("--config", help="TOML config (default: the served default)")
    args = ap.parse_args()
    stems = args.stems or walk_names()
    for stem in stems:
        for n, turn in enumerate(replay(stem, args.config), 1):
            print(f"[{stem} {n}] {turn['question']}  (want: {turn['want']})")
            print(f"    [{turn['read']}] {turn['searched']}")
            print(f"    -> {turn['answer']}")


if __name__ == "__main__":
    main()
