"""The pipeline: the one object that answers a query in a notebook, an eval run and the
service. It is built from a TOML configuration (``Pipeline.from_config(path)``):

```toml
name = "hybrid"
[retriever]          # memkit.retrieval.build(...)
type = "hybrid"
...
[contextualizer]     # how follow-ups use earlier turns (memkit.question.conversation)
type = "topic"
[answer]             # how the answer is written (memkit.answer; default: extractive)
type = "extractive"
[representation]     # context fields for doc templates (memkit.retrieval.representation)
before = 1
after = 1
[relevance]          # when a query counts as having found nothing, and what is cut
                     # (default: no gate)
min_probability = 0.02
min_similarity = 0.25
[ranking]            # the ranking steps, in order (memkit.ranking; default: those
                     # [reader] and changed_facts turn on)
steps = ["relevance", "replies"]
[calibration]        # scores to probabilities (memkit.ranking.calibration; by default the
                     # learned ranker's own)
a = 1.0
b = 0.0
[encoder]            # the model of every dense part, and how it learns
                     # (memkit.training; default: minilm)
model = "minilm"
[encoder.adapt]      # e.g. adapt to the events given to ``fit``
epochs = 1
```

``ask(Query)`` answers one question of one user and returns a ``QueryResult``; it
stores nothing. The request carries everything (the question, the user's earlier turns,
floors, filters, the time of asking); the result carries the items (with probabilities),
the answer (with the posts it quotes and whether it declined), what the conversation and
the question's time words added (``carried``) and the ``Turn`` the caller keeps for the
next question. The steps, in order:

1. **Read** the question (memkit.question.conversation): its time window
   (memkit.language.timeref), whether it follows up the current topic, starts a new one or
   refers to nothing.
2. **Search** each variant (as asked; with the topic carried) and fuse them: probabilities
   by their weighted mean, other scores by min-max. A question naming a time window keeps
   the posts of those days (posted then, or saying something happened then); one naming
   only a window lists its posts.
3. **Rank**: the ranking steps (memkit.ranking; ``[ranking] steps``), in order, each given
   the ``Question`` read once: the reader, the gate, changed facts, replies. The gate:
   nothing was found when the best probability is below ``min_probability``, or when no
   item matched a query term and the best cosine is below ``min_similarity`` (a post whose
   cosine reaches ``sure_similarity`` is found whatever its probability); then no items and
   the answerer's fallback. The gate keeps or drops the whole ranking, so a query that
   finds something gets exactly the ranking ``memkit eval`` scores.
4. **Cut** items below ``min_score`` (the request's, else the config's), then the top ``k``.
5. **Write** the answer from the items (memkit.answer), and **record** the ``Turn``.

The question is read once (``Question``) and read again only when retrieval reads it
otherwise: a follow-up whose first posts do not tie it to its topic is a new topic.

``query`` is ``ask`` with the history kept in memory (notebooks, the eval harness);
``search`` answers independent queries in a batch (what eval does for most datasets),
asking those that name a time window one by one as ``ask`` does; it runs the same ranking
steps through the same code (``memkit.ranking.Ranked.batch`` says how it differs).

Encoder: with an ``[encoder]`` section, ``fit`` first resolves the model (training what
the cache does not hold yet, see memkit.training.EncoderStage) and gives it to every dense
part and the answer writer, so one pipeline never mixes two models (the retriever is
rebuilt from its settings with that model). ``from_config(encoder=name)`` or
``use_encoder(name)`` fixes the model instead (the service: the store names the active
one), and ``fit`` then keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Sequence

import polars as pl

from memkit.answer import Answer, Asked, Evidence, build_answerer
from memkit.answer.base import speaker
from memkit.config import CONFIG_DIR, load_checked
from memkit.config.model import (
    Config,
    RelevanceSpec,
    RepresentationSpec,
    typed,
    validate_config,
)
from memkit.core.items import Item, ItemSource, Posts
from memkit.core.tables import RUN_SCHEMA
from memkit.language import Language, get_language
from memkit.language.en.changes import ASKS_CHANGE, CHANGED
from memkit.language.timeref import dates_in, months_ahead, question_window
from memkit.question import Question
from memkit.question.conversation import (
    ConversationStore,
    Reading,
    Turn,
    build_contextualizer,
    confirms_topic,
    content_words,
    stems,
)
from memkit.question.kinds import base_forms
from memkit.ranking import Ranked, Step, build_steps, default_steps, run_steps
from memkit.ranking.calibration import Calibration
from memkit.ranking.changes import to_top
from memkit.ranking.reader import ReaderStage
from memkit.retrieval import (
    DenseRetriever,
    Filters,
    LearnedRetriever,
    PgVectorRetriever,
    Retriever,
    build,
    convex,
    map_specs,
    walk,
    with_settings,
)
from memkit.retrieval.base import (
    normalize_queries,
    query_filters,
    search_with_time,
    undated_quiet,
)
from memkit.retrieval.registry import kind_of
from memkit.retrieval.representation import Representation
from memkit.training import EncoderStage

DEFAULT_CONFIG = CONFIG_DIR / "default.toml"
WINDOW_DEPTH = 200  # posts of a time window a question that names only the window can list
# A window carried from the previous turn is kept while its best post is at least this
# share of the best of any day (chosen on the dev suite's checks: eval/RESULTS.md).
CARRIED_WINDOW_SHARE = 0.2


@dataclass
class Query:
    """One question of one user, with everything the pipeline needs to answer it."""

    query: str
    user_id: str | None = None
    floor_ids: Sequence[str] | None = None
    filters: Filters | None = None
    now: datetime | None = (
        None  # the time of asking ("last May" is read from it); None: only dated windows
    )
    history: list[Turn] = field(default_factory=list)  # the user's earlier turns, oldest first
    k: int | None = None
    min_score: float | None = None  # items below this score are not returned (None: the config's)
    summary: bool = True
    authors: Sequence[str] | None = (
        None  # the people who post in these floors (None: every author known)
    )
    query_id: str = "q"


@dataclass
class Carried:
    """What the conversation and the question's time words added to the search."""

    kind: str = "alone"  # alone, new, follow-up, return (memkit.question.conversation)
    topic: int = 0
    words: list[str] = field(default_factory=list)
    posts: list[str] = field(default_factory=list)
    window: dict | None = None  # {"from", "to", "text", "source": "question" | "previous turn"}

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "topic": self.topic,
            "words": self.words,
            "posts": self.posts,
            "window": self.window,
        }


