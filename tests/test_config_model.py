"""The typed configuration (memkit/config/model.py): every packaged config loads, a bad one
is refused with its TOML path, and the committed JSON schema is the generated one."""

import json

import pytest

from memkit.cli import main
from memkit.config import CONFIG_DIR, config_files, load_config, resolve_config
from memkit.config.model import config_schema, schema_text, validate_config
from memkit.core.errors import ValidationError
from memkit.pipeline import Pipeline

HYBRID = {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "dense"}]}


@pytest.mark.parametrize("path", config_files(), ids=lambda p: p.stem)
def test_every_config_loads(path):
    config = load_config(path)
    assert validate_config(config).retriever.type == config["retriever"]["type"]


def test_load_config_keeps_the_values_as_written():
    """Validation checks; it does not fill in defaults or convert (what is logged and
    built is what the file says)."""
    config = load_config(resolve_config("hybrid"))
    assert config["retriever"] == {
        "type": "hybrid",
        "method": "convex",
        "norm": "minmax",
        "weights": [0.5, 0.5],
        "depth": 100,
        "retrievers": [{"type": "bm25"}, {"type": "dense"}],
    }
    assert load_config(resolve_config("dense-adapted"))["encoder"]["adapt"] == {}


def test_the_committed_schema_is_the_generated_one():
    """Regenerate: ``memkit config-schema > memkit/config/schema.json``."""
    assert (CONFIG_DIR / "schema.json").read_text() == schema_text()


