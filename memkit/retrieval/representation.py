"""What a retriever indexes for an event besides its own text.

A post in a conversation often makes sense only with its neighbours: "Yes, last Friday!"
answers the turn before it, and "At the zoo." names no job. :func:`add_context` gives every
event the fields a retriever's ``doc_template`` can use:

- ``line``: the post as a chat line, ``"Speaker: text"`` (just the text when nobody is
  named). The speaker is the ``speaker`` column if the events have one (the service puts
  the author's name there), else ``user_id`` (the datasets' speaker names);
- ``prev_lines`` / ``next_lines``: the ``before`` / ``after`` neighbouring posts of the
  same session as chat lines, oldest first;
- ``date``: the event's day written out ("8 May 2023"), so a question naming a date can
  match it;
- ``session_text``: every post of the session as chat lines, so a retriever can score the
  session a post belongs to and pool that evidence into the post's score.

A *session* is the posts of one block on one day (UTC), at most ``max_session`` of them
(64 by default): a busier block-day is cut, in posting order, into runs of that many;
posts without a time form sessions per block the same way. (A LoCoMo session is a block
of at most 43 turns; a busy feed splits into days and runs, so a post's context, and the
work of re-indexing it when a neighbour arrives, stays bounded however busy the feed.)
Posting order within a session is ``created_at``, then row order (the service orders rows
by time and id). Configured as ``[representation] before = 1, after = 1`` in a pipeline's
TOML and used by templates such as ``"{date}. {prev_lines}\\n{line}\\n{next_lines}"``.

Context by shape (``chat_types``, ``chat_max_chars``): neighbours and sessions lift chat
lines (+0.23 R@10 on LoCoMo-dev) but hurt passages of documents, whose neighbours are other
passages (-0.07 MRR@10 on CAsT). With ``chat_types`` given, only a post of a block of one of
those types (the service's "feed", "forum") and at most ``chat_max_chars`` long is a chat
line; any other post stands alone: its ``line`` is its text, ``prev_lines`` and
``next_lines`` are empty and so is ``session_text`` (it belongs to no session), and the
column ``chat`` says which posts are chat lines (a learned ranker may score the two shapes
with two models) and ``chat_block`` which posts are in a block of a chat type, however long
(a long chat line stands alone but is not a blog's post). The rule reads the block's
type and the post's length, which the service knows, never which data set it came from.
Without ``chat_types`` every post is a chat line (what the encoder's training pairs use).
Neighbours depend on the whole session: the service re-indexes the posts whose context
changed when one of them changes (server/search/index.py).
"""

from __future__ import annotations

import polars as pl

from memkit.config.model import FromSpec, RepresentationSpec

FIELDS = ("line", "prev_lines", "next_lines", "date", "session_text", "chat", "chat_block")
SESSION = ["block_id", "_day", "_run"]  # the posts that are each other's context


def _lines(offsets: list[int]) -> pl.Expr:
    if not offsets:
        return pl.lit("")
    parts = [pl.col("_context").shift(o).over(SESSION) for o in offsets]
    return pl.concat_str(parts, separator="\n", ignore_nulls=True).fill_null("")


def add_context(events: pl.DataFrame, **settings) -> pl.DataFrame:
    """The events (same rows, same order) with the context fields of
    ``Representation(**settings)`` added (``before``, ``after``, ...: its settings)."""
    return Representation(**settings)(events)


def _add_context(
    events: pl.DataFrame, before: int, after: int, max_session: int, chat_types, chat_max_chars
) -> pl.DataFrame:
    speaker = pl.col("speaker" if "speaker" in events.columns else "user_id").fill_null("")
    if chat_types is None:  # every post is a chat line
        chat = chat_block = pl.lit(True)
    else:
        chat_block = pl.col("block_type").is_in(list(chat_types))
        chat = chat_block & (pl.col("text").str.len_chars() <= chat_max_chars)
    line = (
        pl.when(chat & (speaker != ""))
        .then(pl.concat_str([speaker, pl.lit(": "), pl.col("text")]))
        .otherwise(pl.col("text"))
    )
    ordered = (
        events.with_row_index("_row")
        .with_columns(line.alias("line"), pl.col("created_at").dt.date().alias("_day"))
        .sort("block_id", "created_at", "_row", nulls_last=False)
    )
    ordered = ordered.with_columns(
        (pl.int_range(pl.len()).over("block_id", "_day") // max_session).alias("_run"),
        # what a post lends its neighbours as context: a chat line lends its line; a post
        # that stands alone (a long one) lends nothing, so a user's short turn between two
        # long answers is not read as those answers' words
        pl.when(chat).then(pl.col("line")).otherwise(None).alias("_context"),
    )
    ordered = ordered.with_columns(
        pl.when(chat)
        .then(_lines(list(range(before, 0, -1))))
        .otherwise(pl.lit(""))
        .alias("prev_lines"),
        pl.when(chat)
        .then(_lines([-i for i in range(1, after + 1)]))
        .otherwise(pl.lit(""))
        .alias("next_lines"),
        pl.col("created_at").dt.strftime("%-d %B %Y").fill_null("").alias("date"),
        pl.when(chat)
        .then(pl.col("line").str.join("\n").over(SESSION))
        .otherwise(pl.lit(""))
        .alias("session_text"),
        chat.alias("chat"),
        chat_block.alias("chat_block"),
    )
    return ordered.sort("_row").drop("_row", "_day", "_run", "_context")


class Representation(FromSpec):
    """The ``[representation]`` section of a pipeline config: its settings are
    ``memkit.config.model.RepresentationSpec``'s fields (``before``, ``after``,
    ``max_session``, ``chat_types``, ``chat_max_chars``)."""

    spec, section = RepresentationSpec, "representation"

    def __call__(self, events: pl.DataFrame) -> pl.DataFrame:
        return _add_context(
            events, self.before, self.after, self.max_session, self.chat_types, self.chat_max_chars
        )

    def line(self, item) -> str:
        """One post's ``line`` as :func:`add_context` writes it (the same rule, for a post
        as a dict or an Item, without a frame): "Speaker: text" for a chat line."""
        speaker = item.get("speaker") or ""
        text = item.get("text") or ""
        return f"{speaker}: {text}" if self.is_chat_line(item) and speaker else text

    def is_chat_line(self, item) -> bool:
        """Whether a post (a dict or an Item) is a chat line, as :func:`add_context`'s
        ``chat`` column says: every post without ``chat_types``; else a post of a block of
        one of those types, at most ``chat_max_chars`` long."""
        return self.chat_types is None or (
            item.get("block_type") in self.chat_types
            and len(item.get("text") or "") <= self.chat_max_chars
        )
