"""The newcomers' walks replayed in this process.

Each walk is a floor written fresh (``memkit/data/walks/NAME-posts.txt``: lines
``who|chat or blog|created_at|text``) and a conversation over it
(``NAME-questions.txt``: lines ``question|what a right answer holds``), driven through the
service with ``examples/walk.sh NAME``. A walk's NAME says what its floor is about
(``sailing-bathroom-jlpt``). Here the same floor is indexed by a pipeline and the
questions asked in order as one user, so that two versions of the code can be compared on
every walk in seconds (``eval/walks.py``). Whether an answer is right stays a reader's
judgement: the ``want`` column is free text.

The walks ship inside the package (package data), found through ``importlib.resources``,
so an installed wheel replays them as a checkout does.
"""

from __future__ import annotations

from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import polars as pl

from memkit.config import CONFIG_DIR, load_config
from memkit.core.tables import events_frame
from memkit.pipeline import Pipeline
from memkit.training import EncoderStage

# A real folder, as memkit/config/__init__.py's CONFIG_DIR: memkit is installed as files (never
# zipped), so the resource is a path that glob and open can use.
WALKS = Path(str(resources.files("memkit") / "data" / "walks"))
ASKED = datetime(2026, 11, 28, 9, tzinfo=timezone.utc)  # every walk is asked on this day


def walk_names(walks: Path = WALKS) -> list[str]:
    """The names of the walks in ``walks`` (each a ``NAME-posts.txt`` and a
    ``NAME-questions.txt``), sorted."""
    return sorted(p.name[: -len("-posts.txt")] for p in walks.glob("*-posts.txt"))


def walk_events(posts: Path | str) -> pl.DataFrame:
    """A walk's floor ("f"): one block per kind ("f/chat", a feed; "f/blog"), posts p0, p1,
    ... in the file's order, each by the person named."""
    rows = []
    for n, line in enumerate(Path(posts).read_text().splitlines()):
        if not line.strip():
            continue
        who, kind, at, text = line.split("|", 3)
        rows.append(
            {
                "event_id": f"p{n}",
                "floor_id": "f",
                "block_id": f"f/{kind}",
                "block_type": "feed" if kind == "chat" else "blog",
                "user_id": who,
                "text": text,
                "created_at": at,
            }
        )
    return events_frame(rows)


def served_pipeline(config=None):
    """The pipeline of a config as a fresh service serves it: the config's own model, fixed,
    so ``fit`` trains nothing (the default adapts its encoder to the events given to ``fit``
    in eval; the service only when `memkit adapt` runs)."""

    config = (
        config if isinstance(config, dict) else load_config(config or CONFIG_DIR / "default.toml")
    )
    stage = EncoderStage.from_config(config.get("encoder"))
    return Pipeline.from_config(config, encoder=stage.model if stage else None)


def replay(stem: str, config=None, walks: Path = WALKS) -> list[dict]:
    """Every turn of walk ``stem`` ("allotment-paper-boats-girona"), asked in order by one
    user over its floor: the question, what a right answer holds, how it was read and the
    answer."""
    events = walk_events(walks / f"{stem}-posts.txt")
    people = list(dict.fromkeys(events["user_id"].to_list()))
    pipeline = served_pipeline(config).fit(events)
    out = []
    for line in (walks / f"{stem}-questions.txt").read_text().splitlines():
        if not line.strip():
            continue
        question, want = line.split("|", 1)
        res = pipeline.query(
            question, user_id="walker", floor_ids=["f"], now=ASKED, k=3, authors=people
        )
        out.append(
            {
                "question": question,
                "want": want,
                "read": res.carried.kind if res.carried else "-",
                "searched": res.effective_query,
                "answer": res.answer,
            }
        )
    return out
