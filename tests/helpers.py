"""Small realistic corpora for tests: posts in a few floors, with times, types and tags."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from memkit.core.tables import events_frame
from memkit.evaluation.walks import served_pipeline  # noqa: F401 (the tests' way to it)

SENTENCES = [
    "I went to the LGBTQ support group yesterday and it was so powerful",
    "We took the kids camping at the lake last weekend",
    "My new job at the bakery starts on Monday, I'm nervous",
    "Just finished painting a sunrise over the mountains",
    "The dog chewed my running shoes again this morning",
    "Thinking about a counseling certification next year",
    "Our book club is reading a novel about a lighthouse keeper",
    "I adopted a kitten from the shelter, she is tiny and loud",
    "Marathon training is brutal, ran twenty miles today",
    "Does anyone know a good recipe for sourdough bread?",
    "The concert downtown was amazing, the band played for hours",
    "I'm learning to play the violin, my neighbours are patient",
    "We visited grandma in the hospital, she is recovering well",
    "Pottery class: my first bowl came out lopsided but I love it",
    "Planning a road trip along the coast in July",
    "Volunteered at the animal shelter walking dogs all afternoon",
    "Got a flat tyre on the way to work and missed the meeting",
    "Our garden finally has tomatoes and way too many zucchini",
    "Started therapy this month and it is helping a lot",
    "The quiz night at the pub was won by the chemistry teachers",
]
FLOORS = ["alice", "bob", "carol"]
TYPES = ["feed", "blog", "forum", "quiz"]
TAGS = ["pets", "art", "work", "family", "sport"]
T0 = datetime(2023, 1, 1, tzinfo=timezone.utc)


def make_events(n: int, seed: int = 0, prefix: str = "e"):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        floor = rng.choice(FLOORS)
        s = rng.choice(SENTENCES)
        rows.append(
            {
                "event_id": f"{prefix}{i}",
                "floor_id": floor,
                "block_id": f"{floor}/{rng.randrange(3)}",
                "block_type": rng.choice(TYPES),
                "user_id": rng.choice(["ann", "ben", "cy"]),
                # A unique word per event keeps texts distinct (no exact ties).
                "text": f"{s} (note {i} {rng.choice(SENTENCES).split()[-1]})",
                "created_at": None
                if rng.random() < 0.1
                else (T0 + timedelta(hours=rng.randrange(24 * 365))).isoformat(),
                "tags": rng.sample(TAGS, rng.randrange(3)),
            }
        )
    return events_frame(rows)


def ranking(ids, scores):
    """One question's ranking (query id "q"), as a retriever gives it."""
    import polars as pl

    n = len(ids)
    return pl.DataFrame(
        {
            "query_id": ["q"] * n,
            "event_id": ids,
            "score": scores,
            "rank": list(range(1, n + 1)),
            "match_type": ["hybrid"] * n,
        }
    )
