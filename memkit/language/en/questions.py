"""English questions: what a question asks for (its kind), whether it asks for several
things, and what some questions cannot be answered without; with the patterns the writer
reads questions and sentences with (first and second person, greetings, names spoken to,
past forms of verbs). The tables at the end (``KINDS``, ``LISTS``, ``NEEDS``) are the rows
``memkit.language.Language`` reads, each with its examples and counterexamples."""

from __future__ import annotations

import re

from memkit.core.text import IRREGULAR, Analyzer
from memkit.language.tables import Need, Rule, Table
from memkit.language.timeref import CALENDAR

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
# name asks; nor do days and months (memkit.language.timeref.CALENDAR).
PLACE_OR_THING_BEFORE = re.compile(r"\b(?:the|in|at|to|from|near|on|into|around)\s+$", re.I)


# -- the rows -------------------------------------------------------------------------------


def _rule(name, pattern, examples, counterexamples=(), note=""):
    return Rule(name, pattern, tuple(examples), tuple(counterexamples), note)


# a habit asked ("When do they rehearse?", "when does she train?", "When are his lessons?")
# is answered by the days it keeps ("we rehearse on Wednesday evenings"), not by one day
# ("First rehearsal tonight")
HABIT_ASKED = re.compile(
    r"^\W*when (?:do|does)\b"
    # "When are his lessons?": things that come back
    r"|^\W*when (?:are|were) (?:his|her|their|the|my|your|our|[A-Z]\w*'s) \w+s\W*$",
    re.IGNORECASE,
)
# "When is the marathon?", "when does he start?": a question about a plan, whose date is
# more likely one after the post than the post's own day ("ran 28 km today. The race is
# on 6 December")
ASKS_AHEAD = re.compile(r"\bwhen (?:is|are|will|does|do)\b|\bwhat (?:date|day) is\b", re.I)

# the length of a thing asked ("How long is the thesis?", "how long was the route?") is a
# measure ("212 pages", "480 km over four days")
LENGTH_ASKED = re.compile(
    r"^\W*how long (?:is|was|are|were) (?:the|his|her|their|its|my|your|our|[A-Z]\w*'s)\b",
    re.IGNORECASE,
)


_TYPE = dict(TYPES)
KINDS = Table(
    "kinds",
    (
        _rule(
            "count",
            _TYPE["count"],
            [
                "How many times has Jon been to Paris?",
                "how much were the tickets?",
                "How often does she swim?",
                "What did the repair cost them?",
                "What does the allotment cost?",
                "What did the plumber charge?",
                "What was the price?",
            ],
            [
                "What did they pay for?",
                "What did Tom think of the cost?",
                "How long did the drive take?",
            ],
            "a number asked for; 'What did X cost?' asks how much, as 'How much did X cost?'",
        ),
        _rule(
            "duration",
            _TYPE["duration"],
            ["How long has Melanie been creating art?", "how long is the course?"],
            ["How long ago did they move?", "When did they move?"],
            "a length of time; 'how long ago' asks when",
        ),
        _rule(
            "when",
            _TYPE["when"],
            [
                "When did Caroline go to the LGBTQ support group?",
                "What date is the gig?",
                "How long ago did they move?",
                "Which year did she graduate?",
                "what time is the dinner?",
            ],
            ["What did she do that day?", "Where did they go?"],
            "a date or a time asked for",
        ),
        _rule(
            "where",
            _TYPE["where"],
            ["Where did Joanna go for a road trip?", "where is the party?"],
            ["Is there anywhere to park?", "What happened there?"],
        ),
        _rule(
            "who",
            _TYPE["who"],
            ["Who organised the trip to Zion?", "Whose dog is Pepper?", "With whom did she go?"],
            ["What did the whole team do?"],
        ),
        _rule(
            "yesno",
            _TYPE["yesno"],
            [
                "Would Caroline pursue writing as a career?",
                "Did Sam buy the tickets?",
                "is the gig still on?",
            ],
            ["What did Sam buy?", "Anything new from Sam?"],
            "a question that opens with an auxiliary verb",
        ),
    ),
    otherwise="what",
)

