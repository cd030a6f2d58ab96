"""The configuration as types: one pydantic model of a whole TOML config, checked once when
it is loaded (``memkit.config.load_config``) or given to ``Pipeline.from_config``.

Every table forbids keys it does not know, so a misspelt setting is an error naming its
TOML path (``retriever.retrievers.1.k1: expected a number, got 'x'``) rather than a
setting silently left at its default. Retriever specs are a union told apart by ``type``;
a hybrid's ``retrievers`` and a learned ranker's ``first`` and ``extra`` are specs again.

The builders (``memkit.retrieval.build``, ``build_contextualizer``, ``build_answerer``,
``EncoderStage.from_config``, ...) take these typed specs: ``Pipeline.from_config`` checks a
config once and hands each section's spec to its builder. A class built from its spec
(``FromSpec``) takes the checked spec as it is; any other builder passes the settings the
file wrote (``arguments``) to the class's constructor. A builder given a plain dict checks
it into its spec first (``typed``). Number fields keep an integer as written, so the
object built is the one the dict would have built. Settings whose meaning depends on
what is built (a linear model's feature names, a learned ranker's fusion weights) are
still checked where the object is built. ``memkit config-schema`` prints the JSON schema
(``config_schema``); ``memkit/config/schema.json`` is that output, kept in step by a test.
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    TypeAdapter,
    ValidationInfo,
    WrapValidator,
    create_model,
    field_validator,
)
from pydantic import ValidationError as PydanticError
from pydantic.json_schema import SkipJsonSchema

from memkit.core.errors import ValidationError
from memkit.language import languages


def _as_written(value: Any, check: Any) -> Any:
    """A number field keeps an integer as the file wrote it (checked as a number, not made
    a float), so a spec's ``model_dump`` is what was written and builds the same object."""
    checked = check(value)
    return value if type(value) is int else checked


def Number(**bounds: float) -> Any:
    """A finite number, integer or float, within ``bounds`` (pydantic's ge, gt, le, lt)."""
    return Annotated[StrictFloat, Field(allow_inf_nan=False, **bounds), WrapValidator(_as_written)]


# Scalars as TOML writes them: no "1" for 1, no true for 1 (a float field takes an integer).
Int = StrictInt
Float = Number()
Bool = StrictBool
Str = StrictStr
Fraction = Number(ge=0, le=1)
SqlName = Annotated[StrictStr, Field(pattern=r"^[a-z_][a-z0-9_]{0,50}$")]


