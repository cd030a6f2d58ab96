"""Dataset converters to the interchange format, and one loader for any supported layout."""

from __future__ import annotations

import os
from pathlib import Path

from memkit.core.errors import DatasetError
from memkit.core.tables import Dataset
from memkit.core.tables import read_dataset as read_folder
from memkit.datasets.beir import read_beir
from memkit.datasets.locomo import read_locomo

# The shared data sets sit beside the repository (../shared/datasets) in development.
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"


def data_root() -> Path:
    """Where data sets named by a relative path are found: ``$MEMKIT_DATA``, else
    ../shared/datasets beside the repository. The one place that default is written."""
    return Path(os.environ.get("MEMKIT_DATA", DEFAULT_DATA))


def load_any(path: str | Path, split: str = "test") -> Dataset:
    """A dataset folder (events.jsonl), a BEIR folder (corpus.jsonl), a LoCoMo JSON file,
    or a folder holding exactly one LoCoMo JSON file."""
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        return read_locomo(path, name=path.stem)
    if (path / "events.jsonl").exists():
        return read_folder(path)
    if (path / "corpus.jsonl").exists():
        return read_beir(path, split)
    jsons = sorted(path.glob("*.json")) if path.is_dir() else []
    if len(jsons) == 1:
        return read_locomo(jsons[0], name=jsons[0].stem)
    raise DatasetError(
        [
            (
                str(path),
                None,
                None,
                "not a dataset: expected events.jsonl (memkit), corpus.jsonl (BEIR) "
                "or a LoCoMo .json",
            )
        ]
    )


def read_dataset(path: str | Path, split: str = "test") -> Dataset:
    """Any supported data set, as ``load_any`` reads it: a memkit dataset folder (its
    three files checked together, ``memkit.core.tables.read_dataset``), a BEIR folder (``split``)
    or a LoCoMo ``.json`` file."""
    return load_any(path, split)


__all__ = [
    "Dataset",
    "data_root",
    "load_any",
    "read_beir",
    "read_dataset",
    "read_folder",
    "read_locomo",
]
