"""Every newcomer's walk (memkit/data/walks) replayed in this process, one line a turn, so two
versions of the code can be compared on all of them in a minute:

    .venv/bin/python eval/walks.py > after.txt
    (cd WORKTREE && PYTHONPATH=WORKTREE /work/main/.venv/bin/python eval/walks.py) > before.txt
    diff before.txt after.txt

Each turn prints as ``[NAME N] question (want: ...) [reading] searched text`` and then the
answer (memkit.evaluation.golden.walk_lines); whether it is right is the reader's call
(memkit/evaluation/walks.py). ``tests/test_golden.py`` checks them against
``tests/golden/walks.txt``."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from memkit.evaluation.golden import walk_lines  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "stems", nargs="*", help="walks to replay (default: all), e.g. allotment-paper-boats-girona"
    )
    ap.add_argument("--config", help="TOML config (default: the served default)")
    args = ap.parse_args()
    for line in walk_lines(args.stems, args.config):
        print(line)


if __name__ == "__main__":
    main()