@dataclass
class QueryResult:
    query: str
    effective_query: str
    # query_id, event_id, score, rank, match_type: the ranking before the cut-off (kept when the
    # reader finds nothing likely to answer; ``relevant`` says whether anything was shown)
    run: pl.DataFrame
    relevant: bool = True
    items: list[Item] = field(default_factory=list)  # what is returned: the top k above the cut-off
    written: Answer | None = None  # the answer with what it quotes, its date, whether it declined
    carried: Carried = field(default_factory=Carried)
    turn: Turn | None = None  # what the conversation keeps of this question
    history: int = 0  # earlier turns of this user's conversation the contextualizer saw
    question: Question | None = None  # how the question was read

    @property
    def answer(self) -> str | None:
        return self.written.text if self.written is not None else None


def read_once(items_of):
    """``items_of`` (ids -> posts) remembering what it read: the posts of one question are
    read from the store once, however many steps look at them."""
    seen: dict = {}

    def read(ids):
        missing = [i for i in ids if i not in seen]
        if missing:
            seen.update((it.get("event_id"), it) for it in items_of(missing))
        return [seen[i] for i in ids if i in seen]

    return read


class Pipeline:
    def __init__(
        self,
        retriever: Retriever,
        contextualizer=None,
        k: int = 10,
        name: str = "pipeline",
        config: dict | None = None,
        conversations: ConversationStore | None = None,
        answerer=None,
        min_similarity: float | None = None,
        representation: Representation | None = None,
        encoder: EncoderStage | None = None,
        calibration: Calibration | None = None,
        min_probability: float | None = None,
        min_score: float | None = None,
        posts: ItemSource | None = None,
        time_windows: bool = False,
        sure_similarity: float | None = None,
        encoder_fixed: bool = False,
        reader: ReaderStage | None = None,
        changed_facts: bool = False,
        steps: Sequence | None = None,
        language: Language | str = "en",
    ):
        self.retriever = retriever
        # the pack its questions are read with (memkit.language; the config's ``language``)
        self.language = get_language(language) if isinstance(language, str) else language
        self.reader = reader  # reads a question's first posts, re-orders them, decides
        self.encoder_stage = encoder
        self.encoder_fixed = encoder_fixed  # fit keeps the dense parts' model (no [encoder] run)
        self.contextualizer = contextualizer or build_contextualizer(None)
        self.answerer = answerer or build_answerer(None)
        self.representation = representation
        dense = _dense_part(retriever)
        if dense is not None and hasattr(self.answerer, "bind"):
            self.answerer.bind(
                dense.text_encoder, self._line
            )  # sentence vectors from the same (cached) encoder
        self.min_similarity = min_similarity
        if (
            calibration is None
            and isinstance(retriever, LearnedRetriever)
            and retriever.model is not None
        ):
            calibration = Calibration()  # the ranker's own logistic output
        self.calibration = calibration
        self.min_probability = (
            min_probability  # nothing found when no item reaches it (calibrated pipelines)
        )
        self.sure_similarity = (
            sure_similarity  # found whatever the probability when a post's cosine reaches it
        )
        self.min_score = min_score  # items below it are not returned
        self.time_windows = time_windows
        # the ranking steps (memkit.ranking), names or step objects; None: those the
        # reader and ``changed_facts`` turn on (``default_steps``), read when asked
        self.ranking = list(steps) if steps is not None else None
        # a later post saying a plan moved goes first
        self.changed_facts = changed_facts or "changed_facts" in (self.ranking or ())
        self.replaced: dict[str, tuple[str, str]] = {}  # the last ``search``'s changed facts
        self.posts: ItemSource = posts if posts is not None else Posts()
        self.k = k
        self.name = name
        self.config = config or {}
        idle = getattr(self.contextualizer, "idle_minutes", None)
        self.conversations = conversations or ConversationStore(
            idle_expiry=timedelta(minutes=idle) if idle else timedelta(minutes=30)
        )
        if self.ranking is not None:
            build_steps(self.ranking, self)  # a name no step has is an error here, not later

    @classmethod
    def from_config(
        cls,
        config: "str | Path | dict | Config | None" = None,
        posts: ItemSource | None = None,
        encoder: str | None = None,
        reader: bool = True,
    ) -> "Pipeline":
        """From a TOML path, an already-loaded config dict, a checked ``Config``
        (memkit.config.model; not checked again), or the project default.
        ``posts``: where items are read (default: kept in memory from what is indexed).
        ``encoder``: the model every dense part is built with and ``fit`` keeps (the service
        passes the model it serves); None: the config's own, resolved by ``fit``.
        ``reader``: False leaves the config's ``[reader]`` out (its training asks the
        pipeline for the candidates the reader will see)."""
        if config is None:
            config = DEFAULT_CONFIG
        if isinstance(config, Config):  # checked already (the service checks its own once)
            checked, config = config, config.model_dump(exclude_unset=True)
        elif isinstance(config, dict):  # every section, once, errors with their TOML path
            checked = validate_config(config)
        else:
            config, checked = load_checked(config)
        relevance = checked.relevance or RelevanceSpec()
        bounds = {
            key: None if getattr(relevance, key) is None else float(getattr(relevance, key))
            for key in ("min_similarity", "min_probability", "min_score", "sure_similarity")
        }
        spec = checked.retriever
        if encoder is not None:
            spec = _with_encoder(spec, encoder)
        return cls(
            retriever=build(spec),
            contextualizer=build_contextualizer(checked.contextualizer),
            answerer=build_answerer(checked.answer),
            representation=_representation(checked.representation),
            encoder=EncoderStage.from_config(checked.encoder),
            calibration=Calibration.from_config(checked.calibration),
            k=checked.k,
            name=checked.name or "pipeline",
            config=config,
            posts=posts,
            time_windows=checked.time_windows,
            changed_facts=checked.changed_facts,
            encoder_fixed=encoder is not None,
            reader=ReaderStage.from_config(checked.reader) if reader else None,
            steps=checked.ranking.steps if checked.ranking is not None else None,
            language=checked.language,
            **bounds,
        )

    def stages(self) -> list[str]:
        """What this pipeline does beyond its retriever, in the order a question meets it
        (an empty list: the retriever alone, as a baseline should be). Eval names them in
        its tables, its report and the MLflow run's ``stages`` tag, so that no row looks
        like a retriever's that is more than one."""
        names = []
        if self.encoder_stage is not None:
            names.append("encoder adapted")
        kind = getattr(self.contextualizer, "type_name", "none")
        if kind != "none":
            names.append(f"follow-ups ({kind})")
        if self.time_windows:
            names.append("time windows")
        if isinstance(self.retriever, LearnedRetriever):
            names.append("learned ranker")
        gated = any(
            bound is not None
            for bound in (
                self.min_similarity,
                self.min_probability,
                self.min_score,
                self.sure_similarity,
            )
        )
        # replies go unnamed (as they always have: the ledger's stages stay as they are),
        # and so does a gate with no bounds (it only finds an empty ranking empty)
        for step in self.steps:
            label = {
                "reader": "reader",
                "relevance": "relevance gate" if gated else None,
                "changed_facts": "changed facts",
                "replies": None,
            }.get(step.name, step.name)
            if label is not None:
                names.append(label)
        if (self.config or {}).get("answer"):
            names.append(f"answers ({self.config['answer'].get('type', 'extractive')})")
        return names

    def params(self) -> dict:
        return {
            "name": self.name,
            "k": self.k,
            "retriever": self.retriever.params(),
            "contextualizer": self.contextualizer.params(),
            "answer": self.answerer.params(),
            "relevance": {
                "min_similarity": self.min_similarity,
                "min_probability": self.min_probability,
                "min_score": self.min_score,
                "sure_similarity": self.sure_similarity,
            },
            "calibration": self.calibration.params() if self.calibration else None,
            "time_windows": self.time_windows,
            "changed_facts": self.changed_facts,
            "representation": self.representation.params() if self.representation else None,
            **({"encoder": self.encoder_stage.params()} if self.encoder_stage else {}),
            **({"reader": self.reader.params()} if self.reader else {}),
            **({"ranking": {"steps": self.step_names()}} if self.ranking is not None else {}),
        }

    # -- the ranking steps --------------------------------------------------------------
    def step_names(self) -> list[str]:
        """The names of the ranking steps, in order (memkit.ranking)."""
        return [step.name for step in self.steps]

    @property
    def steps(self) -> list[Step]:
        """The ranking steps a question's ranking goes through, in order: the config's
        ``[ranking] steps``, else those its reader and ``changed_facts`` turn on. Without a
        reader (``from_config(reader=False)``) there is no reader step."""
        names = (
            self.ranking
            if self.ranking is not None
            else default_steps(self.reader is not None, self.changed_facts)
        )
        if self.reader is None:
            names = [s for s in names if s != "reader"]
        return build_steps(names, self)

    # -- the encoder ------------------------------------------------------------------
    def use_encoder(self, name: str, fixed: bool = True) -> "Pipeline":
        """Every dense part and the answer writer use this model: the retriever is rebuilt
        from its settings with it (nothing built is changed; call before ``fit``, as the
        rebuilt retriever is empty). ``fixed``: later fits keep it."""
        self.retriever = build(_with_encoder(self.retriever.params(), name))
        dense = _dense_part(self.retriever)
        if dense is not None and hasattr(self.answerer, "bind"):
            self.answerer.bind(dense.text_encoder, self._line)
        self.encoder_fixed = fixed
        return self

    @property
    def answerer_reads(self) -> int:
        """How many of the top posts the answer writer reads (its ``max_items``)."""
        return int(getattr(self.answerer, "max_items", 0) or 0)

    def encoder_name(self) -> str | None:
        """The model the dense parts use (None without one)."""
        dense = _dense_part(self.retriever)
        return None if dense is None else dense.params()["encoder"]

    # -- the index --------------------------------------------------------------------
    def fit(self, events: pl.DataFrame, hold_out: str | None = None, documents=None) -> "Pipeline":
        """Index ``events``. With an ``[encoder]`` section (and no fixed model), first
        resolve the model: supervised on its datasets except ``hold_out`` (eval names the
        data set it scores), adapted on these events. ``documents`` as for ``add``."""
        if self.encoder_stage is not None and not self.encoder_fixed:
            self.use_encoder(self.encoder_stage.resolve(events, hold_out), fixed=False)
        self.retriever.fit(self._documents(events, documents))
        if isinstance(self.posts, Posts):
            self.posts = Posts()
            self.posts.add(events)
        return self

    def _holds_few_facts(self, item) -> bool:
        """Whether a post is short enough to be read as one message (a chat line, or a blog's
        post no longer than a chat line may be), not a document whose passages each hold
        other facts."""
        rep = self.representation
        return rep is None or rep.is_chat_line(item) or len(item.text or "") <= rep.chat_max_chars

    def _line(self, item) -> str:
        """A post's text as the dense retrievers read it (its chat line), for the answer
        writer's sentence vectors."""
        return self.representation.line(item) if self.representation else (item.get("text") or "")

    def documents(self, events: pl.DataFrame) -> pl.DataFrame:
        """What the retrievers index for these events: with a representation, the events
        with their context fields (neighbours looked up among the events given together)."""
        return self.representation(events) if self.representation else events

    def add(self, events: pl.DataFrame, only=None, documents=None) -> "Pipeline":
        """Index more events (an event indexed before is replaced). ``only``: event ids;
        the others given serve as context only, e.g. the rest of a session. ``documents``:
        ``documents(events)`` if the caller has it already (it is not made again)."""
        self.retriever.add(_only(self._documents(events, documents), only))
        if isinstance(self.posts, Posts):
            self.posts.add(_only(events, only))
        return self

    def precompute(self, events: pl.DataFrame, only=None, documents=None) -> None:
        """Encode these events (documents, and sentences for answers) into the embedding
        cache ahead of ``add``, so the index can take them in quickly. ``documents`` as
        for ``add``."""
        if hasattr(
            self.answerer, "encode_sentences"
        ):  # first: each post's run encodes its line too
            self.answerer.encode_sentences(_only(events, only))
        self.retriever.precompute(_only(self._documents(events, documents), only))

    def _documents(self, events: pl.DataFrame, documents) -> pl.DataFrame:
        return self.documents(events) if documents is None else documents

    def warm(self) -> None:
        """Build now what the first search after ``fit``/``add`` would build, so that
        searches running side by side only read."""
        self.retriever.warm()

    def remove(self, event_ids) -> "Pipeline":
        event_ids = list(event_ids)
        self.retriever.remove(event_ids)
        if isinstance(self.posts, Posts):
            self.posts.remove(event_ids)
        return self

    # -- asking -------------------------------------------------------------------------
    def search(self, queries, k: int | None = None, filters=None) -> pl.DataFrame:
        """Independent queries (no context), in one batch; scores are probabilities where
        the pipeline has a calibration. A query naming a time window ("What setback did
        Melanie face in October 2023?", or "last May" with a ``time`` of asking) is asked
        on its own, as ``ask`` asks it, so eval scores what the service serves."""
        given = queries if isinstance(queries, pl.DataFrame) else None
        frame = normalize_queries(queries)
        k = k or self.k
        times = (
            given["time"].to_list()
            if given is not None and "time" in given.columns
            else [None] * frame.height
        )
        dated = [
            self.time_windows and question_window(t, now) is not None
            for t, now in zip(frame["text"], times)
        ]
        per = query_filters(frame, filters)
        runs = []
        if not all(dated):
            rest = [f for f, d in zip(per, dated) if not d]
            asked = frame.filter(~pl.Series(dated))
            # the time each was asked, for a retriever that reads it (built-in ones do not)
            asked_at = [t for t, d in zip(times, dated) if not d]
            run = self._calibrated(search_with_time(self.retriever, asked, k, rest, asked_at))
            runs.append(self._read_all(run, dict(asked.select("query_id", "text").iter_rows())))
        for row, f, now, d in zip(frame.iter_rows(named=True), per, times, dated):
            if d:
                res = self.ask(
                    Query(
                        row["text"],
                        filters=f,
                        now=now,
                        k=k,
                        min_score=0.0,
                        summary=False,
                        query_id=row["query_id"],
                    )
                )
                runs.append(res.run.head(k))
        return pl.concat(runs) if runs else pl.DataFrame(schema=RUN_SCHEMA)

    def ask(self, req: Query) -> QueryResult:
        """One question: read (against the user's earlier turns, ``req.history``, and its
        time words), retrieved, ranked (the ranking steps, in order: memkit.ranking), cut,
        written, recorded. Nothing is stored: the result's ``turn`` is what the caller keeps
        for the next question."""
        authors = list(req.authors) if req.authors is not None else None
        question = Question.read(
            req.query,
            req.history,
            req.now,
            authors,
            self.language,
            follow_ups=self.contextualizer,
            windows=self.time_windows,
        )
        reading = question.reading
        k = req.k or self.k
        # The writer reads as many posts at any k ("k": 3 asks for three items, not for an
        # answer from three posts): they are searched for, and the items are the top k and
        # any post it quoted below them.
        reads = max(k, self.answerer_reads) if req.summary else k
        # the posts this question looks at, read from the store once: the topic check, the
        # follow-up's last answer, the steps and the answer
        posts = read_once(self.posts.items)
        ranked, reading = self._retrieved(req, question, authors, reads, posts)
        if reading is not question.reading:  # a follow-up its posts read as a new topic
            question = question.reread(reading)
        ranked = run_steps(self.steps, ranked, question, posts)
        shown = self._cut(ranked, req.min_score, k, reads)
        scores = dict(
            zip(
                shown["event_id"].to_list(),
                zip(shown["score"].to_list(), shown["match_type"].to_list()),
            )
        )
        read_items = [it.scored(*scores[it.event_id]) for it in posts(shown["event_id"].to_list())]
        decided = ranked.decided and self.reader is not None and self.reader.overrule_writer
        written = self.answerer.write(
            Asked(
                req.query,
                summary=req.summary,
                authors=authors,
                reading=reading,
                listing=ranked.listing,
                question=question,
            ),
            Evidence(
                read_items,
                found=ranked.run.height if ranked.listing else None,
                ranked=ranked.listing and not ranked.window_only,
                decided=decided,
                settled=bool(read_items)
                and ranked.settled_by is not None
                and read_items[0].event_id == ranked.settled_by,
            ),
        )
        items = _items(written, read_items, ranked.listing, k)
        return QueryResult(
            query=req.query,
            effective_query=reading.effective_query,
            run=ranked.run,
            relevant=ranked.relevant,
            items=items,
            written=written,
            carried=_carried(reading),
            turn=_turn(req, reading, written, items),
            history=len(req.history),
            question=question,
        )

    def _retrieved(
        self, req: Query, question: Question, authors, reads: int, posts
    ) -> tuple[Ranked, Reading]:
        """A question's ranking before the steps, and the reading it was searched with: the
        posts of the time window it names only, else its readings searched and fused (kept
        to the days it names when any post of them is found). A follow-up whose first posts
        do not tie it to its topic comes back read as a new topic (``_retrieve``)."""
        reading = question.reading
        f = req.filters if req.filters is not None else Filters()
        if req.floor_ids is not None:
            f = f.with_floors(req.floor_ids)
        # A question that names only a time window ("What happened last May?", or "What
        # happened?" with a time filter) asks for the posts of those days.
        filtered = f.time_from is not None or f.time_to is not None
        # ... but not a window still to come: nothing is posted in it yet, so its posts are
        # the plans that name it ("What is Priya doing in January?", asked in November)
        ahead = (
            reading.days is not None and req.now is not None and reading.days[0] > req.now.date()
        )
        window_only = (
            (reading.window is not None or filtered)
            and not ahead
            and not _subject_words(reading, authors)
        )
        best = None  # the best score any reading of the question found
        run = pl.DataFrame(schema=RUN_SCHEMA)
        if window_only and reading.kind != "unresolved":
            run = self._window_posts(reading, f, req.query_id, authors, now=req.now)
            # nothing posted then (by whoever it names): a question that asks for something
            # else than what happened then is searched as any question ("Where is Carys going
            # in August?" is answered by her June post about the August festival)
            window_only = run.height > 0 or question.asks_what_happened
        if reading.kind != "unresolved" and not window_only:
            run, reading, best = self._retrieve(
                reading, question, f, reads, req.query_id, req.history, posts, now=req.now
            )
            if reading.days is not None:
                windowed = self._in_window(run, reading)
                # Nothing of those days: the closest posts of any day (people misremember
                # dates; the answer gives each post's own date). A window carried from the
                # previous turn ("What happened in April?", then "When did they drive to
                # Zion?") is kept only if its best post is at least CARRIED_WINDOW_SHARE as
                # likely as the best of any day.
                unlikely = (
                    reading.window is None
                    and self.calibration is not None
                    and run.height > 0
                    and float(windowed["score"].max() or 0.0)
                    < CARRIED_WINDOW_SHARE * float(run["score"].max())
                )
                if windowed.height and not unlikely:
                    run = windowed
                elif not windowed.height and reading.window is not None:
                    # nothing of those days either: the time phrase is searched as words
                    # too ("Where is Lena going for Christmas?" is answered by "flights to
                    # Lisbon for Christmas", posted in October)
                    plain = self.contextualizer.read(
                        req.query, req.history, None, names=authors or ()
                    )
                    run, _, best = self._retrieve(
                        plain, question, f, reads, req.query_id, req.history, posts, now=req.now
                    )
        # "What was the band up to in April?": the posts of those days are the answer.
        listing = window_only or (reading.window is not None and question.asks_what_happened)
        return Ranked(run, best=best, listing=listing, window_only=window_only), reading

    def _cut(self, ranked: Ranked, min_score: float | None, k: int, reads: int) -> pl.DataFrame:
        """What the writer reads of a ranked question: nothing when nothing was found (when
        the reader finds no post likely to answer, the ranking is kept, as eval scores it,
        but nothing is shown: the answer says so); else the first ``reads`` (a listing: its
        first ``k``) at or above ``min_score`` (the request's, else the config's; a window's
        posts all), less the post a changed fact replaced."""
        run = ranked.run
        floor = min_score if min_score is not None else self.min_score
        to_read = k if ranked.listing else reads  # a listing shows the posts of its days: k
        shown = (
            run.clear()
            if not ranked.relevant
            else run.head(to_read)
            if floor is None or ranked.window_only
            else run.filter(pl.col("score") >= floor).head(to_read)
        )
        if ranked.change:  # the date a newer post replaced is not shown
            shown = shown.filter(pl.col("event_id") != ranked.change[1])
        return shown

    def query(
        self,
        text: str,
        user_id: str | None = None,
        floor_ids=None,
        filters: Filters | dict | None = None,
        k: int | None = None,
        now: datetime | None = None,
        query_id: str = "q",
        summary: bool = True,
        authors=None,
        min_score: float | None = None,
    ) -> QueryResult:
        """``ask`` with the user's history kept in ``self.conversations`` (in memory), for
        notebooks and the eval harness; the service keeps its own
        (server/search/conversations.py)."""
        history = self.conversations.history(user_id, now)
        f = Filters.from_dict(filters) if isinstance(filters, dict) or filters is None else filters
        result = self.ask(
            Query(
                text,
                user_id=user_id,
                floor_ids=floor_ids,
                filters=f,
                now=now,
                history=history,
                k=k,
                min_score=min_score,
                summary=summary,
                authors=authors,
                query_id=query_id,
            )
        )
        self.conversations.record(user_id, result.turn)
        return result

    # -- the steps of a question ---------------------------------------------------------
    def _read_all(self, run: pl.DataFrame, texts: dict[str, str]) -> pl.DataFrame:
        """Each question's ranking (``texts``: the question of each id) through the ranking
        steps, the code ``ask`` runs (``Ranked.batch``: no gate, eval judges each ranking
        itself with ``relevant``). A pipeline whose only steps are the gate and replies (a
        retriever's config: bm25, hybrid, ...) is scored on the ranking its retriever gives,
        as it has always been."""
        self.replaced = {}  # query id -> (newer post, the post it replaced): eval's answers
        steps = self.steps
        if run.height == 0 or all(step.name in ("relevance", "replies") for step in steps):
            return run
        parts = []
        for (qid,), part in run.group_by("query_id", maintain_order=True):
            text, posts = texts.get(qid, ""), read_once(self.posts.items)
            ranked = run_steps(
                steps, Ranked(part, batch=True), Question.of(text, language=self.language), posts
            )
            if ranked.change:
                self.replaced[qid] = ranked.change
            parts.append(ranked.run)
        return pl.concat(parts)

    def _calibrated(self, run: pl.DataFrame) -> pl.DataFrame:
        if self.calibration is None or run.height == 0:
            return run
        return run.with_columns(
            pl.Series("score", self.calibration(run["score"].to_numpy()), pl.Float64)
        )

    def _search(
        self, texts: list[str], k: int, f: Filters, query_id: str, days=None, now=None
    ) -> list[pl.DataFrame]:
        """Each text's ranking, all texts in one search (a question's variants share one
        model call: memkit/retrieval/learned.py); with ``days``, the posts of those days the
        search did not reach are searched for again under a time filter and added (a text
        scores a post the same in both searches)."""
        # one text (most questions): searched under the question's own id, its run is the
        # whole run as it comes (no polars call to split or rename it)
        ids = [query_id] if len(texts) == 1 else [f"{query_id}/{i}" for i in range(len(texts))]
        frame = pl.DataFrame({"query_id": ids, "text": texts})

        def split(run: pl.DataFrame) -> list[pl.DataFrame]:
            run = self._calibrated(run)
            if len(ids) == 1:
                return [run]
            parts = run.partition_by("query_id", as_dict=True, maintain_order=True)
            return [
                parts.get((i,), run.clear()).with_columns(pl.lit(query_id).alias("query_id"))
                for i in ids
            ]

        runs = split(search_with_time(self.retriever, frame, k, f, now))
        lo, hi = _day_bounds(*days, f) if days is not None else (None, None)
        if (
            lo is not None and hi is not None and lo <= hi
        ):  # the window and the request's filter overlap
            dated = Filters(f.floor_ids, lo, hi, f.types, f.tags)
            runs = [
                pl.concat([run, more])
                .unique("event_id", keep="first", maintain_order=True)
                .sort(["score", "event_id"], descending=[True, False])
                for run, more in zip(runs, split(self._dated_search(frame, k, dated, now)))
            ]
        return runs

    def _dated_search(self, frame: pl.DataFrame, k: int, dated: Filters, now) -> pl.DataFrame:
        """A search under the time window a question names: posts without a time are not of
        that window by design, so the warning for undated posts a time filter drops is not
        given (memkit.retrieval.base.undated_quiet)."""
        with undated_quiet():
            return search_with_time(self.retriever, frame, k, dated, now)

    def _retrieve(
        self,
        reading: Reading,
        question: Question,
        f: Filters,
        k: int,
        query_id: str,
        history: list[Turn],
        posts,
        now=None,
    ) -> tuple[pl.DataFrame, Reading, float | None]:
        """The ranking of a question's variants, fused: probabilities by their weighted
        mean, other scores by min-max; and the best score any variant
        found (what the gate reads: a follow-up's fused probabilities are diluted by the
        reading that did not find it). A follow-up naming something its topic never had is
        taken as a new topic when no post found for it ties it to the topic
        (memkit.question.conversation.confirms_topic). ``posts``: ids -> posts (``read_once``);
        ``now``: the time of asking, for a retriever that reads it."""
        depth = (
            k if len(reading.variants) == 1 else max(k, 100)
        )  # fused variants: fuse deeper lists, then cut
        depth = max(depth, WINDOW_DEPTH) if reading.days is not None else depth
        runs = self._search(
            [text for text, _ in reading.variants], depth, f, query_id, reading.days, now
        )
        if len(runs) > 1 and reading.new_subject:
            first = posts(runs[0]["event_id"].head(1).to_list())
            sure = (
                float(runs[0]["score"].max())
                if runs[0].height and self.calibration is not None
                else None
            )
            if not confirms_topic(reading, first[0].text if first else "", sure):
                reading = self.contextualizer.new_topic(reading, history)
                runs = runs[:1]
        best = max((float(r["score"].max()) for r in runs if r.height), default=None)
        if len(runs) == 1:
            return runs[0], reading, best
        norm = "none" if self.calibration is not None else "minmax"
        fused = convex(runs, [w for _, w in reading.variants], norm=norm, top=depth)
        repeat = getattr(self.contextualizer, "repeat_weight", 1.0)
        if (
            reading.own_words and reading.posts and repeat != 1.0
        ):  # it asks something new of the topic
            # ... unless the last answer's post holds it too ("What bike did Jonas buy?",
            # then "How much did it cost?": the post said "350 euros")
            demoted = [
                it.event_id
                for it in posts(list(reading.posts))
                if not _still_answers(
                    question,
                    reading.own_words,
                    it.text,
                    self._holds_few_facts(it),
                )
            ]
            fused = (
                fused.with_columns(
                    pl.when(pl.col("event_id").is_in(demoted))
                    .then(pl.col("score") * repeat)
                    .otherwise(pl.col("score"))
                    .alias("score")
                )
                .sort(["score", "event_id"], descending=[True, False])
                .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"))
            )
        changed = self._change_just_quoted(reading, question, posts)
        if changed is not None and changed in fused["event_id"]:
            fused = to_top(fused, [changed])
        return fused, reading, best

    def _change_just_quoted(self, reading: Reading, question: Question, posts) -> str | None:
        """The last answer's post that states a change, when a follow-up asks about the
        change by no other words than the change's ("When are Pepper's jabs?", quoting
        "Pepper's jabs are postponed to 15 October, Dr Okafor is off sick", then "Why were
        they moved?": Raj's "The Lexington gig moved to 24 October because..." shares
        "moved" and ranked first)."""
        if not reading.posts or not question.asks_change:
            return None
        if any(not ASKS_CHANGE.fullmatch(w) for w in reading.own_words):
            return None
        for it in posts(list(reading.posts)):
            if self._holds_few_facts(it) and CHANGED.search(it.text or ""):
                return it.event_id
        return None

    def _in_window(self, run: pl.DataFrame, reading: Reading) -> pl.DataFrame:
        """Only posts of the question's days: posted then, or saying something happened
        then ("on 10 February", "last night")."""
        start, end = reading.days
        keep = [
            it.event_id
            for it in self.posts.items(run["event_id"].to_list())
            if _in_days(it, start, end)
        ]
        run = run.filter(pl.col("event_id").is_in(keep))
        return run.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("rank"))

    def _window_posts(
        self, reading: Reading, f: Filters, query_id: str, authors=None, now=None
    ) -> pl.DataFrame:
        """A question that names only a time window (and perhaps who): the posts of those
        days (of the request's time filter, when the question names none), by those people,
        the most telling first (most distinct content words, then time). Each is what was
        asked for: score 1. Who is named is read against ``authors`` (the people who post
        where the question is asked), else against the window's posts: "anything from Mia
        two weeks ago?" finds none of Tom's posts when Mia posted nothing then."""
        time_from, time_to = (
            _day_bounds(*reading.days, f) if reading.days else (f.time_from, f.time_to)
        )
        if time_from is not None and time_to is not None and time_from > time_to:
            return pl.DataFrame(schema=RUN_SCHEMA)
        dated = Filters(f.floor_ids, time_from, time_to, f.types, f.tags)
        frame = pl.DataFrame({"query_id": [query_id], "text": [reading.query]})
        if reading.days is not None:  # the question's own window: its undated posts are not of it
            found = self._dated_search(frame, WINDOW_DEPTH, dated, now)
        else:  # the request's time filter
            found = search_with_time(self.retriever, frame, WINDOW_DEPTH, dated, now)
        items = self.posts.items(found["event_id"].to_list())
        who = _named_speakers(
            reading.query, authors if authors is not None else [it.speaker for it in items]
        )
        if who:
            items = [it for it in items if it.speaker in who]
        items.sort(
            key=lambda it: (
                -len(content_words(it.text)),
                it.created_at.timestamp() if it.created_at else 0.0,
                it.event_id,
            )
        )
        n = len(items)
        return pl.DataFrame(
            {
                "query_id": [query_id] * n,
                "event_id": [it.event_id for it in items],
                "score": [1.0] * n,
                "rank": list(range(1, n + 1)),
                "match_type": ["time"] * n,
            },
            schema=RUN_SCHEMA,
        )

    def relevant(self, run: pl.DataFrame, query: str, best: float | None = None) -> bool:
        """Whether a ranking found anything relevant: with calibrated scores, the best
        (``best``: of any reading of the question, default the run's) reaches
        ``min_probability``, and (both gates apply when both are set) see the module's
        docstring for ``min_similarity``. The probability is relative to what the floors
        hold (the ranker's features are scaled per question), so on a floor of a handful of
        unrelated posts the best may still look likely: the similarity gate catches that.
        The other way round, twenty near-copies of one post share the probability of being
        *the* answer, so each looks unlikely: a post whose cosine with the question reaches
        ``sure_similarity`` counts as found whatever its probability."""
        if run.height == 0:
            return False
        if self.reader is not None and self.reader.applies(query):
            return self.reader.answers(run)  # a run ``search`` or ``ask`` re-ranked
        best = float(run["score"].max()) if best is None else best
        if (
            self.calibration is not None
            and self.min_probability is not None
            and best < self.min_probability
        ):
            dense = _dense_part(self.retriever) if self.sure_similarity is not None else None
            return (
                dense is not None
                and float(dense.similarity(query, run["event_id"].head(100).to_list()).max())
                >= self.sure_similarity
            )
        if self.min_similarity is None or (run["match_type"] != "semantic").any():
            return True
        dense = _dense_part(self.retriever)
        if dense is None:
            return True
        return (
            float(dense.similarity(query, run["event_id"].to_list()).max()) >= self.min_similarity
        )


