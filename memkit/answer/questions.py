"""What a question asks for, and the patterns the writer reads questions and sentences with:
its type (when, where, who, ...), whether it asks for several things, what a sentence holds
that answers each type, first and second person, greetings, past forms of verbs."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache

from memkit.text import IRREGULAR, Analyzer
from memkit.timeref import CALENDAR, read_span, resolve

WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:date|day|year|month|time)\b|\bhow long ago\b"
    r"|\bwhich (?:year|month|day)\b",
    re.IGNORECASE,
)
# "What did the repair cost?" asks how much, as "How much did the repair cost?" does
# (the verb at the end: "What did Tom think of the cost?" does not; nor does "What did
# they pay for?"), so do "What did the plumber charge?" and "What did she spend?", and
# "What was the price?" as "How much was it?"
COST_ASKED = (
    r"^\W*what (?:did|does|do|will|would|could)\b[^?]*(?<!\bthe )(?<!\bof )"
    r"\b(?:cost|charge|pay|spend)"
    r"(?:\s+(?:them|him|her|you|us|me))?"
    r"\W*$|^\W*what(?:'s| is| was| are| were) the (?:total )?(?:cost|price)\b"
)
TYPES = [  # first match wins
    ("count", re.compile(r"\bhow (?:many|much|often)\b|" + COST_ASKED, re.I)),
    ("duration", re.compile(r"\bhow long\b(?! ago)", re.I)),
    ("when", WHEN),
    ("where", re.compile(r"\bwhere\b", re.I)),
    ("who", re.compile(r"\bwho(?:se|m)?\b", re.I)),
    (
        "yesno",
        re.compile(
            r"^\s*(?:would|is|are|does|do|did|was|were|has|have|can|could|will|should)\b", re.I
        ),
    ),
]
NUMBER = (
    r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|once|twice|a few|several|couple)\b"
)
HOLDS = {  # what a sentence holds that answers each question type
    "count": re.compile(NUMBER + r"|\btimes?\b|\bevery\b|\bdaily\b|\bweekly\b", re.I),
    "duration": re.compile(NUMBER + r"\s*(?:years?|months?|weeks?|days?)|\bsince\b", re.I),
    "where": re.compile(r"\b(?:in|at|to|from|near)\s+(?:the\s+)?[A-Z]"),
}
LIST = re.compile(
    r"\b(?:what|which) (?:\w+ )?(?:activities|things|books|places|hobbies|kinds|types|events"
    r"|ways|items|pets|sports"
    r"|instruments|games|countries|cities|foods|states|songs|movies|artists|bands)\b"
    r"|\bwhat (?:are|were|have|has) \w+(?:'s)? (?:\w+ )?\w+s\b|\bwhere has\b|\bwhat \w+ has\b"
    r"|\bin what ways\b",
    re.I,
)
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|we|our|us)\b", re.I)
SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.I)
GREETING = frozenset(
    Analyzer()(
        "hey hi hello thanks thank wow congrats congratulations yeah yes no oh haha awesome "
        "great cool sure totally glad good"
    )
)
# A name spoken to ("Thanks, Caroline!"): format with name=re.escape(the name).
VOCATIVE = (
    r"(?:^|[.!?]\s+|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|yeah|yes"
    r"|oh|aw+|sorry|so"
    r"|and|but|haha|ha)\b,?\s*){name}\s*[,!.?]"
)

_IRREGULAR_RE = re.compile(r"\b(" + "|".join(IRREGULAR) + r")\b", re.IGNORECASE)

# Words that say what kind of answer a question wants rather than what it is about.
ANSWER_TYPE_TERMS = frozenset(
    Analyzer()(
        "cost costs price much many time times long often date day year month week "
        "kind type sort happened happen "
        # a measure asked for: "how heavy is it?" is answered by "it weighs eight kilos"
        "heavy old tall big far fast colour color"
    )
)


def question_type(query: str) -> str:
    """count, duration, when, where, who, yesno or what."""
    return next((name for name, pattern in TYPES if pattern.search(query)), "what")


def wants_list(query: str) -> bool:
    """The question asks for several things ("What activities does Melanie do?")."""
    return bool(LIST.search(query))


def asks_when(query: str) -> bool:
    """The question asks when (a when-question's answer leads with the date)."""
    return bool(WHEN.search(query))


@lru_cache(maxsize=65536)  # the same candidate sentences come back question after question
def base_forms(text: str) -> str:
    """The text with irregular past forms put in their base form ("drove" -> "drive")."""
    return _IRREGULAR_RE.sub(lambda m: IRREGULAR[m.group(1).lower()], text)


# A pure function of the sentence, asked for every candidate of every question.
@lru_cache(maxsize=100_000)
def says_when(sentence: str) -> bool:
    """The sentence says when: a relative time ("yesterday") or a date written in it."""
    return bool(resolve(sentence, datetime(2000, 1, 1))) or read_span(sentence) is not None


# What some questions cannot be answered without: a "how much" question (not of time) by
# an amount, a question for a name by a name. A quote without one answers something else
# ("What is the name of Nina's cat?" and "Thinking about getting a cat").
_AMOUNT_ASKED = re.compile(
    r"\bhow much\b(?!\s+(?:time|longer|later|earlier|sooner|more)\b)|" + COST_ASKED, re.I
)
_AMOUNT = re.compile(
    r"[£$€]\s?\d|\d|\b(?:free|nothing|zero|one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred|thousand|million|half|quid"
    r"|grand|pounds?|dollars?|euros?)\b",
    re.I,
)
# "how much did the map cost?" asks for money: "2 miles" is an amount but not a price; so
# does "how much are tickets?" ("we sold 60 tickets" does not say)
_MONEY_ASKED = re.compile(
    r"\b(?:cost|costs|price|priced|pay|paid|spend|spent|charge|charged|fee|worth)\b"
    r"|\bhow much (?:is|are|was|were)\b",
    re.I,
)
_MONEY = re.compile(
    r"[£$€¥]\s?\d|\d\s?(?:p|k)\b|\b(?:free|nothing|quid|grand|pounds?|dollars?|euros?|pence"
    r"|bucks|cents?)\b",
    re.I,
)
_NAME_ASKED = re.compile(
    r"\bwhat(?:'s| is| was| are| were)? (?:the |their |his |her |its )?(?:sur|nick)?names?\b"
    # "Mei's sister's name", "Sam's surname"
    r"|\bwhat(?:'s| is| was| are| were) (?:\w+'s? ){1,3}(?:sur|nick)?names?\b"
    r"|\bwhat (?:is|was|are|were) [\w']+(?: [\w']+){0,2} called\b"
    r"|\bwhat did [\w']+ (?:call|name)\b"
    # a place or body that goes by a name: "Which airline is Dev flying with?" is not
    # answered by "The airline cancelled my January flight"
    r"|\b(?:which|what) (?:airline|band|club|company|firm|hotel|restaurant|caf[eé]|pub|bar"
    r"|school|university|college|team|shop|store|brand|venue|gym|hospital|church|bank)\b",
    re.I,
)


def asks_name(query: str) -> bool:
    """The question asks for a name ("What is the name of Raj's band?", "What is Zoe's cat
    called?"): its "name" or "called" says what kind of answer it wants, which a post
    gives without those words ("Our band Night Ferry")."""
    return bool(_NAME_ASKED.search(query))


# a colour or a weight asked: "What colour is she?" is not answered by a post without one
_COLOUR_ASKED = re.compile(r"\b(?:what|which) colou?rs?\b", re.I)
_COLOUR = re.compile(
    r"\b(?:red|orange|yellow|green|blue|purple|violet|pink|brown|black|white|grey|gray|silver"
    r"|gold|golden|beige|cream|navy|teal|turquoise|ginger|tabby|colou?red|striped|spotted)\b",
    re.I,
)
_WEIGHT_ASKED = re.compile(r"\bhow heavy\b|\bhow much did .+ weigh\b|\bweight\b", re.I)
_WEIGHT = re.compile(
    r"\d\s?(?:kg|g|lbs?|oz|st)\b|\b(?:kilos?|kilograms?|kg|grams?|pounds?|lbs?|stone|tonnes?"
    r"|tons?|ounces?|oz|weighs?|weighed|weighing)\b",
    re.I,
)
# "900 pounds" is money where the sentence buys, pays or sells: "Bought a road bike for 900
# pounds" does not say how heavy the bike is
_MONEY_TALK = re.compile(
    r"\b(?:bought|buy|buying|paid|pay|paying|cost|costs|costing|price|priced|spent|spend|raised"
    r"|raise|charged?|charges|sold|sell|selling|fee|fees|worth|earn|earned|donated)\b",
    re.I,
)
# "What time does the market open?" asks a time of day: a date does not say it
_TIME_ASKED = re.compile(r"\bwhat time\b(?! of (?:the )?(?:year|day|month|week)\b)", re.I)
_CLOCK = re.compile(
    r"\b\d{1,2}(?:[:.]\d\d)?\s?(?:am|pm|a\.m\.|p\.m\.|h)\b|\b\d{1,2}:\d\d\b"
    r"|\b(?:noon|midday|midnight|o'clock|morning|mornings|afternoon|afternoons|evening"
    r"|evenings|tonight|night|nights|overnight|dawn|sunrise|sunset|dusk|lunchtime|teatime)\b"
    r"|\b(?:at|by|from|until|till|after|before|around|about) (?:one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve|half|quarter)\b",
    re.I,
)
# "Who is Hana's climbing coach?" asks for someone in a role: a post that never names the
# role ("Bought climbing shoes, La Sportiva") does not say who holds it. Roles a post names
# by their own word (a partner or a parent goes by too many words to be listed).
_ROLES = (
    "coach|physio|physiotherapist|tutor|teacher|supervisor|examiner|boss|manager|landlord"
    "|landlady|dentist|doctor|vet|mentor|therapist|trainer|instructor|lawyer|solicitor"
    "|accountant|agent|nanny|babysitter|cleaner|plumber|builder|electrician|mechanic"
    "|hairdresser|barber|captain|conductor|editor|surgeon|midwife|counsellor|counselor"
    "|director|producer|guide|teammate|flatmate|housemate|roommate|neighbour|neighbor"
)
_ROLE_ASKED = re.compile(
    r"^\W*who(?:'s| is| was| are| were| will be)\s+"
    r"((?:[A-Z][\w'’-]*'s|his|her|their|its|my|your|our|the)\s+(?:[\w-]+\s+){0,2}?"
    rf"({_ROLES})s?(?:\s+(?:at|in|for|on|from|of)\s+[^?]*)?)\s*\?*\s*$",
    re.I,
)
_NUMBER_ASKED = re.compile(r"\b(?:phone|mobile|telephone|cell|contact) (?:number|no)\b", re.I)
_NUMBER = re.compile(r"\+?\d[\d ()-]{4,}\d")
_EMAIL_ASKED = re.compile(r"\be-?mail(?: address)?\b(?! (?:from|about|to|saying))", re.I)
_EMAIL = re.compile(r"\S@\S")
_WHAT_IS = re.compile(
    r"\s*what(?:'s| is| was)\b", re.I
)  # "what did Kim's email say?" asks no address


# A capitalised word after one of these names a place, a time or a thing ("my sister's hen
# do in Brighton", "on Friday", "a storm warning for the Solent"), not what a question for a
# name asks; nor do days and months (memkit.timeref.CALENDAR).
PLACE_OR_THING_BEFORE = re.compile(r"\b(?:the|in|at|to|from|near|on|into|around)\s+$", re.I)


def lacks_what_is_asked(query: str, quoted: str) -> str | None:
    """What the question needs and ``quoted`` does not hold: "the number" (a phone number:
    six or more digits), "the address" (an e-mail address), "the colour", "the weight" (a
    unit, or "weighs"), "how much" (an amount; money when it asks what something cost, was
    paid or is) or
    "the name" (a capitalised word the question does not have, past the start of a
    sentence), "what time" (a time of day) or who holds a role the question names ("who
    Hana's coach is": the role's word); None when it holds it or the question needs none
    of these."""
    if _NUMBER_ASKED.search(query):
        return None if _NUMBER.search(quoted) else "the number"
    if _WHAT_IS.match(query) and _EMAIL_ASKED.search(query):
        return None if _EMAIL.search(quoted) else "the address"
    if _COLOUR_ASKED.search(query):
        return None if _COLOUR.search(quoted) else "the colour"
    if _WEIGHT_ASKED.search(query):
        weighed = re.sub(r"\bpounds?\b", "", quoted) if _MONEY_TALK.search(quoted) else quoted
        return None if _WEIGHT.search(weighed) else "the weight"
    if _TIME_ASKED.search(query):
        return None if _CLOCK.search(quoted) else "what time"
    role = _ROLE_ASKED.match(query)
    if role:
        word = role.group(2).lower()
        named = re.search(rf"\b{re.escape(word[:5] if len(word) > 5 else word)}", quoted, re.I)
        return None if named else f"who {role.group(1)} is"
    if _AMOUNT_ASKED.search(query):
        amount = _MONEY if _MONEY_ASKED.search(query) else _AMOUNT
        return None if amount.search(quoted) else "how much"
    if _NAME_ASKED.search(query):
        asked = {w.lower().removesuffix("'s") for w in re.findall(r"[\w']+", query)}
        names = [
            m.group(1)
            for m in re.finditer(r"(?<![.!?:]\s)(?<!^)\b([A-Z][\w'-]+)", quoted)
            if not PLACE_OR_THING_BEFORE.search(quoted, 0, m.start())
        ]
        named = any(
            n.lower().removesuffix("'s") not in asked
            and n.split("'")[0] != "I"
            and n.lower() not in CALENDAR
            for n in names
        )
        return None if named else "the name"
    return None
