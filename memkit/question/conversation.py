"""Conversations: what a follow-up refers to, and the turns each user has asked.

Follow-up questions from the same ``user_id`` build on earlier ones; there is no
conversation id. Each answered question leaves a :class:`Turn`: what was asked, the posts
returned, the posts its answer quoted, the words that make up its topic (its own content
words and those of the sentences the answer quoted), the time window it was about and
which topic of the conversation it belongs to. A contextualizer *reads* a new question
against those turns (:meth:`TopicContext.read`) and says how to search it: a
:class:`Reading` with the texts to search and their fusion weights, the words and posts
carried from earlier turns, the time window, and what kind of turn it is.

Contextualizers (``[contextualizer] type = ...``):

- ``none``: every question stands alone.
- ``carry``: every follow-up also searched with the words of the conversation's first
  and previous questions (a baseline for ``topic``, eval/RESULTS.md).
- ``topic`` (the default): a question is read against the *current topic*, the turns since
  the conversation last changed subject, and what their answers quoted:

  * a question that leans on what came before (a pronoun or "that", "what about ...",
    "and ...?", or at most ``short`` content words that are not people's names) is a
    **follow-up**: it is searched as asked and with the topic's words carried, the two
    rankings fused with ``weight`` on the carried one. The words are those of the topic's
    first question and of the previous one, less past-tense verbs ("organised" in "Who
    organised the trip to Zion?" is what was asked, not what the topic is); a follow-up
    with no words of its own ("when was that?") is about what the last answer quoted, so
    those sentences' words come too, at ``bare_weight`` ("and how did they get home?" after
    "Who bought the Coldplay tickets?" carries "Coldplay tickets");
  * an ellipsis naming something the topic's questions never did, with no pronoun ("what
    about the puppy?"), is checked against the posts found for it (``confirms_topic``): if
    none ties it to the topic it starts a new topic, carrying nothing;
  * a question that names its own subject (a time window of its own, more than ``short``
    content words, or a name with them) carries nothing: it stays in the topic when it
    shares its words, **returns** to an earlier topic whose words it shares, or starts a
    **new** one;
  * a new user's bare follow-up ("and how much did that cost them?") refers to nothing:
    ``unresolved``, and the pipeline answers so rather than guessing;
  * a question that names one of the people who post whom the current topic is not about,
    with a word of its own, starts a topic (or returns to the one about them), unless it has
    a pronoun for the topic ("What did Tom think of it?", "Did Tom see him race?"); a topic is
    about the people its questions named, or, where they named nobody, those whose posts its
    answers quoted; "he", "she" and "his" may stand for the person named ("Back to Aisha:
    what does she do for work?");
  * "back to ..." (or "as for ...") leaves the current topic: a return to the one whose words
    it shares, else a new one.

  Names of the people who post (``names``) do not count as shared words: in a two-person
  chat every question names one of them. A follow-up without a time window of its own
  keeps the previous turn's ("What happened in May?" ... "who was there?"), moved when it
  says so ("and a year before that?").

The store here keeps turns in memory; the service keeps them in its database
(server/search/conversations.py) behind the same two methods, ``history`` and ``record``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

from memkit.config.model import (
    CarrySpec,
    ContextualizerSpec,
    FromSpec,
    TopicSpec,
    construct,
    typed,
)
from memkit.core.text import NLTK_STOPWORDS
from memkit.language.en.follow_ups import (
    BACK_TO as _BACK_TO,
)
from memkit.language.en.follow_ups import (
    CUE_PHRASES,
    CUES,
    FILLER,
)
from memkit.language.en.follow_ups import (
    GOING_WHERE_SAID as _GOING_WHERE_SAID,
)
from memkit.language.en.follow_ups import (
    OBJECT_PRONOUN as _OBJECT_PRONOUN,
)
from memkit.language.en.follow_ups import (
    PERSONAL as _PERSONAL,
)
from memkit.language.en.follow_ups import (
    PRONOUN as _PRONOUN,
)
from memkit.language.en.follow_ups import (
    WHAT_HAPPENED as _WHAT_HAPPENED,
)
from memkit.language.timeref import Window, shifted


@dataclass
class Turn:
    """One asked question, as the next ones may need it."""

    query: str
    effective_query: str = ""
    event_ids: list[str] = field(default_factory=list)  # the items returned, best first
    answer: str | None = None
    # the posts the answer quoted (when it declined: the closest post it named, if any)
    quoted: list[str] = field(default_factory=list)
    words: list[str] = field(
        default_factory=list
    )  # the question's content words (its time phrase left out)
    answer_words: list[str] = field(
        default_factory=list
    )  # content words of the sentences the answer quoted
    people: list[str] = field(default_factory=list)  # who wrote the posts the answer quoted
    window: tuple[date, date] | None = None  # the days the turn was about (asked, or carried)
    topic: int = 0  # the conversation's topics are numbered 0, 1, ...
    time: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


@dataclass
class Reading:
    """How to search one question: ``variants`` (text, weight) to fuse, and what was
    carried from earlier turns (shown to the caller)."""

    query: str  # as asked
    variants: list[tuple[str, float]]
    # alone, new, follow-up, return; unresolved: a bare follow-up with nothing before it
    kind: str = "alone"
    topic: int = 0
    words: list[str] = field(default_factory=list)  # carried words
    posts: list[str] = field(default_factory=list)  # posts carried: what the previous answer quoted
    window: Window | None = None  # asked in the question
    carried_window: tuple[date, date] | None = None  # from the previous turn
    own_words: list[str] = field(default_factory=list)  # the question's content words
    new_subject: list[str] = field(
        default_factory=list
    )  # follow-up words the topic never had (stems)
    topic_stems: list[str] = field(default_factory=list)  # the current topic's words (stems)

    @property
    def effective_query(self) -> str:
        return self.variants[-1][0]

    @property
    def days(self) -> tuple[date, date] | None:
        """The days the question is about: its own window, else the one carried."""
        return (
            (self.window.span.start, self.window.span.end) if self.window else self.carried_window
        )


class ConversationStore:
    """Turns per user, newest last, at most ``max_turns``; a user idle longer than
    ``idle_expiry`` starts afresh."""

    def __init__(self, max_turns: int = 20, idle_expiry: timedelta = timedelta(minutes=30)):
        self.max_turns = max_turns
        self.idle_expiry = idle_expiry
        self._turns: dict[str, list[Turn]] = {}

    def history(self, user_id: str | None, now: datetime | None = None) -> list[Turn]:
        if user_id is None:
            return []
        turns = self._turns.get(user_id, [])
        now = now or datetime.now(timezone.utc)
        if turns and now - turns[-1].time > self.idle_expiry:
            self._turns.pop(user_id, None)
            return []
        return list(turns)

    def record(self, user_id: str | None, turn: Turn) -> None:
        if user_id is None:
            return
        turns = self._turns.setdefault(user_id, [])
        turns.append(turn)
        del turns[: -self.max_turns]

    def forget(self, user_id: str) -> None:
        self._turns.pop(user_id, None)


_WORD = re.compile(r"[^\W_][\w'-]*")


def content_words(text: str) -> list[str]:
    """The words of ``text`` that say what it is about (no stopwords, question words,
    fillers or words of one or two letters), in order, each once."""
    out, seen = [], set()
    for w in _WORD.findall(text):
        low = w.lower().strip("'")
        if low in NLTK_STOPWORDS or low in FILLER or len(low) <= 2 or low in seen:
            continue
        seen.add(low)
        out.append(w)
    return out


@lru_cache(maxsize=65536)  # a topic's words are stemmed again on every follow-up
def _stem(word: str) -> str:
    w = word.lower()
    for suffix in ("'s", "ies", "es", "s", "ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def stems(words) -> set[str]:
    """The words' stems (plural, -ing and -ed endings off), lower case."""
    return {_stem(w) for w in words}


