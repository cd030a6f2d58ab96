"""What two versions of the code are compared on, so that a change of structure is seen to
change no behaviour: the ``params()`` of a config's pipeline (what a saved index's digest is
made of) and every walk's turns, one line each. ``eval/params.py`` and ``eval/walks.py``
print them for two trees to ``diff``; ``tests/test_golden.py`` checks them against the
outputs kept in ``tests/golden/``. Both are package code, so an installed memkit runs
them as a checkout does (the walks are package data)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memkit.evaluation.walks import replay, walk_names
from memkit.pipeline import Pipeline


def config_params(path: str | Path) -> dict:
    """A config's pipeline ``params()`` built as eval builds it (``encoder=None``), with a
    fixed encoder as the service builds it (``encoder=minilm-int8``), and after
    ``use_encoder`` (with the encoder's name). Nothing is fitted or encoded."""

    out = {
        f"encoder={encoder}": Pipeline.from_config(path, encoder=encoder).params()
        for encoder in (None, "minilm-int8")
    }
    pipeline = Pipeline.from_config(path).use_encoder("minilm-int8")
    out["use_encoder"] = [pipeline.params(), pipeline.encoder_name()]
    return out


def walk_lines(stems=None, config=None) -> Iterator[str]:
    """Every turn of the walks ``stems`` (default: all), replayed in order
    (memkit.evaluation.walks.replay), as three lines, yielded as each walk is replayed:
    ``[NAME N] question  (want: ...)``, ``[reading] searched text`` and ``-> answer``."""

    for stem in stems or walk_names():
        for n, turn in enumerate(replay(stem, config), 1):
            yield f"[{stem} {n}] {turn['question']}  (want: {turn['want']})"
            yield f"    [{turn['read']}] {turn['searched']}"
            yield f"    -> {turn['answer']}"
