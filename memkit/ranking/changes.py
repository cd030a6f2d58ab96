"""Changed facts: when a later post says a plan moved, its newer statement goes first.

People post a plan ("Planning Dev's birthday dinner for Saturday 14 November at Lardo") and
later its change ("Dinner for Dev moved to Friday 20 November, Lardo was fully booked").
Retrieval ranks the first post higher (it shares more of the question's words), so the
answer gave the old date. ``changed_fact`` looks at a question's first posts: a post written
after the first one that says something changed ("moved to", "postponed", "cancelled",
"instead", ...) and is about the same thing takes the first place (with the first's score);
the post it replaces comes second, the service shows it no more and the answer quotes the
newer post. Only when-, where- and who-questions are read so (``settles``), a where- or
who-question only by a change that names a new place or person instead ("Going to
Bamburgh instead, same dates", "taking my friend Jo instead") or moves the plan to
someone's ("book club moves to Omar's place"):
"which hospital?" or "how did it go?" are answered by posts the change says nothing about.

"About the same thing": it shares at least ``min_shared`` content words with the first
post, and at least ``overlap`` of the two posts' content words together. The walk's moved
plans share 4 of 12 (dinner, Dev, November, Lardo), 2 of 11 (surgery, October) and 2 of 13
("Book club moved to 5 November": book, club); MADial-Bench's long memories of one child
share two of about 25 by chance ("Lisa", "park"). 0.15 was chosen on the project's
train and dev suites and MADial-Bench while the rule still read every question (0.12 and
0.2 did worse on the train suite; eval/RESULTS.md, "Changed facts").
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np
import polars as pl

from memkit.core.text import sentences
from memkit.language.en.changes import ASKS_CHANGE, CHANGED, INSTEAD, NEW_PLACE, TO_SOMEONES
from memkit.language.timeref import CALENDAR, dates_in
from memkit.question import Question
from memkit.question.conversation import content_words

NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z'’-]+")  # a capitalised word inside a sentence
DEPTH = 8  # the posts looked at: those the reader reads
MIN_SHARED = 2
OVERLAP = 0.15  # of the two posts' content words together (long posts share words by chance)


def _words(text: str | Question) -> set[str]:
    # without numbers: a change's new date differs from the old one by nature; a
    # possessive is its noun ("Sam's work" and "Sam and I", "Mum's flight" and "my mum");
    # a question's content words were read with it
    words = text.content if isinstance(text, Question) else content_words(text)
    return {re.sub(r"['’]s$", "", w.lower()) for w in words if not any(c.isdigit() for c in w)}


def changed_fact(
    run: pl.DataFrame,
    items_of: Callable[[Sequence[str]], Sequence],
    depth: int = DEPTH,
    min_shared: int = MIN_SHARED,
    overlap: float = OVERLAP,
    kind: str = "when",
    query: str | Question = "",
) -> tuple[str, str] | None:
    """(the newer post, the first post it replaces) when one of the first ``depth`` posts of
    ``run`` (one question's ranking) states a change to the first one (see the module's
    text), else None. ``items_of(ids)``: the posts (memkit.core.items.Item or dicts); ``kind``:
    the question's (``settles``), "where" takes only a change to a new place; ``query``: the
    question (its text, or the Question read from it), whose sentences of the first post
    are what a change must be about."""
    found = first_and_later(run, items_of, depth, dated=kind == "when")
    if found is None:
        return None
    first_id, first, later = found
    # a plan read past the first post (which names no day) is changed by a post naming one
    passed = first_id != first_ids(run, 1)[0]
    when = first.get("created_at")
    words = _words(first.get("text") or "")
    question = _words(query)
    asked, other = _asked_in(first.get("text") or "", question)
    # a plan for a day is changed before that day, not after it ("Book club is off this
    # month", in May, does not change "Book club moved to Tuesday 10 February"), unless the
    # change names a later day for it ("Rebooked the test for 1 December", after the test
    # of 3 November was failed)
    planned = [s.end for s in dates_in(first.get("text") or "", when) if s.end >= when.date()]
    until = max(planned) if planned else None
    newer = []
    for e, it in later:
        text, posted = it.get("text") or "", it.get("created_at")
        late = until is not None and posted.date() > until
        days = dates_in(text, posted) if passed or late else []
        if (passed and not days) or (late and not any(s.start > posted.date() for s in days)):
            continue
        if kind in ("where", "who"):  # a new place, or a new person ("taking Jo instead")
            if not _new_place(text, first.get("text") or ""):
                continue
            # the words that move it are not another topic's ("moves to Omar's place")
            theirs = _words(TO_SOMEONES.sub(" ", text))
        elif CHANGED.search(text):
            # "instead" alone moves a day only where it names one: "Eva cannot come, so I
            # am taking Jo instead" changes who goes, not when
            if (
                kind == "when"
                and all(INSTEAD.fullmatch(m.group(0)) for m in CHANGED.finditer(text))
                and not dates_in(text, it.get("created_at"))
            ):
                continue
            theirs = _words(text)
        else:
            continue
        # of a post that says several things, the change is to another of its sentences
        # than the question asks about when it names none of the question's words and
        # shares more with those sentences
        mine = _with_redone(theirs)
        if other and not mine & question and len(mine & other) > len(mine & asked):
            continue
        shared = len(words & mine)
        if kind == "where" and NEW_PLACE.search(text) and shared >= 1:
            newer.append((it.get("created_at"), e))
        elif shared >= min_shared and shared >= overlap * len(words | theirs):
            newer.append((it.get("created_at"), e))
    return (max(newer)[1], first_id) if newer else None


def _asked_in(text: str, question: set[str]) -> tuple[set[str], set[str]]:
    """The words of ``text``'s sentences that hold a word of the ``question`` (its
    ``_words``) and those of its other sentences (none when every sentence or none holds
    one). "When are her lessons?" asks of "Lessons with Bernie every Tuesday and Thursday
    at 5." in "Booked my driving test for 3 November. Lessons with ...", and "Rebooked the
    test for 1 December" changes the other sentence."""
    asked: set[str] = set()
    other: set[str] = set()
    for s in sentences(text):
        words = _words(s)
        (asked if question & words else other).update(words)
    return (asked, other) if asked and other else (set(), set())


