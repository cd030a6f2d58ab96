"""Experiment configurations: one TOML file names a configuration; eval and the service
both load it, so what eval measured is what the service serves.

The configs ship inside the package (``memkit/configs``, package data), found through
``importlib.resources``, so a wheel or ``pip install .`` carries its own default;
``eval/configs`` in the repository is a symlink to them, so paths in the README and
eval/RESULTS.md keep working."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from memkit.config_model import Config, validate_config
from memkit.errors import ValidationError
from memkit.retrievers import Retriever, build

# A real folder: memkit is installed as files (never zipped), so the resource is a path
# that glob, parent and ``from = "..."`` between configs can use.
CONFIG_DIR = Path(str(resources.files("memkit") / "configs"))


def load_config(path: str | Path) -> dict:
    """The config at ``path`` as a plain dict, its values as written, with ``from = "..."``
    tables merged in and ``name`` defaulting to the file's stem; checked against
    ``memkit.config_model.Config`` (a ValidationError names the TOML path of a problem)."""
    return load_checked(path)[0]


def load_checked(path: str | Path) -> tuple[dict, Config]:
    """``load_config``'s dict and the typed ``Config`` it was checked into."""
    path = Path(path)
    try:
        config = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValidationError("config", f"no such file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"{path}: {exc}") from None
    for section, table in list(config.items()):
        if (
            isinstance(table, dict) and "from" in table
        ):  # the same table of another config, e.g. its trained models
            source = path.parent / table["from"]
            if source.resolve() == path.resolve():
                raise ValidationError(
                    f"{section}.from", f"{path}: a table cannot come from its own file"
                )
            base = load_config(source).get(section)
            if not isinstance(base, dict):
                raise ValidationError(f"{section}.from", f"{source} has no [{section}] table")
            config[section] = {**base, **{k: v for k, v in table.items() if k != "from"}}
    config.setdefault("name", path.stem)
    try:
        checked = validate_config(config)  # every table, once: errors name the TOML path
    except ValidationError as exc:
        raise ValidationError(exc.field, f"{exc.message} (in {path})") from None
    return config, checked


def build_retriever(config: dict) -> Retriever:
    return build(config["retriever"])


def flatten(d: dict, prefix: str = "") -> dict:
    """Nested config to flat ``a.b.c`` keys (lists of tables get their index)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                out.update(flatten(x, f"{key}.{i}."))
        else:
            out[key] = v
    return out
