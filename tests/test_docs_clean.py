"""The documents a newcomer reads (README.md, CHANGELOG.md, docs/) are a user's reference,
not the project's history (tests/test_no_work_unit_numbers.py scans them with every other
file): every relative link in them points at a file that exists (and a heading that exists,
for a link with a #fragment), and the changelog's newest version is the package's."""

import re
import tomllib
from pathlib import Path

import pytest

import memkit

PROJECT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
VERSION = re.compile(r"^## \[(\d+\.\d+\.\d+)\]", re.MULTILINE)


def documents() -> list[Path]:
    pages = [PROJECT / "README.md", PROJECT / "CHANGELOG.md"]
    return pages + sorted((PROJECT / "docs").rglob("*.md"))


def names(path: Path) -> str:
    return str(path.relative_to(PROJECT))


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.MULTILINE)}


def test_slugs_are_githubs():
    assert slug("Adapting the encoder: `memkit adapt`") == "adapting-the-encoder-memkit-adapt"
    assert slug("What its models were trained on") == "what-its-models-were-trained-on"
    assert slug("Several processes and PostgreSQL + pgvector") == (
        "several-processes-and-postgresql--pgvector"
    )


@pytest.mark.parametrize("path", documents(), ids=names)
def test_every_relative_link_resolves(path):
    broken = []
    for target in LINK.findall(FENCE.sub("", path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked here
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{names(path)}: " + "; ".join(broken)


def test_the_newest_changelog_version_is_the_packages():
    changelog = (PROJECT / "CHANGELOG.md").read_text()
    versions = VERSION.findall(changelog)
    assert versions, "CHANGELOG.md has no '## [x.y.z]' heading"
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["version"]
    assert versions[0] == project == memkit.__version__