def _day_bounds(start: date, end: date, f: Filters) -> tuple[datetime | None, datetime | None]:
    """The window's days as UTC times, narrowed by the request's own time filter."""
    lo = datetime.combine(start, time.min, timezone.utc)
    hi = datetime.combine(end, time.max, timezone.utc)
    if f.time_from is not None:
        lo = max(lo, f.time_from)
    if f.time_to is not None:
        hi = min(hi, f.time_to)
    return lo, hi


def _roots(words) -> set[str]:
    """Stems with a last "e" off too, so "move" meets "moved" and "commute" "commuting";
    an irregular past is its verb ("sold" meets "sell")."""
    return {w.removesuffix("e") for w in stems(base_forms(w) for w in words)}


def _still_answers(question: Question, own_words: Sequence[str], text: str, chat: bool) -> bool:
    """Whether a post the last answer quoted may answer this follow-up too: a chat line
    (``chat``) with one of the question's own words ("How long is her commute?" and "...the
    commute on the 19 bus is 40 minutes"; a document's passage holds many words, and a
    follow-up on it asks for another passage: CAsT 2021's MRR@10 -0.008 when documents were
    let through too), or a post holding the amount, name, number or address the question
    asks for ("How much did it cost?" and "...for 350 euros"). A question about a change
    ("Why were they moved?") is still answered by a chat line that states one in other
    words ("Pepper's jabs are postponed to 15 October, Dr Okafor is off sick")."""
    if chat and _roots(own_words) & _roots(content_words(text or "")):
        return True
    if chat and question.asks_change and CHANGED.search(text or ""):
        return True
    return question.lacks("") is not None and question.lacks(text) is None


