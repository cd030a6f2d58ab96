"""Writing the answer text: what is quoted of a post (the sentence and its neighbours, or
the clause that answers), attributed and dated ("On 8 May 2023 Caroline wrote in
“Session 1”: “...”"), a when-question's date first, and the fixed texts (declined,
nothing found, an unresolved follow-up, the account of what was found, a time window's
posts)."""

from __future__ import annotations

import re
from collections import Counter

from memkit.answer.base import DECLINE, Answer, AnswerItem
from memkit.answer.render import render, render_name, shown_name
from memkit.core.items import as_datetime, timestamp
from memkit.core.text import Analyzer, sentences
from memkit.language.en.answers import CLAUSE_BREAK, INSTEAD_OF_A_PLAN, RECURRING, TO_A_DATE
from memkit.language.en.changes import CHANGED
from memkit.language.timeref import (
    MONTHS,
    WRITTEN,
    Span,
    clause_bounds,
    day_of,
    day_text,
    read_span,
    resolve,
)
from memkit.question import Question
from memkit.question.kinds import HOLDS, question_type, says_when

Quote = tuple[str, AnswerItem, float]  # (sentence, its item, its similarity to the question)
Lead = tuple[Span, str]  # the date a when-answer leads with, and how it was found


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def lead_text(span: Span) -> str:
    """ "On 7 May 2023", "In June 2023", "In the week before 9 June 2023"."""
    if span.days == 1:
        return f"On {day_text(span.start)}"
    if "weekend" in span.text:
        return f"On {span.text}"  # the weekend before ..., 2 weekends before ...
    return f"In {span.text}"  # the week before ..., June 2023, 2022


def _date_instead(text: str, posted) -> Lead | None:
    """The date of a new plan a post states "instead" ("We'll do it on 12 November
    instead"): the one in the clause that ends with it, where the clause names one."""
    if posted is None:
        return None
    for m in INSTEAD_OF_A_PLAN.finditer(text):
        clause = re.split(r"[,;.!?]", text[: m.start()])[-1]
        span = _first_date(clause, posted)
        if span is not None:
            return span, f"“{render(clause.strip())} instead”"
    return None


def _first_date(clause: str, posted) -> Span | None:
    """The first time a clause names: a relative one resolved against ``posted``, else a
    date written in it."""
    found = resolve(clause, posted)
    return found[0].span if found else read_span(clause, ref=posted)


def _month_named(window: str | None) -> str | None:
    """The month a window's text names ("January 2027" -> "January"), if any."""
    first = (window or "").split(" ")[0]
    return first if first.lower() in MONTHS else None


def window_text(reading) -> str | None:
    """How the answer names a question's time window ("May 2026"), where it has one."""
    days = getattr(reading, "days", None)
    if days is None:
        return None
    window = getattr(reading, "window", None)
    if window is not None:
        return window.span.text
    start, end = days
    return day_text(start) if start == end else f"{day_text(start)} to {day_text(end)}"


def written_dates(text: str, posted, taken=()) -> list[tuple[int, Span, str]]:
    """(position, span, "as written") of each date written in ``text`` with its day
    ("1 October", "3 May 2026") that does not start where a relative time was found."""
    out = []
    for m in WRITTEN.finditer(text):
        if m.start() in taken:
            continue
        span = read_span(m.group(0), ref=posted)
        if span is not None and span.start == span.end:
            out.append((m.start(), span, "as written"))
    return out


def around(text: str, at: int, before: int = 5, after: int = 4) -> str:
    """The words just before position ``at`` and from it on (a time phrase and its verb)."""
    return " ".join(text[:at].split()[-before:] + text[at:].split()[:after])


# -- the fixed texts ------------------------------------------------------------------------
def unresolved_text(query: str) -> str:
    return (
        f"I'm not sure what “{render(query)}” refers to: this is the start of our "
        "conversation. Ask me about something first, or say what you mean."
    )