class Table(BaseModel):
    """A TOML table: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


# -- linear models (memkit/core/linear.py) -----------------------------------------------------
class LinearModel(Table):
    """A logistic regression on standardised features, as ``memkit train`` writes it.
    Feature names are checked against what the model reads when it is built."""

    features: list[Str]
    coef: list[Float]
    intercept: Float
    mean: list[Float]
    scale: list[Number(gt=0)]

    @field_validator("coef", "mean", "scale")
    @classmethod
    def _one_per_feature(cls, value: list, info: ValidationInfo) -> list:
        features = info.data.get("features")
        if features is not None and len(value) != len(features):
            raise ValueError(
                f"expected {len(features)} numbers (one per feature), got {len(value)}"
            )
        return value


class DecisionModel(LinearModel):
    """A linear model with a threshold on its probability (``[answer.decline]``)."""

    threshold: Float


# -- retrievers (memkit/retrieval) -------------------------------------------------------
class _Sparse(Table):
    stopwords: Str | list[Str] | None = "english"
    stemmer: Str | None = "english"
    irregular: Bool = False  # irregular past forms read as their base ("won" as "win")
    doc_template: Str = "{text}"


class TfidfSpec(_Sparse):
    type: Literal["tfidf"]
    sublinear_tf: Bool = False


class BM25Spec(_Sparse):
    type: Literal["bm25"]
    k1: Float = 1.2
    b: Float = 0.75


class DenseSpec(Table):
    type: Literal["dense"]
    encoder: Str = "minilm"
    doc_template: Str = "{text}"
    exact_below: Int = 50_000
    exact_share: Float = 0.05
    oversample: Float = 3.0
    connectivity: Int = 16
    expansion_add: Int = 128
    expansion_search: Int = 512
    lines: Literal["whole", "mean"] = "whole"
    passages: Literal["whole", "best"] = "whole"
    long_words: Annotated[StrictInt, Field(ge=1)] = 180
    passage_words: Annotated[StrictInt, Field(ge=1)] = 120


class HybridSpec(Table):
    type: Literal["hybrid"]
    retrievers: Annotated[list["RetrieverSpec"], Field(min_length=2)]
    method: Literal["rrf", "convex"] = "convex"
    weights: list[Float] | None = None
    rrf_k: Int = 60
    norm: Literal["minmax", "zscore", "none"] = "minmax"
    depth: Int = 100

    @field_validator("weights")
    @classmethod
    def _one_per_retriever(cls, value: list | None, info: ValidationInfo) -> list | None:
        parts = info.data.get("retrievers")
        if value is not None and parts is not None and len(value) != len(parts):
            raise ValueError(f"expected {len(parts)} weights, got {len(value)}")
        return value


class LearnedSpec(Table):
    type: Literal["learned"]
    first: "RetrieverSpec"
    extra: list["RetrieverSpec"] = []
    candidates: Annotated[StrictInt, Field(ge=1)] = 100
    model: LinearModel | None = None
    passage_model: LinearModel | None = None
    blog_shift: Float = 0.0

    @field_validator("first")
    @classmethod
    def _hybrid(cls, value: Any) -> Any:
        if not isinstance(value, HybridSpec):
            raise ValueError('expected a hybrid retriever (type = "hybrid")')
        return value

    @field_validator("passage_model")
    @classmethod
    def _with_model(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("model") is None and "model" in info.data:
            raise ValueError("needs a [retriever.model] for chat lines too")
        return value


class _Postgres(Table):
    url: Str = "env:MEMKIT_DATABASE_URL"
    table: SqlName | None = None
    doc_template: Str = "{text}"


class PgVectorSpec(_Postgres):
    type: Literal["pgvector"]
    encoder: Str = "minilm"
    m: Int = 16
    ef_construction: Int = 64
    ef_search: Int = 100
    iterative_scan: Literal["off", "relaxed_order", "strict_order"] = "relaxed_order"
    max_scan_tuples: Int = 20_000
    graph: Bool = True


class PgTextSpec(_Postgres):
    type: Literal["pgtext"]
    config: SqlName = "english"
    rank: Literal["ts_rank", "ts_rank_cd"] = "ts_rank"
    normalization: Int = 1


# -- kinds registered at run time -----------------------------------------------------------
REGISTERED = "registered at run time"  # the union tag of a kind this module has no spec for


class Registered(BaseModel):
    """A kind added to its registry at run time (a retriever's ``@register``, an entry in
    ``memkit.question.conversation.CONTEXTUALIZERS`` or ``memkit.answer.ANSWERERS``), which this
    module has no spec for: its settings are its class's to check when it is built. Left
    out of the JSON schema."""

    model_config = ConfigDict(extra="allow")
    type: Str


def _union(specs: list[type[Table]], registry: str, default: str | None = None) -> Any:
    """The specs as a union told apart by ``type`` (``default`` when a table has none), open
    to the kinds of ``registry`` (``"module:NAME"``) that have no spec."""
    known = {_tag(spec): spec for spec in specs}

    def kind(value: Any) -> Any:
        name = value.get("type", default) if isinstance(value, dict) else value.type
        if name not in known and name in _registry(registry):
            return REGISTERED
        return name

    members = [Annotated[spec, Tag(name)] for name, spec in known.items()]
    members.append(SkipJsonSchema[Annotated[Registered, Tag(REGISTERED)]])
    return Annotated[Union[tuple(members)], Discriminator(kind)]


def _registry(where: str) -> dict:
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def _tag(table: type[BaseModel]) -> Any:
    """The ``type`` a spec is for (None for ``Registered``)."""
    field = table.model_fields.get("type")
    args = get_args(field.annotation) if field is not None else ()
    return args[0] if args and isinstance(args[0], str) else None


RetrieverSpec = _union(
    [TfidfSpec, BM25Spec, DenseSpec, HybridSpec, LearnedSpec, PgVectorSpec, PgTextSpec],
    "memkit.retrieval.registry:REGISTRY",
)
HybridSpec.model_rebuild()
LearnedSpec.model_rebuild()


# -- follow-ups (memkit/question/conversation.py) --------------------------------------------------
class NoContextSpec(Table):
    type: Literal["none"] = "none"


class CarrySpec(Table):
    type: Literal["carry"]
    weight: Fraction = 0.4
    recent: Annotated[StrictInt, Field(ge=0)] = 1
    first: Bool = True
    short: Int = 3
    detect: Bool = False
    idle_minutes: Number(gt=0) = 30.0


class TopicSpec(Table):
    type: Literal["topic"]
    weight: Fraction = 0.4
    bare_weight: Fraction = 0.7
    short: Int = 2
    answer_words: Annotated[StrictInt, Field(ge=0)] = 8
    window: Bool = True
    idle_minutes: Number(gt=0) = 30.0
    # a follow-up asking something new: the last answer's posts' scores times this
    repeat_weight: Fraction = 1.0


ContextualizerSpec = _union(
    [NoContextSpec, CarrySpec, TopicSpec], "memkit.question.conversation:CONTEXTUALIZERS", "none"
)


# -- the answer writer (memkit/answer/) ----------------------------------------------------
class ExtractiveSettings(Table):
    """The extractive answer writer (memkit.answer.extractive.ExtractiveAnswerer)."""

    max_sentences: Int = 3
    max_items: Int = 3
    max_quote_chars: Int = 240
    min_score: Float | None = None  # below it (or nobody allowed) it declines; None: never
    # decline when someone else's sentence is closer by more than this; None: never
    max_gap: Float | None = None
    margin: Float = 1.0  # further quotes score within this of the best
    people: Bool = True  # enforce "who": a named person's question is answered by their posts
    rank_weight: Float = 0.1  # trust in the retriever's order: subtracted per rank
    when_bonus: Float = 0.2  # for when-questions, added to sentences that say when
    select: LinearModel | None = None  # which sentence answers
    decline: DecisionModel | None = None  # whether memory holds no answer (selection.declines)
    # which sentence of a chosen post is quoted (None: the selection model's best)
    within: LinearModel | None = None
    max_list: Int = 3  # posts quoted when the question asks for several
    max_words: Int | None = 30  # a longer quote is cut to the clause that answers; None: never
    # decline when this share of the question's terms is in none of the items
    max_missing: Float | None = None
    unsure_below: Float | None = None  # a question about no one: see selection.declines
    # How a sentence is encoded: read in its post (one run of the model a post) for posts up
    # to in_post_max_chars, else on its own.
    sentences: Literal["in_post", "alone"] = "in_post"
    in_post_max_chars: Annotated[StrictInt, Field(ge=1)] = 500


class ExtractiveSpec(ExtractiveSettings):
    type: Literal["extractive"] = "extractive"


class LLMSpec(Table):
    type: Literal["llm"]
    url: Annotated[StrictStr, Field(pattern=r"^https?://")]
    model: Str
    api_key_env: Str | None = None
    timeout: Float = 10.0
    max_items: Int = 8
    temperature: Float = 0.0
    fallback: ExtractiveSettings | None = None


AnswerSpec = _union([ExtractiveSpec, LLMSpec], "memkit.answer:ANSWERERS", "extractive")


# -- the rest ------------------------------------------------------------------------------
class RelevanceSpec(Table):
    """When a ranking counts as having found nothing (memkit/pipeline.py)."""

    min_similarity: Number(ge=-1, le=1) | None = None
    min_probability: Fraction | None = None
    min_score: Fraction | None = None
    sure_similarity: Number(ge=-1, le=1) | None = None


class RepresentationSpec(Table):
    """Context fields for document templates (memkit/retrieval/representation.py)."""

    before: Annotated[StrictInt, Field(ge=0, le=5)] = 1
    after: Annotated[StrictInt, Field(ge=0, le=5)] = 1
    max_session: Annotated[StrictInt, Field(ge=1, le=10_000)] = 64
    chat_types: list[Str] | None = None
    # LoCoMo's longest turn (with its image caption) is 434 characters; CAsT's median
    # passage 1,056.
    chat_max_chars: Annotated[StrictInt, Field(ge=1)] = 500


def _no_default(schema: dict) -> None:
    schema.pop("default", None)


SECTION_DEFAULT = Field(None, json_schema_extra=_no_default)  # the section's own default


class TrainSettings(Table):
    """How a model is trained (memkit.training.train). ``max_pairs``: a seeded sample when
    there are more (bounds the time on a large store); ``max_length``: word pieces per text
    while training (search still reads 256); ``symmetric``: also learn positive -> anchor
    (for pairs with no direction, such as neighbouring posts). Each setting is written
    here once: a config's ``TrainSpec`` has the same fields, unset by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epochs: Annotated[StrictInt, Field(ge=1, le=50)] = 1
    batch_size: Annotated[StrictInt, Field(ge=2, le=1024)] = 32
    lr: Number(gt=0, le=0.01) = 2e-5
    warmup: Number(ge=0, le=1) = 0.1
    scale: Number(gt=0, le=100) = 20.0
    max_pairs: Annotated[StrictInt, Field(ge=1, le=10_000_000)] = 3000
    max_length: Annotated[StrictInt, Field(ge=8, le=512)] = 128
    seed: Annotated[StrictInt, Field(ge=0, le=2**31 - 1)] = 0
    symmetric: Bool = False

    @classmethod
    def from_dict(
        cls, given: dict, where: str, defaults: "TrainSettings | None" = None
    ) -> "TrainSettings":
        """``given`` over ``defaults`` (else the class's own), checked; an error names
        ``where.<setting>``."""
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise ValidationError(
                f"{where}.{unknown[0]}",
                f"unknown setting (expected one of {', '.join(cls.model_fields)})",
            )
        base = defaults.model_dump() if defaults is not None else {}
        return _checked(cls.model_validate, where, {**base, **given})

    def changed(self, **settings: Any) -> "TrainSettings":
        """These settings changed and the rest kept, checked: ``ADAPT.changed(max_pairs=400)``."""
        return self.from_dict(settings, "settings", self)


