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

from dataclasses import dataclass

from memkit.question.kinds import is_question, question_type, wants_list

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
    reading: object = (
        None  # memkit.question.conversation.Reading (time window, topic, carried posts)
    )

    @classmethod
    def read(cls, text: str, reading=None) -> "Question":
        kind = question_type(text)
        return cls(
            text=text,
            kind=kind,
            expects=EXPECTS.get(kind),
            asks=is_question(text),
            wants_list=wants_list(text),
            words=tuple(getattr(reading, "own_words", ()) or ()),
            leans_on=tuple(getattr(reading, "words", ()) or ()),
            read_as=reading.effective_query if reading is not None else text,
            reading=reading,
        )

    @property
    def window(self):
        return getattr(self.reading, "window", None)
