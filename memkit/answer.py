"""Answer writers: turn the ranked items of a query into the text a person reads.

An answerer gets the query and the top items (dicts with at least ``text``; optionally
``block_title``, ``block_type_name`` and ``created_at``) and writes either

- a **summary** (``summary=True``): a short conversational answer built from the
  sentences of the top items that share most words with the query, each attributed to
  where and when it was posted; or
- a **one-line account** (``summary=False``) of what was found;

and, when nothing relevant was found, a conversational **fallback**.

The built-in ``extractive`` answerer runs offline and quotes only what was posted, so it
never states anything the items do not say. A hosted LLM writer can be plugged in by
registering another class in ``ANSWERERS`` (configured as ``[answer] type = "..."``).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from memkit.errors import ValidationError
from memkit.text import Analyzer

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _when(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return f"{value.day} {value:%B %Y}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class ExtractiveAnswerer:
    """Quotes the query-relevant sentences of the top items; no model, no network."""

    type_name = "extractive"

    def __init__(self, max_sentences: int = 3, max_items: int = 5, max_quote_chars: int = 240):
        self.max_sentences = max_sentences
        self.max_items = max_items
        self.max_quote_chars = max_quote_chars
        self._analyzer = Analyzer()

    def params(self) -> dict:
        return {"type": self.type_name, "max_sentences": self.max_sentences, "max_items": self.max_items,
                "max_quote_chars": self.max_quote_chars}

    def answer(self, query: str, items: list[dict], summary: bool) -> str:
        if not items:
            return self.fallback(query)
        return self.summarize(query, items) if summary else self.account(query, items)

    def fallback(self, query: str) -> str:
        return (f"I couldn't find anything about “{query.strip()}” in the floors you asked about. "
                "You could try other words, a wider time range or fewer filters.")

    def account(self, query: str, items: list[dict]) -> str:
        kinds = Counter(i.get("block_type_name") or "post" for i in items)
        parts = ", ".join(_plural(n, f"{kind} post") for kind, n in kinds.most_common())
        top = items[0]
        when = _when(top.get("created_at"))
        where = f" in “{top['block_title']}”" if top.get("block_title") else ""
        return (f"Found {_plural(len(items), 'item')} for “{query.strip()}” ({parts}); "
                f"the best match was posted{where}{f' on {when}' if when else ''}.")

    def summarize(self, query: str, items: list[dict]) -> str:
        terms = set(self._analyzer(query))
        candidates = []  # (overlap, item rank, sentence rank, sentence, item)
        for rank, item in enumerate(items[: self.max_items]):
            for j, sentence in enumerate(s.strip() for s in _SENTENCE.split(item["text"] or "")):
                if sentence:
                    overlap = len(terms & set(self._analyzer(sentence)))
                    candidates.append((overlap, rank, j, sentence, item))
        # The best-overlapping sentences; the top item's first sentence if none overlaps.
        chosen = sorted(candidates, key=lambda c: (-c[0], c[1], c[2]))[: self.max_sentences]
        chosen = [c for c in chosen if c[0] > 0] or [min(candidates, key=lambda c: (c[1], c[2]))]
        chosen.sort(key=lambda c: (c[1], c[2]))  # in ranking order, then reading order
        lines = []
        for _, _, _, sentence, item in chosen:
            quote = sentence if len(sentence) <= self.max_quote_chars else sentence[: self.max_quote_chars - 1] + "…"
            when = _when(item.get("created_at"))
            where = f"in “{item['block_title']}”" if item.get("block_title") else ""
            source = ", ".join(p for p in (where, f"on {when}" if when else "") if p)
            lines.append(f"“{quote}” ({source})." if source else f"“{quote}”.")
        n = len({id(c[4]) for c in chosen})
        head = f"Here is what I found about “{query.strip()}”"
        head += f" in {_plural(n, 'post')}:" if n > 1 else ":"
        more = len(items) - n
        tail = f" {_plural(more, 'more item')} below." if more > 0 else ""
        return head + " " + " ".join(lines) + tail


ANSWERERS = {"extractive": ExtractiveAnswerer}


def build_answerer(spec: dict | None):
    spec = dict(spec or {"type": "extractive"})
    kind = spec.pop("type", "extractive")
    if kind not in ANSWERERS:
        raise ValidationError("answer.type", f"expected one of {sorted(ANSWERERS)}, got {kind!r}")
    try:
        return ANSWERERS[kind](**spec)
    except TypeError as exc:
        raise ValidationError("answer", str(exc)) from None
