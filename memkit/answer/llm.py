"""The LLM writer: an OpenAI-compatible chat-completions endpoint writes the answer.

It sends the question and the numbered items, with their dates and authors, asks the
model to cite the items it uses as [n] (those are its ``quoted`` ids) and falls back to
the extractive writer on any failure (timeout, HTTP error, malformed reply). Configure
with ``[answer] type = "llm"``, ``url``, ``model`` and ``api_key_env`` (the name of the
environment variable holding the key).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.error
import urllib.request

from memkit.answer.base import DECLINE, Answer, AnswerItem, Asked, Evidence
from memkit.answer.extractive import ExtractiveAnswerer
from memkit.answer.render import labelled, render, shown_name
from memkit.config.model import FromSpec, LLMSpec
from memkit.language.timeref import day_of

log = logging.getLogger(__name__)


class LLMAnswerer(FromSpec):
    """An OpenAI-compatible chat-completions endpoint writes the answer from the items;
    any failure falls back to the extractive writer (logged, never raised). Its settings
    are ``LLMSpec``'s (memkit.config.model): ``url``, ``model``, ``api_key_env``,
    ``timeout``, ``max_items``, ``temperature`` and ``fallback`` (the extractive writer's)."""

    type_name, spec, section = "llm", LLMSpec, "answer"

    def _built(self) -> None:
        self.extractive = (
            ExtractiveAnswerer()
            if self.fallback is None
            else ExtractiveAnswerer.checked(self.fallback)
        )

    def params(self) -> dict:
        return {**super().params(), "fallback": self.extractive.params()}

    def bind(self, encoder, line=None) -> None:
        self.extractive.bind(encoder, line)

    def prepare(self, events, encode: bool = True) -> None:
        self.extractive.prepare(events, encode)

    def encode_sentences(self, events) -> None:
        self.extractive.encode_sentences(events)

    def messages(self, query: str, items: list[AnswerItem]) -> list[dict]:
        # each post on one line of its own, as ``render`` shows it: no name, title or text
        # can start a line that reads as another numbered post, nor close a quote
        lines = []
        for n, item in enumerate(items[: self.max_items], 1):
            title = render(item.get("block_title"))
            meta = ", ".join(
                p
                for p in (shown_name(item), day_of(item.get("created_at")), title and f"in {title}")
                if p
            )
            lines.append(f"[{n}] ({meta}) {render(item.get('text'))}")
        system = (
            "You answer questions about a person's memory using only the numbered posts "
            'given. Say who wrote what and when; resolve relative times ("yesterday") '
            "against the post's date. If the posts do not answer the question, say: "
            '"I have no information available on that." Otherwise answer in one or two '
            "short sentences and cite the posts you use by number, as [1]."
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": "Posts:\n" + "\n".join(lines) + f"\n\nQuestion: {query}"},
        ]

    def write(self, question: Asked, evidence: Evidence) -> Answer:
        """The endpoint's answer to a question asked for a summary; the extractive writer's
        (given the same question and evidence) for a listing, a one-line account, a
        question it cannot resolve, no items, or any failure of the endpoint."""
        reading = question.reading
        if (
            not evidence.items
            or not question.summary
            or question.listing
            or getattr(reading, "kind", None) == "unresolved"
        ):
            return self.extractive.write(question, evidence)
        query = question.text
        # two authors of one name are told apart
        items = labelled(evidence.items, question.authors)
        body = json.dumps(
            {
                "model": self.model,
                "messages": self.messages(query, items),
                "temperature": self.temperature,
            }
        ).encode()
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
        except (
            OSError,
            urllib.error.URLError,
            ValueError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,  # a reply whose content is not text ("content": null)
        ) as exc:
            log.warning(
                "LLM answer writer failed (%s: %s); using the extractive writer",
                type(exc).__name__,
                exc,
            )
            return self.extractive.write(question, evidence)
        declined = DECLINE.lower() in text.lower()
        shown = items[: self.max_items]
        cited = dict.fromkeys(
            int(n) for n in re.findall(r"\[(\d+)\]", text) if 1 <= int(n) <= len(shown)
        )
        quotes = (
            []
            if declined
            else [
                {"event_id": shown[n - 1].get("event_id"), "sentence": None, "score": None}
                for n in cited
            ]
        )
        return Answer(text, declined=declined, quotes=quotes, writer="llm")