def leans_on_context(query: str, short: int, names=()) -> bool:
    """A pronoun or "that", a cue phrase ("what about", "and ..."), or at most ``short``
    content words that are not people's names."""
    named = {n.lower() for n in names}
    own = [w for w in content_words(query) if w.lower() not in named]
    return cued(query) or len(own) <= short


def cued(query: str) -> bool:
    """A pronoun or "that", or a cue phrase ("what about", "and ..."): words that point back."""
    q = " " + query.lower().strip()
    return any(w.lower() in CUES for w in _WORD.findall(query)) or any(
        f" {p}" in q for p in CUE_PHRASES
    )


def names_a_subject(query: str) -> bool:
    """A capitalised word past the first that is not a question word: a name or place."""
    for w in re.findall(r"(?<!^)(?<![.!?]\s)\b[A-Z][\w'-]+", query.strip()):
        if w.lower() not in FILLER and w.lower() not in NLTK_STOPWORDS and w != "I":
            return True
    return False


class NoContext:
    """Every question stands alone."""

    type_name = "none"

    def read(
        self, query: str, history: list[Turn], window: Window | None = None, names=()
    ) -> Reading:
        text = _searched(query, window)
        return Reading(query, [(text, 1.0)], window=window, own_words=_own_words(query, window))

    def contextualize(self, query: str, history: list[Turn]) -> str:
        return self.read(query, history).effective_query

    def params(self) -> dict:
        return {"type": self.type_name}


