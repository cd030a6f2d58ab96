"""The language packs: every row of every registered pack reads its examples and leaves its
counterexamples alone (memkit.language.validate), and the pack is what the writer reads."""

import re

import pytest

from memkit.config import resolve_config
from memkit.language import (
    ENGLISH,
    Language,
    Need,
    Rule,
    Table,
    examples_of,
    get_language,
    languages,
    register,
    validate,
)

PACKS = [get_language(code) for code in languages()]


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.code)
def test_every_row_of_every_pack_reads_its_examples_and_not_its_counterexamples(pack):
    assert validate(pack) == []


@pytest.mark.parametrize("kind,example", examples_of(ENGLISH.kinds.rows))
def test_each_kind_example_is_read_as_its_row(kind, example):
    assert ENGLISH.kind(example) == kind


def test_a_question_no_row_reads_is_a_what_question():
    assert ENGLISH.kind("What colour is the jacket?") == "what"


def test_a_broken_row_is_caught_by_its_own_examples():
    # a "where" row that also reads "anywhere", and a "who" row placed after a row that
    # takes its example: both fail validation, naming the row and the text
    loose = Rule("where", re.compile(r"where", re.I), ("Where is it?",), ("Is there anywhere?",))
    who = Rule("who", re.compile(r"\bwho\b", re.I), ("Who is it?",))
    greedy = Rule("any", re.compile(r"\bis\b", re.I), ("Is it?",))
    pack = Language("xx", "test", Table("kinds", (loose, greedy, who)), ENGLISH.lists)
    problems = validate(pack)
    assert any("where: reads its counterexample 'Is there anywhere?'" in p for p in problems)
    assert any("who: its example 'Who is it?' is read as 'any'" in p for p in problems)


def test_a_need_whose_check_disagrees_with_its_pairs_is_caught():
    asked = Rule("weight", re.compile(r"\bhow heavy\b", re.I), ("How heavy is it?",))
    need = Need(
        "the weight",
        asked,
        lambda q, s: "kg" in s,
        held=(("How heavy is it?", "It weighs eight kilos"),),
    )
    pack = Language("xx", "test", ENGLISH.kinds, ENGLISH.lists, (need,))
    assert validate(pack) == [
        "needs.weight: 'It weighs eight kilos' answers 'How heavy is it?',"
        " read as lacking 'the weight'"
    ]


def test_unknown_language_names_the_packs_there_are():
    with pytest.raises(ValueError, match=r"no pack for 'zz' \(packs: .*en"):
        get_language("zz")


def toy_pack() -> Language:
    """A second pack, three rows of German: what a pack needs to pass the validation and
    be served."""
    return Language(
        "xx",
        "toy",
        Table("kinds", (Rule("when", re.compile(r"\bwann\b", re.I), ("Wann ist das Konzert?",)),)),
        Rule("lists", re.compile(r"\bwelche \w+\b", re.I), ("Welche Bücher lasen sie?",)),
        (
            Need(
                "die Zahl",
                Rule("zahl", re.compile(r"\bwie viele\b", re.I), ("Wie viele Karten?",)),
                lambda q, s: bool(re.search(r"\d", s)),
                held=(("Wie viele Karten?", "Wir haben 2 Karten"),),
                lacking=(("Wie viele Karten?", "Wir haben Karten"),),
            ),
        ),
    )


@pytest.fixture
def toy():
    from memkit import language

    register("xx", toy_pack())
    yield get_language("xx")
    language._PACKS.pop("xx", None)


def test_a_registered_pack_is_what_the_question_functions_read(toy):
    from memkit.question.kinds import lacks_what_is_asked, question_type, wants_list

    assert validate(toy) == []
    assert question_type("Wann ist das Konzert?", toy) == "when"
    assert question_type("When is the gig?", toy) == "what"
    assert wants_list("Welche Bücher lasen sie?", toy)
    assert lacks_what_is_asked("Wie viele Karten?", "Wir haben Karten", toy) == "die Zahl"
    assert lacks_what_is_asked("How much were they?", "no price here") == "how much"


def test_the_config_names_the_language_once_and_a_pack_it_does_not_know_is_an_error(toy):
    from memkit.config import load_config
    from memkit.config.model import validate_config
    from memkit.core.errors import ValidationError

    config = load_config(resolve_config("default"))
    assert validate_config(config).language == "en"
    assert validate_config({**config, "language": "xx"}).language == "xx"
    with pytest.raises(ValidationError) as err:
        validate_config({**config, "language": "zz"})
    assert err.value.field == "language" and "en, xx" in str(err.value)


