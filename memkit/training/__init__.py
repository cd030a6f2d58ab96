"""memkit's trainers: what ``memkit train <reader|ranker|answers|within|encoder>`` and
``memkit tune`` run (memkit/cli.py), one module each.

- :mod:`memkit.training.encoder`: MiniLM fine-tuned on labels or adapted to a corpus's own
  posts, and the ``[encoder]`` stage of a pipeline; its public names are re-exported here
  (``from memkit.training import EncoderStage, train, ADAPT``), as the pipeline, the
  service and the notebooks import them.
- :mod:`memkit.training.encoder_report`: the encoder scored honestly (dense retrieval
  alone, each data set held out).
- :mod:`memkit.training.ranker`: the learned re-rankers (``[retriever.model]``,
  ``[retriever.passage_model]``) and their calibration.
- :mod:`memkit.training.answers`: the answer writer's selection and decline models.
- :mod:`memkit.training.within`: which sentence of the chosen post is quoted.
- :mod:`memkit.training.reader`: the reader (a cross-encoder), its fusion with the ranker
  and its decline threshold.
- :mod:`memkit.training.follow_ups`: a grid over the follow-up weights of
  ``[contextualizer]``.

Trained coefficients are written into the model files a config names (``model_file``,
memkit/models/; :func:`memkit.config.write_model_file`), never into the TOML itself.
"""

from memkit.config import model_files, resolve_config, write_model_file
from memkit.core.errors import ValidationError
from memkit.training.encoder import (
    ADAPT,
    KINDS,
    PAIRS_SCHEMA,
    SUPERVISED,
    TRAIN_VERSION,
    EncoderStage,
    TrainSettings,
    dataset_pairs,
    is_trained,
    model_info,
    model_name,
    pairs_hash,
    structure_pairs,
    supervised_pairs,
    train,
)

__all__ = [
    "ADAPT",
    "KINDS",
    "PAIRS_SCHEMA",
    "SUPERVISED",
    "TRAIN_VERSION",
    "EncoderStage",
    "TrainSettings",
    "dataset_pairs",
    "is_trained",
    "model_info",
    "model_name",
    "pairs_hash",
    "structure_pairs",
    "supervised_pairs",
    "train",
    "write_tables",
]


def write_tables(config, tables: dict):
    """Write trained tables (``{"retriever.model": {...}}``) into the files the config's
    own file names for them (``model_file``); returns the files written. A table the config
    names no file for is a ValidationError saying how to name one: nothing is written."""

    path = resolve_config(config)
    files = model_files(path)
    for table in tables:
        if table not in files:
            raise ValidationError(
                "--write",
                f"[{table}] of {path} names no model file to write into: add model_file = "
                f'"NAME.json" to it (a path beside the config, or under memkit/models)',
            )
    return [write_model_file(files[table], model) for table, model in tables.items()]
