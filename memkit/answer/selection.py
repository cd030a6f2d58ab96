"""Choosing what to quote with the selection model, and deciding to decline.

The selection model (``[answer.select]``) scores each candidate sentence from its
SENTENCE_FEATURES; the best quotable one is quoted (one sentence a post; up to
``max_list`` posts when the question asks for several). The decline decision reads the
question's QUERY_FEATURES (memkit.answer.features) and the missing-terms guard.
"""

from __future__ import annotations

import re

import numpy as np

from memkit.answer.base import AnswerItem, probability
from memkit.answer.features import (
    QUERY_FEATURES,
    SENTENCE_FEATURES,
    WITHIN_FEATURES,
    Candidates,
    columns,
    query_features,
    within_features,
)
from memkit.core.linear import linear_score
from memkit.core.text import Analyzer
from memkit.question.kinds import ANSWER_TYPE_TERMS, VOCATIVE, base_forms


def spoken_to(name: str) -> re.Pattern:  # "Dev, ..." or "thanks Dev": spoken to, not of
    return re.compile(VOCATIVE.format(name=re.escape(name)), re.I)


# The missing-terms guard (max_missing) reads questions, not chat prefixes or passages: a
# longer query (MADial-Bench's dialogues: 41 terms) always has terms no post holds.
QUESTION_TERMS = 12


def selection_scores(select: dict, cands: Candidates) -> np.ndarray:
    """The selection model's score of every candidate sentence."""
    return linear_score(select, columns(cands.x, select, SENTENCE_FEATURES))


def best_candidate(cands: Candidates, quotable, scores: np.ndarray) -> int:
    """The best-scored quotable sentence (the higher-ranked post on a tie)."""
    return max(quotable, key=lambda i: (scores[i], -cands.rank[i]))


def chosen(cands: Candidates, quotable, scores: np.ndarray, query: str, max_list: int) -> list[int]:
    """The sentences quoted, best first: one, or up to ``max_list`` when the question asks
    for several; never two of one post."""
    out, posts = [], set()
    for i in sorted(quotable, key=lambda i: (-scores[i], cands.rank[i])):
        if len(out) >= (max_list if cands.question.wants_list else 1):
            break
        if cands.rank[i] not in posts:  # one sentence per post
            out.append(i)
            posts.add(cands.rank[i])
    return out


def within_post(within: dict, cands: Candidates, quotable, chosen: list[int]) -> list[int]:
    """Each chosen sentence replaced by the sentence of its post the within-post model
    (``[answer.within]``, ``memkit train within``) scores best. The selection model learned
    which *post* answers (LoCoMo labels posts, not sentences) and inside a long post it
    prefers sentences that share fewer of the question's words; on SQuAD's paragraphs,
    each article left out in turn, it finds the answering sentence for 0.487 of the
    questions, cosine alone 0.770, this model 0.832."""
    scores = linear_score(within, columns(within_features(cands), within, WITHIN_FEATURES))
    out = []
    for i in chosen:
        same = [j for j in quotable if cands.rank[j] == cands.rank[i]]
        out.append(max(same, key=lambda j: (scores[j], -j)))
    return out


def declines(
    cands: Candidates,
    scores: np.ndarray,
    items: list[AnswerItem],
    *,
    decline_model: dict | None,
    max_missing: float | None,
    unsure_below: float | None,
    max_items: int,
    analyzer: Analyzer,
) -> bool:
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
            unsure_below is not None
            and content_missing(cands, analyzer)
            and probability(items[0]) < unsure_below
        )
    if decline_model is None and max_missing is None:
        return False
    q = query_features(cands, scores, max_items, analyzer)
    missing = (
        max_missing is not None
        and len(set(analyzer(cands.query))) <= QUESTION_TERMS
        and q[QUERY_FEATURES.index("terms_missing")] >= max_missing
    )
    return missing or (
        decline_model is not None
        and float(
            linear_score(decline_model, columns(q[None, :], decline_model, QUERY_FEATURES))[0]
        )
        > decline_model["threshold"]
    )


def told_by_someone_else(cands: Candidates) -> bool:
    """The first post is someone else's and names the person asked about in the third
    person ("Dinner for Dev moved to Friday 20 November", by Kim, for "When is Dev's
    birthday dinner?"). The decline model learned from LoCoMo's two people, who speak *to*
    each other, that the other one's lines are rarely about the one asked after; on a floor
    of several people, posts about someone are mostly written by others (the writer asks
    this only where three or more people post)."""
    first = [i for i, r in enumerate(cands.rank) if r == 0 and cands.quotable[i]]
    if not first or cands.own[first[0]]:
        return False
    text = cands.item[first[0]].get("text") or ""
    return any(
        re.search(rf"\b{re.escape(p)}\b", spoken_to(p).sub(" ", text), re.I) for p in cands.people
    )


def content_missing(c: Candidates, analyzer: Analyzer) -> bool:
    """None of the question's content terms (not names, not answer-type words) is in
    its items; an irregular verb counts in any of its forms ("drive" finds "drove")."""
    name_terms = {t for n in c.known for t in analyzer(n)}
    terms = set(analyzer(base_forms(c.query))) - name_terms - ANSWER_TYPE_TERMS
    pool = {
        t
        for it in {id(i): i for i in c.item}.values()
        for t in analyzer(base_forms(it.get("text") or ""))
    }
    return bool(terms) and not terms & pool
