"""The extractive writer: quotes what was posted, attributed and dated; runs offline.

It holds the settings, the encoder the pipeline binds and the authors' names it has seen;
what the models read is in memkit.answer.features, how the sentence is chosen and the
decline decided in memkit.answer.selection, the text in memkit.answer.compose, and the
writer without models in memkit.answer.rules.
"""

from __future__ import annotations

import functools
import re
from itertools import groupby

import numpy as np

from memkit.answer import features, selection
from memkit.answer.base import Answer, AnswerItem, Asked, Evidence, speaker
from memkit.answer.compose import (
    Composer,
    account_text,
    decline_text,
    fallback_text,
    lacking_text,
    unresolved_text,
    window_text,
)
from memkit.answer.features import (
    QUERY_FEATURES,
    SENTENCE_FEATURES,
    WITHIN_FEATURES,
    Candidates,
    readable_model,
)
from memkit.answer.render import labelled, shown_name
from memkit.answer.rules import summarize_by_rules
from memkit.config.model import ExtractiveSpec, FromSpec
from memkit.core.items import as_datetime
from memkit.core.linear import check_linear
from memkit.core.text import Analyzer, sentences
from memkit.language.en.answers import DAY_OR_CLOCK as _DAY_OR_CLOCK
from memkit.language.en.answers import KEEPS_DAYS as _RECURRING
from memkit.language.en.answers import MEASURE as _MEASURE
from memkit.language.en.answers import SUBJECT_I as _SUBJECT_I
from memkit.language.timeref import CALENDAR
from memkit.models.encoders import encode_documents
from memkit.question import Question
from memkit.question.kinds import (
    ANSWER_TYPE_TERMS,
    PLACE_OR_THING_BEFORE,
    base_forms,
    says_when,
)