def fallback_text(query: str, window: str | None = None) -> str:
    when = f" from {window}" if window else ""
    return (
        f"I couldn't find anything{when} about “{render(query)}” in the floors you asked "
        "about. You could try other words, a wider time range or fewer filters."
    )


def decline_text(people: set[str], closest_by: str | None = None) -> str:
    if people:
        names = " or ".join(render_name(p) for p in sorted(people))
        if closest_by:
            return (
                f"{DECLINE}: the closest post is {render(closest_by)}'s, and nothing {names} "
                "posted says so."
            )
        return f"{DECLINE}: nothing {names} posted in these floors says so."
    return f"{DECLINE}: nothing in these floors answers it closely enough."


def lacking_text(closest_by: str, lacking: str) -> str:
    """The decline of a question whose closest post lacks what it asks for ("how much",
    "the name", "the number", "the address": memkit.question.kinds.lacks_what_is_asked)."""
    return f"{DECLINE}: the closest post is {render(closest_by)}'s, and it does not say {lacking}."


def account_text(query: str, items: list[AnswerItem]) -> str:
    """The one-line account of what was found (``summary=False``)."""
    kinds = Counter(i.get("block_type") or i.get("block_type_name") or "post" for i in items)
    parts = ", ".join(plural(n, f"{kind} post") for kind, n in kinds.most_common())
    top = items[0]
    when = day_of(top.get("created_at"))
    title = render(top.get("block_title"))
    where = f" in “{title}”" if title else ""
    return (
        f"Found {plural(len(items), 'item')} for “{render(query)}” ({parts}); "
        f"the best match was posted{where}{f' on {when}' if when else ''}."
    )