def _own_words(query: str, window: Window | None) -> list[str]:
    """The question's content words, its time phrase and the words that change the subject
    ("Back to Bram: ...") left out."""
    return content_words(_BACK_TO.sub(" ", window.rest(query) if window is not None else query))


def _searched(query: str, window: Window | None) -> str:
    """What is searched: the question without its time phrase (the window filters by
    time), unless nothing else is left."""
    if window is None:
        return query
    rest = window.rest(query)
    return rest if content_words(rest) else query


class CarryContext(FromSpec):
    """A follow-up is also searched with the content words of the
    conversation's first question and of the last ``recent`` questions, fused at
    ``weight``. With ``detect``, only a turn that leans on context carries anything.
    Context older than ``idle_minutes`` is forgotten (a new conversation starts)."""

    type_name, spec, section = "carry", CarrySpec, "contextualizer"

    def carried(self, query: str, history: list[Turn]) -> list[str]:
        if not history or (self.detect and not leans_on_context(query, self.short)):
            return []
        sources = ([history[0].query] if self.first else []) + [
            t.query for t in history[-self.recent :]
        ] * bool(self.recent)
        return _new_words(query, sources)

    def read(
        self, query: str, history: list[Turn], window: Window | None = None, names=()
    ) -> Reading:
        text = _searched(query, window)
        extra = self.carried(text, history)
        variants = [(text, 1.0)]
        if extra and self.weight > 0:
            variants = [(text, 1.0 - self.weight), (f"{text} {' '.join(extra)}", self.weight)]
        return Reading(
            query,
            variants,
            kind="follow-up" if extra else "alone",
            words=extra,
            window=window,
            own_words=_own_words(query, window),
        )

    def contextualize(self, query: str, history: list[Turn]) -> str:
        return self.read(query, history).effective_query


