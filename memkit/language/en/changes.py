"""English words that say a plan or a fact changed ("moved to Friday", "postponed", "is off
this month") and a question that asks about a change ("Why was it moved?"): what
memkit.ranking.changes and the writer read posts and questions with. Each row carries the
texts it exists for and the near misses it must leave alone (tests/test_language.py runs
them)."""

from __future__ import annotations

import re

from memkit.language.tables import Rule

CHANGED_RULE = Rule(
    "changed",
    re.compile(
        r"\b(?:moved|moving|postponed|delayed|deferred|put off"
        r"|(?:push|pushed|pushing|put|putting) (?:\w+ ){0,2}back"
        r"|brought forward|(?:has|have|had|needs?) to move"
        r"|(?:moves? (?:it |things |everything )?|(?:pushed|bumped) (?:out )?)to (?:next |the )?"
        r"(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|\d)"
        r"|rescheduled|re-?booked|re-?arranged|change of plan"
        r"|changed (?:to|the (?:date|day|time|plan|venue))"
        r"|changed(?=[.,;:!]|$)"
        r"|cancel+ed|called off|instead|no longer|now on"
        r"|(?:is|are|'s) off(?= this| for| now| until|[.,;!]|$))",
        re.IGNORECASE,
    ),
    examples=(
        "Kowalski pushed the start back to 16 March, their tiler broke his wrist",
        "Put the meeting back to Friday",
        "Pushing November back a week so Yusuf can come, now Thursday 27 Nov",
        "putting the match back an hour",
        "the harvest supper has to move to Saturday 11 October",
        "can we move it to Friday?",
        "Book club is off this month, my landlord is doing the boiler",
        "the party is off!",
        "Mum's flight changed, she now lands on 5 December",
        "The plan has changed.",
        # the chess-wooden-boat-japanese walk: "When was the launch?" was answered with the first
        # day, 7 November
        "Storm warning, Greta's launch is pushed to 21 November.",
        "The wedding got bumped to June",
        "Flight delayed until Sunday",
        "We put off the trip until spring",
        # the royal-parks-kitchen-wedding walk: "When is Bea's half marathon?" was answered with the
        # race she deferred from
        "I'm not running the Royal Parks half, I deferred my place to the Brighton half",
        "Rebooked the test for 1 December",  # the edinburgh-pumpkin-driving-test walk
    ),
    counterexamples=(
        "we move to Leeds in spring",
        "Dan is off work today",
        "I am off to Spain on Monday",
        "Got the quote back from Kowalski & Sons",
        "I changed trains at Crewe",
        "I pushed to the front of the queue",  # "pushed to" a day, a month
        "The launch went well",
        "I booked the test for 1 December",  # the edinburgh-pumpkin-driving-test walk
    ),
    note="a post that states a change of plan: moved, put back, off, rebooked, instead",
)

# a question about a change itself ("Why did they cancel Lisbon?", "Why was it moved?")
ASKS_CHANGE_RULE = Rule(
    "asks_change",
    re.compile(
        r"\b(?:cancel+(?:ed|ing)?|call(?:ed)? off|moved?|postponed?|rescheduled?"
        r"|(?:put|push|pushed) back|pushed|delay(?:ed)?|defer(?:red)?|changed?)\b",
        re.IGNORECASE,
    ),
    examples=(
        "Why did she defer?",
        "Why was the race deferred?",
        "Why did they cancel Lisbon?",
        "Why was it moved?",
    ),
    counterexamples=("Why did she run?",),
    note="a question about a change itself",
)

# a where-question is settled only by a change that names a new place "instead" ("Going to
# Bamburgh instead, same dates"): "Let's do Friday instead" moves the day, and the post it
# replaces still holds the place
INSTEAD_RULE = Rule(
    "instead",
    re.compile(r"\binstead\b", re.IGNORECASE),
    examples=("Going to Bamburgh instead, same dates", "Let's do Friday instead"),
    counterexamples=("The launch went well", "Booked the cottage in Whitby"),
    note="a change that says what happens instead",
)
# or moves it to someone's ("My boiler broke, so book club moves to Omar's place, same date"):
# a where-question only, as the day stays the first post's ("we move to Leeds" is not a change)
TO_SOMEONES_RULE = Rule(
    "to_someones",
    re.compile(
        r"\bmov(?:e|es|ed|ing) (?:it |things |everything )?(?:over )?to (?-i:[A-Z])[\w-]*['’]s\b"
        r"(?: (?:place|flat|house|home))?",
        re.IGNORECASE,
    ),
    examples=("My boiler broke, so book club moves to Omar's place, same date",),
    counterexamples=("we move to Leeds in spring", "moved to Friday"),
    note="a plan moved to someone's place",
)
# or names the new place outright ("New venue for the concert is the Union Chapel"): then,
# for a where-question, the thing it moves is enough to tie it to the plan (one shared
# word, "concert")
NEW_PLACE_RULE = Rule(
    "new_place",
    re.compile(
        r"\b(?:new|different) (?:venue|location|address)\b|\b(?:is|are|'s) now (?:at|in)\b",
        re.IGNORECASE,
    ),
    examples=("New venue for the concert is the Union Chapel", "The party is now at the Crown"),
    counterexamples=("The concert is now sold out", "A new album from the band"),
    note="a change that names the new place",
)

CHANGED = CHANGED_RULE.pattern
INSTEAD = INSTEAD_RULE.pattern
TO_SOMEONES = TO_SOMEONES_RULE.pattern
NEW_PLACE = NEW_PLACE_RULE.pattern
ASKS_CHANGE = ASKS_CHANGE_RULE.pattern
CHANGES = (CHANGED_RULE, ASKS_CHANGE_RULE, INSTEAD_RULE, TO_SOMEONES_RULE, NEW_PLACE_RULE)
