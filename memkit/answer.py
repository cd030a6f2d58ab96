"""Answer writers: turn the ranked items of a query into the text a person reads.

An answerer gets the query and the top items (dicts with ``text`` and, where known,
``event_id``, ``speaker`` (the author's name), ``block_title``, ``block_type_name`` and
``created_at``) and returns an :class:`Answer`. ``summary=True`` asks for a conversational
answer; ``summary=False`` for a one-line account of what was found.

``extractive`` (the default) runs offline and only quotes what was posted:

1. It scores every sentence of the top items against the question by the encoder's
   cosine similarity (sentence vectors are computed when events are indexed, see
   ``prepare``, and kept in the encoder's on-disk cache).
2. **Who**: when the question names a person who posts in memory ("What did Caroline
   ..."), only sentences written by that person, or naming them, may answer it.
3. **Declines**: when no allowed sentence reaches ``min_score`` (tuned on LoCoMo-dev by
   ``eval/answer_eval.py``), it says that memory holds no information on that, instead of
   quoting something near.
4. **Attributes** each quote ("On 8 May 2023 Caroline wrote in “Session 1”: “...”") and
   resolves relative times against the post's own time (memkit.timeref): "yesterday" in a
   post of 8 May 2023 is 7 May 2023. A when-question's answer leads with that date.

``llm`` sends the question and the items, with their dates and authors, to an
OpenAI-compatible chat-completions endpoint and falls back to ``extractive`` on any
failure (timeout, HTTP error, malformed reply). Configure with ``[answer] type = "llm"``,
``url``, ``model`` and ``api_key_env`` (the name of the environment variable holding the key).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memkit.errors import ValidationError
from memkit.text import Analyzer
from memkit.timeref import Span, day_text, read_span, resolve

log = logging.getLogger(__name__)

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WHEN = re.compile(r"\bwhen\b|\bwhat (?:date|day|year|month|time)\b|\bhow long ago\b|\bwhich (?:year|month|day)\b",
                   re.IGNORECASE)
DECLINE = "I have no information available on that"


@dataclass
class Answer:
    text: str
    declined: bool = False  # memory holds nothing that answers it (or nothing was found)
    quotes: list[dict] = field(default_factory=list)  # {"event_id", "sentence", "score"} behind the text
    date: Span | None = None  # what a when-question's answer leads with
    strength: float | None = None  # best similarity of a sentence allowed to answer (None: none allowed)
    rival: float | None = None  # best similarity of a sentence by someone other than the person asked about
    writer: str = "extractive"


def sentences(text: str | None) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


def _as_datetime(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _when(value) -> str | None:
    value = _as_datetime(value)
    return day_text(value) if value else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _lead(span: Span) -> str:
    """ "On 7 May 2023", "In June 2023", "In the week before 9 June 2023"."""
    if span.days == 1:
        return f"On {day_text(span.start)}"
    if "weekend" in span.text:
        return f"On {span.text}"  # the weekend before ..., 2 weekends before ...
    return f"In {span.text}"  # the week before ..., June 2023, 2022


class ExtractiveAnswerer:
    """Quotes the sentences that answer the question, attributed and dated; no network."""

    type_name = "extractive"

    def __init__(self, max_sentences: int = 3, max_items: int = 3, max_quote_chars: int = 240,
                 min_score: float | None = None, max_gap: float | None = None, margin: float = 1.0,
                 people: bool = True, rank_weight: float = 0.1, when_bonus: float = 0.2):
        self.max_sentences = max_sentences
        self.max_items = max_items
        self.max_quote_chars = max_quote_chars
        self.min_score = min_score  # below it (or nobody allowed) the writer declines; None: never
        self.max_gap = max_gap  # decline when someone else's sentence is closer by more than this; None: never
        self.margin = margin  # further quotes score within this of the best
        self.people = people  # enforce "who": a named person's question is answered by their posts
        self.rank_weight = rank_weight  # trust in the retriever's order: subtracted per rank from a sentence's score
        self.when_bonus = when_bonus  # for when-questions, added to sentences that say when
        self.encoder = None
        self._by_first: dict[str, frozenset[str]] = {}  # authors' names by their first word, lower case
        self._analyzer = Analyzer()

    def params(self) -> dict:
        return {"type": self.type_name, "max_sentences": self.max_sentences, "max_items": self.max_items,
                "max_quote_chars": self.max_quote_chars, "min_score": self.min_score, "max_gap": self.max_gap,
                "margin": self.margin,
                "people": self.people, "rank_weight": self.rank_weight,
                "when_bonus": self.when_bonus}

    # -- set-up: the pipeline binds its encoder and shows it the events it indexes ---------
    def bind(self, encoder) -> None:
        self.encoder = encoder

    def prepare(self, events, encode: bool = True) -> None:
        """Learn the authors' names and (``encode``) encode the events' sentences into the
        encoder's cache, so that answering reads vectors instead of running the model."""
        rows = events.to_dicts() if hasattr(events, "to_dicts") else list(events)
        for name in filter(None, map(_speaker, rows)):
            key = name.split()[0].casefold()
            if name not in self._by_first.get(key, ()):  # a new set, never one changed in place: readers may hold it
                self._by_first[key] = self._by_first.get(key, frozenset()) | {name}
        if encode:
            self.encode_sentences(rows)

    def encode_sentences(self, events) -> None:
        """Encode the events' sentences into the encoder's cache (nothing else changes)."""
        if self.encoder is None:
            return
        rows = events.to_dicts() if hasattr(events, "to_dicts") else list(events)
        texts = list(dict.fromkeys(s for r in rows for s in sentences(r.get("text"))))
        if texts:
            self.encoder.encode(texts)

    # -- writing --------------------------------------------------------------------------------
    def answer(self, query: str, items: list[dict], summary: bool = True) -> str:
        return self.write(query, items, summary).text

    def write(self, query: str, items: list[dict], summary: bool = True, authors=None) -> Answer:
        """``authors``: the names of the people who post where the question is asked (the
        service passes those of the floors searched, so posts elsewhere change nothing);
        None: every author ``prepare`` has seen."""
        if not items:
            return Answer(self.fallback(query), declined=True)
        return self.summarize(query, items, authors) if summary else Answer(self.account(query, items))

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

    def named_people(self, query: str, items: list[dict], authors=None) -> set[str]:
        """Known authors (``authors``, else every one ``prepare`` saw) the question names,
        looked up by the question's words (so the cost does not grow with the number of
        authors)."""
        by_first = dict(self._by_first) if authors is None else {}
        for n in authors or ():
            by_first[n.split()[0].casefold()] = by_first.get(n.split()[0].casefold(), frozenset()) | {n}
        for n in filter(None, map(_speaker, items)):
            key = n.split()[0].casefold()
            by_first[key] = by_first.get(key, frozenset()) | {n}
        names = {n for w in set(re.findall(r"\w+", query.casefold())) for n in by_first.get(w, ())}
        return {n for n in names if re.search(rf"\b{re.escape(n)}\b", query, re.IGNORECASE)}

    def score(self, query: str, candidates: list[str]) -> np.ndarray:
        """Similarity of each sentence to the question: cosine with the encoder, else the
        share of the question's terms the sentence contains."""
        if self.encoder is not None:
            vecs = self.encoder.encode([query, *candidates])
            return vecs[1:] @ vecs[0]
        terms = set(self._analyzer(query))
        return np.array([len(terms & set(self._analyzer(s))) / max(len(terms), 1) for s in candidates])

    def summarize(self, query: str, items: list[dict], authors=None) -> Answer:
        top = items[: self.max_items]
        cands = [(rank, j, s, item) for rank, item in enumerate(top) for j, s in enumerate(sentences(item.get("text")))]
        if not cands:
            return Answer(self.decline(query, set()), declined=True)
        sims = self.score(query, [c[2] for c in cands])  # the evidence strength the decline is decided on
        scores = sims - self.rank_weight * np.array([c[0] for c in cands])  # what is quoted first
        when = bool(_WHEN.search(query))
        if when and self.when_bonus:
            scores = scores + self.when_bonus * np.array([_says_when(c[2]) for c in cands])
        people = self.named_people(query, items, authors) if self.people else set()
        allowed = [i for i, c in enumerate(cands) if not people or _speaker(c[3]) in people
                   or any(re.search(rf"\b{re.escape(p)}\b", c[2], re.IGNORECASE) for p in people)]
        best = max(allowed, key=lambda i: (scores[i], -cands[i][0]), default=None)
        strongest = max((float(sims[i]) for i in allowed), default=None)
        ok = set(allowed)
        others = [i for i in range(len(cands)) if i not in ok]
        closest = max(others, key=lambda i: sims[i], default=None)
        rival = float(sims[closest]) if closest is not None else None
        someone_else = (self.max_gap is not None and rival is not None
                        and (strongest is None or rival - strongest > self.max_gap))
        if best is None or someone_else or (self.min_score is not None and strongest < self.min_score):
            by = _speaker(cands[closest][3]) if someone_else else None
            return Answer(self.decline(query, people, by), declined=True, strength=strongest, rival=rival)
        chosen, seen_items = [best], {cands[best][0]}
        for i in sorted(allowed, key=lambda i: -scores[i]):
            if len(chosen) >= self.max_sentences or scores[i] < scores[best] - self.margin:
                break
            if cands[i][0] not in seen_items:  # one sentence per post: say more, not the same twice
                chosen.append(i)
                seen_items.add(cands[i][0])
        quotes = [{"event_id": cands[i][3].get("event_id"), "sentence": cands[i][2], "score": float(sims[i])}
                  for i in chosen]
        lines, lead = [], None
        if when:
            lead = self.date_of(cands[best][2], cands[best][3])
        for n, i in enumerate(chosen):
            _, _, sentence, item = cands[i]
            lines.append(self.attributed(sentence, item, first=n == 0, lead=lead if n == 0 else None))
        return Answer(" ".join(lines), quotes=quotes, date=lead[0] if lead else None, strength=strongest,
                      rival=rival)

    def date_of(self, sentence: str, item: dict) -> tuple[Span, str] | None:
        """When a quoted sentence says something happened: a relative time in it (or in the
        rest of its post) resolved against the post's time, a date written in it, or else
        the post's own day. Returns (span, how it was found)."""
        posted = _as_datetime(item.get("created_at"))
        if posted is not None:
            for text in (sentence, item.get("text") or ""):
                found = resolve(text, posted)
                if found:
                    return found[0].span, f"“{found[0].phrase}”"
        written = read_span(sentence)
        if written is not None:
            return written, "as written"
        if posted is not None:
            return Span(posted.date(), posted.date(), day_text(posted)), "the day it was posted"
        return None

    def attributed(self, sentence: str, item: dict, first: bool, lead: tuple[Span, str] | None) -> str:
        quote = sentence if len(sentence) <= self.max_quote_chars else sentence[: self.max_quote_chars - 1] + "…"
        who = _speaker(item) or "someone"
        when = _when(item.get("created_at"))
        where = f" in “{item['block_title']}”" if item.get("block_title") else ""
        posted = _as_datetime(item.get("created_at"))
        notes = [f"{m.phrase} = {m.span.text}" for m in resolve(sentence, posted)] if posted else []
        note = f" ({'; '.join(notes)})" if notes and lead is None else ""
        if lead is not None:
            span, how = lead
            said = (f"{how} in what {who} wrote on {when}{where}" if how.startswith("“")
                    else f"{who} wrote on {when}{where}" if when else f"{who} wrote{where}")
            return f"{_lead(span)} — {said}: “{quote}”" + ("" if quote[-1:] in ".!?…" else ".")
        head = f"On {when} {who} wrote{where}" if when else f"{who[:1].upper()}{who[1:]} wrote{where}"
        end = "" if quote[-1:] in ".!?…" and not note else "."
        return f"{head}: “{quote}”{note}{end}"

    def decline(self, query: str, people: set[str], closest_by: str | None = None) -> str:
        if people:
            names = " or ".join(sorted(people))
            if closest_by:
                return f"{DECLINE}: the closest post is {closest_by}'s, and nothing {names} posted says so."
            return f"{DECLINE}: nothing {names} posted in these floors says so."
        return f"{DECLINE}: nothing in these floors answers it closely enough."