class ExtractiveAnswerer(FromSpec, Composer):
    """Quotes the sentence that answers the question, attributed and dated; no network."""

    # Its settings are ExtractiveSpec's fields (memkit/config/model.py), each with what it does.
    type_name, spec, section = "extractive", ExtractiveSpec, "answer"

    def _built(self) -> None:
        # The linear models as plain dicts whose features this writer computes.
        if self.select is not None:
            self.select = check_linear(
                readable_model(self.select.model_dump()), SENTENCE_FEATURES, "answer.select"
            )
        if self.decline is not None:
            self.decline = check_linear(
                readable_model(self.decline.model_dump()),
                QUERY_FEATURES,
                "answer.decline",
                extra=("threshold",),
            )
        if self.within is not None:
            self.within = check_linear(self.within.model_dump(), WITHIN_FEATURES, "answer.within")
        self.encoder = None
        self.line = None
        # authors' names by their first word, lower case
        self._by_first: dict[str, frozenset[str]] = {}
        self._analyzer = Analyzer(irregular=True)

    # -- set-up: the pipeline binds its encoder and shows it the events it indexes ---------
    def bind(self, encoder, line=None) -> None:
        """``line``: a post's text as the pipeline's dense retriever reads it (its chat line,
        "Speaker: text"); its sentences' vectors come from the run of the model that encodes
        that line (``encode_in_context``), so a post costs one run, not one per sentence."""
        self.encoder = encoder
        self.line = line

    def _sentence_vectors(
        self, posts: list[AnswerItem], parts: list[list[str]], store: bool | None = None
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
        for name in filter(None, map(speaker, rows)):
            key = name.split()[0].casefold()
            # a new set, never one changed in place: readers may hold it
            if name not in self._by_first.get(key, ()):
                self._by_first[key] = self._by_first.get(key, frozenset()) | {name}
        if encode:
            self.encode_sentences(rows)

    def encode_sentences(self, events) -> None:
        """Encode the events' sentences into the encoder's cache (nothing else changes)."""
        if self.encoder is None:
            return
        rows = events.to_dicts() if hasattr(events, "to_dicts") else list(events)
        # each post once: an eval's questions show the same posts again and again
        rows = list({r.get("event_id") or id(r): r for r in rows}.values())
        parts = [sentences(r.get("text")) for r in rows]
        keep = [i for i, ps in enumerate(parts) if ps]
        if keep:
            self._sentence_vectors([rows[i] for i in keep], [parts[i] for i in keep], store=True)

    # -- writing --------------------------------------------------------------------------------
    def write(self, question: Asked, evidence: Evidence) -> Answer:
        """A listing (``question.listing``) lists the posts found in its window; any other
        question is answered by the sentence that answers it (``summarize``), or declined.
        Without ``question.summary`` the text is a one-line account of what was found."""
        query, reading, authors = question.text, question.reading, question.authors
        if getattr(reading, "kind", None) == "unresolved":
            return Answer(self.unresolved(query), declined=True)
        if not evidence.items:
            return Answer(self.fallback(query, window_text(reading)), declined=True)
        # two authors of one name (or of look-alike names) are named apart in the text
        items = labelled(evidence.items, self._known_authors() if authors is None else authors)
        written = (
            self.window_summary(
                items,
                window_text(reading),
                found=evidence.found,
                ranked=evidence.ranked,
                # the window's own words chose the posts ("last May": not "the last bit")
                query=" ".join(getattr(reading, "own_words", None) or [query]),
                ahead=_posted_before(items, getattr(reading, "days", None)),
            )
            if question.listing
            else self.summarize(
                query,
                items,
                authors,
                decided=evidence.decided,
                settled=evidence.settled,
                question=question.question,
            )
        )
        if not question.summary:
            # the account of what was found, but the turn still knows what an answer would
            # quote, so a follow-up reads the same whether the question before it asked for
            # a summary or not (and the post a decline would have named: memkit.pipeline)
            return Answer(
                self.account(query, items), quotes=written.quotes, closest=written.closest
            )
        return written

    def unresolved(self, query: str) -> str:
        return unresolved_text(query)

    def fallback(self, query: str, window: str | None = None) -> str:
        return fallback_text(query, window)

    def account(self, query: str, items: list[AnswerItem]) -> str:
        return account_text(query, items)

    def decline_message(self, query: str, people: set[str], closest_by: str | None = None) -> str:
        return decline_text(people, closest_by)

    def named_people(self, query: str, items: list[AnswerItem], authors=None) -> set[str]:
        """Known authors (``authors``, else every one ``prepare`` saw) the question names,
        looked up by the question's words (so the cost does not grow with the number of
        authors)."""
        by_first = dict(self._by_first) if authors is None else {}
        for n in [*(authors or ()), *filter(None, map(speaker, items))]:
            key = n.split()[0].casefold()
            by_first[key] = by_first.get(key, frozenset()) | {n}
        names = {n for w in set(re.findall(r"\w+", query.casefold())) for n in by_first.get(w, ())}
        return {n for n in names if re.search(rf"\b{re.escape(n)}\b", query, re.IGNORECASE)}

    def score(
        self, query: str, candidates: list[str], posts: list[AnswerItem] | None = None
    ) -> np.ndarray:
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

    def summarize(
        self,
        query: str,
        items: list[AnswerItem],
        authors=None,
        decided: bool = False,
        settled: bool = False,
        question: Question | None = None,
    ) -> Answer:
        """The answer from the sentences of the top items (with the models, else by the
        first writer's rules: memkit.answer.rules). ``settled``: only the first item's
        sentences are quoted. ``question``: the pipeline's reading of ``query`` (None: read
        here)."""
        if self.select is None:
            return summarize_by_rules(self, query, items, authors)
        question = question or Question.of(query)
        cands = self.candidates(query, items, authors, question)
        quotable = np.flatnonzero(cands.quotable) if cands is not None else []
        if settled and len(quotable) and any(cands.rank[i] == 0 for i in quotable):
            quotable = np.array([i for i in quotable if cands.rank[i] == 0])
        if not len(quotable):
            return Answer(
                self.decline_message(query, cands.people if cands else set()), declined=True
            )
        scores = selection.selection_scores(self.select, cands)
        best = selection.best_candidate(cands, quotable, scores)
        strength = float(cands.sims[best])
        if not (decided or settled) and self.declines(cands, scores, items):
            # the closest post is someone else's only where it ranks above all of theirs:
            # "the closest post is Diego's" for a question about Ben's gig, from a post
            # ranked below five of Ben's, named a post that was not close
            first_theirs = min((cands.rank[i] for i in quotable if cands.about[i]), default=None)
            rival = [
                i
                for i in quotable
                if not cands.about[i] and (first_theirs is None or cands.rank[i] < first_theirs)
            ]
            near = (
                cands.item[max(rival, key=lambda i: scores[i])] if rival and cands.people else None
            )
            by = shown_name(near) if near is not None else None
            return Answer(
                self.decline_message(query, cands.people, by),
                declined=True,
                strength=strength,
                closest=near.get("event_id") if by else None,
            )
        chosen = selection.chosen(cands, quotable, scores, query, self.max_list)
        if self.within is not None:
            chosen = selection.within_post(self.within, cands, quotable, chosen)
        # the one sentence to quote, if it lacks the kind of answer asked: a stand-in
        alone = len(chosen) == 1 and not (decided or settled)
        holds = self._holds_instead(query, cands, chosen[0]) if alone else None
        other = (
            _instead(cands, quotable, scores, chosen[0], self._analyzer, *holds) if holds else None
        )
        chosen = [other] if other is not None else chosen
        written = self.compose(
            query,
            [(cands.sentence[i], cands.item[i], float(cands.sims[i])) for i in chosen],
            strength=strength,
            question=question,
        )
        lacking = None if decided else question.lacks(" ".join(q["shown"] for q in written.quotes))
        if lacking:  # "What is the name of Nina's cat?" and "Thinking about getting a cat"
            other = _holding_what_is_asked(cands, quotable, scores, chosen[0], self._analyzer)
            if other is None and alone:  # "how heavy was his pumpkin?": "It weighed 62 kilos"
                other = _instead(
                    cands, quotable, scores, chosen[0], self._analyzer,
                    lambda s: question.lacks(s) is None,
                    context=False,
                )  # fmt: skip
            if other is not None:
                return self.compose(
                    query,
                    [(cands.sentence[other], cands.item[other], float(cands.sims[other]))],
                    strength=strength,
                    question=question,
                )
            near = cands.item[chosen[0]]
            return Answer(
                lacking_text(shown_name(near) or "someone", lacking),
                declined=True,
                strength=strength,
                closest=near.get("event_id"),
            )
        return written

    def _holds_instead(self, query: str, cands: Candidates, best: int):
        """What another sentence must hold to be quoted instead of the best one (``_instead``),
        and whether the sentence before it may hold the question's words: days kept for a
        habit asked, a date for a when-question whose best sentence says none, a measure for
        the length of a thing (facts a post may state over two sentences: "Thesis
        submitted! 212 pages on coral bleaching"); a name for a who-question whose best
        sentence names no one and does not say "I" or "we" (in the sentence itself); else
        None."""
        sentence = cands.sentence[best]
        asks_for = cands.question.asks_for
        if "habit" in asks_for and not _RECURRING.search(sentence):
            return _RECURRING.search, True  # "When do they rehearse?": "on Wednesday evenings"
        if "when" in asks_for:
            return None if _dated(sentence) else (says_when, True)
        if "length" in asks_for and not _MEASURE.search(sentence):
            return _MEASURE.search, True  # "How long is the thesis?": "212 pages"
        if cands.question.kind == "who" and not _SUBJECT_I.search(sentence):
            known = {w.casefold() for n in cands.known for w in n.split()}
            if not _names_a_person(sentence, known):
                return (lambda s: _names_a_person(s, known)), False
        return None

    def declines(self, cands: Candidates, scores: np.ndarray, items: list[AnswerItem]) -> bool:
        """Whether memory holds nothing that answers the question (selection.declines)."""
        return selection.declines(
            cands,
            scores,
            items,
            decline_model=self.decline,
            max_missing=self.max_missing,
            unsure_below=self.unsure_below,
            max_items=self.max_items,
            analyzer=self._analyzer,
        )

    # -- what the models read (memkit.answer.features) -------------------------------------
    def candidates(
        self, query: str, items: list[AnswerItem], authors=None, question: Question | None = None
    ) -> Candidates | None:
        """Every sentence of the top ``max_items`` items with its SENTENCE_FEATURES
        (``question``: the reading of ``query``; None: read here)."""
        top = items[: self.max_items]
        rows = [
            (rank, item, s) for rank, item in enumerate(top) for s in sentences(item.get("text"))
        ]
        if not rows:
            return None
        people = self.named_people(query, items, authors) if self.people else set()
        known = self._known_names(items, authors)
        sims = np.asarray(
            self.score(query, [r[2] for r in rows], [r[1] for r in rows]), dtype=float
        )
        cands = features.sentence_features(
            query, rows, sims, people, known, self._analyzer, question
        )
        # the floors' authors where the service names them, else those of the items read
        several = len(set(authors) if authors is not None else set(map(speaker, top))) >= 3
        if people and several and selection.told_by_someone_else(cands):
            # about them, told by someone else: read as a question about no one (the models'
            # preference for the person's own lines was learned from two people's chats)
            cands = features.sentence_features(
                query, rows, sims, set(), known, self._analyzer, question
            )
        return cands

    def query_features(self, c: Candidates, scores: np.ndarray) -> np.ndarray:
        """QUERY_FEATURES of one question from its candidates and their selection scores."""
        return features.query_features(c, scores, self.max_items, self._analyzer)

    def _known_authors(self) -> list[str]:
        """Every author's name ``prepare`` has seen."""
        return [n for group in self._by_first.values() for n in group]

    def _known_names(self, items: list[AnswerItem], authors=None) -> set[str]:
        names = (
            {n for group in self._by_first.values() for n in group}
            if authors is None
            else set(authors)
        )
        return names | set(filter(None, map(speaker, items)))


def _holding_what_is_asked(
    cands: Candidates, quotable, scores: np.ndarray, best: int, analyzer: Analyzer
) -> int | None:
    """Of the sentences read, the likeliest that holds what the best one lacks, names every
    name the question does that is not an author's and holds every other word it asks with
    ("How much does Ms Sato charge?": "Ms Sato moved our lesson to Thursdays" is the best,
    "A weekly lesson with Ms Sato on Zoom, 35 pounds an hour" holds the amount; "what does a
    bag of the Gristwood flour cost?" is not answered by "a new croissant, made with
    Gristwood flour ... at £2.80 each"); None when the question names no one else or no
    sentence holds it all."""
    names = [
        w
        for w in re.findall(r"(?<!^)\b[A-Z][a-z]+", cands.query)
        if not any(w in n.split() for n in cands.known)
    ]
    if not names:
        return None
    asked = set(analyzer(base_forms(cands.query))) - ANSWER_TYPE_TERMS - _money_terms(analyzer)
    held = [
        i
        for i in quotable
        if i != best
        and all(re.search(rf"\b{w}\b", cands.sentence[i]) for w in names)
        and asked <= set(analyzer(base_forms(cands.sentence[i])))
        and cands.question.lacks(cands.sentence[i]) is None
    ]
    return max(held, key=lambda i: scores[i]) if held else None


def _dated(sentence: str) -> bool:
    """The sentence says when in its own words: a date, a relative time, a day of the week
    or a month ("a pottery class on Tuesday evenings"), or a time of day."""
    return says_when(sentence) or bool(_DAY_OR_CLOCK.search(sentence))


def _names_a_person(sentence: str, known: set[str]) -> bool:
    """A capitalised word past the first that is not an author's name (``known``, lower
    case), a day or a month, nor a place or thing after "the" or a preposition ("for the
    Solent", "into Cowes")."""
    return any(
        m.group().casefold() not in known
        and m.group().casefold() not in CALENDAR
        and not PLACE_OR_THING_BEFORE.search(sentence, 0, m.start())
        for m in re.finditer(r"(?<!^)(?<![.!?:]\s)\b(?!I\b)[A-Z][a-z]+", sentence)
    )


def _with_the_one_before(cands: Candidates, i: int) -> str:
    """Sentence ``i`` with the sentence before it in its post ("Thesis submitted! 212 pages
    on coral bleaching")."""
    same = i > 0 and cands.item[i - 1] is cands.item[i]
    return f"{cands.sentence[i - 1]} {cands.sentence[i]}" if same else cands.sentence[i]


def _instead(
    cands: Candidates,
    quotable,
    scores: np.ndarray,
    best: int,
    analyzer: Analyzer,
    holds,
    context: bool = True,
) -> int | None:
    """The likeliest sentence other than ``best``, by the same author, for which
    ``holds(sentence)`` and that holds (with the sentence before it, with ``context``) every
    word the question asks with but the authors' names (``ExtractiveAnswerer._holds_instead`` says
    when): "When is Ravi's exam?" was answered by "Mock exam score 112 out of 180" with the
    day of its post, where his blog says "The exam is on 6 December in Bloomsbury"; "Who
    was the skipper?" by "Same boat, same skipper.", where "Skipper Gareth let me helm into
    Cowes"; "How long is the thesis?" by its printing's cost, where "Thesis submitted! 212
    pages on coral bleaching"."""
    names = {t for n in cands.known for t in analyzer(n)}
    asked = set(analyzer(base_forms(cands.query))) - ANSWER_TYPE_TERMS - names
    if not asked:
        return None
    held = [
        i
        for i in quotable
        if i != best
        and speaker(cands.item[i]) == speaker(cands.item[best])
        and holds(cands.sentence[i])
        and asked
        <= set(
            analyzer(base_forms(_with_the_one_before(cands, i) if context else cands.sentence[i]))
        )
    ]
    return max(held, key=lambda i: scores[i]) if held else None


@functools.cache
def _money_terms(analyzer: Analyzer) -> frozenset[str]:
    """The terms a question asks a price with ("What does Ms Sato charge?")."""
    return frozenset(analyzer("charge charges charged pay paid spend spent fee fees"))


def _posted_before(items: list[AnswerItem], days) -> bool:
    """Whether every item was posted before the window ``days`` begins (plans about it)."""
    if not days or not items:
        return False
    posted = [as_datetime(i.get("created_at")) for i in items]
    return all(p is not None and p.date() < days[0] for p in posted)
