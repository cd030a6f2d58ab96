"""Made-up but realistic posts for benchmarks and demos: floors owned by users, blocks of
every type, tags, times spread over three years, and text lengths like real chat, forum
and blog posts (short chat lines, medium forum replies, long blog entries).

Everything is drawn from a seeded generator, so the same arguments give the same events.
"""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta, timezone

import polars as pl

from memkit.core.tables import events_frame

NAMES = [
    "Caroline",
    "Melanie",
    "Jon",
    "Gina",
    "Priya",
    "Tomás",
    "Aiko",
    "Kwame",
    "Lena",
    "Omar",
    "Sofia",
    "Dmitri",
    "Nia",
    "Hugo",
    "Mei",
    "Rafael",
    "Zoe",
    "Ibrahim",
    "Elif",
    "Sam",
]
PLACES = [
    "Lisbon",
    "the lake",
    "Kyoto",
    "the farmers market",
    "Nairobi",
    "the gym",
    "grandma's house",
    "the library",
    "Toronto",
    "the beach",
    "the office",
    "Oaxaca",
    "the climbing wall",
    "the clinic",
]
SUBJECTS = [
    "I",
    "We",
    "My sister",
    "Our team",
    "The kids",
    "My partner",
    "Everyone at work",
    "My neighbour",
    "The new manager",
    "Our book club",
    "My dad",
    "The whole class",
]
VERBS = [
    "finally tried",
    "spent the weekend on",
    "can't stop thinking about",
    "signed up for",
    "gave up on",
    "started learning",
    "wrote a long post about",
    "argued about",
    "fell in love with",
    "organised",
    "cancelled",
    "volunteered for",
    "got really into",
    "took photos of",
    "finished",
]
OBJECTS = [
    "sourdough baking",
    "a pottery class",
    "marathon training",
    "the new phone",
    "a road trip",
    "adopting a rescue dog",
    "the quarterly report",
    "a jazz concert",
    "learning Portuguese",
    "the community garden",
    "a chess tournament",
    "painting landscapes",
    "the school fundraiser",
    "a charity bake sale",
    "our kitchen renovation",
    "bird watching",
    "the climate protest",
    "an online course on statistics",
    "the hiking trail",
    "a short film",
    "therapy sessions",
    "a vegan cookbook",
    "the science fair",
    "the band's first gig",
    "a coding bootcamp",
]
TAILS = [
    "yesterday",
    "last week",
    "this morning",
    "two weeks ago",
    "over the holidays",
    "after work",
    "with friends",
    "on my own",
    "and it was amazing",
    "and honestly it was a disaster",
    "and I need advice",
    "for the first time",
    "again",
    "because of the weather",
    "at {place}",
    "with {name}",
    "before the deadline",
    "despite the rain",
]
CHAT = [
    "lol same",
    "omg yes!!",
    "that's so cool",
    "wait what happened?",
    "miss you!",
    "haha true",
    "congrats!!!",
    "ugh mondays",
    "can't wait",
    "so proud of you",
]
QUESTION_OPENERS = [
    "Does anyone know",
    "Any tips on",
    "What do you think about",
    "Has anyone tried",
    "How do I get started with",
]
TAGS = [
    "pets",
    "art",
    "work",
    "family",
    "sport",
    "travel",
    "food",
    "music",
    "health",
    "study",
    "tech",
    "nature",
    "books",
    "film",
    "diy",
    "news",
    "money",
    "kids",
    "garden",
    "events",
]
BLOCK_TYPES = ["feed", "blog", "forum", "quiz"]
T0 = datetime(2022, 1, 1, tzinfo=timezone.utc)


_SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "tu",
    "len",
    "sa",
    "vo",
    "ri",
    "an",
    "de",
    "zu",
    "bel",
    "no",
    "qui",
    "tra",
    "mo",
    "ash",
    "ell",
    "pi",
    "gor",
    "fen",
    "ly",
    "dra",
    "ko",
    "sil",
    "ta",
    "ven",
    "ur",
    "is",
    "ne",
]
_KINDS = [
    "at {}'s place",
    "in {}",
    "at the {} café",
    "with {}",
    "from {} Street",
    "the {} app",
    "by {}",
]


def _proper_nouns(n: int, seed: int = 42) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize())
    return sorted(out)


ENTITIES = _proper_nouns(20_000)
# Zipf weights: a few names come up all the time, most rarely (as in real chat).
_ENTITY_CUM = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(ENTITIES))))


def sentence(rng: random.Random) -> str:
    tail = rng.choice(TAILS).format(place=rng.choice(PLACES), name=rng.choice(NAMES))
    extra = ""
    if rng.random() < 0.7:
        entity = rng.choices(ENTITIES, cum_weights=_ENTITY_CUM)[0]
        extra = " " + rng.choice(_KINDS).format(entity)
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}{extra} {tail}."


def post_text(rng: random.Random, block_type: str) -> str:
    if block_type == "feed":  # chat-like: mostly one line, sometimes a reaction
        return (
            rng.choice(CHAT)
            if rng.random() < 0.15
            else " ".join(sentence(rng) for _ in range(rng.randint(1, 2)))
        )
    if block_type == "forum":
        opener = (
            f"{rng.choice(QUESTION_OPENERS)} {rng.choice(OBJECTS)}?" if rng.random() < 0.4 else ""
        )
        return (opener + " " + " ".join(sentence(rng) for _ in range(rng.randint(1, 5)))).strip()
    if block_type == "quiz":
        return f"Quiz: which of these is about {rng.choice(OBJECTS)}? " + sentence(rng)
    return " ".join(sentence(rng) for _ in range(rng.randint(4, 14)))  # blog


def generate_events(n: int, seed: int = 0, events_per_floor: int = 500) -> pl.DataFrame:
    """``n`` events over ``n / events_per_floor`` floors, each with one block of each type."""
    rng = random.Random(seed)
    n_floors = max(1, n // events_per_floor)
    weights = [0.55, 0.1, 0.3, 0.05]  # feed, blog, forum, quiz
    rows = []
    for i in range(n):
        floor = f"floor-{rng.randrange(n_floors)}"
        btype = rng.choices(BLOCK_TYPES, weights)[0]
        rows.append(
            {
                "event_id": f"ev-{seed}-{i}",
                "floor_id": floor,
                "block_id": f"{floor}/{btype}",
                "block_type": btype,
                "user_id": rng.choice(NAMES),
                "text": post_text(rng, btype),
                "created_at": (T0 + timedelta(seconds=rng.randrange(3 * 365 * 86400))).isoformat(),
                "tags": rng.sample(TAGS, rng.choices([0, 1, 2, 3], [0.3, 0.4, 0.2, 0.1])[0]),
            }
        )
    return events_frame(rows, source="<synthetic>")


def generate_queries(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    forms = [
        "When did {name} try {obj}?",
        "Who went to {place}?",
        "{obj} with {entity}",
        "What happened with {obj} {tail}?",
        "{opener} {obj}?",
        "Where is {entity}?",
    ]
    return [
        rng.choice(forms).format(
            name=rng.choice(NAMES),
            obj=rng.choice(OBJECTS),
            place=rng.choice(PLACES),
            tail=rng.choice(TAILS[:8]),
            opener=rng.choice(QUESTION_OPENERS),
            entity=rng.choices(ENTITIES, cum_weights=_ENTITY_CUM)[0],
        )
        for _ in range(n)
    ]
