"""The built-in ranking steps (memkit.ranking). Each is built for one pipeline and reads
what it needs of it when it runs (the reader, the gate's bounds), so a pipeline changed
after it was built ranks as it is now."""

from __future__ import annotations

from dataclasses import replace

from memkit.ranking.changes import changed_fact, newest_first, settles, stated_change_first
from memkit.ranking.registry import register_step
from memkit.ranking.replies import reply_first


@register_step("reader")
class ReaderStep:
    """The reader (memkit.ranking.reader.ReaderStage) decides: which of the first posts goes first,
    and whether any answers. It reads questions it applies to (``questions_only``), what
    retrieval read (``Question.read_as``); not a window's listing, nor a follow-up that
    refers to nothing."""

    name = "reader"

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def apply(self, ranked, question, posts):
        reader = self.pipeline.reader
        unresolved = getattr(question.reading, "kind", None) == "unresolved"
        if reader is None or ranked.listing or unresolved or not reader.applies(question):
            return ranked
        run = reader.rerank(question.read_as, ranked.run, posts)
        return replace(ranked, run=run, decided=True, relevant=reader.answers(run))


@register_step("relevance")
class RelevanceStep:
    """The gate (``Pipeline.relevant``, bounds from ``[relevance]``): a ranking that found
    nothing is emptied. A listing found something when it holds a post; a ranking the
    reader decided is left to its decision. ``search`` does not gate (``Ranked.batch``)."""

    name = "relevance"

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def apply(self, ranked, question, posts):
        if ranked.batch or ranked.decided:
            return ranked
        run = ranked.run
        relevant = (
            ranked.listing
            and run.height > 0
            or self.pipeline.relevant(run, question.read_as, ranked.best)
        )
        return replace(ranked, relevant=relevant, run=run if relevant else run.clear())


@register_step("changed_facts")
class ChangedFactsStep:
    """A question a changed fact settles (when, where, who): the newer statement first and
    the post it replaced second (the cut hides that one); a question about a change: the
    post stating it first (memkit.ranking.changes)."""

    name = "changed_facts"

    def __init__(self, pipeline=None):
        pass

    def apply(self, ranked, question, posts):
        if not ranked.open:
            return ranked
        run = ranked.run
        change = (
            changed_fact(run, posts, kind=question.kind, query=question)
            if settles(question.kind)
            else None
        )
        if change:
            return replace(ranked, run=newest_first(run, change), change=change)
        return replace(ranked, run=stated_change_first(run, posts, question))


@register_step("replies")
class RepliesStep:
    """The reply that answers first ("Ines, can Pepper come to the gig?": Ines's reply),
    unless a changed fact settled the question (memkit.ranking.replies)."""

    name = "replies"

    def __init__(self, pipeline=None):
        pass

    def apply(self, ranked, question, posts):
        run = ranked.run
        if not ranked.open or ranked.change or not run.height:
            return ranked
        replied = reply_first(run, posts, kind=question.kind, query=question)
        if replied["event_id"][0] != run["event_id"][0]:
            return replace(ranked, run=replied, reply=replied["event_id"][0])
        # The same first post: ``ask`` keeps its ranking as it was, ``search`` takes
        # reply_first's (which may have moved the question second under a reply already
        # first); kept apart so that neither path's rankings change.
        return replace(ranked, run=replied) if ranked.batch else ranked