def _with_redone(words: set[str]) -> set[str]:
    """``words`` and what their "re-" verbs redo: "rebooked" shares the first post's
    "booked" ("Booked my driving test for 3 November", "Rebooked the test for 1 December")."""
    return words | {w[2:].lstrip("-") for w in words if w[:2] == "re" and len(w) > 5}


def first_ids(run: pl.DataFrame, n: int) -> list[str]:
    """The ids of ``run``'s first ``n`` posts by rank (in its order when it has none),
    without sorting the whole run (an eval's runs hold a hundred posts or more). Read one
    by one: polars' ``gather`` costs 40 us a call, ten times this, and it is asked two or
    three times a question."""
    if "rank" not in run.columns:
        return run["event_id"].head(n).to_list()
    order = np.argsort(run["rank"].to_numpy(), kind="stable")[:n]
    ids = run["event_id"]
    return [ids[int(i)] for i in order]


def first_and_later(
    run: pl.DataFrame,
    items_of: Callable[[Sequence[str]], Sequence],
    depth: int,
    dated: bool = False,
) -> tuple[str, object, list[tuple[str, object]]] | None:
    """The first post of ``run``'s first ``depth`` (its id and the post) and those of the
    others posted after it, in rank order (a change is posted after what it changes); None
    when there are fewer than two posts or the first has no time. ``dated``: the first post
    that names a day and shares ``MIN_SHARED`` words with the first, where the first names
    none (a when-question's "The hen do. Fourteen of us went to Bath in the end", posted
    after the plan "hen do booked: Bath, 7 November" and its change)."""
    if run.height < 2:
        return None
    ids = first_ids(run, depth)
    items = {it.get("event_id"): it for it in items_of(ids)}
    head = ids[0]
    if dated and items.get(head) is not None and not _names_a_day(items[head]):
        about = _words(items[head].get("text") or "")
        head = next(
            (
                e
                for e in ids
                if e in items
                and _names_a_day(items[e])
                and len(about & _words(items[e].get("text") or "")) >= MIN_SHARED
            ),
            head,
        )
    first = items.get(head)
    when = first.get("created_at") if first is not None else None
    if when is None:
        return None
    later = [
        (e, items[e])
        for e in ids
        if e != head
        and e in items
        and items[e].get("created_at") is not None
        and items[e].get("created_at") > when
    ]
    return head, first, later