def _in_days(item: Item, start: date, end: date) -> bool:
    """Posted in those days, or saying something happened then: a date or relative time
    in it, or a month without a year that is still ahead of the post (a plan: "the book
    festival in August", posted in June; months mentioned in passing about the past
    crowded a LongMemEval window question's posts out)."""
    if item.created_at is not None and start <= item.created_at.date() <= end:
        return True
    said = dates_in(item.text, item.created_at)
    if item.created_at is not None:
        said += months_ahead(item.text, item.created_at)
    return any(s.start <= end and start <= s.end and s.days <= (end - start).days + 1 for s in said)


def _named_speakers(query: str, names) -> set[str]:
    """The people of ``names`` the question names by their first name."""
    words = {w.lower().strip("?,.!") for w in query.replace("'s", " ").split()}
    return {n for n in names if n and n.split()[0].lower().strip("?,.!") in words}


def _subject_words(reading: Reading, authors) -> list[str]:
    """The question's content words that are not people's names (what it is about);
    without a list of authors every capitalised word counts as a name."""
    names = {p.lower() for n in (authors or ()) for p in n.split()}
    return [
        w
        for w in reading.own_words
        if w.lower().removesuffix("'s") not in names and not (w[:1].isupper() and authors is None)
    ]


def _carried(reading: Reading) -> Carried:
    window = None
    if reading.window is not None:
        span = reading.window.span
        window = {
            "from": span.start.isoformat(),
            "to": span.end.isoformat(),
            "text": span.text,
            "source": "question",
            "phrase": reading.window.phrase,
        }
    elif reading.carried_window is not None:
        start, end = reading.carried_window
        window = {
            "from": start.isoformat(),
            "to": end.isoformat(),
            "text": None,
            "source": "previous turn",
        }
    return Carried(
        kind=reading.kind,
        topic=reading.topic,
        words=list(reading.words),
        posts=list(reading.posts),
        window=window,
    )


