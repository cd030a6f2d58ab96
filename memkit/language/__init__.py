"""The seam for what is language-specific: one pack of tables per language.

A pack is a ``Language`` (memkit.language.tables): its code, the kinds of question
(``kinds``: a first-match ``Table``), what asks for several things (``lists``), and what
some questions cannot be answered without (``needs``: ``Need`` rows, each a rule for the
question and a check of the sentence that would answer it). Every row carries its examples
and counterexamples. ``get_language("en")`` returns the English pack (memkit/language/en);
``register`` adds another; ``validate`` runs every row's examples and counterexamples, which
tests/test_language.py does for every registered pack. docs/LANGUAGE.md says which of
memkit's English tables are in the pack and which are still read in their modules.
"""

from __future__ import annotations

from typing import Callable

from memkit.language.en import ENGLISH
from memkit.language.tables import Language, Need, Rule, Table, examples_of, validate

__all__ = [
    "ENGLISH",
    "Language",
    "Need",
    "Rule",
    "Table",
    "examples_of",
    "get_language",
    "languages",
    "register",
    "validate",
]

_PACKS: dict[str, Language | Callable[[], Language]] = {"en": ENGLISH}


def register(code: str, pack: Language | Callable[[], Language]) -> None:
    """Add a pack, or a function that builds it the first time it is asked for."""
    _PACKS[code] = pack


def languages() -> list[str]:
    """The codes of the registered packs."""
    return sorted(_PACKS)


def get_language(code: str = "en") -> Language:
    """The pack for a language code ("en"); a ValueError naming the packs there are when
    none is registered for it."""
    if code not in _PACKS:
        raise ValueError(f"language: no pack for {code!r} (packs: {', '.join(languages())})")
    pack = _PACKS[code]
    if not isinstance(pack, Language):
        pack = _PACKS[code] = pack()
    return pack
