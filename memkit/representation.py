"""What a retriever indexes for an event besides its own text.

A post in a conversation often makes sense only with its neighbours: "Yes, last Friday!"
answers the turn before it. :func:`add_context` gives every event the fields a retriever's
``doc_template`` can use:

- ``speaker``: who posted it (``user_id``; in the datasets this is the person's name);
- ``prev_text``/``prev_speaker`` and ``next_text``/``next_speaker``: the neighbouring
  posts of the same block, in posting order (``before``/``after`` of them, joined);
- ``date``: the event's day written out ("8 May 2023"), so a question that names a date
  can match it;
- ``session_text``: the whole block ("speaker: text" lines), so a retriever can score the
  session a post belongs to and pool that evidence into the post's score.

Configured in a pipeline's TOML as ``[representation] before = 1, after = 1`` and used by
templates such as ``"{date}. {prev_speaker}: {prev_text}\\n{speaker}: {text}"``.
Neighbours need the whole block, so a pipeline with a representation indexes with
``fit`` (eval); the service does not serve one yet.
"""

from __future__ import annotations

import polars as pl

from memkit.errors import ValidationError

FIELDS = ("speaker", "prev_text", "prev_speaker", "next_text", "next_speaker", "date", "session_text")


def _joined(col: str, offsets: list[int]) -> pl.Expr:
    parts = [pl.col(col).shift(o).over("block_id") for o in offsets]
    return pl.concat_str(parts, separator=" / ", ignore_nulls=True).fill_null("")


def add_context(events: pl.DataFrame, before: int = 1, after: int = 1) -> pl.DataFrame:
    """Events with the context fields added (rows keep their order; posting order within a
    block is the order of the rows)."""
    for name, value in (("before", before), ("after", after)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 5:
            raise ValidationError(f"representation.{name}", f"expected an integer from 0 to 5, got {value!r}")
    prev = list(range(before, 0, -1))  # oldest first
    nxt = [-i for i in range(1, after + 1)]
    speaker = pl.col("user_id").fill_null("")
    return events.with_columns(
        speaker.alias("speaker"),
        (_joined("text", prev) if prev else pl.lit("")).alias("prev_text"),
        (_joined("user_id", prev) if prev else pl.lit("")).alias("prev_speaker"),
        (_joined("text", nxt) if nxt else pl.lit("")).alias("next_text"),
        (_joined("user_id", nxt) if nxt else pl.lit("")).alias("next_speaker"),
        pl.col("created_at").dt.strftime("%-d %B %Y").fill_null("").alias("date"),
        pl.concat_str([speaker, pl.lit(": "), pl.col("text")]).str.join("\n").over("block_id").alias("session_text"),
    )


class Representation:
    """The ``[representation]`` section of a pipeline config."""

    def __init__(self, before: int = 1, after: int = 1):
        self.before, self.after = before, after
        add_context(pl.DataFrame(schema={"block_id": pl.Utf8, "user_id": pl.Utf8, "text": pl.Utf8,
                                         "created_at": pl.Datetime("us", "UTC")}), before, after)  # checks the values

    def params(self) -> dict:
        return {"before": self.before, "after": self.after}

    def __call__(self, events: pl.DataFrame) -> pl.DataFrame:
        return add_context(events, self.before, self.after)