def _unset(field: Any) -> tuple:
    """A ``TrainSettings`` field as a config's: the same type and bounds, unset."""
    kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return kind, SECTION_DEFAULT


TrainSpec = create_model(
    "TrainSpec",
    __base__=Table,
    __module__=__name__,
    __doc__="""How an encoder is trained (memkit.training.TrainSettings); unset: the section's
    defaults (``SUPERVISED`` or ``ADAPT``).""",
    **{name: _unset(field) for name, field in TrainSettings.model_fields.items()},
)


class SupervisedSpec(TrainSpec):
    datasets: Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=1)]
    doc_template: Str = "{line}"
    query_field: Str = "text"
    hard_negatives: Bool = False


class AdaptSpec(TrainSpec):
    kinds: Annotated[list[Literal["neighbour", "reply", "title"]], Field(min_length=1)] = [
        "neighbour",
        "reply",
        "title",
    ]


class EncoderSpec(Table):
    """The encoder of every dense part (memkit/training/encoder.py ``EncoderStage``)."""

    model: Annotated[StrictStr, Field(min_length=1)] = "minilm"
    supervised: SupervisedSpec | None = None
    adapt: AdaptSpec | None = None


class CalibrationSpec(Table):
    a: Float = 1.0
    b: Float = 0.0


class ReaderSpec(Table):
    """The reader (memkit/ranking/reader.py): a cross-encoder that reads a question and each of its
    first ``candidates`` posts together. A post's probability becomes
    ``sigmoid(coef[0] * logit(ranker probability) + coef[1] * reader logit + intercept)``
    (fitted on held-out questions by ``memkit train reader``); when no post read reaches
    ``min_probability``, nothing answers the question. ``questions_only``: read only texts
    shaped like questions (a claim or a chat line is left to the ranker)."""

    candidates: Annotated[StrictInt, Field(ge=1, le=50)] = 8
    coef: Annotated[list[Float], Field(min_length=2, max_length=2)] = [1.0, 1.0]
    intercept: Float = 0.0
    min_probability: Fraction | None = None
    questions_only: Bool = True
    # a post likely enough to answer: the writer quotes it without its own decline check
    overrule_writer: Bool = True
    model: Str | None = None  # a folder with reader-int8.onnx (None: the packaged model)