def _items(written: Answer, read_items: list[Item], listing: bool, k: int) -> list[Item]:
    """What a question returns of the posts its answer read."""
    quoted = set(written.quoted)
    if written.declined and not listing:
        # Nothing found answers it: no items (INTERFACE.md), but for the closest post
        # when the decline names it ("the closest post is Omar's, and it does not say
        # the number"). The ranking is kept in ``run`` (eval scores it).
        return [i for i in read_items if i.event_id == written.closest]
    # the top k, less the lowest where a quoted post below them takes its place
    cited = [i for i in read_items if i.event_id in quoted][:k]
    rest = [i for i in read_items[:k] if i.event_id not in quoted][: k - len(cited)]
    kept = {i.event_id for i in cited + rest}
    return [i for i in read_items if i.event_id in kept]


def _turn(req: Query, reading: Reading, written: Answer, items: list[Item]) -> Turn:
    """What the conversation keeps of a question for the next one."""
    quoted = set(written.quoted)
    # what a bare follow-up ("how much were they?") refers to: the sentences the answer
    # quoted, then the rest of what it showed of their posts ("Got two tickets!! £355 each")
    sentences = [q["sentence"] for q in written.quotes if q.get("sentence")]
    sentences += [q["shown"] for q in written.quotes if q.get("shown")]
    answer_words = list(
        dict.fromkeys(
            w for w in content_words(" ".join(sentences)) if w not in set(reading.own_words)
        )
    )
    return Turn(
        query=req.query,
        effective_query=reading.effective_query,
        event_ids=[i.event_id for i in items],
        answer=written.text,
        # a decline that names the closest post showed it: a follow-up asking something
        # new of the topic looks past it, as past a quoted post ("What does the
        # allotment cost?" declined on the shed's break-in, then "What ate her carrots?")
        quoted=written.quoted or ([written.closest] if written.closest else []),
        words=reading.own_words,
        answer_words=answer_words,
        people=list(
            dict.fromkeys(filter(None, (speaker(i) for i in items if i.event_id in quoted)))
        ),
        window=reading.days,
        topic=reading.topic,
        time=req.now or datetime.now(timezone.utc),
    )


