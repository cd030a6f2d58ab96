"""Print ``pipeline.params()`` (what a saved index's digest is made of) for every config
(memkit's own and this checkout's eval/configs, one file per name): built as eval builds it,
with a fixed encoder as the service builds it, and after ``use_encoder``
(memkit.evaluation.golden.config_params). A change of structure leaves this output the
same; run it under another tree to compare (it imports whichever memkit is first on the
path):

    .venv/bin/python eval/params.py > after.json
    (cd /tmp && PYTHONPATH=/path/to/other/tree /path/to/.venv/bin/python \\
        /path/to/eval/params.py) > before.json
    diff before.json after.json

``tests/test_golden.py`` checks the served configs' against ``tests/golden/params.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from memkit.config import CONFIG_DIR
from memkit.evaluation.golden import config_params


def main() -> None:
    out = {}
    # Globbed here, not through memkit.config.config_files: the memkit under comparison may
    # be one whose package still holds every config.
    found = {}
    for folder in (CONFIG_DIR, Path(__file__).resolve().parent / "configs"):
        for path in folder.glob("*.toml"):
            found.setdefault(path.name, path)
    for path in (found[name] for name in sorted(found)):
        for key, value in config_params(path).items():
            out[f"{path.name} {key}"] = value
    print(json.dumps(out, sort_keys=True, indent=1, default=str))


if __name__ == "__main__":
    main()
