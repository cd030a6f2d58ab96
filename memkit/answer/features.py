"""What the writer's two models read: each candidate sentence's features (``SENTENCE``) and
the question's as a whole (``QUERY``), with what each one measures.

The column order is the order of the dicts below (the order the stored models list them
in). Configs written before the features had these names still load: ``RENAMED`` maps
each old name to its new one (see ``readable_model``).

"Own" sentences are written by the person the question names (every sentence counts as
own when it names nobody); "about" ones speak of that person (their "I", the "you" of a
post addressed to them, their name in the third person); a side with no candidate counts
as clearly weaker than the other (scores 3 below, cosine 0.3 below, term shares 1 below).
The query features read quotable sentences only, except the two about questions asked.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

from memkit.answer.base import AnswerItem, speaker
from memkit.core.text import Analyzer
from memkit.language.en.changes import CHANGED
from memkit.question import Question
from memkit.question.kinds import (
    FIRST_PERSON,
    GREETING,
    HOLDS,
    SECOND_PERSON,
    VOCATIVE,
    asks_name,
    base_forms,
    says_when,
)

SENTENCE = {  # one row per candidate sentence
    "cosine": "cosine of the sentence with the question",
    "cosine_vs_best": "cosine less the best quotable candidate's",
    "terms_in_sentence": "share of the question's terms (less authors' names) in the sentence",
    "terms_in_sentence_vs_best": "terms_in_sentence less the best quotable candidate's",
    "terms_in_post": "share of the question's terms in the sentence's whole post",
    "terms_in_post_vs_best": "terms_in_post less the best quotable candidate's",
    "reciprocal_rank": "1 / (the post's rank + 1)",
    "first_post": "the post ranked first",
    "by_someone_else": "written by someone other than the person asked about",
    "someone_else_names_them": "by someone else, in a post naming the person asked about",
    "log_words": "log(1 + the sentence's words)",
    "image": "the sentence describes an image ([image: ...])",
    "date_for_when": "a when-question, and the sentence says when",
    "number_for_count": "a how-many-question, and the sentence holds a number or frequency",
    "length_for_duration": "a how-long-question, and the sentence holds a length of time",
    "place_for_where": "a where-question, and the sentence holds a place (in/at/to a Name)",
    "name_for_who": "a who-question, and the sentence names someone other than an author",
}
QUERY = {  # one row per question, from its candidates and their selection scores
    "other_first_person": "the best-scored sentence by someone else says I, my, we",
    "other_second_person": "the best-scored sentence by someone else says you, your",
    "best_score": "the best selection score of a quotable sentence",
    "best_score_own": "the best selection score of an own sentence",
    "best_cosine_own": "the best cosine of an own sentence",
    "best_terms_own": "the best terms_in_sentence of an own sentence",
    "best_post_terms_own": "the best terms_in_post of an own sentence",
    "score_gap_other": "best score of someone else's sentence less the best own",
    "cosine_gap_other": "best cosine of someone else's sentence less the best own",
    "terms_gap_other": "best terms_in_sentence of someone else's less the best own",
    "post_terms_gap_other": "best terms_in_post of someone else's less the best own",
    "first_own_rank": "rank (from 1) of the first post with an own sentence (none: max_items + 1)",
    "names_an_author": "the question names one of the authors",
    "best_is_own": "the best-scored sentence is an own one",
    "own_in_top5": "the number of own sentences in the top 5 posts",
    "terms_missing": "share of the question's terms in none of the items",
    "name_missing": "a proper name the question uses is in none of the items",
    "best_score_about": "the best selection score of a sentence about the person asked about",
    "best_cosine_about": "the best cosine of a sentence about the person asked about",
    "score_gap_not_about": "best score of a sentence not about them less the best about them",
    "cosine_gap_not_about": "best cosine of a sentence not about them less the best about them",
    "own_question_cosine": "the best cosine of a question the person asked about asked",
    "other_question_cosine": "the best cosine of a question someone else asked",
    "own_question_vs_answer": "own_question_cosine less best_cosine_own (they only asked)",
}
WITHIN = {  # one row per quotable sentence: which sentence of the chosen post is quoted
    "cosine_vs_post_best": "cosine less the best quotable sentence of the same post's",
    "terms_in_sentence": "share of the question's terms (less authors' names) in the sentence",
    "terms_vs_post_best": "terms_in_sentence less the best of the same post's",
    "holds_what_is_asked": "it holds what the question type asks for (a date, a number, ...)",
    "first_in_post": "the post's first sentence",
    "log_words": "log(1 + the sentence's words)",
}
SENTENCE_FEATURES = list(SENTENCE)
QUERY_FEATURES = list(QUERY)
WITHIN_FEATURES = list(WITHIN)

# The names the stored models used before (configs written before these names).
RENAMED = dict(
    zip(
        "cos cos_rel ov ov_rel ovp ovp_rel rr r1 by_other other_mentions lognw image when_date "
        "t_count t_dur t_where t_who".split(),
        SENTENCE_FEATURES,
    )
) | dict(
    zip(
        "fp_oth sp_oth s1 s_own c_own o_own op_own gap cgap ogap opgap r_own named top_own "
        "n_own5 miss capmiss s_ab c_ab abgap cabgap ask_own ask_oth ask_gap".split(),
        QUERY_FEATURES,
    )
)


def readable_model(model):
    """The model with any old feature names (``RENAMED``) put in their new form; the
    coefficients and the order of the columns stay as they are."""
    if not isinstance(model, dict) or not isinstance(model.get("features"), list):
        return model  # check_linear says what is wrong with it
    return {**model, "features": [RENAMED.get(f, f) for f in model["features"]]}


def columns(x: np.ndarray, model: dict, names: list[str]) -> np.ndarray:
    """The columns of ``x`` (one per name in ``names``) that the model reads, in its order."""
    return x[:, [names.index(f) for f in model["features"]]]


@dataclass
class Candidates:
    """The sentences of one question's items, with what the models read about them."""

    rank: list[int]  # the item's rank (0 = first)
    item: list[AnswerItem]
    sentence: list[str]
    sims: np.ndarray  # cosine with the question
    quotable: np.ndarray  # bool: not a question, not a greeting
    own: np.ndarray  # bool: written by the person asked about (everyone when nobody is named)
    about: np.ndarray  # bool: says something about the person asked about (speaker attribution)
    x: np.ndarray  # SENTENCE_FEATURES, one row per sentence
    people: set[str]
    query: str
    known: set[str]  # the authors' names the writer knows of (see named_people)
    question: Question | None = None  # the question's reading (kind, needs, language)


