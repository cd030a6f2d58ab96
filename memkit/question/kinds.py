"""What a question asks for, read with a language pack (memkit.language; English by
default): its type (when, where, who, ...), whether it asks for several things, what a
quoted sentence lacks that it needs; and the English patterns the writer reads questions
and sentences with, from the pack (memkit/language/en/questions.py)."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

from memkit.core.text import IRREGULAR
from memkit.language import ENGLISH, Language
from memkit.language.en.questions import (  # noqa: F401  (read by the writer's modules)
    _IRREGULAR_RE,
    _NAME_ASKED,
    ANSWER_TYPE_TERMS,
    COST_ASKED,
    FIRST_PERSON,
    GREETING,
    HOLDS,
    LIST,
    NUMBER,
    PLACE_OR_THING_BEFORE,
    SECOND_PERSON,
    TYPES,
    VOCATIVE,
    WHEN,
)
from memkit.language.timeref import read_span, resolve


def question_type(query: str, language: Language = ENGLISH) -> str:
    """count, duration, when, where, who, yesno or what (the pack's ``kinds``)."""
    return language.kind(query)


def wants_list(query: str, language: Language = ENGLISH) -> bool:
    """The question asks for several things ("What activities does Melanie do?")."""
    return language.wants_list(query)


def asks_when(query: str) -> bool:
    """The question asks when (a when-question's answer leads with the date)."""
    return bool(WHEN.search(query))


@lru_cache(maxsize=65536)  # the same candidate sentences come back question after question
def base_forms(text: str) -> str:
    """The text with irregular past forms put in their base form ("drove" -> "drive")."""
    return _IRREGULAR_RE.sub(lambda m: IRREGULAR[m.group(1).lower()], text)


# A pure function of the sentence, asked for every candidate of every question.
@lru_cache(maxsize=100_000)
def says_when(sentence: str) -> bool:
    """The sentence says when: a relative time ("yesterday") or a date written in it."""
    return bool(resolve(sentence, datetime(2000, 1, 1))) or read_span(sentence) is not None


def asks_name(query: str) -> bool:
    """The question asks for a name ("What is the name of Raj's band?", "What is Zoe's cat
    called?"): its "name" or "called" says what kind of answer it wants, which a post
    gives without those words ("Our band Night Ferry")."""
    return bool(_NAME_ASKED.search(query))


def lacks_what_is_asked(query: str, quoted: str, language: Language = ENGLISH) -> str | None:
    """What the question needs and ``quoted`` does not hold: "the number" (a phone number:
    six or more digits), "the address" (an e-mail address), "the colour", "the weight" (a
    unit, or "weighs"), "how much" (an amount; money when it asks what something cost, was
    paid or is) or
    "the name" (a capitalised word the question does not have, past the start of a
    sentence), "what time" (a time of day) or who holds a role the question names ("who
    Hana's coach is": the role's word); None when it holds it or the question needs none
    of these."""
    return language.lacks(query, quoted)


# A text shaped like a question (the reader reads questions only, where configured so).
_QUESTION_WORD = re.compile(r"\w+")
_QUESTION_START = frozenset(
    "what when where who whom whose which why how did do does is are was were can could has "
    "have had will would should shall any anything anyone anybody tell".split()
)


def is_question(text: str) -> bool:
    """A text shaped like a question: it ends with "?" or starts with a question word (a
    claim, "Vitamin D deficiency causes ...", or a chat line is not one)."""
    words = _QUESTION_WORD.findall(text.lower())
    return text.rstrip().endswith("?") or bool(words and words[0] in _QUESTION_START)