LISTS = _rule(
    "lists",
    LIST,
    [
        "What activities does Melanie partake in?",
        "Where has Melanie camped?",
        "What books has she read?",
        "In what ways did she help?",
    ],
    ["What did Melanie realize after the charity race?", "What book is she reading?"],
    "a question asking for several things",
)

# What else a question is read for, each row on its own (not first-match): the writer
# reads them from the Question (memkit.question.Question.asks_for).
ASKS_FOR = (
    _rule(
        "when",
        WHEN,
        ["When is the gig?", "What day is the party?", "How long ago did she move?"],
        ["Where is the gig?", "How long is the drive?"],
        "a when-question: its answer leads with the date",
    ),
    _rule(
        "habit",
        HABIT_ASKED,
        ["When do they rehearse?", "when does she train?", "When are his lessons?"],
        ["When is the marathon?", "When was the launch?"],
        "a habit: answered by the days it keeps, not by one day",
    ),
    _rule(
        "ahead",
        ASKS_AHEAD,
        ["When is the marathon?", "when does he start?", "What date is the party?"],
        ["When was the launch?", "When did they move?"],
        "a plan: its date is more likely one after the post than the post's own day",
    ),
    _rule(
        "length",
        LENGTH_ASKED,
        ["How long is the thesis?", "How long was Kofi's drive?"],
        ["How long ago did she move?", "How long did the race take?"],
        "the length of a thing: answered by a measure (212 pages)",
    ),
)


def _weighed(question: str, sentence: str) -> bool:
    # "900 pounds" is money where the sentence buys, pays or sells
    weighed = re.sub(r"\bpounds?\b", "", sentence) if _MONEY_TALK.search(sentence) else sentence
    return bool(_WEIGHT.search(weighed))


def _names_the_role(question: str, sentence: str) -> bool:
    word = _ROLE_ASKED.match(question).group(2).lower()
    return bool(re.search(rf"\b{re.escape(word[:5] if len(word) > 5 else word)}", sentence, re.I))


def _has_amount(question: str, sentence: str) -> bool:
    amount = _MONEY if _MONEY_ASKED.search(question) else _AMOUNT
    return bool(amount.search(sentence))


def _names_someone_else(question: str, sentence: str) -> bool:
    """A capitalised word the question does not have, past the start of a sentence, that is
    not a place, a thing after "the", a day or a month, nor "I"."""
    asked = {w.lower().removesuffix("'s") for w in re.findall(r"[\w']+", question)}
    names = [
        m.group(1)
        for m in re.finditer(r"(?<![.!?:]\s)(?<!^)\b([A-Z][\w'-]+)", sentence)
        if not PLACE_OR_THING_BEFORE.search(sentence, 0, m.start())
    ]
    return any(
        n.lower().removesuffix("'s") not in asked
        and n.split("'")[0] != "I"
        and n.lower() not in CALENDAR
        for n in names
    )


# "What is Kim's email?" asks for an address; "What did Kim's email say?" does not
_ADDRESS_ASKED = re.compile(
    r"^\s*what(?:'s| is| was)\b(?=.*" + _EMAIL_ASKED.pattern + ")", re.IGNORECASE | re.DOTALL
)