class RankingSpec(Table):
    """The ranking steps between retrieval and the cut, in order (memkit/ranking): the
    built-in ``reader``, ``relevance``, ``changed_facts`` and ``replies``, or a step
    registered at run time (``memkit.ranking.register_step``). Without this table a config
    runs those its ``[reader]`` and ``changed_facts`` turn on (``reader``, ``relevance``,
    ``changed_facts``, ``replies``, in that order); a list names ``reader`` exactly when
    the config has a ``[reader]`` and ``changed_facts`` exactly when it is true, so the two
    never disagree."""

    steps: list[Str]


SECTIONS = {  # the config's tables, each a spec a builder takes
    "retriever": RetrieverSpec,
    "contextualizer": ContextualizerSpec,
    "answer": AnswerSpec,
    "relevance": RelevanceSpec,
    "representation": RepresentationSpec,
    "encoder": EncoderSpec,
    "calibration": CalibrationSpec,
    "reader": ReaderSpec,
    "ranking": RankingSpec,
}


class Config(Table):
    """A whole configuration file (after ``from = "..."``, the whole config's and each
    table's, is merged in)."""

    name: Str | None = None
    description: Str | None = None
    # The language its questions and posts are read in: the code of a registered pack
    # (memkit.language: "en" ships; ``memkit.language.register`` adds another).
    language: Str = "en"
    # The data sets its trained models (ranker, answer models, reader) learned from, as
    # data set names ("locomo-dev"; "scifact:train" for one split of it): a run on one of
    # them is in-sample, and eval marks it so (memkit.evaluation.harness.in_sample).
    trained_on: list[Annotated[StrictStr, Field(min_length=1)]] = []
    retriever: RetrieverSpec
    contextualizer: ContextualizerSpec | None = None
    answer: AnswerSpec | None = None
    relevance: RelevanceSpec | None = None
    representation: RepresentationSpec | None = None
    encoder: EncoderSpec | None = None
    calibration: CalibrationSpec | None = None
    reader: ReaderSpec | None = None
    ranking: RankingSpec | None = None
    k: Int = 10
    # Stages after the retriever are off unless a config names them, so that a config of a
    # retriever alone (bm25.toml) scores that retriever and nothing else.
    time_windows: Bool = False
    changed_facts: Bool = False
    eval: dict[str, Any] | None = None


