"""The shapes a language pack is made of: rules whose rows carry the texts they must read
and the near misses they must not, tables of them, and the pack (``Language``).

A row is data a reader can check by eye: its pattern, why it is there (``note``), and the
examples it exists for beside the counterexamples it must leave alone. ``validate`` runs
them all; a change to a row that breaks one of its own examples fails the language test
(tests/test_language.py) before any suite runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["Language", "Need", "Rule", "Table", "examples_of", "validate"]


@dataclass(frozen=True)
class Rule:
    """One pattern with the texts it exists for (``examples``: it must find something in
    each) and the near misses it must not read (``counterexamples``)."""

    name: str
    pattern: re.Pattern
    examples: tuple[str, ...] = ()
    counterexamples: tuple[str, ...] = ()
    note: str = ""

    def search(self, text: str) -> re.Match | None:
        return self.pattern.search(text)

    def problems(self) -> list[str]:
        out = [
            f"{self.name}: does not read its example {t!r}"
            for t in self.examples
            if not self.search(t)
        ]
        out += [
            f"{self.name}: reads its counterexample {t!r}"
            for t in self.counterexamples
            if self.search(t)
        ]
        if not self.examples:
            out.append(f"{self.name}: has no example")
        return out


@dataclass(frozen=True)
class Table:
    """Rules tried in order; the first that finds something names the text (``first``).
    An example of a row must be named by that row (not by one above it)."""

    name: str
    rows: tuple[Rule, ...]
    otherwise: str | None = None  # the name of a text no row reads

    def first(self, text: str) -> str | None:
        return next((r.name for r in self.rows if r.search(text)), self.otherwise)

    def problems(self) -> list[str]:
        out = []
        for r in self.rows:
            out += [f"{self.name}.{p}" for p in r.problems()]
            out += [
                f"{self.name}.{r.name}: its example {t!r} is read as {self.first(t)!r}"
                for t in r.examples
                if r.search(t) and self.first(t) != r.name
            ]
        names = [r.name for r in self.rows]
        out += [f"{self.name}: row {n!r} twice" for n in set(names) if names.count(n) > 1]
        return out


@dataclass(frozen=True)
class Need:
    """What a question asks for that a sentence must hold to answer it: ``asked`` reads the
    question; ``holds(question, sentence)`` says whether the sentence holds it; ``missing``
    is how a decline names what is missing (a format string of the question's match's
    groups: ``"who {0} is"``). ``held`` and ``lacking`` are (question,
    sentence) pairs the check must get right."""

    missing: str
    asked: Rule
    holds: Callable[[str, str], bool]
    held: tuple[tuple[str, str], ...] = ()
    lacking: tuple[tuple[str, str], ...] = ()

    def problems(self, language: "Language") -> list[str]:
        name = f"needs.{self.asked.name}"
        out = [f"needs.{p}" for p in self.asked.problems()]
        for question, sentence in self.held:
            got = language.lacks(question, sentence)
            if got is not None:
                out.append(f"{name}: {sentence!r} answers {question!r}, read as lacking {got!r}")
        for question, sentence in self.lacking:
            if language.lacks(question, sentence) is None:
                out.append(f"{name}: {sentence!r} does not answer {question!r}, read as holding it")
        return out


@dataclass(frozen=True)
class Language:
    """A language's pack: the tables memkit reads its questions with."""

    code: str
    name: str
    kinds: Table
    lists: Rule
    needs: tuple[Need, ...] = field(default=())
    changes: tuple[Rule, ...] = field(default=())  # what says a plan changed, what asks so
    # what else a question is read for, each row on its own ("when", "habit", "ahead",
    # "length"): the names of the rows that read it are the Question's ``asks_for``
    asks_for: tuple[Rule, ...] = field(default=())
    # what says a question leans on the earlier turns or changes the subject
    follow_ups: tuple[Rule, ...] = field(default=())
    # what asks someone in a feed by name, and what opens a reply to it
    replies: tuple[Rule, ...] = field(default=())
    # what the writer reads in a sentence (a day that comes back, a measure, ...)
    sentences: tuple[Rule, ...] = field(default=())

    def kind(self, question: str) -> str:
        """The kind of answer a question asks for (the first row of ``kinds`` it matches)."""
        return self.kinds.first(question) or "what"

    def wants_list(self, question: str) -> bool:
        return bool(self.lists.search(question))

    def need(self, question: str) -> tuple[Need, tuple] | None:
        """The first need the question asks for, with its match's groups (what ``missing``
        is formatted with), or None."""
        for need in self.needs:
            m = need.asked.search(question)
            if m:
                return need, m.groups()
        return None

    def lacks(self, question: str, sentence: str) -> str | None:
        """What the question needs and ``sentence`` does not hold (the first need the
        question asks for decides), or None."""
        return lacking(self.need(question), question, sentence)

    def asked_for(self, question: str) -> frozenset[str]:
        """The names of the ``asks_for`` rows that read the question."""
        return frozenset(r.name for r in self.asks_for if r.search(question))

    def asks_change(self, question: str) -> bool:
        """Whether the question asks about a change itself ("Why was it moved?"): the
        ``asks_change`` row of ``changes``."""
        return any(r.name == "asks_change" and r.search(question) for r in self.changes)


def lacking(need: tuple[Need, tuple] | None, question: str, sentence: str) -> str | None:
    """What ``need`` (``Language.need``'s answer for ``question``) finds missing from
    ``sentence``, or None."""
    if need is None:
        return None
    rule, groups = need
    return None if rule.holds(question, sentence) else rule.missing.format(*groups)


def validate(language: Language) -> list[str]:
    """Every row's examples and counterexamples, run: the problems found (none: valid)."""
    out = [p for p in language.kinds.problems()]
    out += [f"lists.{p}" for p in language.lists.problems()]
    for need in language.needs:
        out += need.problems(language)
    for rule in language.changes:
        out += [f"changes.{p}" for p in rule.problems()]
    for group, rules in (
        ("asks_for", language.asks_for),
        ("follow_ups", language.follow_ups),
        ("replies", language.replies),
        ("sentences", language.sentences),
    ):
        out += [f"{group}.{p}" for rule in rules for p in rule.problems()]
    return out


def examples_of(rows: Sequence[Rule]) -> list[tuple[str, str]]:
    """(row name, example) of every row: what a parametrized test runs."""
    return [(r.name, t) for r in rows for t in r.examples]
