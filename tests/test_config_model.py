"""The typed configuration (memkit/config_model.py): every packaged config loads, a bad one
is refused with its TOML path, and the committed JSON schema is the generated one."""

import json

import pytest

from memkit.cli import main
from memkit.config import CONFIG_DIR, load_config
from memkit.config_model import config_schema, schema_text, validate_config
from memkit.errors import ValidationError
from memkit.pipeline import Pipeline

HYBRID = {"type": "hybrid", "retrievers": [{"type": "bm25"}, {"type": "dense"}]}


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_packaged_config_loads(path):
    config = load_config(path)
    assert validate_config(config).retriever.type == config["retriever"]["type"]


def test_load_config_keeps_the_values_as_written():
    """Validation checks; it does not fill in defaults or convert (what is logged and
    built is what the file says)."""
    config = load_config(CONFIG_DIR / "hybrid.toml")
    assert config["retriever"] == {
        "type": "hybrid",
        "method": "convex",
        "norm": "minmax",
        "weights": [0.5, 0.5],
        "depth": 100,
        "retrievers": [{"type": "bm25"}, {"type": "dense"}],
    }
    assert load_config(CONFIG_DIR / "dense-adapted.toml")["encoder"]["adapt"] == {}


def test_the_committed_schema_is_the_generated_one():
    """Regenerate: ``memkit config-schema > memkit/configs/schema.json``."""
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
    from memkit.conversation import CONTEXTUALIZERS, NoContext

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

    out, todo = {}, [union]
    while todo:
        t = todo.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            out[t.model_fields["type"].annotation.__args__[0]] = t
        else:
            todo.extend(get_args(t))
    return out


@pytest.mark.parametrize(
    "union, registry",
    [
        ("RetrieverSpec", "memkit.retrievers.registry:REGISTRY"),
        ("ContextualizerSpec", "memkit.conversation:CONTEXTUALIZERS"),
        ("AnswerSpec", "memkit.answer:ANSWERERS"),
    ],
)
def test_each_spec_has_its_class_arguments_and_defaults(union, registry):
    """The typed config copies each kind's constructor: a setting added to a constructor
    but not to its spec would be refused in a config, a default changed in one place only
    would make the schema lie. Every registered kind has a spec, with the same settings
    and the same defaults (a required setting has none)."""
    import importlib

    import memkit.config_model as cm

    module, name = registry.split(":")
    kinds = getattr(importlib.import_module(module), name)
    specs = _specs(getattr(cm, union))
    assert set(specs) == set(kinds)
    for kind, spec in specs.items():
        params = _init_params(kinds[kind])
        fields = {k: f for k, f in spec.model_fields.items() if k != "type"}
        assert set(fields) == set(params), kind
        for key, field in fields.items():
            default = params[key]
            default = list(default) if isinstance(default, tuple) else default  # TOML has arrays
            if field.is_required():
                continue  # a hybrid's parts: a config must name them
            assert field.default == default, (kind, key, field.default, default)