# -- typed specs for the builders ----------------------------------------------------------
def typed(section: str, value: Any) -> Any:
    """One section of a config (``"retriever"``, ``"answer"``, ...) as its typed spec: a
    typed spec as it is, a dict checked into one (a ValidationError names the TOML path,
    from ``section``)."""
    if isinstance(value, BaseModel):
        return value
    return _checked(_adapter(section).validate_python, section, value)


def _checked(check: Any, section: str, value: Any) -> Any:
    try:
        return check(value)
    except PydanticError as exc:
        error = exc.errors()[0]
        field, message = _explain({**error, "loc": (section, *error["loc"])}, {section: value})
        raise ValidationError(field, message) from None


class FromSpec:
    """A class whose settings are the fields of its spec, written nowhere else: with
    ``spec = TopicSpec`` and ``section = "contextualizer"``, ``TopicContext(weight=0.5)``
    checks its keywords with the spec (a ValidationError names ``contextualizer.weight``,
    as a config's would), fills the rest with the spec's defaults and keeps each setting
    as an attribute of the same name; ``params()`` is the settings (with ``type``), and
    ``inspect.signature`` shows them. A new setting is one field of the spec."""

    spec: ClassVar[type[Table]]
    section: ClassVar[str]
    type_name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "spec" in vars(cls):
            cls.__signature__ = inspect.Signature(
                [
                    inspect.Parameter(
                        name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=inspect.Parameter.empty if field.is_required() else field.default,
                    )
                    for name, field in settings_of(cls.spec).items()
                ]
            )

    def __init__(self, **settings: Any) -> None:
        if "type" in type(self).spec.model_fields:
            settings = {"type": self.type_name, **settings}
        self._take(checked_with(type(self).spec, self.section, settings))

    @classmethod
    def checked(cls, spec: Table) -> Any:
        """One built from a spec checked already (a config's section): not checked again."""
        built = cls.__new__(cls)
        built._take(spec)
        return built

    def _take(self, spec: Table) -> None:
        for name in settings_of(type(self).spec):
            setattr(self, name, getattr(spec, name))
        self._built()

    def _built(self) -> None:
        """What the settings make, once they are set (a model read, an empty cache)."""

    def params(self) -> dict[str, Any]:
        kind = {"type": self.type_name} if "type" in type(self).spec.model_fields else {}
        return {**kind, **{name: getattr(self, name) for name in settings_of(type(self).spec)}}