class TopicContext(FromSpec):
    """Follow-ups read against the current topic and what its answers quoted (see the
    module's docstring). ``answer_words``: at most this many words of the quoted sentences
    are carried; ``short``: a question with at most this many content words of its own
    (not people's names) leans on context."""

    type_name, spec, section = "topic", TopicSpec, "contextualizer"

    def read(
        self, query: str, history: list[Turn], window: Window | None = None, names=()
    ) -> Reading:
        text = _searched(query, window)
        own = _own_words(query, window)
        named = {n.lower() for n in names} | {p.lower() for n in names for p in n.split()}
        mine = {_stem(w) for w in own if w.lower() not in named}
        if not history:
            # "and how much did that cost them?" from someone who asked nothing yet: a pronoun
            # with next to nothing of its own refers to nothing.
            bare = (
                window is None
                and _PRONOUN.search(text)
                and len(mine) <= self.short
                and not names_a_subject(text)
            )
            return Reading(
                query,
                [(text, 1.0)],
                kind="unresolved" if bare else "new",
                window=window,
                own_words=own,
            )
        last = history[-1]
        current = _topic_stems(history, last.topic, named)
        own_window = window is not None and not _PRONOUN.search(
            text
        )  # "what happened in May?" says what it is about
        # "When is Tom's race?" after questions about Priya's dog names someone else: its
        # own subject, though short ("What about Tom?", with nothing of its own, and "What did
        # Tom think of it?", with a pronoun for the topic's thing, still follow up)
        asked, theirs = _people(own, names), _topic_people(history, last.topic, names)
        other = bool(asked) and bool(theirs) and not asked & theirs
        if other and mine & current and not _named_in(history, last.topic, names):
            # who the topic is about was only read from its answers' posts: a question that
            # shares its words stays ("What did Dana think of Stevens?" after questions on
            # the book club's book, whose answers quoted Omar)
            other = False
        if (
            own_window
            or _BACK_TO.search(text)  # "back to the hen weekend, which airport did they fly from?"
            or not leans_on_context(text, self.short, names)
            or (names_a_subject(text) and len(mine) > self.short)
            # "Where is Dev going?" after questions about Rosa's dog: someone else, asked
            # about with no word pointing back ("What about Dev?" points back)
            or (
                other
                and (mine or not cued(text))
                and not _topic_pronoun(text, asked)
                and not _GOING_WHERE_SAID.match(text)
            )
        ):
            # It names its own subject: the same topic, a return to an earlier one, or a new one.
            topic, kind = last.topic, "alone"
            if own_window and not mine:  # a new window, nothing else: a topic of its own
                topic, kind = max(t.topic for t in history) + 1, "new"
            elif (mine and not mine & current) or other:
                earlier = [
                    t.topic
                    for t in reversed(history)
                    if t.topic != last.topic
                    and mine & _topic_stems(history, t.topic, named)
                    and (not other or asked & _topic_people(history, t.topic, names))
                ]  # back to a topic about them only where it shares a word: "How did Ruben
                # hurt his ankle?" is not the topic of Ruben's birthday dinner
                topic = earlier[0] if earlier else max(t.topic for t in history) + 1
                kind = "return" if earlier else "new"
            return Reading(
                query, [(text, 1.0)], kind=kind, topic=topic, window=window, own_words=own
            )
        turns = [t for t in history if t.topic == last.topic]
        sources = [turns[0].words] + ([last.words] if last is not turns[0] else [])
        if (
            not mine
        ):  # nothing of its own ("when was that?"): it is about what the last answer quoted
            sources.append(last.answer_words[: self.answer_words])
        # What the topic is about, not what was asked of it: "organised" in "Who organised the
        # trip to Zion?" would pull the organiser's post into "and how much did it cost?".
        extra = [
            w for w in _new_words(text, [" ".join(words) for words in sources]) if not _past_verb(w)
        ]
        weight = self.weight if mine else self.bare_weight  # a bare "when was that?" is all context
        variants = [(text, 1.0)]
        if extra and weight > 0:
            variants = [(text, 1.0 - weight), (f"{text} {' '.join(extra)}", weight)]
        carried = None
        if self.window and window is None and last.window:
            moved = shifted(text, last.window)  # "and a year before that?"
            carried = (moved.start, moved.end) if moved else last.window
        # "what about the puppy?": an ellipsis naming something the topic never mentioned may
        # be a new subject; the pipeline checks it against the posts found (confirms_topic).
        asked = {_stem(w) for t in turns for w in t.words if w.lower() not in named}
        elliptic = _PRONOUN.search(text) or _GOING_WHERE_SAID.match(text)
        new_subject = sorted(mine - asked) if not elliptic else []
        return Reading(
            query,
            variants,
            kind="follow-up",
            topic=last.topic,
            words=extra,
            posts=list(last.quoted),
            window=window,
            carried_window=carried,
            own_words=own,
            new_subject=new_subject,
            topic_stems=sorted(asked),
        )

    def new_topic(self, reading: Reading, history: list[Turn]) -> Reading:
        """The reading of a question that turned out to start a new topic."""
        text = reading.variants[0][0]
        return Reading(
            reading.query,
            [(text, 1.0)],
            kind="new",
            topic=max(t.topic for t in history) + 1,
            window=reading.window,
            own_words=reading.own_words,
        )

    def contextualize(self, query: str, history: list[Turn]) -> str:
        return self.read(query, history).effective_query


def asks_what_happened(query: str) -> bool:
    """Whether a question asks for whatever happened ("what was the band up to in April?",
    "anything in October?", "what did Omar post two weeks ago?"), not for one fact."""
    return bool(_WHAT_HAPPENED.search(query))