# -- quoting --------------------------------------------------------------------------------
class Composer:
    """Writes the answer text; the writer (memkit.answer.extractive) sets what it reads:
    ``max_words`` (a longer quote is cut to the clause that answers; None: never),
    ``max_quote_chars`` and ``_analyzer`` (the terms of a text)."""

    max_words: int | None
    max_quote_chars: int
    _analyzer: Analyzer

    def compose(
        self,
        query: str,
        quotes: list[Quote],
        strength=None,
        rival=None,
        question: Question | None = None,
    ) -> Answer:
        """The answer text from (sentence, item, similarity) quotes, best first; a
        when-question leads with the date the first quote gives."""
        question = question or Question.of(query)
        lead = (
            self.date_of(quotes[0][0], quotes[0][1], query, question)
            if "when" in question.asks_for
            else None
        )
        shown = [
            render(self.quote(query, sentence, item, question.kind)) for sentence, item, _ in quotes
        ]
        lines = [
            self.attributed(text, item, lead=lead if n == 0 else None)
            for n, (text, (_, item, _)) in enumerate(zip(shown, quotes))
        ]
        return Answer(
            " ".join(lines),
            quotes=[
                {
                    "event_id": item.get("event_id"),
                    "sentence": sentence,
                    "score": sim,
                    "shown": text,
                }
                for (sentence, item, sim), text in zip(quotes, shown)
            ],
            date=lead[0] if lead else None,
            strength=strength,
            rival=rival,
        )

    def window_summary(
        self,
        items: list[AnswerItem],
        window: str | None,
        shown: int = 3,
        found: int | None = None,
        query: str = "",
        ahead: bool = False,
        ranked: bool = False,
    ) -> Answer:
        """What a question about a time window gets ("What happened last May?"): how many
        posts there are (``found``: all the window holds, default the items given) and the
        most telling ones, in the order they were posted, each by its first sentence or
        the one sharing most words with ``query`` ("What did Hana say she'll grow next
        year?": "Next year I am going to try onions"), a sentence naming the window's month
        first. ``ahead``: the window is still to come, so its posts are plans about it,
        written before it ("1 post about January 2027"). ``ranked``: the items were
        searched for what else the question names ("What happened to Kofi's kitchen in late
        October?"), so the first, the best match, is quoted first, the others after it in
        the order they were posted."""
        top = sorted(
            items[int(ranked) : shown],
            key=lambda i: (timestamp(i.get("created_at")), i.get("event_id")),
        )
        top = [items[0], *top] if ranked and items else top
        terms = set(self._analyzer(query))
        month = _month_named(window)
        lines, said = [], []
        for item in top:
            parts = sentences(item.get("text"))
            best = (
                max(
                    parts,
                    key=lambda p: (
                        bool(month and re.search(rf"\b{month}\b", p, re.IGNORECASE)),
                        len(terms & set(self._analyzer(p))),
                        -parts.index(p),
                    ),
                )
                if parts
                else None
            )
            quote = self.quote("", best, item) if best else item.get("text") or ""
            said.append(best)
            lines.append(self.attributed(quote, item, lead=None))
        n = max(found or 0, len(items))
        link = "about" if ahead else "from"
        head = f"{plural(n, 'post')}{f' {link} {window}' if window else ''}"
        more = f" (and {n - len(top)} more)" if n > len(top) else ""
        return Answer(
            f"{head}{more}. " + " ".join(lines),
            quotes=[
                {"event_id": i.get("event_id"), "sentence": sentence, "score": None}
                for i, sentence in zip(top, said)
            ],
        )

    def quote(self, query: str, sentence: str, item: AnswerItem, kind: str | None = None) -> str:
        """What is quoted of a post: the chosen sentence and the sentences around it, while
        they fit in ``max_words`` and are not questions (a chat line is usually quoted
        whole: "Yeah she's fine. They've taken the car to Hendry's" answers where the car
        went only with its second sentence), else the sentence cut to the clause that
        answers (``span``; ``kind``: the question's, read with it, else read here)."""
        parts = sentences(item.get("text"))
        if (
            self.max_words is None
            or sentence not in parts
            or len(sentence.split()) > self.max_words
        ):
            return self.span(query, sentence, kind)
        lo = hi = parts.index(sentence)
        size = len(sentence.split())
        while True:
            grown = False
            for a, b in ((lo, hi + 1), (lo - 1, hi)):
                if 0 <= a and b < len(parts):
                    added = parts[b if b > hi else a]
                    fits = size + len(added.split()) <= self.max_words
                    if fits and not added.rstrip().endswith("?"):
                        lo, hi, size, grown = a, b, size + len(added.split()), True
                        break
            if not grown:
                break
        return " ".join(parts[lo : hi + 1])

    def span(self, query: str, sentence: str, kind: str | None = None) -> str:
        """The sentence, or past ``max_words`` the clause holding most of the question's
        terms (what it asks for breaks ties) with its neighbours up to ``max_words``,
        marked with "…" where cut."""
        words = sentence.split()
        if self.max_words is None or len(words) <= self.max_words:
            return sentence
        clauses = [c for c in CLAUSE_BREAK.split(sentence) if c.strip()]
        terms = set(self._analyzer(query))
        holds = HOLDS.get(kind if kind is not None else question_type(query))

        def weight(c: str) -> tuple:
            answers = bool(holds and holds.search(c)) or says_when(c)
            return len(terms & set(self._analyzer(c))), answers

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

    def date_of(
        self, sentence: str, item: AnswerItem, query: str = "", question: Question | None = None
    ) -> Lead | None:
        """When a quoted sentence says something happened: a relative time in it (or in the
        rest of its post) resolved against the post's time, a date written in it, or else
        the post's own day. Returns (span, how it was found). Of several times, the one
        whose neighbouring words the question shares most ("when does he start?" and "Last
        week at the Leeds office, start the London job on the 30th": the 30th)."""
        posted = as_datetime(item.get("created_at"))
        for moved in CHANGED.finditer(sentence) if posted is not None else ():
            # "moved to Friday 20 November, ... on the 14th"; "Change of plan: the party
            # moves to Sunday 13 September, the landlord needs Saturday": the date the plan
            # moves to, read from the first words naming a move that are followed by one
            said = moved.group(0)
            cut = said.lower().find(" to ")  # "moves to Sun" holds the start of its date
            said = said[:cut] if cut >= 0 else said
            start = moved.start() + len(said)
            clause = re.split(r"[,;.!?]", sentence[start:], maxsplit=1)[0]
            if not TO_A_DATE.match(clause):
                continue  # "we moved here four years ago", "Change of plan:": no new date here
            span = _first_date(clause, posted)
            if span is not None:
                return span, f"“{render(said + clause.rstrip())}”"
        # "Book club is off tomorrow ... We'll do it on 12 November instead"
        instead = _date_instead(item.get("text") or "", posted)
        if instead is not None:
            return instead
        question = question or Question.of(query)
        if "habit" in question.asks_for and RECURRING.search(sentence):
            return None  # "When are her lessons?": "every Tuesday and Thursday", no one day
        if posted is not None:
            terms = set(self._analyzer(query))
            ahead = "ahead" in question.asks_for

            def shared(text: str) -> int:
                return len(terms & set(self._analyzer(text)))

            chosen = None
            # a sentence that keeps days ("Saturday mornings at 10") answers a when without
            # the rest of its post's dates ("First lesson with my teacher today")
            texts = (
                (sentence,) if RECURRING.search(sentence) else (sentence, item.get("text") or "")
            )
            for text in texts:
                found = [(m.start, m.span, f"“{render(m.phrase)}”") for m in resolve(text, posted)]
                if not found:
                    continue
                # a date written beside them competes too ("Promoted to senior designer
                # today, starting the new role on 1 October": "when does her new role start?")
                found += written_dates(text, posted, taken=[f[0] for f in found])
                # in a post saying a plan changed, the last date it names is the new one
                # ("CalMac cancelled the 18th sailing, we're now going on the 19th of July")
                # then the one in a clause the question shares words with, then, for a
                # question about a plan, one after the post, then the nearest words shared
                changed = CHANGED.search(text) is not None
                at, span, how = max(
                    found,
                    key=lambda f: (
                        f[0] if changed else 0,
                        shared(text[slice(*clause_bounds(text, f[0]))]),
                        ahead and f[1].start > posted.date(),
                        shared(around(text, f[0])),
                        shared(" ".join(text[: f[0]].split()[-5:])),  # the words it follows
                        -f[0],
                    ),
                )
                later = span.start > posted.date()
                if chosen is None:
                    chosen = span, how
                    if not ahead or later:
                        return chosen
                    # a question about a plan whose sentence names no later day reads the
                    # rest of the post ("ran 28 km today. The race is on 6 December")
                    continue
                return (span, how) if later else chosen
            if chosen is not None:
                return chosen
        written = read_span(sentence, ref=posted)
        if written is not None:
            return written, "as written"
        if RECURRING.search(sentence):
            return None  # "they train on Wednesday evenings": no one day answers when
        if posted is not None:
            return Span(posted.date(), posted.date(), day_text(posted)), "the day it was posted"
        return None

    def attributed(self, sentence: str, item: AnswerItem, lead: Lead | None) -> str:
        """The quote with who wrote it, when and where (a when-answer: its date first). What
        the post's author and the floor's owner wrote (the quote, the name, the block's
        title) is ``render``ed: none of it can close the answer's “ ” marks."""
        sentence = render(sentence)
        quote = (
            sentence
            if len(sentence) <= self.max_quote_chars
            else sentence[: self.max_quote_chars - 1] + "…"
        )
        who = shown_name(item) or "someone"
        when = day_of(item.get("created_at"))
        title = render(item.get("block_title"))
        where = f" in “{title}”" if title else ""
        posted = as_datetime(item.get("created_at"))
        notes = (
            [f"{render(m.phrase)} = {m.span.text}" for m in resolve(sentence, posted)]
            if posted
            else []
        )
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
            end = "" if quote[-1:] in ".!?…" else "."
            return f"{lead_text(span)} — {said}: “{quote}”{end}"
        head = (
            f"On {when} {who} wrote{where}" if when else f"{who[:1].upper()}{who[1:]} wrote{where}"
        )
        end = "" if quote[-1:] in ".!?…" and not note else "."
        return f"{head}: “{quote}”{note}{end}"