def _names_a_day(post) -> bool:
    when = post.get("created_at")
    return when is not None and bool(dates_in(post.get("text") or "", when))


def newest_first(run: pl.DataFrame, change: tuple[str, str]) -> pl.DataFrame:
    """``run`` with the newer post of ``change`` first and the post it replaces second (both
    with the first's score); the others keep their order. The service shows the replaced
    post no more (memkit.pipeline), so the answer quotes the new statement, though the old
    one shares more of the question's words."""
    return to_top(run, list(change))


def to_top(run: pl.DataFrame, event_ids: Sequence[str]) -> pl.DataFrame:
    """``run`` with these posts first, in this order, each with the run's top score; the
    others keep their order (ranks renumbered)."""
    run = run.sort("rank") if "rank" in run.columns else run
    top = float(run["score"].max())
    first = pl.concat(
        [run.filter(pl.col("event_id") == e).with_columns(pl.lit(top).alias("score"))
         for e in event_ids]
    )  # fmt: skip
    out = pl.concat([first, run.filter(~pl.col("event_id").is_in(list(event_ids)))])
    if "rank" in out.columns:
        out = out.with_columns(pl.int_range(1, pl.len() + 1, dtype=out["rank"].dtype).alias("rank"))
    return out


def _new_place(text: str, first: str) -> bool:
    """Whether a change names a place "instead" (or moves the plan to someone's) that the
    first post does not: a capitalised word inside a sentence, not a day or a month."""
    if not (INSTEAD.search(text) or TO_SOMEONES.search(text) or NEW_PLACE.search(text)):
        return False
    before = first.casefold()
    return any(
        w.casefold() not in CALENDAR and w.casefold() not in before for w in NAME.findall(text)
    )


def stated_change_first(
    run: pl.DataFrame, items_of: Callable[[Sequence[str]], Sequence], query: str | Question,
    depth: int = DEPTH,
) -> pl.DataFrame:  # fmt: skip
    """``run`` with the post that states a change first, for a question about a change
    ("Why did they cancel Lisbon?": "Lisbon trip is off, Sam's work moved a deadline", not
    the plan "Sam and I are going to Lisbon", which shares more of its words): the first of
    the first ``depth`` posts posted after the first post that says something changed
    (``CHANGED``) and has one of the question's own words besides the change's, when the
    first post says no change."""
    text = query.text if isinstance(query, Question) else query
    about_change = query.asks_change if isinstance(query, Question) else ASKS_CHANGE.search(text)
    asked = _words(ASKS_CHANGE.sub(" ", text)) if about_change else set()
    found = first_and_later(run, items_of, depth) if asked else None
    if found is None or CHANGED.search(found[1].get("text") or ""):
        return run
    first_id, _, later = found
    for e, it in later:
        text = it.get("text") or ""
        if CHANGED.search(text) and asked & _words(text):
            return newest_first(run, (e, first_id))
    return run


def settles(kind: str) -> bool:
    """Whether a changed fact settles a question of this kind (memkit.question.Question's
    ``kind``): a when-question asks for the new date, a where-question for a new place (only
    a change that names one: ``changed_fact``); "which hospital?" may be answered by the
    replaced post, which the newer one ("moved to 23 October") does not repeat. A
    who-question is settled as a where-question is, by a change naming someone new instead
    ("Eva cannot come, so I am taking my friend Jo instead")."""
    return kind in ("when", "where", "who")