# The first need a question asks for decides (a question for a phone number is not also one
# for a name).
NEEDS = (
    Need(
        "the number",
        _rule(
            "phone number",
            _NUMBER_ASKED,
            ["What is Omar's cello teacher's phone number?", "what's Dave's mobile number?"],
            ["What number is the bus?"],
        ),
        lambda q, s: bool(_NUMBER.search(s)),
        held=(("what's Dave's mobile number?", "Dave's mobile is 07700 900123"),),
        lacking=(
            (
                "What is Omar's cello teacher's phone number?",
                "My cello teacher says I can play in the student concert on 13 December!",
            ),
        ),
    ),
    Need(
        "the address",
        _rule(
            "e-mail address",
            _ADDRESS_ASKED,
            ["What is Kim's email address?", "What is Kim's email?"],
            ["What did Kim's email say?", "What was the email about?"],
        ),
        lambda q, s: bool(_EMAIL.search(s)),
        held=(("What is Kim's email?", "It's kim.b@example.org"),),
        lacking=(("What is Kim's email address?", "Kim said to email her about the flat"),),
    ),
    Need(
        "the colour",
        _rule(
            "colour",
            _COLOUR_ASKED,
            ["What colour is the jacket?", "which colours did they pick?"],
            ["What did they colour in?"],
        ),
        lambda q, s: bool(_COLOUR.search(s)),
        held=(("What colour is the jacket?", "Got the navy one"),),
        lacking=(("What colour is the jacket?", "Bought a jacket in the sale"),),
    ),
    Need(
        "the weight",
        _rule(
            "weight",
            _WEIGHT_ASKED,
            ["How heavy is it?", "weight?", "How much did the turkey weigh?"],
            ["How heavily did it rain?"],
        ),
        _weighed,
        held=(
            ("How heavy is it?", "It weighs eight kilos"),
            ("weight?", "Aylin, born yesterday afternoon, 2.9kg"),
            ("How heavy was the turkey?", "The turkey was 14 pounds, it fed everyone"),
        ),
        lacking=(
            ("How heavy is it?", "Bought a Canyon road bike for 900 euros"),
            (
                "How heavy is Bayo's bike?",
                "Bought a second-hand road bike, a Ribble Endurance, for 900 pounds.",
            ),
        ),
    ),
    Need(
        "what time",
        _rule(
            "time of day",
            _TIME_ASKED,
            ["What time does the Brockley Market open?", "what time did they go up?"],
            ["What time of year is best?", "When does the market open?"],
        ),
        lambda q, s: bool(_CLOCK.search(s)),
        held=(
            ("What time is the dinner?", "Dinner is on Saturday the 27th at Olivo, 7pm"),
            ("What time do they train?", "They train on Wednesday evenings"),
        ),
        lacking=(
            (
                "What time does the Brockley Market open?",
                "The Brockley stall is pushed back to 14 November",
            ),
        ),
    ),
    Need(
        "who {0} is",
        _rule(
            "someone in a role",
            _ROLE_ASKED,
            ["Who is Hana's climbing coach?", "Who is Bea's coach at the Harriers?"],
            ["Who is her best friend?", "Who coached them?"],
        ),
        _names_the_role,
        held=(
            ("Who is her physio?", "My physiotherapist, Priya, gave me calf raises"),
            ("Who is his tutor?", "Started Spanish with a tutor, Lucía, on Tuesdays"),
        ),
        lacking=(
            (
                "Who is Hana's climbing coach?",
                "Bought climbing shoes, La Sportiva Tarantulace, 85 pounds.",
            ),
        ),
    ),
    Need(
        "how much",
        _rule(
            "an amount",
            _AMOUNT_ASKED,
            ["How much did the map cost?", "What did the teeth clean cost?"],
            ["How much time is left?", "How much longer is the drive?", "What did they pay for?"],
        ),
        _has_amount,
        held=(
            ("What does the allotment cost?", "The society charges 85 pounds a year"),
            ("What does Ms Sato charge?", "A weekly lesson with Ms Sato, 35 pounds an hour."),
        ),
        lacking=(
            (
                "What did the plumber charge?",
                "Bad news, the plumber found a leak under the floorboards.",
            ),
            ("How much did the map cost?", "We walked 2 miles with the map"),
        ),
    ),
    Need(
        "the name",
        _rule(
            "a name",
            _NAME_ASKED,
            [
                "What's Mei's sister's name?",
                "What is the name of Nina's cat?",
                "What is Sam's surname?",
                "What is the boat called?",
                "Which airline is Dev flying with?",
            ],
            ["What did Mei say?", "Where is the boat?"],
        ),
        _names_someone_else,
        held=(
            ("What is Sam's surname?", "Sam Okafor teaches on Saturdays"),
            ("What is the boat called?", "Five days on a yacht called Wren"),
            ("What's Mei's sister's name?", "My sister Ruth is visiting at Easter"),
            ("Which club did she join?", "Joined the Herne Hill Harriers!"),
        ),
        lacking=(
            (
                "What's Mei's sister's name?",
                "Off to my sister's hen do in Brighton this weekend!",
            ),
            (
                "What is the boat called?",
                "Storm warning for the Solent, the school moved my course. Same boat.",
            ),
        ),
    ),
)
