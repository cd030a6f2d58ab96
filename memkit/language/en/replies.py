"""English replies in a feed: a post that asks someone by name ("Ines, can Pepper come to
the gig?") and a reply that opens with a yes, a no, a refusal or the asker's name ("No Raj,
she hates loud music"), which memkit.ranking.replies reads. Each row carries the texts it
exists for and the near misses it must leave alone (tests/test_language.py runs them)."""

from __future__ import annotations

import re

from memkit.language.tables import Rule

# the question's addressees: names opening the post ("Ines, can ...", "Sadie, Olek, you
# in?") or a question in it ("... at 7.30. Noor, can you still come?"), closing a question
# ("... to the gig, Ines?") or asked on their own after it ("... on Friday? Marek?")
_NAME = r"[A-Z][\w'’-]+"
_NAMES = rf"{_NAME}(?:(?:,\s*|\s+and\s+|\s*&\s*){_NAME})*"
ASKED_BY_NAME_RULE = Rule(
    "asked_by_name",
    re.compile(
        rf"^\s*({_NAMES}),\s|(?<=[.!?])\s+({_NAMES}),\s(?=[^.!?]*\?)"
        rf"|,\s*({_NAME})\s*\?|[?!.]\s+({_NAME})\s*\?\s*$"
    ),
    examples=(
        "Ines, can Pepper come to the gig? Dogs are allowed at the Lexington.",
        "Sadie, Olek, you in?",
        "Drinks at 7.30. Noor, can you still come?",
        "Are you coming to the gig, Ines?",
        "Dinner on Friday? Marek?",
    ),
    counterexamples=("can anyone come on Friday?", "I can come on Friday."),
    note="a post that asks someone by name (a case-sensitive pattern: names are capitalised)",
)
OPENS_A_REPLY_RULE = Rule(
    "opens_a_reply",
    re.compile(
        r"^\s*(?:yes|yeah|yep|no|nope|nah|sure|of course|definitely|absolutely|sorry|sadly"
        r"|unfortunately|afraid not|not|can[’']t|cannot|can not|won[’']t|count me in|i[’']m in"
        r"|wouldn[’']t miss it|would not miss it|i[’']ll be there|see you there|love to)(?!\w)",
        re.IGNORECASE,
    ),
    examples=(
        "No Raj, she hates loud music, I'll leave her with my sister Lucia",
        "Yes! Dill, it has a Michelin star",
        "Can't Hana, I'm working",
        "count me in",
    ),
    counterexamples=("Nobody came to the quiz", "Dinner on Friday?"),
    note="a reply that opens with a yes, a no or a refusal",
)

ASKED_BY_NAME = ASKED_BY_NAME_RULE.pattern
OPENS_A_REPLY = OPENS_A_REPLY_RULE.pattern
REPLIES = (ASKED_BY_NAME_RULE, OPENS_A_REPLY_RULE)
