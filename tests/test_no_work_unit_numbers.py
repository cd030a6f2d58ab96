"""No work-unit numbers in the product: the code, tests, configs, notebooks and file names say
why a thing is so (the reason, the figure measured), not which numbered stop, issue or round
of work it came from; git keeps that history. A walk is named by what its floor is about
(``memkit/data/walks/sailing-bathroom-jlpt-posts.txt``), a test by what it checks.

Scanned: every tracked file (``git ls-files``; the tree when this is no git checkout) whose
name or text is code, tests, TOML, JSON, notebooks or scripts, and every tracked file's path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A work unit named with its number: "stop 50", "stop50", "Stop 65's", "stops 50 and 55",
# "issue 39", "Issue 20, 5", "issues 27-38", "round 3", "test_stop64_...", "stop65b".
# Not preceded by a letter, digit or hyphen ("nonstop 24", "non-stop 3" are words), and
# "round" followed by a count of decimals, digits, places or figures is arithmetic.
WORK_UNIT = re.compile(
    r"(?<![A-Za-z0-9-])(?:stop|issue|round)s?[ _-]?\d+(?!\d)"
    r"(?![ _-]?(?:decimals?|digits?|places?|figures?|significant)\b)",
    re.IGNORECASE,
)


# This file: its examples are work-unit numbers on purpose.
SELF = (Path(__file__).resolve().relative_to(ROOT).as_posix(),)

# Text that is data, not a label: fixture posts and questions in which "round 3" is a quiz's
# or a league's round. Keyed by file; each phrase is allowed there only.
DATA = {
    "tests/test_changes.py": ("round 3",),
    "datasets/conversations/train/events.jsonl": ("Round 3", "round 3"),
    "datasets/conversations/train/queries.jsonl": ("round 3",),
}

# Alembic revision ids are data too (renaming one breaks existing databases); memkit's are
# "0001" ... and hold no work unit, so only their comments are scanned like any code.
SCANNED_SUFFIXES = (
    ".py",
    ".pyi",
    ".toml",
    ".json",
    ".jsonl",
    ".ipynb",
    ".ini",
    ".cfg",
    ".yml",
    ".yaml",
    ".sh",
    ".txt",
    ".mako",
    ".md",
)
SCANNED_NAMES = ("Makefile", "Dockerfile")


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {".git", ".venv", "__pycache__", "build", "dist", "instance", "node_modules"}
    found = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        found += [(Path(folder) / n).relative_to(ROOT).as_posix() for n in names]
    return found


def readable_text(path: str, text: str) -> str:
    """The text a reader sees: a notebook's cell sources and text outputs, not its images'
    base64 (where "/Round5" may occur by chance)."""
    if not path.endswith(".ipynb"):
        return text
    parts = []
    for cell in json.loads(text).get("cells", []):
        parts.append("".join(cell.get("source", [])))
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", [])))
            parts.append("".join(output.get("data", {}).get("text/plain", [])))
    return "\n".join(parts)


def findings(path: str, text: str) -> list[str]:
    """``path:line: match`` for every work-unit number in ``text`` not allowed as data."""
    allowed = DATA.get(path, ())
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in WORK_UNIT.finditer(line):
            if m.group(0) not in allowed:
                out.append(f"{path}:{n}: {m.group(0)!r} in {line.strip()[:120]!r}")
    return out


@pytest.mark.parametrize(
    "text",
    [
        "eval/RESULTS.md, issue 39",
        "(stop 49: 8-bit -> 7-bit weights)",
        "Stop 65's walk: when is her driving test?",
        "stops 50 and 55",
        "issues 27-38",
        "Issue 20, 5: Ann's failed attempts",
        '("hardening, round 4")',
        'replay("stop58")',
        "def test_stop64_walk_a_named_reply():",
        "examples/walks/stop65c-posts.txt",
        "stop-50",
        "ISSUE_12 = True",
    ],
)
def test_a_work_unit_number_is_found(text):
    assert WORK_UNIT.search(text), text


@pytest.mark.parametrize(
    "text",
    [
        "round(x, 3)",
        "np.round(scores, 4)",
        "rounded to 2 decimals",
        "round 2 decimals",
        "round to 3 significant figures",
        "round 3 places",
        "round 23 decimals",
        "a round of 3 questions",
        "stop_words = 3",
        "test_stopwords_removed_and_configurable",
        "nonstop 24 hours",
        "non-stop 3 days",
        "backstop 5",
        "the issue is that 40 posts",
        "tissue 3",
        "roundtrip 2",
        "stopped 3 times",
        "tests/test_attacks.py",
        "memkit/data/walks/sailing-bathroom-jlpt-posts.txt",
    ],
)
def test_a_word_that_is_no_work_unit_is_not_found(text):
    assert not WORK_UNIT.search(text), WORK_UNIT.search(text)


def test_data_is_allowed_only_where_it_is_listed():
    assert findings("tests/test_changes.py", 'text = "Quiz night, round 3"') == []
    assert findings("tests/test_other.py", 'text = "Quiz night, round 3"') != []
    assert findings("tests/test_changes.py", "# found in stop 38") != []


def test_every_allowance_for_data_is_still_used():
    # so that an allowance outliving its fixture is noticed and dropped
    for path, phrases in DATA.items():
        text = (ROOT / path).read_text(encoding="utf-8")
        for phrase in phrases:
            assert re.search(rf"(?<![A-Za-z0-9-]){phrase}(?!\d)", text), (path, phrase)


def test_no_tracked_file_names_or_mentions_a_work_unit_number():
    bad = []
    for path in tracked_files():
        if path in SELF:
            continue
        bad += [f"{path}: file name {m.group(0)!r}" for m in WORK_UNIT.finditer(path)]
        name = path.rsplit("/", 1)[-1]
        if not (name.endswith(SCANNED_SUFFIXES) or name in SCANNED_NAMES):
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary, or deleted in the working tree
        bad += findings(path, readable_text(path, text))
    assert bad == [], "work-unit numbers (say why instead; git keeps the history):\n" + "\n".join(
        bad
    )
