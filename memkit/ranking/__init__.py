"""The ranking steps: what re-orders (or empties) a question's ranking between retrieval and
the cut, in the order the config lists them (``[ranking] steps``, memkit/config/model.py).

A step is any object with a ``name`` and ``apply(ranked, question, posts) -> Ranked``:
``ranked`` is the ranking with what earlier steps decided (``Ranked``), ``question`` the
question read once (memkit.question.Question: its text, kind and the reading it was
searched with), ``posts`` the question's posts by id, read from the store once
(memkit.pipeline.read_once). ``Pipeline.ask`` and ``Pipeline.search`` run the same steps
through the same code (``run_steps``); ``Ranked.batch`` is what tells the two apart.

The built-in steps (memkit/ranking/steps.py), in the order a config without ``[ranking]``
runs them:

- ``reader``: the cross-encoder re-orders the first posts and decides whether any answers
  (``[reader]``);
- ``relevance``: the gate: nothing was found (the ranking is emptied) when the best score
  is too low (``[relevance]``; with none, only an empty ranking finds nothing);
- ``changed_facts``: a later post saying a plan changed goes first (``changed_facts``);
- ``replies``: a reply to the first post, or of the person the question names, goes first.

Calibration is not a step: it makes each reading's scores probabilities before the
readings are fused (and the time window and the gate read those), so it belongs to the
search itself (``Pipeline._search``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import polars as pl

from memkit.core.errors import ValidationError
from memkit.ranking.registry import BUILT_IN, STEPS, default_steps, known_steps, register_step


@dataclass(frozen=True)
class Ranked:
    """A question's ranking (``run``: memkit.core.tables.RUN_SCHEMA) and what the steps decided
    that the cut and the writer read.

    ``batch``: ranked for ``Pipeline.search`` (eval's batch of independent queries): the
    gate does not run (eval judges each ranking itself, ``Pipeline.relevant``) and the
    steps after it re-order whatever the reader found. ``best``: the best score any
    reading of the question found (the gate reads it); ``listing``: the question asks for
    the posts of a time window, which no step re-orders; ``window_only``: it names only the
    window (the cut keeps every post of it). Decided by the steps: ``relevant`` (anything
    found), ``decided`` (the reader re-ranked and decided it), ``change`` (the newer post
    and the one it replaced, ``changed_facts``), ``reply`` (the reply put first)."""

    run: pl.DataFrame
    batch: bool = False
    best: float | None = None
    listing: bool = False
    window_only: bool = False
    relevant: bool = True
    decided: bool = False
    change: tuple[str, str] | None = None
    reply: str | None = None

    @property
    def open(self) -> bool:
        """Whether a step after the gate may re-order the ranking: something was found (or
        nothing is judged here: ``batch``), and it is not a window's listing."""
        return (self.relevant or self.batch) and not self.listing

    @property
    def settled_by(self) -> str | None:
        """The post a step put first as what settles the question (the newer statement of
        a changed fact, or the reply), else None."""
        return self.change[0] if self.change else self.reply


@runtime_checkable
class Step(Protocol):
    name: str

    def apply(self, ranked: Ranked, question: Any, posts: Callable) -> Ranked: ...


def build_steps(steps: Sequence, pipeline: Any, field: str = "ranking.steps") -> list[Step]:
    """Each of ``steps`` (a registered name, or a step object as it is) built for
    ``pipeline``; an unknown name is a ValidationError naming ``field.<i>``."""
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, str):
            if step not in STEPS:
                known_steps()  # the built-in steps registered
            if step not in STEPS:
                raise ValidationError(f"{field}.{i}", unknown_step(step))
            step = STEPS[step](pipeline)
        out.append(step)
    return out


def unknown_step(name: Any) -> str:
    return f"expected one of {', '.join(known_steps())} or a registered step, got {name!r}"


def run_steps(steps: Sequence[Step], ranked: Ranked, question: Any, posts: Callable) -> Ranked:
    """``ranked`` through each step in order."""
    for step in steps:
        ranked = step.apply(ranked, question, posts)
    return ranked


from memkit.ranking import steps as _steps  # noqa: E402,F401  (registers the built-in steps)

__all__ = [
    "BUILT_IN",
    "STEPS",
    "Ranked",
    "Step",
    "build_steps",
    "default_steps",
    "known_steps",
    "register_step",
    "run_steps",
]
