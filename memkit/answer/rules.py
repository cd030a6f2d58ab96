"""The first writer: rules, no models. Used by every config whose ``[answer]`` has no
``select`` model (the packaged configs other than default, default-fresh and postgres;
``build_answerer(None)``), and kept as the baseline in eval/RESULTS.md.

Sentences of the top ``max_items`` are scored by cosine, less ``rank_weight`` per rank,
plus ``when_bonus`` for dated sentences of when-questions; up to ``max_sentences`` quotes
within ``margin`` of the best; only posts by (or naming) the person asked about may
answer; declines below ``min_score`` or when someone else's sentence is closer by more
than ``max_gap``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from memkit.answer.base import Answer, AnswerItem, speaker
from memkit.answer.render import shown_name
from memkit.core.text import sentences
from memkit.question.kinds import asks_when, says_when

if TYPE_CHECKING:
    from memkit.answer.extractive import ExtractiveAnswerer


def summarize_by_rules(
    writer: ExtractiveAnswerer, query: str, items: list[AnswerItem], authors=None
) -> Answer:
    """The answer the first writer gives, with ``writer``'s settings."""
    top = items[: writer.max_items]
    cands = [
        (rank, j, s, item)
        for rank, item in enumerate(top)
        for j, s in enumerate(sentences(item.get("text")))
    ]
    if not cands:
        return Answer(writer.decline_message(query, set()), declined=True)
    # the evidence strength the decline is decided on
    sims = writer.score(query, [c[2] for c in cands], [c[3] for c in cands])
    scores = sims - writer.rank_weight * np.array([c[0] for c in cands])  # what is quoted first
    if asks_when(query) and writer.when_bonus:
        scores = scores + writer.when_bonus * np.array([says_when(c[2]) for c in cands])
    people = writer.named_people(query, items, authors) if writer.people else set()
    allowed = [
        i
        for i, c in enumerate(cands)
        if not people
        or speaker(c[3]) in people
        or any(re.search(rf"\b{re.escape(p)}\b", c[2], re.IGNORECASE) for p in people)
    ]
    best = max(allowed, key=lambda i: (scores[i], -cands[i][0]), default=None)
    strongest = max((float(sims[i]) for i in allowed), default=None)
    ok = set(allowed)
    others = [i for i in range(len(cands)) if i not in ok]
    closest = max(others, key=lambda i: sims[i], default=None)
    rival = float(sims[closest]) if closest is not None else None
    someone_else = (
        writer.max_gap is not None
        and rival is not None
        and (strongest is None or rival - strongest > writer.max_gap)
    )
    if (
        best is None
        or someone_else
        or (writer.min_score is not None and strongest < writer.min_score)
    ):
        by = shown_name(cands[closest][3]) if someone_else else None
        return Answer(
            writer.decline_message(query, people, by),
            declined=True,
            strength=strongest,
            rival=rival,
        )
    chosen, seen_items = [best], {cands[best][0]}
    for i in sorted(allowed, key=lambda i: -scores[i]):
        if len(chosen) >= writer.max_sentences or scores[i] < scores[best] - writer.margin:
            break
        if cands[i][0] not in seen_items:  # one sentence per post: say more, not the same twice
            chosen.append(i)
            seen_items.add(cands[i][0])
    return writer.compose(
        query,
        [(cands[i][2], cands[i][3], float(sims[i])) for i in chosen],
        strength=strongest,
        rival=rival,
    )
