"""The encoder learns: pairs, the training loop, models kept by what made them, the
pipeline's [encoder] stage and `memkit train encoder`, on a small corpus written here.

The corpus: exchanges of two posts in their own block, where Ann names a made-up thing and
Bo answers with the made-up word that goes with it ("the zorvex" -> "the plimbor"). The
packaged model has never seen these words, so it cannot tell which answer follows which
question; the exchanges' own structure (a post and the one before it) teaches it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from memkit.cli import main
from memkit.core.errors import ValidationError
from memkit.core.tables import Dataset, events_frame, qrels_frame, queries_frame
from memkit.datasets import load_any
from memkit.evaluation.harness import evaluate_config
from memkit.models.encoders import MiniLMEncoder, get_encoder, models_dir, trained_model_path
from memkit.pipeline import Pipeline
from memkit.training import (
    EncoderStage,
    TrainSettings,
    model_info,
    model_name,
    structure_pairs,
    supervised_pairs,
    train,
)

pytestmark = pytest.mark.slow

CODES = [
    ("zorvex", "plimbor"),
    ("quandle", "fribbet"),
    ("snarlow", "vantic"),
    ("moxtrel", "grellin"),
    ("twindop", "casperel"),
    ("blurnish", "dolvane"),
    ("krestin", "pomwick"),
    ("yaddle", "sorbinth"),
]
ASK = [
    "Tell me about the {} {}",
    "Any news on the {} {}",
    "How is the {} doing {}",
    "What happened with the {} {}",
]
WHEN = [
    "today",
    "this week",
    "lately",
    "since Monday",
    "after the storm",
    "at the fair",
    "on the boat",
]
ANSWER = [
    "The {} is {}",
    "Oh, the {} turned out {}",
    "Honestly the {} seems {}",
    "Well, the {} got {}",
]
MOOD = [
    "fine",
    "a bit loud",
    "bigger than before",
    "quite shiny",
    "very calm",
    "rather odd",
    "almost done",
]
SETTINGS = TrainSettings(epochs=4, batch_size=8, lr=1e-4, max_length=32, seed=3)
T0 = datetime(2024, 3, 1, 9, 0)


def exchanges(rounds: range) -> pl.DataFrame:
    rows = []
    for r in rounds:
        for i, (thing, word) in enumerate(CODES):
            block, t = f"b{r}-{i}", T0 + timedelta(days=r)
            ask = ASK[(r + i) % len(ASK)].format(thing, WHEN[(r * 3 + i) % len(WHEN)])
            answer = ANSWER[(r + 2 * i) % len(ANSWER)].format(word, MOOD[(r * 5 + i) % len(MOOD)])
            for n, (who, text) in enumerate([("Ann", ask), ("Bo", answer)]):
                rows.append(
                    {
                        "event_id": f"{block}/{n}",
                        "floor_id": "f",
                        "block_id": block,
                        "block_type": "feed",
                        "user_id": who,
                        "text": text,
                        "created_at": t + timedelta(minutes=n),
                        "tags": [],
                    }
                )
    return events_frame(rows)


def held_back_mrr(vectors_of) -> float:
    """Mean reciprocal rank of each held-back question's own answer among the held-back answers."""
    held = structure_pairs(exchanges(range(9, 10)))
    q, a = vectors_of(held["anchor"].to_list()), vectors_of(held["positive"].to_list())
    scores = q @ a.T
    ranks = (scores > np.diag(scores)[:, None]).sum(axis=1) + 1
    return float((1 / ranks).mean())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model adapted on the first eight rounds of exchanges (training happens once for the
    module)."""
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMKIT_CACHE_DIR", str(folder))
        pairs = structure_pairs(exchanges(range(8)))
        name = train(pairs, "minilm", SETTINGS, ["test"], progress=False)
        path = trained_model_path(name)
    return name, path, pairs


def test_structure_pairs_follow_sessions_replies_and_titles():
    t = T0
    rows = [
        {
            "event_id": "a1",
            "block_id": "chat",
            "user_id": "Ann",
            "text": "Shall we sail on Sunday?",
            "created_at": t,
        },
        {
            "event_id": "a2",
            "block_id": "chat",
            "user_id": "Bo",
            "text": "Only if the wind drops",
            "created_at": t,
        },
        {
            "event_id": "a3",
            "block_id": "chat",
            "user_id": "Ann",
            "text": "It will",
            "created_at": t + timedelta(days=1),
        },
        {
            "event_id": "d1",
            "block_id": "docs",
            "user_id": None,
            "text": "Tides\n\nThey follow the moon.",
            "created_at": None,
        },
        {
            "event_id": "r1",
            "block_id": "forum",
            "user_id": "Cy",
            "text": "Bring a jacket",
            "created_at": t,
        },
    ]
    ev = events_frame([{"floor_id": "f", "block_type": "feed", "tags": [], **r} for r in rows])
    ev = ev.with_columns(
        pl.Series("reply_to", [None, None, None, None, "a1"]),
        pl.Series("block_title", ["Sailing", "Sailing", "Sailing", "Notes", "Notes"]),
    )
    pairs = {
        (p["kind"], p["anchor"], p["positive"]) for p in structure_pairs(ev).iter_rows(named=True)
    }
    assert pairs == {
        (
            "neighbour",
            "Ann: Shall we sail on Sunday?",
            "Bo: Only if the wind drops",
        ),  # a3 is the next day: a new session
        ("reply", "Ann: Shall we sail on Sunday?", "Cy: Bring a jacket"),
        ("title", "Tides", "They follow the moon."),
        # "Sailing" names one block; "Notes" names two, so it teaches nothing
        *{
            ("title", "Sailing", line)
            for line in (
                "Ann: Shall we sail on Sunday?",
                "Bo: Only if the wind drops",
                "Ann: It will",
            )
        },
    }
    assert structure_pairs(ev, ["reply"]).height == 1
    with pytest.raises(ValidationError, match="kinds"):
        structure_pairs(ev, ["siblings"])


def _dataset(name: str, rounds: range) -> Dataset:
    """Questions about each exchange; the relevant event is Bo's answer (Ann's question is
    marked relevance 0 once, which is not relevant)."""
    ev = exchanges(rounds)
    ids = [(f"b{r}-{i}", thing) for r in rounds for i, (thing, _) in enumerate(CODES)]
    queries = queries_frame(
        [
            {
                "query_id": f"{name}/{b}",
                "text": f"What did Bo say about the {thing}?",
                "floor_ids": ["f"],
            }
            for b, thing in ids
        ]
    )
    qrels = qrels_frame(
        [{"query_id": f"{name}/{b}", "event_id": f"{b}/1", "relevance": 1} for b, _ in ids]
        + [{"query_id": f"{name}/{ids[0][0]}", "event_id": f"{ids[0][0]}/0", "relevance": 0}]
    )
    return Dataset(name, ev, queries, qrels)


def test_supervised_pairs_are_relevant_events_as_indexed_with_hard_negatives():
    ds = _dataset("s", range(2))
    pairs = supervised_pairs(ds)
    assert pairs.height == 16  # relevance 0 is not a pair
    first = pairs.row(0, named=True)
    assert first["anchor"] == "What did Bo say about the zorvex?" and first["positive"].startswith(
        "Bo: "
    )
    assert pairs["negative"].null_count() == 16
    hard = supervised_pairs(ds, hard_negatives=True)
    relevant = set(zip(pairs["anchor"], pairs["positive"]))
    assert hard["negative"].null_count() == 0
    assert all((a, n) not in relevant for a, n in zip(hard["anchor"], hard["negative"]))


@pytest.mark.heavy
def test_training_changes_the_vectors_and_ranks_held_back_pairs_higher(trained):
    name, path, _ = trained
    model = MiniLMEncoder(path=path, name=name)
    base = MiniLMEncoder()
    texts = ["Ann: Tell me about the zorvex today", "Bo: The plimbor is fine"]
    assert np.abs(model.encode(texts) - base.encode(texts)).max() > 1e-2
    before, after = held_back_mrr(base.encode), held_back_mrr(model.encode)
    assert after > before + 0.2, (before, after)  # exchanges it never saw, with its own words


@pytest.mark.heavy
def test_training_is_deterministic_with_a_seed_and_kept_by_what_made_it(
    trained, tmp_path, monkeypatch
):
    name, path, pairs = trained
    monkeypatch.setenv(
        "MEMKIT_CACHE_DIR", str(tmp_path)
    )  # a fresh cache: trained again, from scratch
    again = train(pairs, "minilm", SETTINGS, ["test"], progress=False)
    assert again == name and trained_model_path(again) != path
    texts = ["Ann: Any news on the quandle lately", "Bo: Oh, the fribbet turned out very calm"]
    a = MiniLMEncoder(path=path, name=name).encode(texts)
    b = MiniLMEncoder(path=trained_model_path(again), name=again).encode(texts)
    assert np.allclose(a, b, atol=1e-6)
    info = model_info(again)
    assert (
        info["base"] == "minilm"
        and info["pairs"] == pairs.height
        and info["kinds"] == {"neighbour": pairs.height}
    )
    # The same training is not done twice; any other seed, setting or pair is another model.
    monkeypatch.setattr(
        "memkit.training.encoder._fit", lambda *a, **k: pytest.fail("trained again")
    )
    assert train(pairs, "minilm", SETTINGS, progress=False) == name
    from memkit.training import model_name

    others = {
        model_name("minilm", pairs, TrainSettings(**{**SETTINGS.__dict__, "seed": 4})),
        model_name("minilm", pairs.head(10), SETTINGS),
        model_name(name, pairs, SETTINGS),
    }
    assert name not in others and len(others) == 3


@pytest.mark.heavy  # trains a model
def test_a_trained_model_is_an_encoder_with_its_own_cache_entries(trained, monkeypatch):
    name, path, _ = trained
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(path.parent.parent))
    enc = get_encoder(name)
    assert enc.name == name != get_encoder("minilm").name and enc.dim == 384
    v = enc.encode(["Bo: The plimbor is fine", "Ann: hello"])
    assert np.allclose(
        v,
        MiniLMEncoder(path=path, name=name).encode(["Bo: The plimbor is fine", "Ann: hello"]),
        atol=1e-6,
    )
    assert get_encoder(str(path)).name == name  # or by its folder
    with pytest.raises(ValueError, match="memkit train encoder"):
        get_encoder("minilm-ft-0123456789ab")
    with pytest.raises(ValueError, match="minilm-int8"):
        get_encoder("bert")


@pytest.mark.heavy  # trains a model
def test_the_encoder_stage_adapts_on_fit_and_reuses_the_model(trained, monkeypatch):
    name, path, pairs = trained
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(path.parent.parent))
    config = {
        "name": "adapted",
        "representation": {"before": 1, "after": 0},
        "retriever": {
            "type": "hybrid",
            "retrievers": [
                {"type": "bm25"},
                {"type": "dense", "doc_template": "{line}"},
                {"type": "dense", "doc_template": "{text}"},
            ],
        },
        "encoder": {"adapt": {**SETTINGS.__dict__, "kinds": ["neighbour"]}},
    }
    monkeypatch.setattr(
        "memkit.training.encoder._fit", lambda *a, **k: pytest.fail("trained again")
    )
    pipe = Pipeline.from_config(config).fit(
        exchanges(range(8))
    )  # the same events: the model is in the cache
    assert pipe.encoder_name() == name
    assert [p.encoder for p in pipe.retriever.retrievers[1:]] == [
        name,
        name,
    ]  # every dense part: one model
    assert pipe.answerer.encoder.name == name  # answers compare sentences with the same model
    assert pipe.params()["encoder"]["adapt"]["epochs"] == SETTINGS.epochs
    run = pipe.search(
        pl.DataFrame({"query_id": ["q"], "text": ["Ann: Tell me about the zorvex at the fair"]}), 3
    )
    assert run.height == 3
    fixed = (
        Pipeline.from_config(config).use_encoder("minilm").fit(exchanges(range(8)))
    )  # the service's way: no training
    assert fixed.encoder_name() == "minilm"


@pytest.mark.heavy  # trains a model
def test_supervised_stage_never_learns_from_the_held_out_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path / "cache"))
    for name, rounds in (("alpha", range(0, 1)), ("beta", range(1, 2))):
        _dataset(name, rounds).write(tmp_path / name)
    stage = EncoderStage.from_config(
        {
            "supervised": {
                "datasets": [str(tmp_path / "alpha"), str(tmp_path / "beta")],
                "epochs": 1,
                "batch_size": 8,
                "max_length": 16,
            }
        }
    )
    held = stage.resolve(hold_out="alpha")
    assert model_info(held)["sources"] == ["beta"] and model_info(held)["pairs"] == 8
    # memkit eval scores alpha with the model that never saw alpha's labels
    config = {
        "name": "sup",
        "representation": {},
        "retriever": {"type": "dense", "doc_template": "{line}"},
        "encoder": {"supervised": stage.supervised.model_dump(exclude_unset=True)},
    }
    assert evaluate_config(config, load_any(tmp_path / "alpha"), answers=False).encoder == held
    both = stage.resolve()
    assert model_info(both)["sources"] == ["alpha", "beta"] and both != held
    assert stage.resolve(hold_out="beta") not in (held, both)
    with pytest.raises(ValidationError, match="not trained yet"):
        EncoderStage.from_config(
            {"supervised": {"datasets": [str(tmp_path / "alpha")], "epochs": 2}}
        ).resolve(allow_training=False)


@pytest.mark.parametrize(
    "spec,field",
    [
        ({"adapt": {"epoch": 1}}, "encoder.adapt.epoch"),
        ({"adapt": {"epochs": 0}}, "encoder.adapt.epochs"),
        ({"adapt": {"lr": "fast"}}, "encoder.adapt.lr"),
        ({"adapt": {"kinds": ["gossip"]}}, "encoder.adapt.kinds.0"),
        ({"supervised": {"epochs": 1}}, "encoder.supervised.datasets"),
        ({"supervised": {"datasets": "locomo"}}, "encoder.supervised.datasets"),
        ({"model": ""}, "encoder.model"),
        ({"adapted": {}}, "encoder.adapted"),
        ("yes", "encoder"),
    ],
)
def test_bad_encoder_sections_name_the_field(spec, field):
    with pytest.raises(ValidationError) as err:
        Pipeline.from_config({"retriever": {"type": "dense"}, "encoder": spec})
    assert err.value.field == field


def test_nothing_to_learn_is_an_error():
    with pytest.raises(ValidationError, match="no pairs"):
        train(structure_pairs(exchanges(range(1)), ["reply"]))
    with pytest.raises(ValidationError, match="model"):  # an int8 name is no way around the check
        train(structure_pairs(exchanges(range(1))), "bert-int8")


def test_an_int8_base_trains_its_float_model_and_serves_int8_weights():
    """``adapt`` from the int8 default trains the float model (the same training, so the
    same folder) and names the result for serving with int8 weights."""
    pairs, settings = structure_pairs(exchanges(range(2))), TrainSettings()
    float_model = model_name("minilm", pairs, settings)
    assert model_name("minilm-int8", pairs, settings) == float_model + "-int8"
    assert (
        model_name(float_model + "-int8", pairs, settings)
        == model_name(float_model, pairs, settings) + "-int8"
    )


@pytest.mark.heavy  # trains a model
def test_train_encoder_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMKIT_CACHE_DIR", str(tmp_path / "cache"))
    _dataset("gamma", range(2)).write(tmp_path / "gamma")
    rc = main(
        [
            "train",
            "encoder",
            "--dataset",
            str(tmp_path / "gamma"),
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--max-length",
            "16",
            "--threads",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "16 pairs (label 16) from gamma" in out
    name = out.split(":")[0]
    assert (models_dir() / name / "memkit.json").exists() and model_info(name)["settings"][
        "epochs"
    ] == 1
    assert (
        main(
            [
                "train",
                "encoder",
                "--events",
                str(tmp_path / "gamma"),
                "--max-pairs",
                "4",
                "--batch-size",
                "4",
                "--max-length",
                "16",
            ]
        )
        == 0
    )
    assert "4 pairs (neighbour 4)" in capsys.readouterr().out
    assert main(["train", "encoder"]) == 2 and "--dataset" in capsys.readouterr().err
    assert main(["train", "encoder", "--events", str(tmp_path / "gamma"), "--lr", "5"]) == 2
    assert "lr" in capsys.readouterr().err
    assert main(["train", "encoder", "--report", "everything"]) == 2
    assert "--report: expected one of settings, loco" in capsys.readouterr().err
    assert main(["train", "encoder", "--report", "loco", "--events", "x"]) == 2