def _only(frame: pl.DataFrame, event_ids) -> pl.DataFrame:
    return frame if event_ids is None else frame.filter(pl.col("event_id").is_in(list(event_ids)))


def _representation(spec: RepresentationSpec | dict | None) -> Representation | None:
    """From a ``[representation]`` typed spec, or its dict checked into one first."""
    return None if spec is None else Representation.checked(typed("representation", spec))


_DENSE = (DenseRetriever, PgVectorRetriever)  # the kinds that score by an encoder's cosine


def _with_encoder(spec, name: str):
    """A retriever spec (typed or a dict) with every dense part's ``encoder`` set to this."""
    return map_specs(
        spec, lambda s: with_settings(s, encoder=name) if issubclass(kind_of(s), _DENSE) else s
    )


def _dense_parts(r: Retriever) -> list[DenseRetriever | PgVectorRetriever]:
    """Every part that scores by an encoder's cosine similarity, in config order."""
    return [p for p in walk(r) if isinstance(p, _DENSE)]


def _dense_part(r: Retriever) -> DenseRetriever | PgVectorRetriever | None:
    """The first part that scores by the encoder's cosine similarity (``similarity`` and
    ``text_encoder``): the relevance gate and the answerer use it."""
    return next(iter(_dense_parts(r)), None)
