"""The English pack: the tables memkit reads English questions with (memkit/language/en/)."""

from memkit.language.en.answers import SENTENCES
from memkit.language.en.changes import CHANGES
from memkit.language.en.follow_ups import FOLLOW_UPS
from memkit.language.en.questions import ASKS_FOR, KINDS, LISTS, NEEDS
from memkit.language.en.replies import REPLIES
from memkit.language.tables import Language

ENGLISH = Language(
    code="en",
    name="English",
    kinds=KINDS,
    lists=LISTS,
    needs=NEEDS,
    changes=CHANGES,
    asks_for=ASKS_FOR,
    follow_ups=FOLLOW_UPS,
    replies=REPLIES,
    sentences=SENTENCES,
)

__all__ = ["ENGLISH"]
