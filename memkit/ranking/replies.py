"""A question one person asks another in a feed, and the other's reply.

"Ines, can Pepper come to the gig? Dogs are allowed at the Lexington." shares every word
of "Is Pepper going to the gig?", so it ranks first; the answer is Ines's reply twenty
minutes later, "No Raj, she hates loud music, I'll leave her with my sister Lucia", which
shares fewer. When a question's first post asks someone by name, their reply (among the
first posts: posted after it in the same block within a day, opening with a yes, a no, a
refusal ("Can't Hana, ...") or the asker's name) is put first and the question second.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Callable, Sequence

import polars as pl

from memkit.language.en.replies import ASKED_BY_NAME as _ASKED_BY_NAME
from memkit.language.en.replies import OPENS_A_REPLY as _OPENS_A_REPLY
from memkit.question import Question
from memkit.question.conversation import content_words, stems
from memkit.ranking.changes import DEPTH, first_and_later, first_ids, newest_first, to_top

REPLY_WITHIN = timedelta(days=1)
# questions (memkit.question's kinds) for a number, a length of time or a place: a reply that
# opens with a yes, a no or a name rarely holds one (the question it answers holds the place)
UNREPLIED = frozenset({"count", "duration", "where"})


def addressees(text: str) -> list[str]:
    """The names a post asks a question of, in order ("Kemi, are you free on Saturday?
    Ravi?": Kemi and Ravi); none when it asks nobody by name."""
    if "?" not in text:
        return []
    return [
        name
        for m in _ASKED_BY_NAME.finditer(text)
        for names in m.groups()
        if names
        for name in re.split(r",\s*|\s+and\s+|\s*&\s*", names)
    ]


def first_name(who: str | None) -> str:
    return (who or "").split(" ")[0].casefold()


def reply_first(
    run: pl.DataFrame,
    items_of: Callable[[Sequence[str]], Sequence],
    depth: int = DEPTH,
    kind: str | None = None,
    query: str | Question = "",
) -> pl.DataFrame:
    """``run`` with the reply to its first post first (and that post second), when the
    first post asks someone by name and their reply is among the first ``depth`` posts;
    else ``run`` as it was. Of a post that asks several people, the reply of the one the
    ``query`` names counts ("And Ravi?" after Kemi's yes), else any of theirs. A question
    of a ``kind`` a reply rarely answers (``UNREPLIED``: "How many cups did Mei sell at the
    craft fair?" is not answered by "Yes Mei, I'll pick you up at nine") keeps its
    ranking."""
    if kind in UNREPLIED:
        return run
    first = items_of(first_ids(run, 1)) if run.height else []
    asked = addressees(first[0].get("text") or "") if first else []
    if not asked:  # most questions: only the first post is read
        return _reply_of_the_one_named(run, items_of, depth, query)
    found = first_and_later(run, items_of, depth)
    if found is None:
        return run
    first_id, first, later = found
    asker = first_name(first.get("speaker"))
    repliers = {first_name(a) for a in asked} - {asker}
    text = query.text if isinstance(query, Question) else query
    named = {n for n in repliers if re.search(rf"\b{re.escape(n)}\b", text, re.IGNORECASE)}
    repliers = named or repliers
    for e, it in later:
        if _replies(it, first, repliers):
            return newest_first(run, (e, first_id))  # the reply first, the question second
    return run


def _reply_of_the_one_named(
    run: pl.DataFrame,
    items_of: Callable[[Sequence[str]], Sequence],
    depth: int,
    query: str | Question,
) -> pl.DataFrame:
    """For a question that names someone: their reply to a post among the first ``depth``
    that asks them by name and holds the question's other words, first, and the post
    second, unless the first post holds those words. "And Mateo?", after Noor's refusal of
    Felix's "Noor, can you still come? Mateo?" was quoted; "What did Wen recommend?",
    asked of "Wen, can you recommend a restaurant in Reykjavik?", which Wen answered "Yes!
    Dill, it has a Michelin star" (her first shift ranked first)."""
    words = query.content if isinstance(query, Question) else content_words(query)
    wanted = {first_name(w) for w in words if w[:1].isupper()}
    rest = stems(w for w in words if not w[:1].isupper())
    if not wanted:
        return run
    ids = first_ids(run, depth)
    items = [it for it in items_of(ids) if it.get("created_at") is not None]
    if rest and items and rest <= stems(content_words(items[0].get("text") or "")):
        return run  # the first post holds what is asked ("Did Kemi go sailing with Ines?")
    for question in items:
        text = question.get("text") or ""
        asked = {first_name(a) for a in addressees(text)} & wanted
        asked -= {first_name(question.get("speaker"))}
        if not asked or not rest <= stems(content_words(text)):
            continue
        for it in items:
            if _replies(it, question, asked):
                return to_top(run, [it.get("event_id"), question.get("event_id")])
    return run


def _replies(it, question, repliers: set[str]) -> bool:
    """Whether post ``it`` is one of ``repliers``' reply to ``question``: in its block,
    within ``REPLY_WITHIN`` after it, opening with a yes, a no, a refusal or the asker's
    name."""
    text, when = it.get("text") or "", question.get("created_at")
    asker = first_name(question.get("speaker"))
    return (
        first_name(it.get("speaker")) in repliers
        and it.get("block_id") == question.get("block_id")
        and it.get("created_at") is not None
        and when < it.get("created_at") <= when + REPLY_WITHIN
        and bool(
            _OPENS_A_REPLY.match(text)
            or (asker and re.match(rf"\s*{re.escape(asker)}\b", text, re.IGNORECASE))
        )
    )