def settings_of(spec: type[Table]) -> dict[str, Any]:
    """A spec's fields but ``type``: the settings of the class built from it."""
    return {name: field for name, field in spec.model_fields.items() if name != "type"}


def checked_with(spec: type[Table], section: str, settings: dict[str, Any]) -> Table:
    """``settings`` checked into ``spec``; a ValidationError names ``section.field``."""
    return _checked(spec.model_validate, section, settings)


@cache
def _adapter(section: str) -> TypeAdapter:
    return TypeAdapter(SECTIONS[section])


def arguments(spec: BaseModel) -> dict[str, Any]:
    """A typed spec as its class's constructor arguments (a kind registered at run time,
    which has no spec of its own): the settings the file wrote except
    ``type``; a retriever spec inside stays typed (the composite builds it), any other
    table is the dict it was written as."""
    written = {
        name: getattr(spec, name)
        for name in type(spec).model_fields
        if name in spec.model_fields_set and name != "type"
    }
    return {
        name: _argument(value) for name, value in {**written, **(spec.model_extra or {})}.items()
    }


def _argument(value: Any) -> Any:
    if isinstance(value, list):
        return [_argument(v) for v in value]
    if isinstance(value, BaseModel) and not isinstance(value, (*RETRIEVER_SPECS, Registered)):
        return value.model_dump(exclude_unset=True)
    return value


def construct(cls: type, spec: BaseModel, where: str) -> Any:
    """``cls`` built from a typed spec's ``arguments``. A kind registered at run time has no
    spec to check its settings: a constructor refusing one is a ValidationError at ``where``."""
    own = getattr(cls, "spec", None)
    if isinstance(cls, type) and issubclass(cls, FromSpec) and own and isinstance(spec, own):
        return cls.checked(spec)
    try:
        return cls(**arguments(spec))
    except TypeError as exc:
        raise ValidationError(where, str(exc)) from None


# -- errors ---------------------------------------------------------------------------------
def validate_config(config: Any) -> Config:
    """The config as a ``Config``, or a memkit ValidationError naming the first problem's
    TOML path. A part of a kind registered at run time is checked by its class when it is
    built (``Registered``)."""
    try:
        checked = Config.model_validate(config)
    except PydanticError as exc:
        field, message = _explain(exc.errors()[0], config)
        raise ValidationError(field, message) from None
    _check_steps(checked)
    _check_language(checked)
    return checked


def _check_language(config: Config) -> None:
    known = languages()
    if config.language not in known:
        raise ValidationError(
            "language",
            f"expected the code of a language pack ({', '.join(known)}), got {config.language!r}",
        )


