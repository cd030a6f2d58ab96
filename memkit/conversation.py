"""Per-user conversation state and query contextualisation.

Follow-up questions from the same ``user_id`` build on earlier ones; there is no
conversation id. A :class:`Contextualizer` turns a user's new query plus their recent
turns into the *effective query* the retriever sees; :class:`ConversationStore` keeps
each user's turns (in memory here; the service keeps them in its database).

The default contextualizer (``none``) uses the query as asked. Better ones are swappable
by configuration: ``[contextualizer] type = "..."``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


@dataclass
class Turn:
    """One asked query: what was asked, what the retriever saw, what came back."""

    query: str
    effective_query: str
    event_ids: list[str] = field(default_factory=list)
    answer: str | None = None
    time: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class ConversationStore:
    """Turns per user, newest last; a user idle longer than ``idle_expiry`` starts afresh."""

    def __init__(self, max_turns: int = 20, idle_expiry: timedelta = timedelta(minutes=30)):
        self.max_turns = max_turns
        self.idle_expiry = idle_expiry
        self._turns: dict[str, list[Turn]] = {}

    def history(self, user_id: str | None, now: datetime | None = None) -> list[Turn]:
        if user_id is None:
            return []
        turns = self._turns.get(user_id, [])
        now = now or datetime.now(timezone.utc)
        if turns and now - turns[-1].time > self.idle_expiry:
            self._turns.pop(user_id, None)
            return []
        return list(turns)

    def record(self, user_id: str | None, turn: Turn) -> None:
        if user_id is None:
            return
        turns = self._turns.setdefault(user_id, [])
        turns.append(turn)
        del turns[: -self.max_turns]

    def forget(self, user_id: str) -> None:
        self._turns.pop(user_id, None)


class NoContext:
    """Every query stands alone."""

    type_name = "none"

    def contextualize(self, query: str, history: list[Turn]) -> str:
        return query

    def params(self) -> dict:
        return {"type": self.type_name}


_WORD = re.compile(r"[^\W_][\w'-]*")
# Words that make a question lean on what came before ("how deadly is it?", "what about
# the cost?", "and in winter?").
CUES = frozenset("it its it's they them their theirs this that these those he him his she her hers there such "
                 "same other another one ones former latter also too else".split())
CUE_PHRASES = ("what about", "how about", "and ", "what else", "tell me more", "more about")


class CarryContext:
    """Carries the topic of earlier turns into a follow-up, at a lower weight.

    A follow-up is searched twice: as asked, and with the content words of the
    conversation's first question and of the last ``recent`` questions appended; the two
    rankings are fused with weights ``1 - weight`` and ``weight`` (a convex combination of
    min-max scores). Appending the history to the question alone lets it drown the
    question; fusing keeps the question in charge. With ``detect``, only a turn that leans
    on context (a cue word such as "it" or "those", a cue phrase such as "what about", or
    at most ``short`` content words) carries it; measured on CAsT and LoCoMo-dev
    (eval/RESULTS.md) detection cost a little on both, so it is off by default. Context
    older than ``idle_minutes`` is forgotten (a new conversation starts).
    """

    type_name = "carry"

    def __init__(self, weight: float = 0.4, recent: int = 1, first: bool = True, short: int = 3,
                 detect: bool = False, idle_minutes: float = 30.0):
        from memkit.errors import ValidationError

        if not 0 <= weight <= 1:
            raise ValidationError("contextualizer.weight", f"expected a number from 0 to 1, got {weight!r}")
        if isinstance(recent, bool) or not isinstance(recent, int) or recent < 0:
            raise ValidationError("contextualizer.recent", f"expected a non-negative integer, got {recent!r}")
        if not idle_minutes > 0:
            raise ValidationError("contextualizer.idle_minutes", f"expected a positive number, got {idle_minutes!r}")
        self.weight, self.recent, self.first, self.short = weight, recent, first, short
        self.detect, self.idle_minutes = detect, idle_minutes
        from memkit.text import NLTK_STOPWORDS

        self._stop = NLTK_STOPWORDS

    def params(self) -> dict:
        return {"type": self.type_name, "weight": self.weight, "recent": self.recent, "first": self.first,
                "short": self.short, "detect": self.detect, "idle_minutes": self.idle_minutes}

    def _content(self, text: str) -> list[str]:
        return [w for w in _WORD.findall(text) if w.lower() not in self._stop and len(w) > 2]

    def leans_on_context(self, query: str) -> bool:
        words = [w.lower() for w in _WORD.findall(query)]
        q = " " + query.lower().strip()
        return (any(w in CUES for w in words) or any(f" {p}" in q for p in CUE_PHRASES)
                or len(self._content(query)) <= self.short)

    def carried(self, query: str, history: list[Turn]) -> list[str]:
        """The words of earlier turns to carry (those the query does not already have)."""
        if not history or (self.detect and not self.leans_on_context(query)):
            return []
        sources = ([history[0].query] if self.first else []) + [t.query for t in history[-self.recent:]] * bool(self.recent)
        seen = {w.lower() for w in self._content(query)}
        out = []
        for text in sources:
            for w in self._content(text):
                if w.lower() not in seen:
                    seen.add(w.lower())
                    out.append(w)
        return out

    def contextualize(self, query: str, history: list[Turn]) -> str:
        extra = self.carried(query, history)
        return f"{query} {' '.join(extra)}" if extra else query

    def variants(self, query: str, history: list[Turn]) -> list[tuple[str, float]]:
        """What to search, with fusion weights."""
        ctx = self.contextualize(query, history)
        if ctx == query or self.weight == 0:
            return [(query, 1.0)]
        return [(query, 1.0 - self.weight), (ctx, self.weight)]


CONTEXTUALIZERS = {"none": NoContext, "carry": CarryContext}


def build_contextualizer(spec: dict | None):
    spec = dict(spec or {"type": "none"})
    kind = spec.pop("type", "none")
    if kind not in CONTEXTUALIZERS:
        from memkit.errors import ValidationError

        raise ValidationError("contextualizer.type", f"expected one of {sorted(CONTEXTUALIZERS)}, got {kind!r}")
    try:
        return CONTEXTUALIZERS[kind](**spec)
    except TypeError as exc:
        from memkit.errors import ValidationError

        raise ValidationError("contextualizer", str(exc)) from None