def sentence_features(
    query: str,
    rows: list[tuple[int, AnswerItem, str]],
    sims: np.ndarray,
    people: set[str],
    known: set[str],
    analyzer: Analyzer,
    question: Question | None = None,
) -> Candidates:
    """The candidates of ``rows`` ((rank, item, sentence), ``sims``: each one's cosine with
    the question) with their SENTENCE_FEATURES. ``question``: the reading of ``query``
    (None: read here)."""
    question = question or Question.of(query)
    rank, item, sent = (list(c) for c in zip(*rows))
    top = {r: it for r, it, _ in rows}
    name_terms = {t for n in known for t in analyzer(n)}
    # Terms in their base forms: "when did they drive there?" shares "drive" with "we drove".
    q_terms = set(analyzer(base_forms(query))) - name_terms
    s_terms = [set(analyzer(base_forms(s))) for s in sent]
    p_terms = {r: set(analyzer(base_forms(top[r].get("text") or ""))) for r in set(rank)}
    if question.asks_change:  # "Why was it moved?": "postponed to 15 October" says it
        said = q_terms & _change_terms(analyzer)
        s_terms = [t | said if CHANGED.search(s) else t for s, t in zip(sent, s_terms)]
        p_terms = {
            r: t | said if CHANGED.search(top[r].get("text") or "") else t
            for r, t in p_terms.items()
        }
    qtype = question.kind
    n = len(rows)

    def share(terms: set) -> float:
        return len(q_terms & terms) / max(len(q_terms), 1)

    quotable = np.array(
        [
            not s.rstrip().endswith("?") and len(t - name_terms - GREETING) >= 2
            for s, t in zip(sent, s_terms)
        ]
    )
    own = np.array([not people or speaker(it) in people for it in item])
    names_them = [
        bool(people)
        and any(re.search(rf"\b{re.escape(p)}\b", it.get("text") or "", re.I) for p in people)
        for it in item
    ]
    about = np.array([is_about(s, it, people) for s, it in zip(sent, item)])
    x = np.zeros((n, len(SENTENCE_FEATURES)))
    cols = {name: i for i, name in enumerate(SENTENCE_FEATURES)}
    x[:, cols["cosine"]] = sims
    x[:, cols["terms_in_sentence"]] = [share(t) for t in s_terms]
    x[:, cols["terms_in_post"]] = [share(p_terms[r]) for r in rank]
    for name in ("cosine", "terms_in_sentence", "terms_in_post"):  # against the best candidate
        best = x[quotable, cols[name]].max() if quotable.any() else 0.0
        x[:, cols[f"{name}_vs_best"]] = x[:, cols[name]] - best
    x[:, cols["reciprocal_rank"]] = [1 / (r + 1) for r in rank]
    x[:, cols["first_post"]] = [r == 0 for r in rank]
    x[:, cols["by_someone_else"]] = ~own
    x[:, cols["someone_else_names_them"]] = [(not o) and m for o, m in zip(own, names_them)]
    x[:, cols["log_words"]] = [math.log1p(len(s.split())) for s in sent]
    x[:, cols["image"]] = ["[image:" in s for s in sent]
    x[:, cols["date_for_when"]] = [qtype == "when" and says_when(s) for s in sent]
    for name, kind in (
        ("number_for_count", "count"),
        ("length_for_duration", "duration"),
        ("place_for_where", "where"),
    ):
        x[:, cols[name]] = [qtype == kind and bool(HOLDS[kind].search(s)) for s in sent]
    x[:, cols["name_for_who"]] = [
        qtype == "who" and names_someone(s, name_terms, analyzer) for s in sent
    ]
    return Candidates(
        rank, item, sent, sims, quotable, own, about, x, people, query, known, question
    )


