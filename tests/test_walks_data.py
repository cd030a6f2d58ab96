"""The walks are package data: every file in memkit/data/walks is covered by pyproject.toml's
package-data globs (so a wheel carries it; tests/test_wheel.py checks one built), and each
walk is a pair of files that parse."""

import fnmatch
import tomllib
from pathlib import Path

import memkit
from memkit.evaluation.walks import WALKS, walk_events, walk_names

ROOT = Path(memkit.__file__).resolve().parents[1]


def test_the_package_data_globs_cover_every_walk_file():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["memkit"]
    package = Path(memkit.__file__).resolve().parent
    files = [p.relative_to(package).as_posix() for p in WALKS.iterdir()]
    assert files, WALKS
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []


def test_the_walks_are_read_from_the_package():
    assert WALKS.is_relative_to(Path(memkit.__file__).resolve().parent)


def test_every_walk_is_a_pair_of_files_that_parse():
    names = walk_names()
    assert len(names) >= 20
    assert sorted(p.name for p in WALKS.iterdir()) == sorted(
        f"{n}-{half}.txt" for n in names for half in ("posts", "questions")
    )
    for name in names:
        assert walk_events(WALKS / f"{name}-posts.txt").height > 0
        lines = (WALKS / f"{name}-questions.txt").read_text().splitlines()
        assert lines and all("|" in line for line in lines if line.strip()), name
