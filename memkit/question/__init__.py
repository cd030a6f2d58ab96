"""A question, read once: what it asks for, about what, when, and what it leans on.

``Pipeline.ask`` builds one ``Question`` at the top of a query, from the text and the
conversation's reading of it (memkit.question.conversation.Reading: follow-up or not, the words
carried from earlier turns, the time window); the stages after it read this object.

- ``kind``: count, duration, when, where, who, yesno or what (memkit.question.kinds);
- ``expects``: the kind of thing an answer must hold: a number, a duration, a date, a
  place, a person, or None when any statement may answer;
- ``asks``: the text is shaped like a question (a claim or a chat line is not one: the
  reader reads only questions);
- ``words``: its own content words; ``leans_on``: the words it carries from earlier turns;
- ``read_as``: what retrieval and the reader read: the question with what it leans on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Sequence

from memkit.language import ENGLISH, Language
from memkit.language.tables import lacking
from memkit.language.timeref import question_window
from memkit.question.conversation import (
    NoContext,
    Reading,
    Turn,
    asks_what_happened,
    content_words,
)
from memkit.question.kinds import is_question

EXPECTS = {
    "count": "number",
    "duration": "duration",
    "when": "date",
    "where": "place",
    "who": "person",
}


@dataclass(frozen=True)
class Question:
    text: str
    kind: str
    expects: str | None
    asks: bool
    wants_list: bool
    words: tuple[str, ...]
    leans_on: tuple[str, ...]
    read_as: str
    # memkit.question.conversation.Reading: time window, topic, carried posts
    reading: Reading | None = None
    # the names of the people who post where it is asked (None: not known)
    authors: tuple[str, ...] | None = None
    language: Language = field(default=ENGLISH, repr=False, compare=False)
    # the first thing it cannot be answered without (memkit.language.Need, with the groups
    # its name is formatted with: "the number"), or None
    need: tuple | None = field(default=None, repr=False, compare=False)
    asks_change: bool = False  # it asks about a change itself ("Why was it moved?")
    asks_what_happened: bool = False  # "What happened ...?", "What was the band up to?"
    # the pack's ``asks_for`` rows that read it: "when" (the answer leads with a date),
    # "habit" (the days it keeps), "ahead" (a plan), "length" (a measure)
    asks_for: frozenset[str] = frozenset()
    # its content words, in order (memkit.question.conversation.content_words of the text)
    content: tuple[str, ...] = ()

    @classmethod
    def read(
        cls,
        text: str,
        history: Sequence[Turn] = (),
        now: datetime | None = None,
        authors: Sequence[str] | None = None,
        language: Language = ENGLISH,
        *,
        follow_ups=None,
        windows: bool = False,
    ) -> "Question":
        """The question asked after ``history`` (the user's earlier turns, oldest first) at
        ``now``, where ``authors`` post, read in ``language``: its time window (with
        ``windows``), how it leans on the earlier turns (``follow_ups``: the config's
        contextualizer, memkit.question.conversation; None: every question stands alone),
        its kind and what it expects."""
        names = tuple(authors) if authors is not None else None
        window = question_window(text, now) if windows else None
        follow_ups = follow_ups or NoContext()
        reading = follow_ups.read(text, list(history), window, names=names or ())
        return cls.of(text, reading, names, language)

    @classmethod
    def of(
        cls,
        text: str,
        reading: Reading | None = None,
        authors: tuple[str, ...] | None = None,
        language: Language = ENGLISH,
    ) -> "Question":
        """The question with the conversation's reading of it already made."""
        kind = language.kind(text)
        return cls(
            text=text,
            kind=kind,
            expects=EXPECTS.get(kind),
            asks=is_question(text),
            wants_list=language.wants_list(text),
            words=tuple(getattr(reading, "own_words", ()) or ()),
            leans_on=tuple(getattr(reading, "words", ()) or ()),
            read_as=reading.effective_query if reading is not None else text,
            reading=reading,
            authors=authors,
            language=language,
            need=language.need(text),
            asks_change=language.asks_change(text),
            asks_what_happened=asks_what_happened(text),
            asks_for=language.asked_for(text),
            content=tuple(content_words(text)),
        )

    def lacks(self, sentence: str) -> str | None:
        """What the question needs that ``sentence`` does not hold ("the number"), or None."""
        return lacking(self.need, self.text, sentence)

    def reread(self, reading: Reading) -> "Question":
        """The same question under another reading (a follow-up whose posts read it as a
        new topic): what it leans on changes, its kind does not."""
        return replace(
            self,
            words=tuple(reading.own_words or ()),
            leans_on=tuple(reading.words or ()),
            read_as=reading.effective_query,
            reading=reading,
        )

    @property
    def window(self):
        return getattr(self.reading, "window", None)