def confirms_topic(
    reading: Reading, first: str, best: float | None = None, sure: float = 0.1
) -> bool:
    """Whether a follow-up's new words still belong to the current topic. ``first``: the
    best post found for the question as asked; ``best``: its probability. It names a new
    subject ("what about the puppy?") when the question alone finds a post it is sure of
    (at least ``sure``) that shares no word with the topic; words found nowhere on their
    own ("and the cost?" when the posts say "£1,200") are the topic's."""
    if not reading.new_subject or (best is not None and best < sure):
        return True
    return bool({_stem(w) for w in content_words(first)} & set(reading.topic_stems))


def _topic_stems(history: list[Turn], topic: int, named: set[str]) -> set[str]:
    """The words of a topic's questions and of what their answers quoted (stems)."""
    return {
        _stem(w)
        for t in history
        if t.topic == topic
        for w in [*t.words, *t.answer_words]
        if w.lower() not in named
    }


def _people(words, names) -> set[str]:
    """The people of ``names`` (as given) that ``words`` name, by any part of the name,
    possessive or not ("Tom's" names "Tom Evans")."""
    said = {re.sub(r"['’]s$", "", w).lower() for w in words}
    return {n for n in names if said & {p.lower() for p in n.split()}}


def _topic_people(history: list[Turn], topic: int, names) -> set[str]:
    """The people a topic is about: those its questions named; where they named nobody,
    those who wrote what its answers quoted ("What happened on the descent?", answered from
    Diego's post, is about Diego)."""
    quoted = {p for t in history if t.topic == topic for p in t.people}
    return _named_in(history, topic, names) or {n for n in names if n in quoted}


def _named_in(history: list[Turn], topic: int, names) -> set[str]:
    """The people a topic's questions named."""
    return _people([w for t in history if t.topic == topic for w in t.words], names)


def _topic_pronoun(text: str, asked: set[str]) -> bool:
    """Whether a question that names someone the topic is not about (``asked``) still has
    a pronoun for the topic's people or things. "it", "they", "that" ... always do ("What
    did Tom think of it?"). A personal pronoun may stand for the person named: "he", "she"
    and "his" do ("Back to Aisha: what does she do for work?"), and so do "him" and "her"
    after a possessive name ("What does Diego's coach tell him?") or a cue that changes the
    subject ("back to", "as for"). After a plain name they do not: in "Did Tom see him
    race?" the object is not the subject, so "him" is the topic's."""
    rest = _PERSONAL.sub(" ", text)
    if _PRONOUN.search(rest):
        return True
    owner = any(
        re.search(rf"\b{re.escape(p)}['’]s\b", text, re.IGNORECASE)
        for n in asked
        for p in n.split()
    )
    # "her" before a noun is "his" ("with her sister"); before nothing or a small word
    # ("buy her for Christmas") it is "him"
    objects = [
        m
        for m in _OBJECT_PRONOUN.finditer(text)
        if m.group(1).lower() == "him" or not m.group(2) or m.group(2).lower() in NLTK_STOPWORDS
    ]
    return bool(objects) and not owner and not _BACK_TO.search(text)


def _past_verb(word: str) -> bool:
    """A lower-case word that reads as a past tense ("organised", "bought" is missed): the
    question's predicate rather than its subject."""
    return word.islower() and len(word) >= 5 and word.endswith("ed") and not word.endswith("eed")


def _new_words(query: str, sources: list[str]) -> list[str]:
    """Content words of ``sources`` the query does not already have, in order, once each."""
    seen = {w.lower() for w in content_words(query)}
    out = []
    for text in sources:
        for w in content_words(text):
            if w.lower() not in seen:
                seen.add(w.lower())
                out.append(w)
    return out


CONTEXTUALIZERS = {"none": NoContext, "carry": CarryContext, "topic": TopicContext}


def build_contextualizer(spec: "ContextualizerSpec | dict | None"):
    """From a ``[contextualizer]`` typed spec (memkit.config.model), or its dict checked
    into one first (None: no follow-ups). A type added to CONTEXTUALIZERS at run time has
    its settings checked by its class."""
    spec = typed("contextualizer", spec or {"type": "none"})
    return construct(CONTEXTUALIZERS[spec.type], spec, "contextualizer")