def _says_when(sentence: str) -> bool:
    return bool(resolve(sentence, datetime(2000, 1, 1))) or read_span(sentence) is not None


def _speaker(item: dict) -> str | None:
    name = str(item.get("speaker") or item.get("user_name") or "").strip()  # a blank name is no name
    return name or None


class LLMAnswerer:
    """An OpenAI-compatible chat-completions endpoint writes the answer from the items;
    any failure falls back to the extractive writer (logged, never raised)."""

    type_name = "llm"

    def __init__(self, url: str, model: str, api_key_env: str | None = None, timeout: float = 10.0,
                 max_items: int = 8, temperature: float = 0.0, fallback: dict | None = None):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationError("answer.url", f"expected an http(s) URL of a chat-completions endpoint, got {url!r}")
        self.url, self.model, self.api_key_env = url, model, api_key_env
        self.timeout, self.max_items, self.temperature = float(timeout), max_items, temperature
        self.extractive = ExtractiveAnswerer(**(fallback or {}))

    def params(self) -> dict:
        return {"type": self.type_name, "url": self.url, "model": self.model, "api_key_env": self.api_key_env,
                "timeout": self.timeout, "max_items": self.max_items, "fallback": self.extractive.params()}

    def bind(self, encoder) -> None:
        self.extractive.bind(encoder)

    def prepare(self, events, encode: bool = True) -> None:
        self.extractive.prepare(events, encode)

    def encode_sentences(self, events) -> None:
        self.extractive.encode_sentences(events)

    def answer(self, query: str, items: list[dict], summary: bool = True) -> str:
        return self.write(query, items, summary).text

    def messages(self, query: str, items: list[dict]) -> list[dict]:
        lines = []
        for n, item in enumerate(items[: self.max_items], 1):
            meta = ", ".join(p for p in (_speaker(item), _when(item.get("created_at")),
                                         f"in {item['block_title']}" if item.get("block_title") else None) if p)
            lines.append(f"[{n}] ({meta}) {item.get('text') or ''}")
        system = ("You answer questions about a person's memory using only the numbered posts given. "
                  "Say who wrote what and when; resolve relative times (\"yesterday\") against the post's date. "
                  "If the posts do not answer the question, say: \"I have no information available on that.\" "
                  "Answer in at most three sentences.")
        return [{"role": "system", "content": system},
                {"role": "user", "content": "Posts:\n" + "\n".join(lines) + f"\n\nQuestion: {query}"}]

    def write(self, query: str, items: list[dict], summary: bool = True, authors=None) -> Answer:
        if not items or not summary:
            return self.extractive.write(query, items, summary, authors)
        body = json.dumps({"model": self.model, "messages": self.messages(query, items),
                           "temperature": self.temperature}).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                reply = json.loads(resp.read().decode("utf-8"))
            text = reply["choices"][0]["message"]["content"].strip()
            if not text:
                raise ValueError("empty answer")
        except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError, TypeError) as exc:
            log.warning("LLM answer writer failed (%s: %s); using the extractive writer", type(exc).__name__, exc)
            return self.extractive.write(query, items, summary, authors)
        return Answer(text, declined=DECLINE.lower() in text.lower(), writer="llm")


ANSWERERS = {"extractive": ExtractiveAnswerer, "llm": LLMAnswerer}


def build_answerer(spec: dict | None):
    spec = dict(spec or {"type": "extractive"})
    kind = spec.pop("type", "extractive")
    if kind not in ANSWERERS:
        raise ValidationError("answer.type", f"expected one of {sorted(ANSWERERS)}, got {kind!r}")
    try:
        return ANSWERERS[kind](**spec)
    except TypeError as exc:
        raise ValidationError("answer", str(exc)) from None
