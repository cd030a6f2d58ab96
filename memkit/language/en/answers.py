"""English sentences as the writer reads them: a day that comes back ("on Wednesday
evenings"), a habit kept ("twice a week"), a measure ("212 pages"), the author as the one
who did it ("I baked the cake"), a day or a time of day. memkit.answer's composing and its
choice of another sentence read them. Each row carries the sentences it exists for and the
near misses it must leave alone (tests/test_language.py runs them)."""

from __future__ import annotations

import re

from memkit.language.tables import Rule
from memkit.language.timeref import CALENDAR, WEEKDAYS

# a day that comes back ("on Wednesday evenings", "Tuesdays", "every Sunday"): a when-question
# it answers gets no date of its own (the post's day would read as the answer)
_DAY = f"(?:{'|'.join(WEEKDAYS)})"
RECURRING_RULE = Rule(
    "recurring",
    re.compile(
        rf"\b(?:every|each) {_DAY}\b|\b{_DAY}s\b"
        rf"|\b{_DAY} (?:mornings|afternoons|evenings|nights)\b",
        re.IGNORECASE,
    ),
    examples=(
        "we rehearse on Wednesday evenings",
        "Lessons with Bernie every Tuesday and Thursday at 5.",
        "Tuesdays are swim days",
    ),
    counterexamples=("First rehearsal tonight", "See you on Tuesday"),
    note="a day of the week that comes back",
)
# the days a habit keeps, as a habit asked is answered ("When do they rehearse?"): a day
# that comes back, or every day, week or month, or so many times a week
KEEPS_DAYS_RULE = Rule(
    "keeps_days",
    re.compile(
        RECURRING_RULE.pattern.pattern
        + r"|\b(?:every|each) (?:day|week|month|morning|evening|night|weekend|other)\b"
        r"|\b(?:daily|weekly|fortnightly|monthly)\b|\b(?:once|twice) a (?:day|week|month)\b",
        re.IGNORECASE,
    ),
    examples=("we rehearse on Wednesday evenings", "We train twice a week", "she swims daily"),
    counterexamples=("First rehearsal tonight", "We trained on Saturday"),
    note="the days a habit keeps",
)
# the length of a thing ("How long is the thesis?") is a measure: "212 pages", "480 km"
MEASURE_RULE = Rule(
    "measure",
    re.compile(
        r"\b\d[\d,.]*\s?(?:pages?|words?|chapters?|km|kilometres?|kilometers?|miles?|metres?"
        r"|meters?|m|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|months?|years?|laps?|bars?)\b"
        r"|\b(?:an?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty|forty"
        r"|fifty|hundred) (?:pages?|words?|chapters?|miles?|minutes?|hours?|days?|nights?|weeks?"
        r"|months?|years?|laps?|bars?)\b",
        re.IGNORECASE,
    ),
    examples=("Thesis submitted! 212 pages on coral bleaching", "480 km over four days"),
    counterexamples=("Thesis submitted!", "a long walk by the sea"),
    note="a measure: a number of pages, kilometres, hours, ...",
)
# the author as the one who did it ("I baked the cake"): "the school moved my course" is not
SUBJECT_I_RULE = Rule(
    "subject_i",
    re.compile(r"\b(?:I|I'm|I've|I'll|I'd|we|we're|we've)\b", re.IGNORECASE),
    examples=("I baked the cake", "we're moving in May"),
    counterexamples=("the school moved my course",),
    note="the author as the one who did it",
)
# a day, a month or a time of day said in a sentence's own words
DAY_OR_CLOCK_RULE = Rule(
    "day_or_clock",
    re.compile(
        r"\b(?:" + "|".join(sorted(CALENDAR)) + r")s?\b|\b\d{1,2}(?::\d\d)?\s?(?:am|pm)\b", re.I
    ),
    examples=("a pottery class on Tuesday evenings", "doors open at 7pm", "back in March"),
    counterexamples=("a pottery class", "open late"),
    note="a day, a month or a time of day",
)

# a new plan stated "instead" ("We'll do it on 12 November instead"), not "instead of"
INSTEAD_OF_A_PLAN_RULE = Rule(
    "instead_of_a_plan",
    re.compile(r"\binstead\b(?! of)", re.IGNORECASE),
    examples=("We'll do it on 12 November instead",),
    counterexamples=("Tea instead of coffee", "Booked it for Friday"),
    note="the clause before it names the new plan",
)
# where a long sentence may be cut to the clause that answers: after a comma, a semicolon
# or a colon, before a dash, before a conjunction
CLAUSE_BREAK_RULE = Rule(
    "clause_break",
    re.compile(r"(?<=[,;:])\s+|\s+(?=[–—-]\s)|\s+(?=(?:and|but|because|so|which|while) )"),
    examples=("The flat is lovely, the rent is 950", "We went to Leeds and then home"),
    counterexamples=("The flat is lovely",),
    note="a break between clauses",
)
# the words after a change that lead to its new date ("moved to Friday", "pushed back to
# 16 March", "postponed until May"): "we moved here four years ago" leads to none
TO_A_DATE_RULE = Rule(
    "to_a_date",
    re.compile(r"\s+(?:back\s+)?(?:to|until|till|for|on)\b"),
    examples=(" to Friday 20 November", " back to 16 March", " until May"),
    counterexamples=(" here four years ago", ":"),
    note="what follows a change's words when a new date comes next (matched at the start)",
)

RECURRING = RECURRING_RULE.pattern
INSTEAD_OF_A_PLAN = INSTEAD_OF_A_PLAN_RULE.pattern
CLAUSE_BREAK = CLAUSE_BREAK_RULE.pattern
TO_A_DATE = TO_A_DATE_RULE.pattern
KEEPS_DAYS = KEEPS_DAYS_RULE.pattern
MEASURE = MEASURE_RULE.pattern
SUBJECT_I = SUBJECT_I_RULE.pattern
DAY_OR_CLOCK = DAY_OR_CLOCK_RULE.pattern
SENTENCES = (
    RECURRING_RULE,
    KEEPS_DAYS_RULE,
    MEASURE_RULE,
    SUBJECT_I_RULE,
    DAY_OR_CLOCK_RULE,
    INSTEAD_OF_A_PLAN_RULE,
    CLAUSE_BREAK_RULE,
    TO_A_DATE_RULE,
)
