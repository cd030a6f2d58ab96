"""Answer writers: turn the ranked items of a query into the text a person reads.

An answerer gets the query and the top items (dicts with ``text`` and, where known,
``event_id``, ``speaker`` (the author's name), ``block_title``, ``block_type_name`` and
``created_at``) and returns an :class:`Answer`: the text, the event ids it quotes, and
whether it declined. ``summary=True`` asks for a conversational answer; ``summary=False``
for a one-line account of what was found.

``extractive`` (the default) runs offline and only quotes what was posted. With its two
models (``[answer.select]`` and ``[answer.decline]`` in the config, logistic regressions
written by ``eval/train_answers.py``, cross-validated by conversation):

1. **Candidates** are the sentences of the top ``max_items`` items, less questions (a
   question never answers one) and greetings ("Thanks, Caroline!": nothing but names and
   pleasantries, which the encoder finds close to any question naming that person).
2. **Select**: each candidate is described by ``SENTENCE_FEATURES`` (cosine with the
   question, the question's terms it and its post contain, the item's rank, whether its
   author is someone other than the person asked about, whether it holds what the
   question type asks for: a date, a number, a place, a name) and the best one is quoted.
3. **Decline**: the question as a whole is described by ``QUERY_FEATURES``: how well the
   posts *about* the person asked about answer it against posts about someone else
   (speaker attribution: an author's "I", the addressee's "you", a third-person name),
   whether that person only *asked* about it, whether the question's terms or proper
   names appear in the items at all. Above the model's threshold, or when at least
   ``max_missing`` of a question's terms (at most ``QUESTION_TERMS``) are in none of the items (a fact never
   posted: "What is Ann's favourite pizza topping?" over posts that mention pizza once),
   the writer says memory holds nothing on it, and quotes nothing.
4. **Shape**: one post, the sentence that answers (cut to its clause past ``max_words``),
   attributed ("On 8 May 2023 Caroline wrote in “Session 1”: “...”"); several posts only
   when the question asks for several (``wants_list``: "What activities ...", "Where has
   ..."). A when-question leads with the date, relative times ("yesterday") resolved
   against the post's own time (memkit.timeref).

Without models it works as the first version did (kept for configs with none, and as the
baseline in eval/RESULTS.md): sentences of the top ``max_items`` scored by cosine, less
``rank_weight`` per rank, plus ``when_bonus`` for dated sentences of when-questions; up
to ``max_sentences`` quotes within ``margin`` of the best; only posts by (or naming) the
person asked about may answer; declines below ``min_score`` or when someone else's
sentence is closer by more than ``max_gap``.

``llm`` sends the question and the numbered items, with their dates and authors, to an
OpenAI-compatible chat-completions endpoint, asks it to cite the items it uses as [n]
(those are its ``quoted`` ids) and falls back to ``extractive`` on any failure (timeout,
HTTP error, malformed reply). Configure with ``[answer] type = "llm"``, ``url``,
``model`` and ``api_key_env`` (the name of the environment variable holding the key).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import groupby

import numpy as np

from memkit.encoders import encode_documents
from memkit.errors import ValidationError
from memkit.linear import check_linear, linear_score
from memkit.text import Analyzer
from memkit.timeref import Span, day_text, read_span, resolve

log = logging.getLogger(__name__)

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:date|day|year|month|time)\b|\bhow long ago\b|\bwhich (?:year|month|day)\b",
    re.IGNORECASE,
)
DECLINE = "I have no information available on that"
# The missing-terms guard (max_missing) reads questions, not chat prefixes or passages: a
# longer query (MADial-Bench's dialogues: 41 terms) always has terms no post holds.
QUESTION_TERMS = 12

# -- what a question asks for ---------------------------------------------------------------
_TYPES = [  # first match wins
    ("count", re.compile(r"\bhow (?:many|much|often)\b", re.I)),
    ("duration", re.compile(r"\bhow long\b(?! ago)", re.I)),
    ("when", _WHEN),
    ("where", re.compile(r"\bwhere\b", re.I)),
    ("who", re.compile(r"\bwho(?:se|m)?\b", re.I)),
    (
        "yesno",
        re.compile(
            r"^\s*(?:would|is|are|does|do|did|was|were|has|have|can|could|will|should)\b", re.I
        ),
    ),
]
_NUMBER = (
    r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|once|twice|a few|several|couple)\b"
)
_HOLDS = {  # what a sentence holds that answers each question type
    "count": re.compile(_NUMBER + r"|\btimes?\b|\bevery\b|\bdaily\b|\bweekly\b", re.I),
    "duration": re.compile(_NUMBER + r"\s*(?:years?|months?|weeks?|days?)|\bsince\b", re.I),
    "where": re.compile(r"\b(?:in|at|to|from|near)\s+(?:the\s+)?[A-Z]"),
}
_LIST = re.compile(
    r"\b(?:what|which) (?:\w+ )?(?:activities|things|books|places|hobbies|kinds|types|events|ways|items|pets|sports"
    r"|instruments|games|countries|cities|foods|states|songs|movies|artists|bands)\b"
    r"|\bwhat (?:are|were|have|has) \w+(?:'s)? (?:\w+ )?\w+s\b|\bwhere has\b|\bwhat \w+ has\b|\bin what ways\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|we|our|us)\b", re.I)
_SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.I)
_GREETING = frozenset(
    Analyzer()(
        "hey hi hello thanks thank wow congrats congratulations yeah yes no oh haha awesome "
        "great cool sure totally glad good"
    )
)
_VOCATIVE = (
    r"(?:^|[.!?]\s+|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|yeah|yes|oh|aw+|sorry|so"
    r"|and|but|haha|ha)\b,?\s*){name}\s*[,!.?]"
)


# The past forms of common irregular verbs, to their base: a question asks "when did they
# drive there?" of a post saying "we drove".
_IRREGULAR = dict(
    pair.split(":")
    for pair in (
        "drove:drive driven:drive went:go gone:go bought:buy ate:eat eaten:eat got:get gotten:get came:come saw:see "
        "seen:see took:take taken:take made:make gave:give given:give ran:run won:win lost:lose left:leave found:find "
        "told:tell said:say met:meet sent:send broke:break broken:break fell:fall felt:feel flew:fly flown:fly rode:ride "
        "wrote:write written:write sang:sing swam:swim began:begin brought:bring caught:catch thought:think spent:spend "
        "paid:pay kept:keep held:hold sat:sit stood:stand heard:hear knew:know known:know became:become sold:sell "
        "built:build chose:choose chosen:choose drank:drink drunk:drink forgot:forget hid:hide hit:hit hurt:hurt "
        "lent:lend read:read shook:shake slept:sleep spoke:speak stole:steal stolen:steal taught:teach threw:throw "
        "wore:wear woke:wake"
    ).split()
)
_IRREGULAR_RE = re.compile(r"\b(" + "|".join(_IRREGULAR) + r")\b", re.IGNORECASE)


@lru_cache(maxsize=65536)  # the same candidate sentences come back question after question
def _base_forms(text: str) -> str:
    return _IRREGULAR_RE.sub(lambda m: _IRREGULAR[m.group(1).lower()], text)


# Words that say what kind of answer a question wants rather than what it is about.
_ANSWER_TYPE_TERMS = frozenset(
    Analyzer()(
        "cost costs price much many time times long often date day year month week "
        "kind type sort happened happen"
    )
)


def question_type(query: str) -> str:
    """count, duration, when, where, who, yesno or what."""
    return next((name for name, pattern in _TYPES if pattern.search(query)), "what")


def wants_list(query: str) -> bool:
    """The question asks for several things ("What activities does Melanie do?")."""
    return bool(_LIST.search(query))


SENTENCE_FEATURES = [
    "cos",
    "cos_rel",
    "ov",
    "ov_rel",
    "ovp",
    "ovp_rel",
    "rr",
    "r1",
    "by_other",
    "other_mentions",
    "lognw",
    "image",
    "when_date",
    "t_count",
    "t_dur",
    "t_where",
    "t_who",
]
QUERY_FEATURES = [
    "fp_oth",
    "sp_oth",
    "s1",
    "s_own",
    "c_own",
    "o_own",
    "op_own",
    "gap",
    "cgap",
    "ogap",
    "opgap",
    "r_own",
    "named",
    "top_own",
    "n_own5",
    "miss",
    "capmiss",
    "s_ab",
    "c_ab",
    "abgap",
    "cabgap",
    "ask_own",
    "ask_oth",
    "ask_gap",
]


@dataclass
class Answer:
    text: str
    declined: bool = False  # memory holds nothing that answers it (or nothing was found)
    quotes: list[dict] = field(
        default_factory=list
    )  # {"event_id", "sentence", "score"} behind the text, in order
    date: Span | None = None  # what a when-question's answer leads with
    strength: float | None = (
        None  # best similarity of a sentence allowed to answer (None: none allowed)
    )
    rival: float | None = (
        None  # best similarity of a sentence by someone other than the person asked about
    )
    writer: str = "extractive"

    @property
    def quoted(self) -> list[str]:
        return [q["event_id"] for q in self.quotes if q.get("event_id") is not None]


@dataclass
class Candidates:
    """The sentences of one question's items, with what the models read about them."""

    rank: list[int]  # the item's rank (0 = first)
    item: list[dict]
    sentence: list[str]
    sims: np.ndarray  # cosine with the question
    quotable: np.ndarray  # bool: not a question, not a greeting
    own: np.ndarray  # bool: written by the person asked about (everyone when nobody is named)
    about: np.ndarray  # bool: says something about the person asked about (speaker attribution)
    x: np.ndarray  # SENTENCE_FEATURES, one row per sentence
    people: set[str]
    query: str
    known: set[str]  # the authors' names the writer knows of (see named_people)