def within_features(c: Candidates) -> np.ndarray:
    """WITHIN_FEATURES of every candidate: how it compares with the other quotable
    sentences of its own post (the selection model is trained on which *post* answers
    and so cannot tell the sentences of one post apart: memkit.answer.selection)."""
    cols = {name: i for i, name in enumerate(SENTENCE_FEATURES)}
    sims, terms = c.sims, c.x[:, cols["terms_in_sentence"]]
    ranks = np.asarray(c.rank)
    best_sim, best_terms = np.zeros(len(ranks)), np.zeros(len(ranks))
    for r in set(c.rank):
        mine = ranks == r
        pool = mine & c.quotable if (mine & c.quotable).any() else mine
        best_sim[mine], best_terms[mine] = sims[pool].max(), terms[pool].max()
    holds = c.x[:, [cols[n] for n in ASKED]].max(axis=1)
    first = np.r_[True, ranks[1:] != ranks[:-1]] if len(ranks) else np.zeros(0, bool)
    x = np.zeros((len(ranks), len(WITHIN_FEATURES)))
    x[:, 0] = sims - best_sim
    x[:, 1] = terms
    x[:, 2] = terms - best_terms
    x[:, 3] = holds
    x[:, 4] = first
    x[:, 5] = c.x[:, cols["log_words"]]
    return x


# the SENTENCE features saying a sentence holds what its question's type asks for
ASKED = (
    "date_for_when",
    "number_for_count",
    "length_for_duration",
    "place_for_where",
    "name_for_who",
)


