"""English follow-ups: the words and patterns that say a question leans on what came
before ("how deadly is it?", "what about the cost?", "and in winter?"), that it changes the
subject ("back to the hen weekend, ..."), or that it asks for whatever happened ("what was
the band up to in April?"). memkit.question.conversation reads them. The patterns are
rules with the questions they exist for and the near misses they must leave alone
(tests/test_language.py runs them); the word lists are data the rules' module reads word by
word."""

from __future__ import annotations

import re

from memkit.language.tables import Rule

# Words that make a question lean on what came before ("how deadly is it?", "what about
# the cost?", "and in winter?").
CUES = frozenset(
    "it its it's they them their theirs this that these those he him his she her hers "
    "there then such "
    "same other another one ones former latter also too else".split()
)
CUE_PHRASES = ("what about", "how about", "and ", "what else", "tell me more", "more about")
# Question words and fillers that say nothing of a topic.
FILLER = frozenset(
    "what when where who whom whose which why how did does do was were is are anything something "
    "happened happen happening going tell know say said post posted mention mentioned talk talked "
    "much many write wrote get got thing things stuff people anyone someone go goes went gone "
    "come came "
    "make made take took give gave put different question another okay anyway also now "
    "let's lets".split()
)

# Whatever happened, not one fact: the posts of a window are the answer.
WHAT_HAPPENED_RULE = Rule(
    "what_happened",
    re.compile(
        r"^\W*(?:and\s+)?(?:anything|any news|news)\b|"
        r"\bwhat(?:'s| was| were| is| are)?\b.*\b(?:happen\w*|going on|up to|doing|"
        r"new|news|post\w*|writ\w+|wrote|talk\w* about|say|said|share\w*)\b",
        re.IGNORECASE,
    ),
    examples=(
        "what was the band up to in April?",
        "anything in October?",
        "what did Omar post two weeks ago?",
        "What happened last May?",
    ),
    counterexamples=("Where is Aisha's allotment?", "How much does it cost?"),
    note="a question that asks for whatever happened",
)
# A word that points back to the topic's people or things.
PRONOUN_RULE = Rule(
    "pronoun",
    re.compile(
        r"\b(?:it|its|it's|they|them|their|this|that|these|those|he|him|his|she|her|there|then)\b",
        re.IGNORECASE,
    ),
    examples=("How much does it cost?", "What did she plant?", "When was that?"),
    counterexamples=("Where is Aisha's allotment?", "Who won the pub quiz?"),
    note="a pronoun: the question leans on the topic",
)
# The personal pronouns, which may stand for the person a question names ("Back to Aisha:
# what does she do for work?").
PERSONAL_RULE = Rule(
    "personal",
    re.compile(r"\b(?:he|she|his|him|her|hers)\b", re.IGNORECASE),
    examples=("What does she do for work?", "Did Tom see him race?"),
    counterexamples=("How much does it cost?", "When was that?"),
    note="a personal pronoun",
)
# "Is Noor coming?" after "Where is his birthday dinner?": coming to what the topic is about
# (someone else asked about with no word pointing back is otherwise a new subject)
GOING_WHERE_SAID_RULE = Rule(
    "going_where_said",
    re.compile(
        r"^\W*(?:is|are|was|were|will|would|can|could|did|does|do)\s+(?-i:[A-Z])[\w'’-]*"
        r"(?:\s+(?-i:[A-Z])[\w'’-]*)?\s+(?:be\s+)?(?:coming|going|joining|come|go|join|make it"
        r"|attending|there)(?:\s+(?:us|them|too|as well))?\s*\?*\s*$",
        re.IGNORECASE,
    ),
    examples=("Is Noor coming?", "Will Sam be joining us?", "Is Kim going too?"),
    counterexamples=("Is Noor coming to the wedding in May?", "Where is Noor going?"),
    note="someone else asked about with no word pointing back, coming to what the topic is about",
)
# words that change the subject to what follows them ("back to the hen weekend, ...", "Let's
# talk about the quiz night. When is it?")
BACK_TO_RULE = Rule(
    "back_to",
    re.compile(
        r"^\W*(?:and\s+)?(?:back to|now to|as for|over to|on to|moving on to|switching to"
        r"|(?:let's|let us|can we|now) talk about|talking (?:of|about)|speaking of)\b",
        re.IGNORECASE,
    ),
    examples=(
        "back to the hen weekend, which airport did they fly from?",
        "Let's talk about the quiz night. When is it?",
        "As for Bram, where does he work?",
    ),
    counterexamples=("When did they get back to Leeds?", "What did they talk about?"),
    note="words that change the subject to what follows them",
)

# "him" or "her" with the word after it: "her" before a noun is "his" ("with her sister"),
# before nothing or a small word ("buy her for Christmas") it is "him"
OBJECT_PRONOUN_RULE = Rule(
    "object_pronoun",
    re.compile(r"\b(him|her)\b(?:\W+(\w+))?", re.IGNORECASE),
    examples=("What does Diego's coach tell him?", "What did they buy her for Christmas?"),
    counterexamples=("What did he say?", "Where does she work?"),
    note="an object pronoun, read with the word after it",
)

WHAT_HAPPENED = WHAT_HAPPENED_RULE.pattern
OBJECT_PRONOUN = OBJECT_PRONOUN_RULE.pattern
PRONOUN = PRONOUN_RULE.pattern
PERSONAL = PERSONAL_RULE.pattern
GOING_WHERE_SAID = GOING_WHERE_SAID_RULE.pattern
BACK_TO = BACK_TO_RULE.pattern
FOLLOW_UPS = (
    WHAT_HAPPENED_RULE,
    PRONOUN_RULE,
    PERSONAL_RULE,
    GOING_WHERE_SAID_RULE,
    BACK_TO_RULE,
    OBJECT_PRONOUN_RULE,
)
