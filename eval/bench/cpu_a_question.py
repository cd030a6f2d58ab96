"""CPU ms a question, answers on and items only, in this process: the query endpoint through
Flask's test client on one thread, over a copy of the store the speed guard leaves (run
``eval/bench/guard.py`` first). For before/after comparisons of two commits, run it from each
tree in turn, alternating, on the same store (a store of the older commit: the newer one
upgrades its copy):

    ROOT=TREE PYTHONPATH=TREE .venv/bin/python eval/bench/cpu_a_question.py [--store DIR]

60 questions warm up (answers on), then 320 with answers, then 320 items only; prints one
JSON line.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# ROOT: the tree whose memkit and server are measured (this script's helpers stay its own)
ROOT = Path(os.environ.get("ROOT") or Path(__file__).resolve().parents[2])
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import service  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=str(ROOT / "eval" / "out" / "bench-guard"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "store"
        shutil.copytree(args.store, folder)  # questions write turns: the store stays as it was
        client, floors = service.guard_client(folder, ROOT / "memkit" / "config" / "default.toml")
        bodies = service.query_bodies(700, floors, 20, seed=11)

        def run(part, summary: str) -> float:
            start = time.process_time()
            service.ask_all(client, part, summary)
            return (time.process_time() - start) * 1000 / len(part)

        run(bodies[:60], "1")
        answers, items = run(bodies[60:380], "1"), run(bodies[380:700], "0")
    print(
        json.dumps(
            {"root": str(ROOT), "answers_ms": round(answers, 2), "items_ms": round(items, 2)}
        )
    )


if __name__ == "__main__":
    main()
