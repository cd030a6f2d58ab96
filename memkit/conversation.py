"""Per-user conversation state and query contextualisation.

Follow-up questions from the same ``user_id`` build on earlier ones; there is no
conversation id. A :class:`Contextualizer` turns a user's new query plus their recent
turns into the *effective query* the retriever sees; :class:`ConversationStore` keeps
each user's turns (in memory here; the service keeps them in its database).

The default contextualizer (``none``) uses the query as asked. Better ones are swappable
by configuration: ``[contextualizer] type = "..."``.
"""

from __future__ import annotations

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


CONTEXTUALIZERS = {"none": NoContext}


def build_contextualizer(spec: dict | None):
    spec = dict(spec or {"type": "none"})
    kind = spec.pop("type", "none")
    if kind not in CONTEXTUALIZERS:
        from memkit.errors import ValidationError

        raise ValidationError("contextualizer.type", f"expected one of {sorted(CONTEXTUALIZERS)}, got {kind!r}")
    return CONTEXTUALIZERS[kind](**spec)