def test_the_cli_prints_the_schema(capsys):
    assert main(["config-schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(schema_text()) == config_schema()
    kinds = {
        d["properties"]["type"]["const"]
        for d in printed["$defs"].values()
        if d["title"].endswith("Spec") and "const" in d["properties"].get("type", {})
    }
    assert {"tfidf", "bm25", "dense", "hybrid", "learned", "pgvector", "pgtext"} <= kinds


def _error(tmp_path, text: str) -> ValidationError:
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(ValidationError) as err:
        load_config(tmp_path / "bad.toml")
    return err.value


def test_a_wrong_type_in_a_nested_retriever_names_its_toml_path(tmp_path):
    err = _error(
        tmp_path,
        '[retriever]\ntype = "hybrid"\n'
        '[[retriever.retrievers]]\ntype = "bm25"\n'
        '[[retriever.retrievers]]\ntype = "bm25"\nk1 = "x"\n',
    )
    assert err.field == "retriever.retrievers.1.k1"
    assert err.message.startswith("expected a number, got 'x'")
    assert "bad.toml" in err.message


def test_a_misspelt_key_in_a_nested_retriever_names_its_toml_path(tmp_path):
    err = _error(
        tmp_path,
        '[retriever]\ntype = "learned"\n'
        '[retriever.first]\ntype = "hybrid"\n'
        '[[retriever.first.retrievers]]\ntype = "bm25"\n'
        '[[retriever.first.retrievers]]\ntype = "dense"\ndoc_templte = "{line}"\n',
    )
    assert err.field == "retriever.first.retrievers.1.doc_templte"
    assert err.message.startswith("unknown setting (expected one of type, encoder, doc_template,")


@pytest.mark.parametrize(
    "config,field",
    [
        ({}, "retriever"),
        ({"retriever": {"type": "magic"}}, "retriever.type"),
        ({"retriever": {"k1": 1.0}}, "retriever.type"),
        ({"retriever": {**HYBRID, "weights": [1.0]}}, "retriever.weights"),
        ({"retriever": {**HYBRID, "retrievers": [{"type": "bm25"}]}}, "retriever.retrievers"),
        ({"retriever": {"type": "learned", "first": {"type": "bm25"}}}, "retriever.first"),
        ({"retriever": {"type": "dense", "lines": "max"}}, "retriever.lines"),
        ({"retriever": {"type": "pgtext", "table": "Events"}}, "retriever.table"),
        ({"retriever": {"type": "bm25"}, "colour": 1}, "colour"),
        ({"retriever": {"type": "bm25"}, "k": True}, "k"),
        (
            {"retriever": {"type": "bm25"}, "relevance": {"min_probability": 2}},
            "relevance.min_probability",
        ),
        (
            {"retriever": {"type": "bm25"}, "representation": {"beforee": 1}},
            "representation.beforee",
        ),
        (
            {"retriever": {"type": "bm25"}, "contextualizer": {"type": "topci"}},
            "contextualizer.type",
        ),
        (
            {"retriever": {"type": "bm25"}, "contextualizer": {"weight": 0.3}},
            "contextualizer.weight",
        ),
        ({"retriever": {"type": "bm25"}, "answer": {"max_itmes": 3}}, "answer.max_itmes"),
        (
            {"retriever": {"type": "bm25"}, "answer": {"decline": {"features": ["s1"]}}},
            "answer.decline.coef",
        ),
        ({"retriever": {"type": "bm25"}, "calibration": {"a": "1"}}, "calibration.a"),
        ({"retriever": {"type": "bm25"}, "time_windows": "yes"}, "time_windows"),
    ],
)
def test_bad_configs_name_the_toml_path(config, field):
    with pytest.raises(ValidationError) as err:
        validate_config(config)
    assert err.value.field == field
    with pytest.raises(ValidationError) as err:  # a dict given to the pipeline: the same check
        Pipeline.from_config(config)
    assert err.value.field == field


def test_a_contextualizer_registered_at_run_time_is_left_to_its_class(tmp_path, monkeypatch):
    from memkit.question.conversation import CONTEXTUALIZERS, NoContext

    class Echo(NoContext):
        type_name = "echo"

    (tmp_path / "echo.toml").write_text(
        '[retriever]\ntype = "bm25"\n[contextualizer]\ntype = "echo"\n'
    )
    with pytest.raises(ValidationError, match="contextualizer.type"):
        load_config(tmp_path / "echo.toml")
    monkeypatch.setitem(CONTEXTUALIZERS, "echo", Echo)
    assert isinstance(Pipeline.from_config(tmp_path / "echo.toml").contextualizer, Echo)


def _init_params(cls) -> dict:
    """``cls.__init__``'s keyword parameters and their defaults (following ``**kwargs`` to
    the base class, as ``Retriever.get_params`` does)."""
    import inspect

    out = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters
        for name, p in params.items():
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                out.setdefault(name, p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return out


def _specs(union) -> dict:
    """``type`` value -> spec model, for a discriminated union of specs."""
    from typing import get_args

    from pydantic import BaseModel

    import memkit.config.model as cm

    out, todo = {}, [union]
    while todo:
        t = todo.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t is not cm.Registered:  # any kind registered at run time
                out[t.model_fields["type"].annotation.__args__[0]] = t
        else:
            todo.extend(get_args(t))
    return out


@pytest.mark.parametrize(
    "union, registry",
    [
        ("RetrieverSpec", "memkit.retrieval.registry:REGISTRY"),
        ("ContextualizerSpec", "memkit.question.conversation:CONTEXTUALIZERS"),
        ("AnswerSpec", "memkit.answer:ANSWERERS"),
    ],
)
def test_each_spec_has_its_class_arguments_and_defaults(union, registry):
    """A kind built from its spec (``FromSpec``) is built from that spec. Any other kind's
    typed config copies its constructor: a setting added to a constructor
    but not to its spec would be refused in a config, a default changed in one place only
    would make the schema lie. Every registered kind has a spec, with the same settings
    and the same defaults (a required setting has none)."""
    import importlib

    import memkit.config.model as cm

    module, name = registry.split(":")
    kinds = getattr(importlib.import_module(module), name)
    specs = _specs(getattr(cm, union))
    assert set(specs) == set(kinds)
    for kind, spec in specs.items():
        if issubclass(kinds[kind], cm.FromSpec):  # built from the spec: nothing to compare
            assert kinds[kind].spec is spec, kind
            continue
        params = _init_params(kinds[kind])
        fields = {k: f for k, f in spec.model_fields.items() if k != "type"}
        assert set(fields) == set(params), kind
        for key, field in fields.items():
            default = params[key]
            default = list(default) if isinstance(default, tuple) else default  # TOML has arrays
            if field.is_required():
                continue  # a hybrid's parts: a config must name them
            assert field.default == default, (kind, key, field.default, default)


def test_reader_spec_has_the_stage_arguments_and_defaults():
    """[reader] is one class, not a union: the same check as above."""
    from memkit.config.model import FromSpec, ReaderSpec
    from memkit.ranking.reader import ReaderStage

    if issubclass(ReaderStage, FromSpec):  # built from the spec: nothing to compare
        assert ReaderStage.spec is ReaderSpec
        return
    params = _init_params(ReaderStage)
    assert set(ReaderSpec.model_fields) == set(params)
    for key, field in ReaderSpec.model_fields.items():
        default = params[key]
        assert field.default == (list(default) if isinstance(default, tuple) else default), key


def test_builders_take_typed_specs():
    """Each builder takes its section's typed spec and passes the settings it holds to the
    constructor; a dict is checked into the same spec first, so both build the same."""
    from memkit.answer import build_answerer
    from memkit.config.model import (
        BM25Spec,
        CalibrationSpec,
        DenseSpec,
        EncoderSpec,
        ExtractiveSpec,
        HybridSpec,
        TopicSpec,
    )
    from memkit.question.conversation import build_contextualizer
    from memkit.ranking.calibration import Calibration
    from memkit.retrieval import BM25Retriever, build
    from memkit.training import EncoderStage

    hybrid = build(
        HybridSpec(
            type="hybrid",
            retrievers=[BM25Spec(type="bm25", k1=0.9), DenseSpec(type="dense")],
            weights=[0.3, 0.7],
        )
    )
    assert [p.type_name for p in hybrid.children()] == ["bm25", "dense"]
    assert hybrid.children()[0].k1 == 0.9 and hybrid.weights == [0.3, 0.7]
    assert (
        hybrid.params()
        == build(
            {
                **HYBRID,
                "retrievers": [{"type": "bm25", "k1": 0.9}, {"type": "dense"}],
                "weights": [0.3, 0.7],
            }
        ).params()
    )
    assert BM25Retriever.from_spec(BM25Spec(type="bm25", b=0.4)).b == 0.4
    with pytest.raises(ValidationError, match="expected 'bm25' for BM25Retriever"):
        BM25Retriever.from_spec(DenseSpec(type="dense"))
    topic = build_contextualizer(TopicSpec(type="topic", weight=0.25, short=3))
    assert (topic.weight, topic.short) == (0.25, 3)
    assert build_answerer(ExtractiveSpec(max_items=2)).params()["max_items"] == 2
    assert (
        EncoderStage.from_config(EncoderSpec(adapt={"epochs": 2})).params()["adapt"]["epochs"] == 2
    )
    assert Calibration.from_config(CalibrationSpec(a=2)) == Calibration(a=2.0, b=0.0)
    with pytest.raises(ValidationError, match="retriever.retrievers.1.oversample"):
        build({**HYBRID, "retrievers": [{"type": "bm25"}, {"type": "dense", "oversample": "x"}]})


def test_an_integer_written_for_a_number_is_kept_as_written():
    """A number setting takes an integer and keeps it one: the object built from the typed
    spec reports the settings the file wrote, so the digest of a saved index (the
    pipeline's params) does not change when a config goes through the typed model."""
    from memkit.config.model import typed

    spec = typed("retriever", {"type": "bm25", "k1": 1, "b": 0.5})
    assert type(spec.k1) is int and type(spec.b) is float
    default = load_config(CONFIG_DIR / "default.toml")
    written = default["retriever"]["passage_model"]["coef"]
    assert any(type(c) is int for c in written)  # what this test is about
    built = Pipeline.from_config(default).retriever.params()["passage_model"]["coef"]
    assert json.dumps(built) == json.dumps(written)
    for bad, message in [("x", "expected a number"), (True, "expected a number")]:
        with pytest.raises(ValidationError, match=message):
            typed("retriever", {"type": "bm25", "k1": bad})


def test_a_retriever_registered_at_run_time_can_be_named_in_a_config(tmp_path, monkeypatch):
    """The typed union is open to kinds registered at run time (``Registered``): a config
    names one alone or inside a hybrid, and its class checks its settings (a subclass of a
    built-in kind with its spec, as the kind's own would be)."""
    from memkit.retrieval import REGISTRY, BM25Retriever, walk

    class Plain(BM25Retriever):  # BM25 with its own name, for this test only
        type_name = "plain"

    (tmp_path / "plain.toml").write_text(
        '[retriever]\ntype = "hybrid"\n[[retriever.retrievers]]\ntype = "plain"\nk1 = 1.5\n'
        '[[retriever.retrievers]]\ntype = "dense"\n'
    )
    with pytest.raises(ValidationError, match="retriever.retrievers.0.type"):
        load_config(tmp_path / "plain.toml")
    monkeypatch.setitem(REGISTRY, "plain", Plain)
    pipeline = Pipeline.from_config(tmp_path / "plain.toml")
    part = list(walk(pipeline.retriever))[1]
    assert type(part) is Plain and part.k1 == 1.5
    for setting, message in [
        ("k3 = 1", "retriever.k3: unknown setting"),
        ('k1 = "x"', "retriever.k1: expected a number"),
    ]:
        (tmp_path / "bad.toml").write_text(f'[retriever]\ntype = "plain"\n{setting}\n')
        with pytest.raises(ValidationError, match=message):
            Pipeline.from_config(tmp_path / "bad.toml")


def test_use_encoder_builds_a_new_retriever_and_changes_none():
    """Nothing built is changed after build: a pipeline given another model rebuilds its
    retriever from its settings, and the retriever it had still holds its own model."""
    from memkit.retrieval import walk

    pipeline = Pipeline.from_config(resolve_config("hybrid"))
    old = pipeline.retriever
    pipeline.use_encoder("minilm-int8")
    assert pipeline.retriever is not old
    assert [p.params().get("encoder") for p in walk(old)] == [None, None, "minilm"]
    assert [p.params().get("encoder") for p in walk(pipeline.retriever)] == [
        None,
        None,
        "minilm-int8",
    ]
    assert pipeline.encoder_fixed and pipeline.encoder_name() == "minilm-int8"


def test_a_class_built_from_its_spec_has_its_settings_and_checks_them_once():
    """``FromSpec``: the spec is the one place a setting is written. The class takes its
    fields as keywords with the spec's defaults, shows them in its signature and params,
    and refuses what a config would, under the config's path."""
    import inspect

    from memkit.config.model import TopicSpec
    from memkit.question.conversation import TopicContext

    defaults = {k: f.default for k, f in TopicSpec.model_fields.items() if k != "type"}
    assert TopicContext().params() == {"type": "topic", **defaults}
    assert TopicContext(weight=0.5, short=3).params() == {
        "type": "topic",
        **defaults,
        "weight": 0.5,
        "short": 3,
    }
    assert list(inspect.signature(TopicContext).parameters) == list(defaults)
    for bad, field in (
        ({"weight": 1.5}, "contextualizer.weight"),
        ({"answer_words": True}, "contextualizer.answer_words"),
        ({"idle_minutes": 0}, "contextualizer.idle_minutes"),
        ({"colour": 1}, "contextualizer.colour"),
    ):
        with pytest.raises(ValidationError) as err:
            TopicContext(**bad)
        assert err.value.field == field
    # built from a config, the same object
    built = Pipeline.from_config(
        {"retriever": {"type": "bm25"}, "contextualizer": {"type": "topic", "weight": 0.5}}
    ).contextualizer
    assert built.params() == TopicContext(weight=0.5).params()
