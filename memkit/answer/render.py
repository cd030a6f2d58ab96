"""How user text is shown inside an answer, so that what someone posted can never pass for
the answer's own words.

An answer quotes posts between its own “ and ” marks and attributes each quote ("On 19
November 2026 Oli wrote in “Notices”: “...”"). Every piece of user text it shows (the
quoted text, the author's name, the block title, the words a date was read from, the
question echoed back) goes through :func:`render` first: a post that closes the quote and
writes an attribution of its own ("...”. On 19 November 2026 Oli wrote in “Notices”: “I
owe Bo 500 pounds") stays inside its quote, as ‘single’ marks, and a name cannot hold a
line break, a zero-width character or a bidi override that makes it read as someone
else's. Text holding none of those characters is shown byte for byte as written.

Two authors of one name (or of names that look alike: a Cyrillic "О" for a Latin "O") are
told apart by :func:`labelled`, which names each with a short piece of their user id
("Oli (u_1a2b3c)"): stable across answers and floors (a number by first post, "Oli (2)",
would change as posts come and go, and go to whoever posted first, an impostor too), and
the same id a client reads in the item's ``user_id``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import replace
from functools import lru_cache

from memkit.answer.base import AnswerItem, speaker

NAME_CHARS = 60  # the most of a name an answer shows (a long name could hold a whole quote)

# Every double quotation mark a user could type, and look-alikes of one, as the single mark
# of the same shape: only the answer's template writes “ and ”.
DOUBLE_TO_SINGLE = {
    '"': "'",
    "“": "‘",
    "”": "’",
    "„": "‚",
    "‟": "‛",
    "«": "‹",
    "»": "›",
    "″": "′",  # double prime
    "‶": "‵",  # reversed double prime
    "＂": "＇",  # fullwidth
    "〝": "‘",
    "〞": "’",
    "〟": "‚",
    "❝": "❛",
    "❞": "❜",
    "❠": "❟",
    "⹂": "‚",
    "🙶": "❛",
    "🙷": "❜",
    "🙸": "❟",
    "ʺ": "ʹ",  # modifier letter double prime
    "ˮ": "ʼ",  # modifier letter double apostrophe
    "˝": "'",  # double acute accent
    "˶": "'",  # middle double acute accent
    "״": "׳",  # Hebrew gershayim
    "〃": "'",  # ditto mark
}
_JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner: spelling in Persian, emoji
_KEPT_MARKS = re.compile("[\ufe00-\ufe0f\u20e3\U000e0100-\U000e01ef]")  # variation selectors
_SPECIAL = re.compile(
    "[" + re.escape("".join(DOUBLE_TO_SINGLE)) + r"\x00-\x1f\x7f-\x9f]|[^\S ]|  |^ | $"
)


def render(text: str | None) -> str:
    """``text`` as an answer may show it: whitespace and line breaks as one space, control
    and format characters (zero-width spaces, bidi overrides and isolates) dropped (a
    zero-width joiner or non-joiner between two characters is spelling and stays), a
    combining mark with no letter or digit to sit on dropped (over a space it can draw a
    quotation mark), and every double quotation mark as a single one. Idempotent; text
    holding none of these is returned as it is."""
    text = text or ""
    if text.isascii() and not _SPECIAL.search(text):
        return text  # the common case, unchanged by construction
    out: list[str] = []
    base = False  # whether the last character kept can carry a combining mark
    for n, c in enumerate(text):
        kind = unicodedata.category(c)
        if c.isspace():
            out.append(" ")
            base = False
        elif c in DOUBLE_TO_SINGLE:
            out.append(DOUBLE_TO_SINGLE[c])
            base = False
        elif c in _JOINERS:
            after = text[n + 1 : n + 2]
            if out and out[-1] != " " and after and not after.isspace():
                out.append(c)  # dropped after all if what follows is dropped too (below)
        elif kind in ("Cc", "Cf", "Cs"):
            continue
        elif kind in ("Mn", "Me") and not _KEPT_MARKS.match(c):
            if base:
                out.append(c)
        else:
            out.append(c)
            base = kind[0] in "LNM" or kind == "So"  # letters, digits, marks; emoji
    shown = re.sub(" {2,}", " ", "".join(out)).strip()
    # a joiner left beside a space or at an end (its neighbour was dropped) joins nothing
    return re.sub(f"(?:(?<= )|^)[{_JOINERS}]+|[{_JOINERS}]+(?= |$)", "", shown)


def render_name(name: str | None, limit: int = NAME_CHARS) -> str:
    """An author's name (or a block's title) as an answer shows it: ``render``ed, and past
    ``limit`` characters cut with "…"."""
    shown = render(name)
    return shown if len(shown) <= limit else shown[: limit - 1].rstrip() + "…"


# -- telling authors apart ----------------------------------------------------------------------
# Letters of other scripts that look like Latin ones, by case (an uppercase Greek Eta looks
# like H, its lowercase like n), mapped before case is folded; with the digits and signs
# that pass for letters ("0" for "O", "1" and "I" for "l").
_LOOK_ALIKE = str.maketrans(
    {
        # Cyrillic
        "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "l", "Ј": "J", "К": "K",
        "М": "M", "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "У": "Y", "Ү": "Y",
        "Һ": "H", "Ԛ": "Q", "Ԝ": "W", "Ӏ": "l", "а": "a", "с": "c", "ԁ": "d", "е": "e",
        "һ": "h", "і": "i", "ј": "j", "ӏ": "l", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s",
        "ԝ": "w", "х": "x", "у": "y", "ү": "y",
        # Greek
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "l", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C", "Ϳ": "J",
        "α": "a", "γ": "y", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j",
        # Latin letters that pass for others, digits and signs that pass for letters
        "ı": "i", "ɑ": "a", "ɡ": "g", "ʟ": "L", "ℓ": "l",
        "I": "l", "1": "l", "|": "l", "0": "O",
    }
)  # fmt: skip
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}")


@lru_cache(maxsize=65536)
def skeleton(name: str | None) -> str:
    """What a name looks like, for telling whether two names could be taken for each other:
    its compatibility form (NFKC: fullwidth and mathematical letters as plain ones), without
    accents, look-alike letters of other scripts as Latin ones, case folded, "rn" as "m",
    and only its letters and digits, less a part in brackets (so a name written as
    "Oli (u_1a2b3c)", as an answer tells two Olis apart, still looks like "Oli")."""
    text = unicodedata.normalize("NFKC", render(name))
    text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    bare = _BRACKETED.sub(" ", text)
    text = (bare if re.search(r"\w", bare) else text).translate(_LOOK_ALIKE).casefold()
    text = "".join(c for c in text if c.isalnum()).replace("rn", "m")
    return text or render(name).casefold()


SHOWN_AS = "shown_as"  # the key of an item's name as the answer shows it, set by ``labelled``


def shown_name(item: AnswerItem) -> str | None:
    """The author's name as an answer shows it: told apart from a look-alike
    (``labelled``), ``render_name``d."""
    label = item.get(SHOWN_AS)
    if label:
        return label
    name = speaker(item)
    return render_name(name) if name else None


def _tag(user_id: str | None, name: str, size: int) -> str:
    """The short form of an author's id shown beside their name; an author without one
    (a data set's speaker) by a digest of the name as written."""
    if user_id:
        return render(str(user_id))[:size]
    return "#" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[: size - 2]


def labelled(items: list[AnswerItem], authors=None) -> list[AnswerItem]:
    """``items`` with the author of each named so that no two people read as one: where two
    different authors among the items (by ``user_id``), or among the items and ``authors``
    (the names of the people who post in the floors searched, one for each person: a name
    given twice is two people), have names of one ``skeleton``, each of their items is
    shown as "Oli (u_1a2b3c)" (``SHOWN_AS``; the first 8 characters of the user id, more
    where two ids share them). Items of names no one else's resembles are the same objects
    as given."""
    by_look: dict[str, set[tuple]] = {}  # skeleton -> the items' authors: (user id, name)
    for item in items:
        name = speaker(item)
        if name:
            by_look.setdefault(skeleton(name), set()).add((item.get("user_id"), name))
    if not by_look:
        return items
    named: dict[str, list[str]] = {}  # skeleton -> the floors' authors' names, one a person
    for name in authors or ():
        key = skeleton(name)
        if key in by_look:
            named.setdefault(key, []).append(name.strip())
    sizes = {}  # skeleton shared by two people -> how much of their ids to show
    for key, who in by_look.items():
        ids = {u if u else ("name", n) for u, n in who}
        spellings = {n for _, n in who} | set(named.get(key, ()))
        if max(len(ids), len(named.get(key, ())), len(spellings)) > 1:
            size = 8
            while size < 64 and len({_tag(u, n, size) for u, n in who}) < len(ids):
                size += 2  # two ids alike in their first characters: show more of each
            sizes[key] = size
    if not sizes:
        return items
    out = []
    for item in items:
        name = speaker(item)
        size = sizes.get(skeleton(name)) if name else None
        if size is None:
            out.append(item)
        else:
            label = f"{render_name(name)} ({_tag(item.get('user_id'), name, size)})"
            out.append(_with(item, label))
    return out


def _with(item: AnswerItem, label: str) -> AnswerItem:
    if isinstance(item, dict):
        return {**item, SHOWN_AS: label}
    return replace(item, extra={**item.extra, SHOWN_AS: label})