def query_features(
    c: Candidates, scores: np.ndarray, max_items: int, analyzer: Analyzer
) -> np.ndarray:
    """QUERY_FEATURES of one question from its candidates and their selection scores
    (``max_items``: the rank given when no post is the person's own)."""
    ok = c.quotable
    cols = {name: i for i, name in enumerate(SENTENCE_FEATURES)}

    def best(values, mask, missing):
        return float(values[mask].max()) if mask.any() else missing

    def first_of(mask, values):  # the value of the best-scored candidate in mask
        idx = np.flatnonzero(mask)
        return float(values[idx[np.argmax(scores[idx])]]) if len(idx) else 0.0

    own, oth, ab, nab = ok & c.own, ok & ~c.own, ok & c.about, ok & ~c.about
    asks = np.array([s.rstrip().endswith("?") for s in c.sentence])
    fp = np.array([bool(FIRST_PERSON.search(s)) for s in c.sentence], dtype=float)
    sp = np.array([bool(SECOND_PERSON.search(s)) for s in c.sentence], dtype=float)
    rank = np.array(c.rank)
    s1 = best(scores, ok, 0.0)
    f = {
        "best_score": s1,
        "best_score_own": best(scores, own, s1 - 3),
        "best_score_about": best(scores, ab, s1 - 3),
        "names_an_author": float(bool(c.people)),
        "other_first_person": first_of(oth, fp),
        "other_second_person": first_of(oth, sp),
        "first_own_rank": float(rank[own].min() + 1) if own.any() else max_items + 1.0,
        "best_is_own": float(c.own[np.flatnonzero(ok)[np.argmax(scores[ok])]]) if ok.any() else 0.0,
        "own_in_top5": float((own & (rank < 5)).sum()),
        "own_question_cosine": best(c.sims, asks & c.own, 0.0),
        "other_question_cosine": best(c.sims, asks & ~c.own, 0.0),
    }
    f["best_score_other"] = best(scores, oth, f["best_score_own"] - 3)
    f["best_score_not_about"] = best(scores, nab, f["best_score_about"] - 3)
    for short, name, weaker in (
        ("cosine", "cosine", 0.3),
        ("terms", "terms_in_sentence", 1.0),
        ("post_terms", "terms_in_post", 1.0),
    ):
        f[f"best_{short}_own"] = best(c.x[:, cols[name]], own, 0.0)
        f[f"best_{short}_other"] = best(c.x[:, cols[name]], oth, f[f"best_{short}_own"] - weaker)
        f[f"{short}_gap_other"] = f[f"best_{short}_other"] - f[f"best_{short}_own"]
    f["best_cosine_about"] = best(c.sims, ab, 0.0)
    f["best_cosine_not_about"] = best(c.sims, nab, f["best_cosine_about"] - 0.3)
    f["score_gap_other"] = f["best_score_other"] - f["best_score_own"]
    f["score_gap_not_about"] = f["best_score_not_about"] - f["best_score_about"]
    f["cosine_gap_not_about"] = f["best_cosine_not_about"] - f["best_cosine_about"]
    f["own_question_vs_answer"] = f["own_question_cosine"] - f["best_cosine_own"]
    f["terms_missing"], f["name_missing"] = missing(c, analyzer)
    return np.array([f[name] for name in QUERY_FEATURES])


def missing(c: Candidates, analyzer: Analyzer) -> tuple[float, float]:
    """The share of the question's terms in none of its items, and whether a proper
    name it uses (a capitalised word not first, not a known author) is in none. The "name"
    or "called" of a question for a name (``asks_name``) is never missing: a post gives a
    name without them ("Our band Night Ferry")."""
    names = c.known
    name_terms = {t for n in names for t in analyzer(n)}
    pool = {t for it in {id(i): i for i in c.item}.values() for t in analyzer(it.get("text") or "")}
    terms = set(analyzer(c.query)) - name_terms
    if asks_name(c.query):
        pool |= set(analyzer("name call"))
    caps = [w for w in re.findall(r"(?<!^)\b[A-Z][a-z]+", c.query) if w not in names]
    cap_missing = any(t not in pool for w in caps for t in analyzer(w)[:1])
    return len(terms - pool) / max(len(terms), 1), float(cap_missing)


@functools.cache
def _change_terms(analyzer: Analyzer) -> frozenset[str]:
    """The terms of the words a question about a change asks with (memkit.ranking.changes'
    ``ASKS_CHANGE``): a post that states a change (``CHANGED``) holds them in its own words."""
    return frozenset(
        analyzer(
            "move moved moving postpone postponed delay delayed reschedule rescheduled cancel "
            "cancelled canceled change changed push pushed"
        )
    )


def names_someone(sentence: str, name_terms: set[str], analyzer: Analyzer) -> bool:
    """A capitalised word past the first that is not I or an author's name (who-questions)."""
    words = re.findall(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+", sentence)
    return any(w != "I" and analyzer(w)[:1] and analyzer(w)[0] not in name_terms for w in words)


def is_about(sentence: str, item: AnswerItem, people: set[str]) -> bool:
    """Whether the sentence speaks of one of ``people``: its author's own "I" (or no
    second person), the addressee's "you" when the post addresses them by name, or
    their name in the third person. Everyone counts when nobody is named."""
    if not people:
        return True
    first, second = bool(FIRST_PERSON.search(sentence)), bool(SECOND_PERSON.search(sentence))
    for p in people:
        if speaker(item) == p:
            if first or not second:
                return True
            continue
        vocative = re.compile(VOCATIVE.format(name=re.escape(p)), re.I)
        addressed = bool(vocative.search(item.get("text") or ""))
        if (second and addressed and not first) or re.search(
            rf"\b{re.escape(p)}\b", vocative.sub(" ", sentence), re.I
        ):
            return True
    return False
