"""Golden outputs: the served configs' pipeline params (what a saved index's digest is made
of) and every walk's turns, as the package code (memkit.evaluation.golden, which
eval/params.py and eval/walks.py print) gives them, against the outputs kept in
tests/golden/. A change that moves either is a change of behaviour: make it on purpose,
then write the new output (the commands below) and say why in the commit.

    .venv/bin/python -c "import json; from memkit.evaluation.golden import config_params; \\
        print(json.dumps({n: config_params(n) for n in ('default', 'postgres', 'reader')}, \\
        sort_keys=True, indent=1, default=str))" > tests/golden/params.json
    .venv/bin/python eval/walks.py > tests/golden/walks.txt   # and its CPU class:
    .venv/bin/python -c "from memkit.evaluation.ledger import cpu; \
        print(cpu()['cpu_class'])" > tests/golden/walks-cpu.txt
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memkit.evaluation.golden import config_params, walk_lines

GOLDEN = Path(__file__).resolve().parent / "golden"
SERVED = ("default", "postgres", "reader")  # the configs the package serves


@pytest.mark.parametrize("name", SERVED)
def test_a_served_configs_params_are_the_golden_ones(name):
    golden = json.loads((GOLDEN / "params.json").read_text())[name]
    got = json.loads(json.dumps(config_params(name), sort_keys=True, default=str))
    assert got == golden


def test_the_golden_params_hold_the_shipped_coefficients():
    """The trained numbers reach the pipeline: the default's chat ranker and decline model,
    the reader's fusion (memkit/models/), as they were written in the configs."""
    golden = json.loads((GOLDEN / "params.json").read_text())
    default = golden["default"]["encoder=None"]
    assert default["retriever"]["model"]["intercept"] == -5.71858
    assert default["answer"]["decline"]["threshold"] == 0.408631
    assert golden["reader"]["encoder=None"]["reader"]["coef"] == [0.2096, 0.6049]


@pytest.mark.heavy  # replays every walk: about a minute warm
def test_every_walk_replays_as_the_golden_output():
    """The answers come through the int8 encoder, whose vectors can differ between CPU
    classes in a rare 8-bit step (docs/experiments/int8-cpus.md): the comparison runs on the
    classes the golden file was checked on (tests/golden/walks-cpu.txt, one a line: written
    on an AMD EPYC with AVX2, replayed line for line on one with AVX-512 and VNNI)."""
    from memkit.evaluation.ledger import cpu

    checked_on = (GOLDEN / "walks-cpu.txt").read_text().split()
    if cpu()["cpu_class"] not in checked_on:
        pytest.skip(f"the golden walks were checked on {checked_on}, this CPU is {cpu()}")
    expected = (GOLDEN / "walks.txt").read_text().splitlines()
    assert list(walk_lines()) == expected