def sentences(text: str | None) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


def _as_datetime(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _around(text: str, at: int, before: int = 5, after: int = 4) -> str:
    """The words just before position ``at`` and from it on (a time phrase and its verb)."""
    return " ".join(text[:at].split()[-before:] + text[at:].split()[:after])


def _timestamp(value) -> float:
    """Seconds since 1970 (an unknown time first), for ordering posts by when they were posted."""
    value = _as_datetime(value)
    return value.timestamp() if value is not None else float("-inf")


def _when(value) -> str | None:
    value = _as_datetime(value)
    return day_text(value) if value else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _lead(span: Span) -> str:
    """ "On 7 May 2023", "In June 2023", "In the week before 9 June 2023"."""
    if span.days == 1:
        return f"On {day_text(span.start)}"
    if "weekend" in span.text:
        return f"On {span.text}"  # the weekend before ..., 2 weekends before ...
    return f"In {span.text}"  # the week before ..., June 2023, 2022


class ExtractiveAnswerer:
    """Quotes the sentence that answers the question, attributed and dated; no network."""

    type_name = "extractive"

    def __init__(
        self,
        max_sentences: int = 3,
        max_items: int = 3,
        max_quote_chars: int = 240,
        min_score: float | None = None,
        max_gap: float | None = None,
        margin: float = 1.0,
        people: bool = True,
        rank_weight: float = 0.1,
        when_bonus: float = 0.2,
        select: dict | None = None,
        decline: dict | None = None,
        max_list: int = 3,
        max_words: int | None = 30,
        max_missing: float | None = None,
        unsure_below: float | None = None,
        sentences: str = "in_post",
        in_post_max_chars: int = 500,
    ):
        if sentences not in ("in_post", "alone"):
            raise ValidationError(
                "answer.sentences", f"expected in_post or alone, got {sentences!r}"
            )
        if (
            isinstance(in_post_max_chars, bool)
            or not isinstance(in_post_max_chars, int)
            or in_post_max_chars < 1
        ):
            raise ValidationError(
                "answer.in_post_max_chars",
                f"expected a positive integer, got {in_post_max_chars!r}",
            )
        # How a sentence is encoded: read in its post (one run of the model a post: see
        # _sentence_vectors) for posts up to in_post_max_chars, else on its own.
        self.sentences = sentences
        self.in_post_max_chars = in_post_max_chars
        self.max_sentences = max_sentences
        self.max_items = max_items
        self.max_quote_chars = max_quote_chars
        self.min_score = min_score  # below it (or nobody allowed) the writer declines; None: never
        self.max_gap = (
            max_gap  # decline when someone else's sentence is closer by more than this; None: never
        )
        self.margin = margin  # further quotes score within this of the best
        self.people = people  # enforce "who": a named person's question is answered by their posts
        self.rank_weight = rank_weight  # trust in the retriever's order: subtracted per rank from a sentence's score
        self.when_bonus = when_bonus  # for when-questions, added to sentences that say when
        self.select = (
            check_linear(select, SENTENCE_FEATURES, "answer.select") if select is not None else None
        )
        self.decline_model = (
            check_linear(decline, QUERY_FEATURES, "answer.decline", extra=("threshold",))
            if decline is not None
            else None
        )
        self.max_list = max_list  # posts quoted when the question asks for several
        self.max_words = (
            max_words  # a longer quoted sentence is cut to the clause that answers; None: never
        )
        self.max_missing = (
            max_missing  # decline when this share of the question's terms is in none of the items
        )
        self.unsure_below = unsure_below  # a question about no one: see declines()
        self.encoder = None
        self.line = None
        self._by_first: dict[
            str, frozenset[str]
        ] = {}  # authors' names by their first word, lower case
        self._analyzer = Analyzer()

    def params(self) -> dict:
        return {
            "type": self.type_name,
            "max_sentences": self.max_sentences,
            "max_items": self.max_items,
            "max_quote_chars": self.max_quote_chars,
            "min_score": self.min_score,
            "max_gap": self.max_gap,
            "margin": self.margin,
            "people": self.people,
            "rank_weight": self.rank_weight,
            "when_bonus": self.when_bonus,
            "select": self.select,
            "decline": self.decline_model,
            "max_list": self.max_list,
            "max_words": self.max_words,
            "max_missing": self.max_missing,
            "unsure_below": self.unsure_below,
            "sentences": self.sentences,
            "in_post_max_chars": self.in_post_max_chars,
        }

    # -- set-up: the pipeline binds its encoder and shows it the events it indexes ---------
    def bind(self, encoder, line=None) -> None:
        """``line``: a post's text as the pipeline's dense retriever reads it (its chat line,
        "Speaker: text"); its sentences' vectors come from the run of the model that encodes
        that line (``encode_in_context``), so a post costs one run, not one per sentence."""
        self.encoder = encoder
        self.line = line

    def _sentence_vectors(
        self, posts: list, parts: list[list[str]], store: bool | None = None
    ) -> list[np.ndarray]:
        """Each post's sentences' vectors. A short post's (a chat line's: up to
        ``in_post_max_chars``) are read in the post, from the run of the model that
        encodes its line (see ``bind``); a longer post's sentences are encoded on their
        own: pooled over a passage, every sentence carries the passage's topic and they
        all look alike (CAsT 2021's follow-ups, whose answers quote passages, lost 0.012
        MRR@10 when they were read in their passage: eval/RESULTS.md)."""
        out: list = [None] * len(posts)
        short = [
            i for i, p in enumerate(posts) if len(p.get("text") or "") <= self.in_post_max_chars
        ]
        if self.sentences == "in_post" and short and hasattr(self.encoder, "encode_in_context"):
            lines = [
                self.line(posts[i]) if self.line is not None else (posts[i].get("text") or "")
                for i in short
            ]
            for i, v in zip(
                short, self.encoder.encode_in_context(lines, [parts[i] for i in short], store=store)
            ):
                out[i] = v
        rest = [i for i in range(len(posts)) if out[i] is None]
        flat = [s for i in rest for s in parts[i]]
        if flat:
            vecs = encode_documents(self.encoder, flat) if store else self.encoder.encode(flat)
            at = 0
            for i in rest:
                out[i] = vecs[at : at + len(parts[i])]
                at += len(parts[i])
        for i in rest:
            if out[i] is None:
                out[i] = np.zeros((0, self.encoder.dim), np.float32)
        return out

    def prepare(self, events, encode: bool = True) -> None:
        """Learn the authors' names and (``encode``) encode the events' sentences into the
        encoder's cache, so that answering reads vectors instead of running the model."""
        rows = events.to_dicts() if hasattr(events, "to_dicts") else list(events)
        for name in filter(None, map(_speaker, rows)):
            key = name.split()[0].casefold()
            if name not in self._by_first.get(
                key, ()
            ):  # a new set, never one changed in place: readers may hold it
                self._by_first[key] = self._by_first.get(key, frozenset()) | {name}
        if encode:
            self.encode_sentences(rows)

    def encode_sentences(self, events) -> None:
        """Encode the events' sentences into the encoder's cache (nothing else changes)."""
        if self.encoder is None:
            return
        rows = events.to_dicts() if hasattr(events, "to_dicts") else list(events)
        parts = [sentences(r.get("text")) for r in rows]
        keep = [i for i, ps in enumerate(parts) if ps]
        if keep:
            self._sentence_vectors([rows[i] for i in keep], [parts[i] for i in keep], store=True)

    # -- writing --------------------------------------------------------------------------------
    def answer(self, query: str, items: list[dict], summary: bool = True) -> str:
        return self.write(query, items, summary).text

    def write(
        self,
        query: str,
        items: list[dict],
        summary: bool = True,
        authors=None,
        reading=None,
        listing: bool = False,
        found: int | None = None,
    ) -> Answer:
        """``authors``: the names of the people who post where the question is asked (the
        service passes those of the floors searched, so posts elsewhere change nothing);
        None: every author ``prepare`` has seen. ``reading``: how the pipeline read the
        question (memkit.conversation.Reading): its time window, what it carried;
        ``listing``: the question asks what happened in its window, so the answer lists
        the posts found there."""
        if getattr(reading, "kind", None) == "unresolved":
            return Answer(self.unresolved(query), declined=True)
        if not items:
            return Answer(self.fallback(query, _window_text(reading)), declined=True)
        written = (
            self.window_summary(items, _window_text(reading), found=found)
            if listing
            else self.summarize(query, items, authors)
        )
        if (
            not summary
        ):  # the account of what was found, but the turn still knows what an answer would quote,
            # so a follow-up reads the same whether the question before it asked for a summary or not
            return Answer(self.account(query, items), quotes=written.quotes)
        return written

    def unresolved(self, query: str) -> str:
        return (
            f"I'm not sure what “{query.strip()}” refers to: this is the start of our conversation. "
            "Ask me about something first, or say what you mean."
        )

    def fallback(self, query: str, window: str | None = None) -> str:
        when = f" from {window}" if window else ""
        return (
            f"I couldn't find anything{when} about “{query.strip()}” in the floors you asked about. "
            "You could try other words, a wider time range or fewer filters."
        )

    def window_summary(
        self, items: list, window: str | None, shown: int = 3, found: int | None = None
    ) -> Answer:
        """What a question about a time window gets ("What happened last May?"): how many
        posts there are (``found``: all the window holds, default the items given) and the
        most telling ones, in the order they were posted."""
        top = sorted(
            items[:shown], key=lambda i: (_timestamp(i.get("created_at")), i.get("event_id"))
        )
        lines = []
        for item in top:
            first = sentences(item.get("text"))[:1]
            quote = self.quote("", first[0], item) if first else item.get("text") or ""
            lines.append(self.attributed(quote, item, lead=None))
        n = max(found or 0, len(items))
        head = f"{_plural(n, 'post')}{f' from {window}' if window else ''}"
        more = f" (and {n - len(top)} more)" if n > len(top) else ""
        return Answer(
            f"{head}{more}. " + " ".join(lines),
            quotes=[
                {
                    "event_id": i.get("event_id"),
                    "sentence": (sentences(i.get("text")) or [None])[0],
                    "score": None,
                }
                for i in top
            ],
        )

    def account(self, query: str, items: list[dict]) -> str:
        kinds = Counter(i.get("block_type") or i.get("block_type_name") or "post" for i in items)
        parts = ", ".join(_plural(n, f"{kind} post") for kind, n in kinds.most_common())
        top = items[0]
        when = _when(top.get("created_at"))
        where = f" in “{top['block_title']}”" if top.get("block_title") else ""
        return (
            f"Found {_plural(len(items), 'item')} for “{query.strip()}” ({parts}); "
            f"the best match was posted{where}{f' on {when}' if when else ''}."
        )

    def named_people(self, query: str, items: list[dict], authors=None) -> set[str]:
        """Known authors (``authors``, else every one ``prepare`` saw) the question names,
        looked up by the question's words (so the cost does not grow with the number of
        authors)."""
        by_first = dict(self._by_first) if authors is None else {}
        for n in [*(authors or ()), *filter(None, map(_speaker, items))]:
            key = n.split()[0].casefold()
            by_first[key] = by_first.get(key, frozenset()) | {n}
        names = {n for w in set(re.findall(r"\w+", query.casefold())) for n in by_first.get(w, ())}
        return {n for n in names if re.search(rf"\b{re.escape(n)}\b", query, re.IGNORECASE)}

    def score(self, query: str, candidates: list[str], posts: list | None = None) -> np.ndarray:
        """Similarity of each sentence to the question: cosine with the encoder (each
        sentence read in its post, ``posts[i]``, where given), else the share of the
        question's terms the sentence contains."""
        if self.encoder is not None:
            q = self.encoder.encode([query])[0]
            if posts is None:
                return self.encoder.encode(candidates) @ q if candidates else np.zeros(0)
            # Both callers list a post's sentences together: one group of sentences a post.
            groups = [
                (post, [s for s, _ in run])
                for post, run in groupby(zip(candidates, posts), key=lambda c: c[1])
            ]
            vecs = self._sentence_vectors([g[0] for g in groups], [g[1] for g in groups])
            return np.concatenate([v @ q for v in vecs]) if vecs else np.zeros(0)
        terms = set(self._analyzer(query))
        return np.array(
            [len(terms & set(self._analyzer(s))) / max(len(terms), 1) for s in candidates]
        )

    def summarize(self, query: str, items: list[dict], authors=None) -> Answer:
        if self.select is None:
            return self._summarize_by_rules(query, items, authors)
        cands = self.candidates(query, items, authors)
        quotable = np.flatnonzero(cands.quotable) if cands is not None else []
        if not len(quotable):
            return Answer(self.decline(query, cands.people if cands else set()), declined=True)
        scores = linear_score(self.select, _columns(cands.x, self.select, SENTENCE_FEATURES))
        best = max(quotable, key=lambda i: (scores[i], -cands.rank[i]))
        strength = float(cands.sims[best])
        if self.declines(cands, scores, items):
            rival = [i for i in quotable if not cands.about[i]]
            by = (
                _speaker(cands.item[max(rival, key=lambda i: scores[i])])
                if rival and cands.people
                else None
            )
            return Answer(self.decline(query, cands.people, by), declined=True, strength=strength)
        chosen, posts = [], set()
        for i in sorted(quotable, key=lambda i: (-scores[i], cands.rank[i])):
            if len(chosen) >= (self.max_list if wants_list(query) else 1):
                break
            if cands.rank[i] not in posts:  # one sentence per post
                chosen.append(i)
                posts.add(cands.rank[i])
        return self.compose(
            query,
            [(cands.sentence[i], cands.item[i], float(cands.sims[i])) for i in chosen],
            strength=strength,
        )

    def declines(self, cands: Candidates, scores: np.ndarray, items: list) -> bool:
        """Whether memory holds nothing that answers the question.

        A question about someone (it names one of the authors) is declined by the decline
        model, trained on LoCoMo's questions about what the *other* person did (speaker
        attribution is what tells them apart), or when ``max_missing`` of its terms are in
        none of the items. A question about no one has no such evidence: measured on the
        conversation suite, the model and the missing-terms guard declined answerable turns
        about as often as unanswerable ones (eval/RESULTS.md), because people ask in other
        words than they posted. So it is declined only when nothing found bears on it: none
        of its content terms (less the words that say what kind of answer it wants: "how
        much did it cost?" is answered by "£840") is in the items, and the first item's
        probability of answering it is below ``unsure_below``."""
        if not cands.people:
            return (
                self.unsure_below is not None
                and self._content_missing(cands)
                and _score(items[0]) < self.unsure_below
            )
        if self.decline_model is None and self.max_missing is None:
            return False
        q = self.query_features(cands, scores)
        missing = (
            self.max_missing is not None
            and len(set(self._analyzer(cands.query))) <= QUESTION_TERMS
            and q[QUERY_FEATURES.index("miss")] >= self.max_missing
        )
        return missing or (
            self.decline_model is not None
            and float(
                linear_score(
                    self.decline_model, _columns(q[None, :], self.decline_model, QUERY_FEATURES)
                )[0]
            )
            > self.decline_model["threshold"]
        )

    def _content_missing(self, c: Candidates) -> bool:
        """None of the question's content terms (not names, not answer-type words) is in
        its items; an irregular verb counts in any of its forms ("drive" finds "drove")."""
        name_terms = {t for n in c.known for t in self._analyzer(n)}
        terms = set(self._analyzer(_base_forms(c.query))) - name_terms - _ANSWER_TYPE_TERMS
        pool = {
            t
            for it in {id(i): i for i in c.item}.values()
            for t in self._analyzer(_base_forms(it.get("text") or ""))
        }
        return bool(terms) and not terms & pool

    def compose(
        self, query: str, quotes: list[tuple[str, dict, float]], strength=None, rival=None
    ) -> Answer:
        """The answer text from (sentence, item, similarity) quotes, best first; a
        when-question leads with the date the first quote gives."""
        lead = self.date_of(quotes[0][0], quotes[0][1], query) if _WHEN.search(query) else None
        lines = [
            self.attributed(self.quote(query, sentence, item), item, lead=lead if n == 0 else None)
            for n, (sentence, item, _) in enumerate(quotes)
        ]
        return Answer(
            " ".join(lines),
            quotes=[
                {"event_id": item.get("event_id"), "sentence": sentence, "score": sim}
                for sentence, item, sim in quotes
            ],
            date=lead[0] if lead else None,
            strength=strength,
            rival=rival,
        )

    def quote(self, query: str, sentence: str, item) -> str:
        """What is quoted of a post: the chosen sentence and the sentences around it, while
        they fit in ``max_words`` and are not questions (a chat line is usually quoted whole:
        "Yeah she's fine. They've taken the car to Hendry's" answers where the car went only
        with its second sentence), else the sentence cut to the clause that answers (``span``)."""
        parts = sentences(item.get("text"))
        if (
            self.max_words is None
            or sentence not in parts
            or len(sentence.split()) > self.max_words
        ):
            return self.span(query, sentence)
        lo = hi = parts.index(sentence)
        size = len(sentence.split())
        while True:
            grown = False
            for a, b in ((lo, hi + 1), (lo - 1, hi)):
                if 0 <= a and b < len(parts):
                    added = parts[b if b > hi else a]
                    if size + len(added.split()) <= self.max_words and not added.rstrip().endswith(
                        "?"
                    ):
                        lo, hi, size, grown = a, b, size + len(added.split()), True
                        break
            if not grown:
                break
        return " ".join(parts[lo : hi + 1])

    def span(self, query: str, sentence: str) -> str:
        """The sentence, or past ``max_words`` the clause holding most of the question's
        terms (what it asks for breaks ties) with its neighbours up to ``max_words``,
        marked with "…" where cut."""
        words = sentence.split()
        if self.max_words is None or len(words) <= self.max_words:
            return sentence
        clauses = [
            c
            for c in re.split(
                r"(?<=[,;:])\s+|\s+(?=[–—-]\s)|\s+(?=(?:and|but|because|so|which|while) )", sentence
            )
            if c.strip()
        ]
        terms = set(self._analyzer(query))
        holds = _HOLDS.get(question_type(query))

        def weight(c: str) -> tuple:
            return len(terms & set(self._analyzer(c))), bool(
                holds and holds.search(c)
            ) or _says_when(c)

        best = max(range(len(clauses)), key=lambda i: (weight(clauses[i]), -i))
        lo = hi = best
        count = lambda a, b: sum(len(c.split()) for c in clauses[a : b + 1])  # noqa: E731
        while True:
            grown = False
            for a, b in ((lo, hi + 1), (lo - 1, hi)):
                if 0 <= a and b < len(clauses) and count(a, b) <= self.max_words:
                    lo, hi, grown = a, b, True
                    break
            if not grown:
                break
        text = " ".join(clauses[lo : hi + 1])
        cut = len(text.split()) > self.max_words
        if cut:
            text = " ".join(text.split()[: self.max_words])
        return ("…" if lo > 0 else "") + text + ("…" if cut or hi < len(clauses) - 1 else "")

    # -- what the models read -----------------------------------------------------------------
    def candidates(self, query: str, items: list[dict], authors=None) -> Candidates | None:
        """Every sentence of the top ``max_items`` items with its SENTENCE_FEATURES."""
        top = items[: self.max_items]
        rows = [
            (rank, item, s) for rank, item in enumerate(top) for s in sentences(item.get("text"))
        ]
        if not rows:
            return None
        rank, item, sent = (list(c) for c in zip(*rows))
        people = self.named_people(query, items, authors) if self.people else set()
        known = self._known_names(items, authors)
        name_terms = {t for n in known for t in self._analyzer(n)}
        # Terms in their base forms: "when did they drive there?" shares "drive" with "we drove".
        q_terms = set(self._analyzer(_base_forms(query))) - name_terms
        s_terms = [set(self._analyzer(_base_forms(s))) for s in sent]
        p_terms = {r: set(self._analyzer(_base_forms(top[r].get("text") or ""))) for r in set(rank)}
        sims = np.asarray(self.score(query, sent, item), dtype=float)
        qtype = question_type(query)
        n = len(rows)

        def share(terms: set) -> float:
            return len(q_terms & terms) / max(len(q_terms), 1)

        quotable = np.array(
            [
                not s.rstrip().endswith("?") and len(t - name_terms - _GREETING) >= 2
                for s, t in zip(sent, s_terms)
            ]
        )
        own = np.array([not people or _speaker(it) in people for it in item])
        names_them = [
            bool(people)
            and any(re.search(rf"\b{re.escape(p)}\b", it.get("text") or "", re.I) for p in people)
            for it in item
        ]
        about = np.array([self._about(s, it, people) for s, it in zip(sent, item)])
        x = np.zeros((n, len(SENTENCE_FEATURES)))
        cols = {name: i for i, name in enumerate(SENTENCE_FEATURES)}
        x[:, cols["cos"]] = sims
        x[:, cols["ov"]] = [share(t) for t in s_terms]
        x[:, cols["ovp"]] = [share(p_terms[r]) for r in rank]
        for name in ("cos", "ov", "ovp"):  # against the question's best candidate
            best = x[quotable, cols[name]].max() if quotable.any() else 0.0
            x[:, cols[f"{name}_rel"]] = x[:, cols[name]] - best
        x[:, cols["rr"]] = [1 / (r + 1) for r in rank]
        x[:, cols["r1"]] = [r == 0 for r in rank]
        x[:, cols["by_other"]] = ~own
        x[:, cols["other_mentions"]] = [(not o) and m for o, m in zip(own, names_them)]
        x[:, cols["lognw"]] = [math.log1p(len(s.split())) for s in sent]
        x[:, cols["image"]] = ["[image:" in s for s in sent]
        x[:, cols["when_date"]] = [qtype == "when" and _says_when(s) for s in sent]
        for name, kind in (("t_count", "count"), ("t_dur", "duration"), ("t_where", "where")):
            x[:, cols[name]] = [qtype == kind and bool(_HOLDS[kind].search(s)) for s in sent]
        x[:, cols["t_who"]] = [qtype == "who" and self._names_someone(s, name_terms) for s in sent]
        return Candidates(rank, item, sent, sims, quotable, own, about, x, people, query, known)

    def query_features(self, c: Candidates, scores: np.ndarray) -> np.ndarray:
        """QUERY_FEATURES of one question from its candidates and their selection scores."""
        ok = c.quotable
        cols = {name: i for i, name in enumerate(SENTENCE_FEATURES)}

        def best(values, mask, missing):
            return float(values[mask].max()) if mask.any() else missing

        def first_of(mask, values):  # the value of the best-scored candidate in mask
            idx = np.flatnonzero(mask)
            return float(values[idx[np.argmax(scores[idx])]]) if len(idx) else 0.0

        own, oth, ab, nab = ok & c.own, ok & ~c.own, ok & c.about, ok & ~c.about
        asks = np.array([s.rstrip().endswith("?") for s in c.sentence])
        fp = np.array([bool(_FIRST_PERSON.search(s)) for s in c.sentence], dtype=float)
        sp = np.array([bool(_SECOND_PERSON.search(s)) for s in c.sentence], dtype=float)
        rank = np.array(c.rank)
        # A side with no candidate counts as clearly weaker than the other: scores 3 below,
        # cosine 0.3 below, term shares 1 below.
        s1 = best(scores, ok, 0.0)
        f = {
            "s1": s1,
            "s_own": best(scores, own, s1 - 3),
            "s_ab": best(scores, ab, s1 - 3),
            "named": float(bool(c.people)),
            "fp_oth": first_of(oth, fp),
            "sp_oth": first_of(oth, sp),
            "r_own": float(rank[own].min() + 1) if own.any() else self.max_items + 1.0,
            "top_own": float(c.own[np.flatnonzero(ok)[np.argmax(scores[ok])]]) if ok.any() else 0.0,
            "n_own5": float((own & (rank < 5)).sum()),
            "ask_own": best(c.sims, asks & c.own, 0.0),
            "ask_oth": best(c.sims, asks & ~c.own, 0.0),
        }
        f["s_oth"], f["s_nab"] = best(scores, oth, f["s_own"] - 3), best(scores, nab, f["s_ab"] - 3)
        for short, name, weaker in (("c", "cos", 0.3), ("o", "ov", 1.0), ("op", "ovp", 1.0)):
            f[f"{short}_own"] = best(c.x[:, cols[name]], own, 0.0)
            f[f"{short}_oth"] = best(c.x[:, cols[name]], oth, f[f"{short}_own"] - weaker)
        f["c_ab"] = best(c.sims, ab, 0.0)
        f["c_nab"] = best(c.sims, nab, f["c_ab"] - 0.3)
        f["gap"], f["cgap"] = f["s_oth"] - f["s_own"], f["c_oth"] - f["c_own"]
        f["ogap"], f["opgap"] = f["o_oth"] - f["o_own"], f["op_oth"] - f["op_own"]
        f["abgap"], f["cabgap"] = f["s_nab"] - f["s_ab"], f["c_nab"] - f["c_ab"]
        f["ask_gap"] = f["ask_own"] - f["c_own"]
        f["miss"], f["capmiss"] = self._missing(c)
        return np.array([f[name] for name in QUERY_FEATURES])

    def _missing(self, c: Candidates) -> tuple[float, float]:
        """The share of the question's terms in none of its items, and whether a proper
        name it uses (a capitalised word not first, not a known author) is in none."""
        names = c.known
        name_terms = {t for n in names for t in self._analyzer(n)}
        pool = {
            t
            for it in {id(i): i for i in c.item}.values()
            for t in self._analyzer(it.get("text") or "")
        }
        terms = set(self._analyzer(c.query)) - name_terms
        caps = [w for w in re.findall(r"(?<!^)\b[A-Z][a-z]+", c.query) if w not in names]
        cap_missing = any(t not in pool for w in caps for t in self._analyzer(w)[:1])
        return len(terms - pool) / max(len(terms), 1), float(cap_missing)

    def _known_names(self, items: list[dict], authors=None) -> set[str]:
        names = (
            {n for group in self._by_first.values() for n in group}
            if authors is None
            else set(authors)
        )
        return names | set(filter(None, map(_speaker, items)))

    def _names_someone(self, sentence: str, name_terms: set[str]) -> bool:
        """A capitalised word past the first that is not I or an author's name (who-questions)."""
        words = re.findall(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+", sentence)
        return any(
            w != "I" and self._analyzer(w)[:1] and self._analyzer(w)[0] not in name_terms
            for w in words
        )

    @staticmethod
    def _about(sentence: str, item: dict, people: set[str]) -> bool:
        """Whether the sentence speaks of one of ``people``: its author's own "I" (or no
        second person), the addressee's "you" when the post addresses them by name, or
        their name in the third person. Everyone counts when nobody is named."""
        if not people:
            return True
        first, second = bool(_FIRST_PERSON.search(sentence)), bool(_SECOND_PERSON.search(sentence))
        for p in people:
            if _speaker(item) == p:
                if first or not second:
                    return True
                continue
            vocative = re.compile(_VOCATIVE.format(name=re.escape(p)), re.I)
            addressed = bool(vocative.search(item.get("text") or ""))
            if (second and addressed and not first) or re.search(
                rf"\b{re.escape(p)}\b", vocative.sub(" ", sentence), re.I
            ):
                return True
        return False

    # -- the first version: rules, no models ----------------------------------------------------
    def _summarize_by_rules(self, query: str, items: list[dict], authors=None) -> Answer:
        top = items[: self.max_items]
        cands = [
            (rank, j, s, item)
            for rank, item in enumerate(top)
            for j, s in enumerate(sentences(item.get("text")))
        ]
        if not cands:
            return Answer(self.decline(query, set()), declined=True)
        sims = self.score(
            query, [c[2] for c in cands], [c[3] for c in cands]
        )  # the evidence strength the decline is decided on
        scores = sims - self.rank_weight * np.array([c[0] for c in cands])  # what is quoted first
        if _WHEN.search(query) and self.when_bonus:
            scores = scores + self.when_bonus * np.array([_says_when(c[2]) for c in cands])
        people = self.named_people(query, items, authors) if self.people else set()
        allowed = [
            i
            for i, c in enumerate(cands)
            if not people
            or _speaker(c[3]) in people
            or any(re.search(rf"\b{re.escape(p)}\b", c[2], re.IGNORECASE) for p in people)
        ]
        best = max(allowed, key=lambda i: (scores[i], -cands[i][0]), default=None)
        strongest = max((float(sims[i]) for i in allowed), default=None)
        ok = set(allowed)
        others = [i for i in range(len(cands)) if i not in ok]
        closest = max(others, key=lambda i: sims[i], default=None)
        rival = float(sims[closest]) if closest is not None else None
        someone_else = (
            self.max_gap is not None
            and rival is not None
            and (strongest is None or rival - strongest > self.max_gap)
        )
        if (
            best is None
            or someone_else
            or (self.min_score is not None and strongest < self.min_score)
        ):
            by = _speaker(cands[closest][3]) if someone_else else None
            return Answer(
                self.decline(query, people, by), declined=True, strength=strongest, rival=rival
            )
        chosen, seen_items = [best], {cands[best][0]}
        for i in sorted(allowed, key=lambda i: -scores[i]):
            if len(chosen) >= self.max_sentences or scores[i] < scores[best] - self.margin:
                break
            if cands[i][0] not in seen_items:  # one sentence per post: say more, not the same twice
                chosen.append(i)
                seen_items.add(cands[i][0])
        return self.compose(
            query,
            [(cands[i][2], cands[i][3], float(sims[i])) for i in chosen],
            strength=strongest,
            rival=rival,
        )

    def date_of(self, sentence: str, item: dict, query: str = "") -> tuple[Span, str] | None:
        """When a quoted sentence says something happened: a relative time in it (or in the
        rest of its post) resolved against the post's time, a date written in it, or else
        the post's own day. Returns (span, how it was found). Of several times, the one
        whose neighbouring words the question shares most ("when does he start?" and "Last
        week at the Leeds office, start the London job on the 30th": the 30th)."""
        posted = _as_datetime(item.get("created_at"))
        if posted is not None:
            terms = set(self._analyzer(query))
            for text in (sentence, item.get("text") or ""):
                found = resolve(text, posted)
                if found:
                    best = max(
                        found,
                        key=lambda m: (
                            len(terms & set(self._analyzer(_around(text, m.start)))),
                            -m.start,
                        ),
                    )
                    return best.span, f"“{best.phrase}”"
        written = read_span(sentence, ref=posted)
        if written is not None:
            return written, "as written"
        if posted is not None:
            return Span(posted.date(), posted.date(), day_text(posted)), "the day it was posted"
        return None

    def attributed(self, sentence: str, item: dict, lead: tuple[Span, str] | None) -> str:
        quote = (
            sentence
            if len(sentence) <= self.max_quote_chars
            else sentence[: self.max_quote_chars - 1] + "…"
        )
        who = _speaker(item) or "someone"
        when = _when(item.get("created_at"))
        where = f" in “{item['block_title']}”" if item.get("block_title") else ""
        posted = _as_datetime(item.get("created_at"))
        notes = [f"{m.phrase} = {m.span.text}" for m in resolve(sentence, posted)] if posted else []
        note = f" ({'; '.join(notes)})" if notes and lead is None else ""
        if lead is not None:
            span, how = lead
            said = (
                f"{how} in what {who} wrote on {when}{where}"
                if how.startswith("“")
                else f"{who} wrote on {when}{where}"
                if when
                else f"{who} wrote{where}"
            )
            return f"{_lead(span)} — {said}: “{quote}”" + ("" if quote[-1:] in ".!?…" else ".")
        head = (
            f"On {when} {who} wrote{where}" if when else f"{who[:1].upper()}{who[1:]} wrote{where}"
        )
        end = "" if quote[-1:] in ".!?…" and not note else "."
        return f"{head}: “{quote}”{note}{end}"

    def decline(self, query: str, people: set[str], closest_by: str | None = None) -> str:
        if people:
            names = " or ".join(sorted(people))
            if closest_by:
                return f"{DECLINE}: the closest post is {closest_by}'s, and nothing {names} posted says so."
            return f"{DECLINE}: nothing {names} posted in these floors says so."
        return f"{DECLINE}: nothing in these floors answers it closely enough."


def _window_text(reading) -> str | None:
    """How the answer names a question's time window ("May 2026"), where it has one."""
    days = getattr(reading, "days", None)
    if days is None:
        return None
    window = getattr(reading, "window", None)
    if window is not None:
        return window.span.text
    start, end = days
    return day_text(start) if start == end else f"{day_text(start)} to {day_text(end)}"


@lru_cache(
    maxsize=100_000
)  # a pure function of the sentence, asked for every candidate of every question
def _says_when(sentence: str) -> bool:
    return bool(resolve(sentence, datetime(2000, 1, 1))) or read_span(sentence) is not None


def _columns(x: np.ndarray, model: dict, names: list[str]) -> np.ndarray:
    """The columns of ``x`` (one per name in ``names``) that the model reads, in its order."""
    return x[:, [names.index(f) for f in model["features"]]]


def _score(item) -> float:
    """An item's score where it is a probability (0 to 1), else 0."""
    value = item.get("score")
    return float(value) if isinstance(value, (int, float)) and 0.0 <= value <= 1.0 else 0.0


def _speaker(item: dict) -> str | None:
    name = str(
        item.get("speaker") or item.get("user_name") or ""
    ).strip()  # a blank name is no name
    return name or None


class LLMAnswerer:
    """An OpenAI-compatible chat-completions endpoint writes the answer from the items;
    any failure falls back to the extractive writer (logged, never raised)."""

    type_name = "llm"

    def __init__(
        self,
        url: str,
        model: str,
        api_key_env: str | None = None,
        timeout: float = 10.0,
        max_items: int = 8,
        temperature: float = 0.0,
        fallback: dict | None = None,
    ):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationError(
                "answer.url", f"expected an http(s) URL of a chat-completions endpoint, got {url!r}"
            )
        self.url, self.model, self.api_key_env = url, model, api_key_env
        self.timeout, self.max_items, self.temperature = float(timeout), max_items, temperature
        self.extractive = ExtractiveAnswerer(**(fallback or {}))

    def params(self) -> dict:
        return {
            "type": self.type_name,
            "url": self.url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "max_items": self.max_items,
            "fallback": self.extractive.params(),
        }

    def bind(self, encoder, line=None) -> None:
        self.extractive.bind(encoder, line)

    def prepare(self, events, encode: bool = True) -> None:
        self.extractive.prepare(events, encode)

    def encode_sentences(self, events) -> None:
        self.extractive.encode_sentences(events)

    def answer(self, query: str, items: list[dict], summary: bool = True) -> str:
        return self.write(query, items, summary).text

    def messages(self, query: str, items: list[dict]) -> list[dict]:
        lines = []
        for n, item in enumerate(items[: self.max_items], 1):
            meta = ", ".join(
                p
                for p in (
                    _speaker(item),
                    _when(item.get("created_at")),
                    f"in {item['block_title']}" if item.get("block_title") else None,
                )
                if p
            )
            lines.append(f"[{n}] ({meta}) {item.get('text') or ''}")
        system = (
            "You answer questions about a person's memory using only the numbered posts given. "
            'Say who wrote what and when; resolve relative times ("yesterday") against the post\'s date. '
            'If the posts do not answer the question, say: "I have no information available on that." '
            "Otherwise answer in one or two short sentences and cite the posts you use by number, as [1]."
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": "Posts:\n" + "\n".join(lines) + f"\n\nQuestion: {query}"},
        ]

    def write(
        self,
        query: str,
        items: list[dict],
        summary: bool = True,
        authors=None,
        reading=None,
        listing: bool = False,
        found: int | None = None,
    ) -> Answer:
        if not items or not summary or listing or getattr(reading, "kind", None) == "unresolved":
            return self.extractive.write(query, items, summary, authors, reading, listing, found)
        body = json.dumps(
            {
                "model": self.model,
                "messages": self.messages(query, items),
                "temperature": self.temperature,
            }
        ).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                reply = json.loads(resp.read().decode("utf-8"))
            text = reply["choices"][0]["message"]["content"].strip()
            if not text:
                raise ValueError("empty answer")
        except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning(
                "LLM answer writer failed (%s: %s); using the extractive writer",
                type(exc).__name__,
                exc,
            )
            return self.extractive.write(query, items, summary, authors, reading, listing, found)
        declined = DECLINE.lower() in text.lower()
        shown = items[: self.max_items]
        cited = dict.fromkeys(
            int(n) for n in re.findall(r"\[(\d+)\]", text) if 1 <= int(n) <= len(shown)
        )
        quotes = (
            []
            if declined
            else [
                {"event_id": shown[n - 1].get("event_id"), "sentence": None, "score": None}
                for n in cited
            ]
        )
        return Answer(text, declined=declined, quotes=quotes, writer="llm")


ANSWERERS = {"extractive": ExtractiveAnswerer, "llm": LLMAnswerer}


def build_answerer(spec: dict | None):
    spec = dict(spec or {"type": "extractive"})
    kind = spec.pop("type", "extractive")
    if kind not in ANSWERERS:
        raise ValidationError("answer.type", f"expected one of {sorted(ANSWERERS)}, got {kind!r}")
    try:
        return ANSWERERS[kind](**spec)
    except TypeError as exc:
        raise ValidationError("answer", str(exc)) from None
