"""Dates in what people write.

``resolve(text, when)`` finds relative time expressions in a post ("yesterday", "last
week", "last Saturday", "two weeks ago", "next month") and turns each into a
:class:`Span` of calendar days, counted from the post's own time: "yesterday" in a post
of 8 May 2023 is 7 May 2023. A span is written the way a person would say it ("7 May
2023", "the week before 9 June 2023", "the Sunday before 25 May 2023", "June 2023",
"2022"), and ``read_span`` reads exactly those phrasings (and plain dates) back, so a
date written in an answer can be compared with a gold answer (``Span.matches``).

Conventions (those of the LoCoMo annotations): "last week" is the seven days before the
post; "last <weekday>" the nearest such day before it; "last weekend" the nearest Saturday
and Sunday both before it; "this/next <weekday>" the nearest such day after it; "N weeks
ago" the week around the day N weeks before; months and years are calendar ones. Vague
expressions ("a few days ago", "recently") resolve to nothing rather than to a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2}


def day_text(d: date) -> str:
    return f"{d.day} {d:%B %Y}"


@dataclass(frozen=True)
class Span:
    """Calendar days ``start``..``end`` (inclusive) and how to say them."""

    start: date
    end: date
    text: str
    year_known: bool = True

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def matches(self, gold: "Span") -> bool:
        """This (an answer's date) names the gold span: at least as precise, and overlapping.
        A gold date without a year ("13 August") matches that day of any year."""
        if self.days > gold.days:
            return False
        if not gold.year_known:
            d = self.start
            while d <= self.end:
                if (d.month, d.day) == (gold.start.month, gold.start.day):
                    return True
                d += timedelta(days=1)
            return False
        return self.start <= gold.end and gold.start <= self.end


# -- spans as they are written -----------------------------------------------------------
def day(d: date) -> Span:
    return Span(d, d, day_text(d))


def month(year: int, m: int) -> Span:
    year, m = year + (m - 1) // 12, (m - 1) % 12 + 1
    start = date(year, m, 1)
    end = date(year + (m == 12), m % 12 + 1, 1) - timedelta(days=1)
    return Span(start, end, f"{start:%B %Y}")


def year(y: int) -> Span:
    return Span(date(y, 1, 1), date(y, 12, 31), str(y))


def week_before(ref: date) -> Span:
    return Span(ref - timedelta(days=7), ref - timedelta(days=1), f"the week before {day_text(ref)}")


def week_after(ref: date) -> Span:
    return Span(ref + timedelta(days=1), ref + timedelta(days=7), f"the week after {day_text(ref)}")


def week_of(ref: date) -> Span:
    return Span(ref - timedelta(days=3), ref + timedelta(days=3), f"the week of {day_text(ref)}")


def weekday_before(ref: date, wd: int) -> Span:
    d = ref - timedelta(days=(ref.weekday() - wd - 1) % 7 + 1)
    return Span(d, d, f"the {WEEKDAYS[wd].title()} before {day_text(ref)}")


def weekday_after(ref: date, wd: int) -> Span:
    d = ref + timedelta(days=(wd - ref.weekday() - 1) % 7 + 1)
    return Span(d, d, f"the {WEEKDAYS[wd].title()} after {day_text(ref)}")


def weekend_before(ref: date, n: int = 1) -> Span:
    sunday = ref - timedelta(days=(ref.weekday() - 6 - 1) % 7 + 1) - timedelta(weeks=n - 1)
    count = "the weekend" if n == 1 else f"{n} weekends"
    return Span(sunday - timedelta(days=1), sunday, f"{count} before {day_text(ref)}")


def weekend_after(ref: date) -> Span:
    saturday = ref + timedelta(days=(5 - ref.weekday() - 1) % 7 + 1)
    return Span(saturday, saturday + timedelta(days=1), f"the weekend after {day_text(ref)}")


# -- resolving relative expressions ------------------------------------------------------------
_NUM = r"(\d+|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_WD = "(" + "|".join(WEEKDAYS) + r"|mon|tues?|wed|thu|thurs?|fri|sat|sun)\.?"
_ABBREV = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5, "sun": 6}
_RULES: list[tuple[re.Pattern, object]] = [
    (r"the day before yesterday", lambda m, d: day(d - timedelta(days=2))),
    (r"yesterday|last night", lambda m, d: day(d - timedelta(days=1))),
    (r"today|tonight|this (?:morning|afternoon|evening)|earlier today", lambda m, d: day(d)),
    (r"the day after tomorrow", lambda m, d: day(d + timedelta(days=2))),
    (r"tomorrow", lambda m, d: day(d + timedelta(days=1))),
    (_NUM + r" days? ago", lambda m, d: day(d - timedelta(days=_n(m[1])))),
    (_NUM + r" weeks? ago", lambda m, d: week_of(d - timedelta(weeks=_n(m[1])))),
    (_NUM + r" weekends? ago", lambda m, d: weekend_before(d, _n(m[1]))),
    (_NUM + r" months? ago", lambda m, d: month(d.year, d.month - _n(m[1]))),
    (_NUM + r" years? ago", lambda m, d: year(d.year - _n(m[1]))),
    (r"(?:last|this past|past) week", lambda m, d: week_before(d)),
    (r"next week", lambda m, d: week_after(d)),
    (r"this week", lambda m, d: week_of(d)),
    (r"(?:last|this past|past) weekend", lambda m, d: weekend_before(d)),
    (r"(?:this|next|this coming) weekend", lambda m, d: weekend_after(d) if d.weekday() < 5 else
     Span(d - timedelta(days=d.weekday() - 5), d + timedelta(days=6 - d.weekday()), f"the weekend of {day_text(d)}")),
    (r"(?:last|this past|past) " + _WD, lambda m, d: weekday_before(d, _weekday(m[1]))),
    (r"(?:next|this coming|this) " + _WD, lambda m, d: weekday_after(d, _weekday(m[1]))),
    (r"last month", lambda m, d: month(d.year, d.month - 1)),
    (r"this month", lambda m, d: month(d.year, d.month)),
    (r"next month", lambda m, d: month(d.year, d.month + 1)),
    (r"last year", lambda m, d: year(d.year - 1)),
    (r"this year", lambda m, d: year(d.year)),
    (r"next year", lambda m, d: year(d.year + 1)),
]
_RULES = [(re.compile(r"\b(?:" + p + r")\b", re.IGNORECASE), f) for p, f in _RULES]


def _weekday(word: str) -> int:
    word = word.lower().rstrip(".")
    return WEEKDAYS.index(word) if word in WEEKDAYS else _ABBREV[word]


def _n(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBERS[word]


@dataclass(frozen=True)
class Mention:
    phrase: str  # as written in the text
    start: int  # character offset in the text
    span: Span


def resolve(text: str, when: datetime | date) -> list[Mention]:
    """The relative time expressions in ``text``, resolved against ``when`` (the post's
    time), in reading order; an expression inside a longer one counts once."""
    ref = when.date() if isinstance(when, datetime) else when
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for pattern, make in _RULES:  # longer expressions come first in _RULES
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            groups = [m.group(0)] + [g.lower() if g else g for g in m.groups()]
            try:
                span = make(groups, ref)
            except (OverflowError, ValueError):  # "tomorrow" on 31 December 9999: no such day
                continue
            found.append(Mention(m.group(0), m.start(), span))
            taken.append((m.start(), m.end()))
    return sorted(found, key=lambda x: x.start)


# -- reading written dates ------------------------------------------------------------------------
_MONTH = "(" + "|".join(MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
_DATE = rf"(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH},? (\d{{4}})|{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})"
_READ = re.compile(
    rf"(?P<rel>(?:the )?(?:(?P<n>{_NUM}) )?(?P<unit>{'|'.join(WEEKDAYS)}|weekends?|week) (?P<dir>before|after|of) (?P<rd>{_DATE}))"
    rf"|(?P<full>{_DATE})"
    rf"|(?P<dm>(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH})\b"
    rf"|(?P<my>{_MONTH},? (\d{{4}}))"
    r"|(?P<y>\b(?:19|20)\d{2}\b)",
    re.IGNORECASE)
_DATE_RE = re.compile(_DATE, re.IGNORECASE)


def _month_number(name: str) -> int:
    name = name.lower().rstrip(".")[:3]
    return [m[:3] for m in MONTHS].index(name) + 1


def _date(text: str) -> date:
    m = _DATE_RE.fullmatch(text.strip())
    if m[1]:
        return date(int(m[3]), _month_number(m[2]), int(m[1]))
    return date(int(m[6]), _month_number(m[4]), int(m[5]))


def read_span(text: str) -> Span | None:
    """The first date written in ``text`` ("7 May 2023", "May 7, 2023", "the week before
    9 June 2023", "The Sunday before 25 May 2023", "two weekends before 17 July 2023",
    "June 2023", "13 August", "2022") as a span; None when it names none."""
    for m in _READ.finditer(text or ""):
        try:
            if m["rel"]:
                ref = _date(m["rd"])
                unit, direction = m["unit"].lower(), m["dir"].lower()
                n = _n(m["n"]) if m["n"] else 1
                if unit in WEEKDAYS:
                    wd = WEEKDAYS.index(unit)
                    return weekday_before(ref, wd) if direction != "after" else weekday_after(ref, wd)
                if unit.startswith("weekend"):
                    return weekend_after(ref) if direction == "after" else weekend_before(ref, n)
                return {"before": week_before, "after": week_after, "of": week_of}[direction](ref)
            if m["full"]:
                return day(_date(m["full"]))
            if m["dm"]:
                parts = m["dm"].split()
                d = date(2000, _month_number(parts[1]), int(re.sub(r"\D", "", parts[0])))  # a leap year
                return Span(d, d, f"{d.day} {d:%B}", year_known=False)
            if m["my"]:
                name, y = m["my"].replace(",", " ").split()
                return month(int(y), _month_number(name))
            return year(int(m["y"]))
        except (ValueError, KeyError, OverflowError):  # "31 February 2023", "30 Feb", before year 1: not a date
            continue
    return None