def test_a_floor_asked_through_the_toy_pack_is_answered_by_its_rows(toy):
    """The default as a fresh service serves it (``default-fresh``: no adapted encoder to
    train) with ``language = "xx"``: the pipeline reads the question's kind
    with the toy pack, and the writer declines with the toy pack's own words for what the
    post lacks ("die Zahl"), where the English pack finds nothing missing."""
    from memkit.config import load_config
    from memkit.core.tables import events_frame
    from memkit.pipeline import Pipeline

    said = {
        "e1": ("Jonas", "Wir haben Karten für das Konzert im Stadtpark."),
        "e2": ("Mia", "Das Wetter im Stadtpark war heute schön."),
    }
    posts = events_frame(
        [
            {"event_id": e, "floor_id": "f", "block_id": "b", "block_type": "feed",
             "user_name": who, "text": text}
            for e, (who, text) in said.items()
        ]
    )  # fmt: skip
    asked = "Wie viele Karten haben wir für das Konzert?"
    answers = {}
    for code in ("en", "xx"):
        config = {**load_config(resolve_config("default-fresh")), "language": code}
        pipeline = Pipeline.from_config(config).fit(posts)
        result = pipeline.query(asked, user_id=f"u-{code}")
        assert result.items[0].event_id == "e1"
        answers[code] = result
    assert answers["xx"].question.language is toy
    assert "die Zahl" in answers["xx"].answer and answers["xx"].written.declined
    assert "die Zahl" not in answers["en"].answer


# Regular expressions outside memkit/language: each file's count may only fall. What is
# left reads spelling rather than words of a language (a capitalised word, a name as a whole
# word, punctuation, digits, ids and model names) or is English still to move into the pack
# (docs/LANGUAGE.md lists those tables). A new pattern that reads a language belongs in a
# pack's rows, with its examples and counterexamples.
PATTERNS_OUTSIDE_THE_PACK = {
    "memkit/answer/compose.py": 3,  # punctuation between clauses, a month's name
    "memkit/answer/extractive.py": 5,  # names and capitalised words
    "memkit/answer/features.py": 5,  # names, capitalised words, the vocative's name
    "memkit/answer/llm.py": 1,  # the citation marks [1] in an LLM's reply
    "memkit/answer/render.py": 6,  # whitespace, joiners and brackets in quoted text
    "memkit/answer/rules.py": 1,  # a name as a whole word
    "memkit/answer/selection.py": 2,  # a name as a whole word, the vocative's name
    "memkit/cli.py": 2,
    "memkit/config/__init__.py": 1,
    "memkit/core/text.py": 2,  # the tokenizer's word and the sentence splitter
    "memkit/datasets/locomo.py": 3,
    "memkit/evaluation/answers.py": 1,
    "memkit/evaluation/tracking.py": 1,
    "memkit/models/encoders.py": 1,
    "memkit/question/conversation.py": 4,  # a word, capitalised words, a possessive
    "memkit/question/kinds.py": 1,  # a word
    "memkit/ranking/changes.py": 2,  # a capitalised word, a possessive
    "memkit/ranking/reader.py": 1,  # a word
    "memkit/ranking/replies.py": 3,  # a list of names, a name as a whole word
    "memkit/retrieval/postgres.py": 3,  # SQL identifiers
    "memkit/training/answers.py": 1,
    "memkit/training/reader.py": 1,
}
_RE_CALLS = (
    "compile",
    "search",
    "match",
    "fullmatch",
    "findall",
    "finditer",
    "sub",
    "subn",
    "split",
)


def test_regular_expressions_outside_the_pack_only_fall():
    import ast
    from pathlib import Path

    import memkit

    root = Path(memkit.__file__).parent
    counts = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith("memkit/language/"):
            continue
        n = sum(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _RE_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            for node in ast.walk(ast.parse(path.read_text()))
        )
        if n:
            counts[rel] = n
    grown = {f: n for f, n in counts.items() if n > PATTERNS_OUTSIDE_THE_PACK.get(f, 0)}
    assert grown == {}, "new patterns outside memkit/language (move them into a pack's rows)"
    fallen = {f: n for f, n in counts.items() if n < PATTERNS_OUTSIDE_THE_PACK[f]}
    gone = set(PATTERNS_OUTSIDE_THE_PACK) - set(counts)
    assert not fallen and not gone, f"lower the counts here: {fallen} {sorted(gone)}"