def _check_steps(config: Config) -> None:
    """``[ranking] steps``: known names (built in or registered at run time), each once,
    and the reader and changed facts listed exactly when the config turns them on."""
    if config.ranking is None:
        return
    # read by name, as the retrievers' registry is: the config sits below the ranking steps
    steps, known = config.ranking.steps, _registry("memkit.ranking.registry:known_steps")()
    for i, name in enumerate(steps):
        if name not in known:
            raise ValidationError(
                f"ranking.steps.{i}",
                f"expected one of {', '.join(known)} or a registered step, got {name!r}",
            )
        if name in steps[:i]:
            raise ValidationError(f"ranking.steps.{i}", f"{name!r} is listed twice")
    for name, on, by in (
        ("reader", config.reader is not None, "a [reader] table"),
        ("changed_facts", config.changed_facts, "changed_facts = true"),
    ):
        if on and name not in steps:
            raise ValidationError("ranking.steps", f"leaves out {name!r}, which {by} turns on")
        if name in steps and not on:
            raise ValidationError("ranking.steps", f"lists {name!r}, which needs {by}")


def _path(loc: tuple, data: Any) -> list[str]:
    """``loc`` as TOML keys: a union's tag (``"bm25"`` in ``("retriever", "bm25", "k1")``)
    is pydantic's, not the file's, so it is left out."""
    out = []
    for i, key in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(data, dict) and isinstance(key, str):
            if key in data:
                data = data[key]
            elif not last:
                continue  # a tag (a missing key is only ever the last)
            out.append(key)
            continue
        if isinstance(data, (list, tuple)) and isinstance(key, int) and key < len(data):
            data = data[key]
        out.append(str(key))
    return out


def _explain(error: dict, config: Any) -> tuple[str, str]:
    path = _path(tuple(error["loc"]), config)
    kind, got, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        path.append("type")
        if kind == "union_tag_not_found":
            return ".".join(path), "required"
        expected = ctx.get("expected_tags", "").replace(f", {REGISTERED!r}", " or a registered one")
        return ".".join(path), f"expected one of {expected}, got {ctx.get('tag')!r}"
    field = ".".join(path) or "config"
    shown = f", got {got!r}"
    messages = {
        "missing": "required",
        "extra_forbidden": _unknown(tuple(error["loc"][:-1])),
        "int_type": "expected an integer" + shown,
        "int_from_float": "expected an integer" + shown,
        "float_type": "expected a number" + shown,
        "bool_type": "expected true or false" + shown,
        "string_type": "expected a string" + shown,
        "list_type": "expected a list" + shown,
        "model_type": "expected a table" + shown,
        "model_attributes_type": "expected a table" + shown,
        "dict_type": "expected a table" + shown,
        "finite_number": "expected a finite number" + shown,
    }
    if kind in messages:
        return field, messages[kind]
    if kind == "value_error":
        return field, str(ctx.get("error", error["msg"]))
    if kind == "string_too_short":
        return field, f"expected a non-empty string{shown}"
    if kind == "too_short":
        n = len(got) if isinstance(got, (list, tuple)) else got
        return field, f"expected at least {ctx.get('min_length')} item(s), got {n}"
    message = error["msg"]
    if message.startswith("Input should be "):
        message = "expected " + message[len("Input should be ") :]
    elif message.startswith("String should match pattern "):
        message = "expected a string matching " + message[len("String should match pattern ") :]
    return field, message + shown


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The tables an annotation can hold (through Optional, unions, lists, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def _unknown(loc: tuple) -> str:
    """The message for an unknown key in the table at ``loc``: the keys it knows."""
    tables: list[type[BaseModel]] = [Config]
    for key in loc:
        if isinstance(key, int):
            continue
        fields = [t.model_fields[key] for t in tables if key in t.model_fields]
        if fields:
            tables = [m for f in fields for m in _models(f.annotation)]
        else:  # a union's tag: the member whose type is it
            tables = [t for t in tables if _tag(t) == key] or tables
    if len(tables) != 1:
        return "unknown setting"
    return f"unknown setting (expected one of {', '.join(tables[0].model_fields)})"


RETRIEVER_SPECS = tuple(m for m in _models(RetrieverSpec) if m is not Registered)


def config_schema() -> dict:
    """The JSON schema of a configuration file."""
    schema = Config.model_json_schema()
    schema["title"] = "memkit configuration"
    return schema


def schema_text() -> str:
    """``config_schema`` as the committed file holds it."""
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"
