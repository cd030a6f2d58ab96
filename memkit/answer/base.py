"""What every answer writer shares: the item it reads, the question and the evidence it is
given, the answer it returns, the protocol the pipeline calls, and the small readers of an
item (its author, its time, its sentences)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Union, runtime_checkable

from memkit.core.items import Item
from memkit.language import ENGLISH, Language
from memkit.language.timeref import Span

if TYPE_CHECKING:
    from memkit.question import Question
    from memkit.question.conversation import Reading

DECLINE = "I have no information available on that"


class ItemDict(TypedDict, total=False):
    """A ranked item as a plain dict (eval, tests, notebooks): the keys a writer reads."""

    event_id: str
    text: str
    score: float  # the probability that it answers the question (0 to 1), where calibrated
    speaker: str | None  # the author's name
    user_name: str | None  # the author's name where ``speaker`` is not given
    created_at: datetime | str | None  # when it was posted (ISO text is read too)
    block_title: str | None
    block_type: str | None  # feed, blog, forum, quiz
    block_type_name: str | None  # as ``block_type``, the name eval's items use
    user_id: str | None  # the author's id: two authors of one name are told apart by it
    shown_as: str | None  # the author as the answer names them (memkit.answer.render.labelled)


# What a writer reads: the pipeline's memkit.core.items.Item (read with ``.get`` like a dict)
# or a plain dict with the same keys.
AnswerItem = Union[Item, ItemDict]


@dataclass
class Answer:
    text: str
    declined: bool = False  # memory holds nothing that answers it (or nothing was found)
    # {"event_id", "sentence", "score", "shown"} behind the text, in order ("shown": what
    # the text quotes of the post, the sentence and the neighbours quoted with it)
    quotes: list[dict] = field(default_factory=list)
    date: Span | None = None  # what a when-question's answer leads with
    # best similarity of a sentence allowed to answer (None: none allowed)
    strength: float | None = None
    # best similarity of a sentence by someone other than the person asked about
    rival: float | None = None
    writer: str = "extractive"
    # a decline that names the closest post ("the closest post is Omar's, and it does not
    # say the number"): that post's event id, the one item shown with the decline (also
    # kept when no summary was asked for, which declines nothing: the turn carries it)
    closest: str | None = None

    @property
    def quoted(self) -> list[str]:
        return [q["event_id"] for q in self.quotes if q.get("event_id") is not None]


@dataclass(frozen=True)
class Asked:
    """The question as a writer reads it: its text and what the pipeline found out about
    how it is asked (``Pipeline.ask`` builds it with the ``Question`` it read; eval and tests
    build one from the text).

    ``summary``: a conversational answer (False: a one-line account of what was found).
    ``authors``: the names of the people who post where the question is asked (the
    service passes those of the floors searched, so posts elsewhere change nothing);
    None: every author the writer's ``prepare`` has seen. ``reading``: how the pipeline
    read the question (memkit.question.conversation.Reading: its time window, the words it carried,
    or that it refers to nothing it can resolve). ``listing``: it asks what happened in
    its window, so the answer lists the posts found there."""

    text: str
    summary: bool = True
    authors: tuple[str, ...] | None = None
    reading: Reading | None = None
    listing: bool = False
    # the question as Question.read read it (the pipeline's; None: read from ``text``)
    question: Question | None = None

    @property
    def language(self) -> Language:
        """The pack the question is read in (the config's ``language``; English without a
        ``question``)."""
        return self.question.language if self.question is not None else ENGLISH

    def __post_init__(self) -> None:
        # any sequence of names is accepted; kept as a tuple so the question cannot change
        # under a writer that holds it
        if self.authors is not None and not isinstance(self.authors, tuple):
            object.__setattr__(self, "authors", tuple(self.authors))


@dataclass(frozen=True)
class Evidence:
    """The ranked items a writer answers from, best first, with what the pipeline learned
    about them.

    ``found``: for a listing, how many posts its window held (the items are the first of
    them). ``ranked``: a listing's items were searched for what else the question names
    ("What happened to Kofi's kitchen in late October?"), so the best comes first rather
    than the earliest. ``decided``: the pipeline's reader read the items and found one
    likely enough to answer, so the writer quotes rather than declines. ``settled``: the
    first item is the newest statement of a changed fact (memkit.ranking.changes) or the reply
    that answers the question, so the answer quotes it."""

    items: list[AnswerItem] = field(default_factory=list)
    found: int | None = None
    ranked: bool = False
    decided: bool = False
    settled: bool = False


@runtime_checkable
class Answerer(Protocol):
    """What the pipeline (and through it the service) calls on an answer writer."""

    type_name: str

    def params(self) -> dict[str, Any]:
        """The writer's settings, as a config table (logged with a run)."""

    def bind(self, encoder, line=None) -> None:
        """Use this encoder; ``line`` gives a post's text as the dense retriever reads it."""

    def prepare(self, events, encode: bool = True) -> None:
        """Learn the authors' names of these events (and encode their sentences)."""

    def encode_sentences(self, events) -> None:
        """Encode these events' sentences into the encoder's cache."""

    def write(self, question: Asked, evidence: Evidence) -> Answer:
        """The answer to ``question`` from the items of ``evidence``."""


def probability(item: AnswerItem) -> float:
    """An item's score where it is a probability (0 to 1), else 0."""
    value = item.get("score")
    return float(value) if isinstance(value, (int, float)) and 0.0 <= value <= 1.0 else 0.0


def speaker(item: AnswerItem) -> str | None:
    """The author's name (``speaker``, else ``user_name``); a blank name is no name."""
    name = str(item.get("speaker") or item.get("user_name") or "").strip()
    return name or None
